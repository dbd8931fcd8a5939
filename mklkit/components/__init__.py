"""Component contracts and the built-in losses and regularizers."""
