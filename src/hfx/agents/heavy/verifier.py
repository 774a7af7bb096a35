"""The verifier agent: a search agent with its own small tool budget that scores one candidate answer in [0, 1].

Asymmetric verification (arXiv 2510.06135, Sec. 5): checking a given answer against the documents is easier than
finding it, so a modest verifier budget per candidate buys more than extra solver sampling. The prompt's structure
follows the authors' verifier (conditions of the question, each checked with the tools, score = satisfied / all);
see :mod:`~hfx.agents.heavy.prompts`.
"""

from __future__ import annotations

import math
import re
import time
from dataclasses import dataclass, field

from .agent import _gave_final_answer, agent_cost, build_agent, with_initial_search
from .budget import Cost, ToolBudget, _check_budget
from .prompts import VERIFIER_INSTRUCTIONS, VERIFIER_SYSTEM_PROMPT, VERIFIER_TASK


VERIFIER_CONTEXTS = ("answer", "answer_and_evidence")
_NUMBER = re.compile(r"(?<![\w.])(\d+(?:\.\d+)?|\.\d+)\s*(?:(/)\s*(\d+(?:\.\d+)?)|(%))?")
_BOXED = re.compile(r"\\boxed\{(?:\\text\{)?([^{}]*)\}")
_WORDS = {"yes": 1.0, "true": 1.0, "correct": 1.0, "no": 0.0, "false": 0.0, "incorrect": 0.0, "wrong": 0.0}


@dataclass
class Verification:
    """A verifier run: ``score`` in [0, 1] (``None`` if the output had no score), its ``raw`` text and ``cost``."""

    answer: str
    score: float | None
    raw: str
    cost: Cost = field(default_factory=Cost)


def parse_score(text) -> float | None:
    """The verifier's confidence score from its final answer, in [0, 1], or ``None`` when there is none.

    Accepted (first match wins): ``\\boxed{0.8}`` (the authors' format), a number (``"0.75"``, ``"1"``), a fraction
    ``"2/3"``, a percentage ``"80%"``, and the words yes/true/correct (1) or no/false/incorrect/wrong (0).
    Values are clipped to [0, 1]; a number > 1 and <= 100 without ``%`` is read as a percentage, a larger one (a
    year, say) is no score [reconstruction].
    """
    if text is None:
        return None
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        value = float(text)
        return None if math.isnan(value) else _clip(value)
    text = str(text)
    boxed = _BOXED.search(text)
    if boxed:
        text = boxed.group(1)
    match = _NUMBER.search(text)
    if match:
        value = float(match.group(1))
        if match.group(2) and match.group(3):
            denominator = float(match.group(3))
            if denominator == 0:
                return None
            value = value / denominator
        elif match.group(4) or 1 < value <= 100:
            value = value / 100
        elif value > 100:  # a year or another quantity, not a score
            return None
        return _clip(value)
    for word in re.findall(r"[a-z]+", text.lower()):
        if word in _WORDS:
            return _WORDS[word]
    return None


def verify(
    question: str,
    answer: str,
    model,
    tools,
    tool_budget: int = 1,
    evidence: str | None = None,
    system_prompt: str = VERIFIER_SYSTEM_PROMPT,
    instructions: str | None = None,
    max_steps: int | None = None,
    initial_search: bool = False,
) -> Verification:
    """Score ``answer`` to ``question`` with a verifier agent that may call the tools at most ``tool_budget`` times.

    Args:
        question (`str`), answer (`str`): the candidate to check. The verifier sees only the question and the answer
            (the asymmetric-verification reading of the paper) unless ``evidence`` is given [reconstruction].
        model: any smolagents ``Model`` (it can differ from the solver's).
        tools (`list[smolagents.Tool]`): wrapped in the verifier's own :class:`ToolBudget`.
        tool_budget (`int`, *optional*, defaults to 1): the verifier's tool budget per candidate.
        evidence (`str`, *optional*): text appended to the task (``HeavyConfig.verifier_context="answer_and_evidence"``
            passes the solver's observations).
        initial_search (`bool`, *optional*, defaults to `False`): the environment first searches for the question
            and the answer together (one call of the verifier's budget), as in :func:`~hfx.agents.heavy.solve`.

    Returns:
        :class:`Verification`; ``score`` is :func:`parse_score` of the final answer (``None`` when unparsable; the
        selectors then use ``HeavyConfig.unparsable_score``).
    """
    _check_budget(tool_budget, "tool_budget")
    budget = ToolBudget(tool_budget)
    if instructions is None:
        instructions = VERIFIER_INSTRUCTIONS.format(budget=tool_budget)
    agent = build_agent(model, tools, budget, system_prompt, instructions, max_steps)
    task = VERIFIER_TASK.format(question=question, answer=answer if str(answer).strip() else "(no answer)")
    if evidence:
        task += f"\nEvidence found by the solver:\n{evidence}"
    if initial_search:
        task = with_initial_search(task, f"{question} {answer}", tools, budget)
    start = time.perf_counter()
    result = agent.run(task, return_full_result=True)
    raw = "" if result.output is None else str(result.output)
    score = parse_score(raw) if _gave_final_answer(agent) or raw else None
    return Verification(
        answer=answer, score=score, raw=raw, cost=agent_cost(agent, budget, time.perf_counter() - start)
    )


def _clip(value: float) -> float:
    return min(1.0, max(0.0, value))
