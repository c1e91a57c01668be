# C7 as a dose-response (tables.c7_dose; tying.claims.c7_dose): the pair's tied run and each input-scaled variant,
# one dose each; C7's ceilings (a second untied run against the pair's) and the tied run's cosines at each
# checkpoint, per seed; results/tables/c7_dose.{csv,md} and figures/c7_dose.pdf.
from tying.plan.pairs import scaled_variants


rule c7_dose_reference:
    input:
        unpack(lambda w: token_set(w.pair, w.seed)),
        untied=lambda w: pair_models(config, w.pair, int(w.seed))["untied"],
        second=lambda w: reference(PAIRS[w.pair]["untied"]).as_variant(config["analysis"]["ceiling_variant"]).directory(
            int(w.seed), pair_step(config, w.pair)),
        tied=lambda w: [reference(PAIRS[w.pair]["tied"]).directory(int(w.seed), s)
                        for s in pair_schedule(config, w.pair).checkpoints],
    output:
        "results/metrics/c7_dose_reference/{pair}/seed{seed}.parquet",
    params:
        ids=lambda w: {"pair": w.pair, "seed": int(w.seed)},
        analysis=lambda w: analysis_params(config, w.pair, "rows", "held_out", "split_seed"),
        steps=lambda w: list(pair_schedule(config, w.pair).checkpoints),
        final=lambda w: pair_step(config, w.pair),
    log:
        "logs/metrics/c7_dose_reference/{pair}/seed{seed}.log",
    resources:
        mem_mb=lambda w, input: request_mb("scaling", [input.untied, input.second, *input.tied], 4000, held=2),
        runtime=30,
    conda:
        "../envs/tying.yaml"
    script:
        "../scripts/c7_dose_reference.py"


rule c7_dose:
    input:
        scaling=lambda w: per_seed(rules.scaling, table_pairs("c7_dose")),
        quality=lambda w: per_seed(rules.quality, table_pairs("c7_dose")),
        reference=lambda w: per_seed(rules.c7_dose_reference, table_pairs("c7_dose")),
        provenance=lambda w: [
            expand(rules.train.output.provenance, arch=PAIRS[table_pairs("c7_dose")]["tied"]["arch"], variant=v,
                   seed=s)[0]
            for v, s in dose_runs(table_pairs("c7_dose"))
        ],
    output:
        csv=report("results/tables/c7_dose.csv", caption="../report/table.rst", category="Tables"),
        md="results/tables/c7_dose.md",
        figure=report("figures/c7_dose.pdf", caption="../report/table.rst", category="Figures"),
    params:
        pair=lambda w: table_pairs("c7_dose"),
        runs=lambda w: dose_runs(table_pairs("c7_dose")),
        doses=lambda w: {v: float(config["variants"][v]["input_grad_scale"])
                         for v in scaled_variants(config, table_pairs("c7_dose"))},
    log:
        "logs/tables/c7_dose.log",
    conda:
        "../envs/tying.yaml"
    script:
        "../scripts/c7_dose.py"
