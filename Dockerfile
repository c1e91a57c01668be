# The pipeline's software as one image, for `snakemake --sdm apptainer` (docs/cluster.md, "Software deployment"):
#   docker build -t tying:0.1.0 . && apptainer build tying.sif docker-daemon://tying:0.1.0
# It holds the pip list of workflow/envs/eval.yaml (the lm_eval rule's conda environment: every other rule's,
# workflow/envs/tying.yaml, and lm-eval), installed under constraints.txt, so the image and the environments
# pin the same packages and every rule runs in it. The `tying` package is not
# in the image: jobs import it from the checkout (the Snakefile puts src/ on PYTHONPATH).
FROM python:3.11-slim-bookworm

COPY constraints.txt workflow/envs/eval.yaml /tmp/pins/
RUN sed -n 's/^ *- \([A-Za-z0-9._-]*==[^ ]*\)$/\1/p' /tmp/pins/eval.yaml > /tmp/pins/requirements.txt \
    && pip install --no-cache-dir -c /tmp/pins/constraints.txt -r /tmp/pins/requirements.txt \
    && rm -rf /tmp/pins
