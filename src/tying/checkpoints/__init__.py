"""Checkpoints on disk: tensor layouts, file formats, embedding matrices, control matrices."""
