"""The built-in TAIL-style tasks: 18 tasks in 8 algorithm classes (importing this package registers them)."""

from . import arithmetic, automata, dp, graph, searching, sorting, stack, string
