# The claims by lookup share (tables.claims_by_lookup): the claims by exposure's per-token claims by the share of
# steps that looked each token up (tying.claims.exposure), what batches as large as the paper's, which look nearly
# every row up at every step, would change; results/tables/claims_by_lookup.{csv,md}.


rule claims_by_lookup:
    input:
        unpack(lambda w: exposure_inputs(table_pairs("claims_by_lookup"))),
    output:
        csv=report("results/tables/claims_by_lookup.csv", caption="../report/table.rst", category="Tables"),
        md="results/tables/claims_by_lookup.md",
    params:
        **exposure_params(lambda w: table_pairs("claims_by_lookup")) | {"edges": config["analysis"]["lookup_share_edges"]},
    log:
        "logs/tables/claims_by_lookup.log",
    group:
        "tables"
    conda:
        "../envs/tying.yaml"
    script:
        "../scripts/claims_by_lookup.py"
