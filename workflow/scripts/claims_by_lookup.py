from tying.claims.exposure import LOOKUP_COLUMNS, exposure_table, pairs_values, read_token_sets, write_exposure_table
from tying.rule_script import run
from tying.tidy import read_frames


def main(snakemake):
    inp, p = snakemake.input, snakemake.params
    frames = {name: read_frames(inp[name]) for name in ("alignment", "knn", "evolution_tokens", "scaling_tokens")
              if name in inp.keys()}
    values = pairs_values(p.pairs, read_token_sets(inp.token_sets, p.token_sets), **frames, k=p.k,
                          scaled_variant=p.scaled_variant)
    table = exposure_table(values, p.edges, p.min_tokens, by="lookup_share")
    write_exposure_table(table, snakemake.output.csv, snakemake.output.md, LOOKUP_COLUMNS)


run(snakemake, main)
