"""Tool budgets and cost accounting for search agents (arXiv 2510.06135: "up to a maximum of N tool calls").

A :class:`ToolBudget` is shared by all the tools of one agent run. A call within the budget runs the tool and is
counted; a call beyond it is **not executed**: the agent gets a refusal ("You have reached the maximum number of tool
calls ... give your final answer now") as the observation, as in the authors' loop. So the number of executed tool
calls can never exceed the budget (tested), whatever the model does. ``final_answer`` is never budgeted.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from smolagents import Tool


REFUSAL = (
    "You have reached the maximum number of tool calls ({budget}). Do not call search or browse again: "
    "give your final answer now with final_answer, based on what you found."
)


class ToolBudget:
    """A counter of executed tool calls with a limit that budget forcing can raise.

    Args:
        limit (`int`): the most tool calls that may execute (>= 0).

    Attributes:
        used (`int`): executed calls; ``refused`` (`int`): calls refused at the limit; ``calls`` (`list`): the
            executed ``(tool name, arguments)`` in order.
    """

    def __init__(self, limit: int):
        _check_budget(limit, "limit")
        self.limit = limit
        self.used = 0
        self.refused = 0
        self.calls: list[tuple[str, dict]] = []
        self._lock = threading.Lock()

    @property
    def remaining(self) -> int:
        return self.limit - self.used

    def grant(self, extra: int) -> None:
        """Raise the limit by ``extra`` calls (budget forcing)."""
        _check_budget(extra, "extra")
        with self._lock:
            self.limit += extra

    def try_use(self, name: str, arguments: dict) -> bool:
        """Count one call of ``name`` if the budget allows it; ``False`` (and a refusal counted) otherwise."""
        with self._lock:
            if self.used >= self.limit:
                self.refused += 1
                return False
            self.used += 1
            self.calls.append((name, dict(arguments)))
            return True


class BudgetedTool(Tool):
    """A smolagents tool that draws on a :class:`ToolBudget` before running the wrapped tool.

    Same ``name``, ``description``, ``inputs`` and ``output_type`` as ``tool``; beyond the budget the wrapped tool is
    not called and :data:`REFUSAL` is returned instead.
    """

    skip_forward_signature_validation = True

    def __init__(self, tool: Tool, budget: ToolBudget):
        if not isinstance(tool, Tool):
            raise TypeError(f"`tool` must be a smolagents `Tool`, but is {type(tool).__name__}")
        self.name, self.description = tool.name, tool.description
        self.inputs, self.output_type = tool.inputs, tool.output_type
        super().__init__()
        self.tool, self.budget = tool, budget

    def forward(self, *args, **kwargs):
        arguments = kwargs if kwargs else {"args": list(args)}
        if not self.budget.try_use(self.name, arguments):
            return REFUSAL.format(budget=self.budget.limit)
        return self.tool(*args, **kwargs)


@dataclass
class Cost:
    """Compute spent on one agent run (or a sum of runs).

    Attributes:
        tool_calls (`int`): executed tool calls (``final_answer`` excluded); ``refused_tool_calls`` (`int`): calls
            refused at the budget; ``model_calls`` (`int`): LLM calls; ``input_tokens`` / ``output_tokens`` (`int`):
            as reported by the smolagents model (prompt tokens are counted at every call, as APIs bill them);
            ``wall_time`` (`float`): seconds.
    """

    tool_calls: int = 0
    refused_tool_calls: int = 0
    model_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    wall_time: float = 0.0
    extra: dict = field(default_factory=dict)

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def __add__(self, other: Cost) -> Cost:
        return Cost(
            self.tool_calls + other.tool_calls,
            self.refused_tool_calls + other.refused_tool_calls,
            self.model_calls + other.model_calls,
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.wall_time + other.wall_time,
        )

    def to_dict(self) -> dict:
        return {
            "tool_calls": self.tool_calls,
            "refused_tool_calls": self.refused_tool_calls,
            "model_calls": self.model_calls,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "total_tokens": self.total_tokens,
            "wall_time": round(self.wall_time, 3),
        }


def _check_budget(value, name):
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"`{name}` must be an integer >= 0, but is {value!r}")
