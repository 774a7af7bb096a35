"""`hfx` command-line sub-commands: one light module per command (heavy imports happen inside `run`)."""
