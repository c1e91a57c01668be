"""What runs while Snakemake builds the DAG: the config check, pairs, the scaling grid, job memory."""
