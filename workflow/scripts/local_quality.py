import pandas as pd

from tying.io import write_parquet
from tying.lens.unembed import lens_placement
from tying.metrics.local_quality import local_quality_frame
from tying.rule_script import run
from tying.runtime import configure
from tying.tidy import with_ids


def main(snakemake):
    inp, p = snakemake.input, snakemake.params
    configure(snakemake.threads)
    device, dtype = lens_placement(p.lens["device"], p.lens["dtype"])
    frames = [
        local_quality_frame(
            role,
            inp[f"{role}_model"],
            {k: inp[f"{role}_{k}"] for k in ("train", "val", "meta")},
            p.lens,
            device=device,
            dtype=dtype,
        )
        for role in ("tied", "untied")
    ]
    write_parquet(with_ids(pd.concat(frames, ignore_index=True), p.ids), snakemake.output[0])


run(snakemake, main)
