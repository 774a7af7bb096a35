"""hfx tuners (see the package README for the methods)."""
