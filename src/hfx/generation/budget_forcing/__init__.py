"""Budget forcing (s1, arXiv 2501.19393; used for search agents in arXiv 2510.06135) as a ``custom_generate`` method.

* :func:`budget_forcing` -- ``model.generate(..., custom_generate="budget_forcing", think_end=..., num_extra_rounds=N,
  continuation="Wait", max_thinking_tokens=T, tokenizer=tok)``, or ``custom_generate=hfx.budget_forcing``.
* :class:`BudgetForcingOutput` -- with ``return_dict_in_generate=True``: per-row rounds and thinking-token counts.
"""

from .generate import BudgetForcingOutput, budget_forcing


__all__ = ["BudgetForcingOutput", "budget_forcing"]
