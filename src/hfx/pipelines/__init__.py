"""hfx pipelines (see the package README for the methods)."""
