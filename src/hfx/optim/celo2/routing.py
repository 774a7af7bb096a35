"""Which parameters get Celo2's learned rule and which get AdamW (spec: "Ambiguities", parameter routing)."""

from __future__ import annotations

import re
from collections.abc import Sequence

import torch


ROUTINGS = ("reference", "pylo", "all")
LEARNED, ADAMW = "celo2", "adamw"
DEFAULT_ADAMW_PATTERN = r"embed"


def route_parameters(
    named: Sequence[tuple[str | None, torch.Tensor]],
    routing: str = "reference",
    adamw_pattern: str | None = None,
) -> list[str]:
    """Assign each parameter to ``"celo2"`` (the learned rule) or ``"adamw"``.

    * ``"reference"`` (default) [code]: AdamW for tensors with ``ndim <= 1`` and for names matching
      ``adamw_pattern`` (default ``"embed"``, case-insensitive ``re.search``): the official usage's
      ``'adam' if val.ndim <= 1 or 'embed' in path``. For Hugging Face models this catches ``embed_tokens``,
      ``word_embeddings``, ``position_embeddings``, ... and therefore a **tied** ``lm_head`` (it is the same tensor, and
      ``named_parameters()`` lists it once, under the embedding's name). An **untied** ``lm_head`` gets the learned rule;
      pass ``adamw_pattern=r"embed|lm_head"`` or use ``"pylo"`` to send it to AdamW.
    * ``"pylo"`` [code: PyLO]: the reference rule, plus the first and the last parameter with ``ndim >= 2`` (in the
      given order: for a Hugging Face LM, the input embedding and the untied output head; for an MLP, its input and
      output layers).
    * ``"all"``: the learned rule for every tensor (Celo2-base).

    Without names (plain tensors, e.g. the param groups ``Trainer`` builds), only the shape rule applies: pass
    ``names_from=model`` to :class:`~hfx.optim.Celo2` to keep name-based routing.

    Args:
        named (`Sequence[tuple[str | None, torch.Tensor]]`): ``(name, tensor)`` pairs in model order.
        routing (`str`, defaults to `"reference"`): one of ``"reference"``, ``"pylo"``, ``"all"``.
        adamw_pattern (`str`, *optional*): regular expression for names sent to AdamW (not used by ``"all"``).

    Returns:
        `list[str]`: ``"celo2"`` or ``"adamw"`` for each entry of ``named``.

    Raises:
        ValueError: for an unknown ``routing`` or an invalid ``adamw_pattern``.
    """
    if routing not in ROUTINGS:
        raise ValueError(f"`routing` must be one of {ROUTINGS}, but is {routing!r}")
    if routing == "all":
        return [LEARNED] * len(named)
    try:
        pattern = re.compile(DEFAULT_ADAMW_PATTERN if adamw_pattern is None else adamw_pattern, re.IGNORECASE)
    except re.error as err:
        raise ValueError(f"`adamw_pattern` is not a valid regular expression: {adamw_pattern!r} ({err})") from None
    roles = []
    for name, p in named:
        to_adamw = p.ndim <= 1 or (name is not None and pattern.search(name) is not None)
        roles.append(ADAMW if to_adamw else LEARNED)
    if routing == "pylo":
        matrices = [i for i, (_, p) in enumerate(named) if p.ndim >= 2]
        for i in matrices[:1] + matrices[-1:]:
            roles[i] = ADAMW
    return roles


__all__ = ["ADAMW", "DEFAULT_ADAMW_PATTERN", "LEARNED", "ROUTINGS", "route_parameters"]
