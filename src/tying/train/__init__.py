"""Models, the training loop, its loss, gradient provenance and multi-process launch."""
