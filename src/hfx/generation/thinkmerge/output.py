"""The output class of ThinkMerge (defined in the self-contained :mod:`.generate` so the Hub copy carries it)."""

from .generate import ThinkMergeOutput


__all__ = ["ThinkMergeOutput"]
