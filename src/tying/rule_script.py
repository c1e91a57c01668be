"""The wrapper every workflow script runs in: stderr teed to the rule's log, one-line errors."""
import sys

from tying.errors import PipelineError


class _Tee:
    def __init__(self, *streams):
        self.streams = streams

    def write(self, text):
        for s in self.streams:
            s.write(text)
            s.flush()

    def flush(self):
        for s in self.streams:
            s.flush()


def run(snakemake, body):
    """Call body(snakemake) with stderr copied into snakemake.log[0]; a PipelineError exits with its line."""
    log = open(snakemake.log[0], "w") if snakemake.log else None
    if log:
        sys.stderr = _Tee(sys.__stderr__, log)
    try:
        body(snakemake)
    except PipelineError as err:
        print(f"error: {err}", file=sys.stderr)
        sys.exit(1)
    finally:
        if log:
            sys.stderr = sys.__stderr__
            log.close()
