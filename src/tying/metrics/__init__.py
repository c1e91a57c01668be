"""Per-run measurements: alignment, KNN overlap, drift, gradient flow, norms, losses, baselines."""
