"""Run one matrix job's work as its workflow script does, in this process, and print its memory as JSON:
{"base": RSS after the imports (bytes), "peak": the process's peak RSS (bytes)}.

    python tests/plan/memory_probe.py METRIC MODEL_DIR...   (alignment, knn: untied tied; evolution: checkpoints)
"""

import json
import resource
import sys

import pandas as pd
import torch

from tying.checkpoints.embeddings import load_embeddings
from tying.metrics.alignment import alignment_frame
from tying.metrics.evolution import evolution_frames
from tying.metrics.knn_overlap import knn_frame
from tying.metrics.norm_frequency import norm_frequency_frame


def rss():
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmRSS:"))


def main(metric, *dirs):
    torch.set_num_threads(1)
    base = rss()
    if metric == "evolution":
        evolution_frames((s, load_embeddings(d)) for s, d in enumerate(dirs))[0]
    else:
        untied, tied = load_embeddings(dirs[0]), load_embeddings(dirs[1])
        if metric == "alignment":
            alignment_frame(untied, tied, held_out=0.2, seed=0)
        elif metric == "knn":
            knn_frame(untied, tied, ks=(10,), approximate=False, null_seed=1)
        elif metric == "norm_freq":
            ids = torch.arange(len(untied.tokens)).numpy()
            initial = [load_embeddings(d) for d in dirs[2:]] or None
            norm_frequency_frame(untied, tied, pd.DataFrame({"token_id": ids, "count": ids + 1}), initial)
        else:
            raise SystemExit(f"unknown metric {metric}")
    print(json.dumps({"base": base, "peak": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}))


if __name__ == "__main__":
    main(*sys.argv[1:])
