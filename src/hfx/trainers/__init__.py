"""hfx trainers (see the package README for the methods)."""
