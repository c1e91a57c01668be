"""Reproduce 'Weight Tying Biases Token Embeddings Towards the Output Space'."""
