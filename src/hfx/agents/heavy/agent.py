"""A tool-budgeted search agent (``solve``) and budget forcing for agents (arXiv 2510.06135, Sec. 3-4).

Both run a smolagents :class:`~smolagents.ToolCallingAgent` (ReAct with JSON tool calls) over any smolagents model
class (``TransformersModel``, ``InferenceClientModel``, ``LiteLLMModel``, :class:`BatchedTransformersModel`, a
:class:`ScriptedModel`, ...) and any list of smolagents tools, each wrapped in one shared :class:`ToolBudget`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from smolagents import ToolCallingAgent
from smolagents.memory import ActionStep, PlanningStep
from smolagents.monitoring import LogLevel

from .budget import BudgetedTool, Cost, ToolBudget, _check_budget
from .prompts import (
    BUDGET_FORCING_PROMPT,
    SOLVER_INSTRUCTIONS,
    SOLVER_SYSTEM_PROMPT,
    prompt_templates,
)


DEFAULT_STEP_SLACK = 2
"""Agent steps allowed beyond the tool budget (to read the last observation and answer)."""


@dataclass
class Trajectory:
    """One agent run on a question.

    Attributes:
        question (`str`); answer (`str` or `None`): the last answer given through ``final_answer`` (``None`` if the
            agent never gave one; then ``fallback_answer`` holds smolagents' forced answer at ``max_steps``);
        answers (`list`): the final answer after the first run and after each budget-forcing round;
        cost (:class:`Cost`); tool_calls (`list`): executed ``(tool, arguments)``; observations (`list[str]`);
        messages (`list[dict]`): the agent memory as chat messages; round_costs (`list[Cost]`): the cumulative cost
            after the first run and after each budget-forcing round.
    """

    question: str
    answer: str | None
    answers: list = field(default_factory=list)
    fallback_answer: str | None = None
    cost: Cost = field(default_factory=Cost)
    tool_calls: list = field(default_factory=list)
    observations: list = field(default_factory=list)
    messages: list = field(default_factory=list)
    round_costs: list = field(default_factory=list)

    @property
    def final(self) -> str:
        """The answer used for selection: ``answer``, else the fallback, else ``""``."""
        if self.answer is not None:
            return self.answer
        return self.fallback_answer or ""


def build_agent(
    model,
    tools,
    budget: ToolBudget,
    system_prompt: str = SOLVER_SYSTEM_PROMPT,
    instructions: str | None = None,
    max_steps: int | None = None,
    verbosity_level: int = LogLevel.OFF,
) -> ToolCallingAgent:
    """A ``ToolCallingAgent`` whose tools share ``budget`` (``max_steps`` defaults to the budget + 2)."""
    wrapped = [BudgetedTool(t, budget) for t in tools]
    if instructions is None:
        instructions = SOLVER_INSTRUCTIONS.format(budget=budget.limit)
    return ToolCallingAgent(
        tools=wrapped,
        model=model,
        prompt_templates=prompt_templates(system_prompt),
        instructions=instructions,
        max_steps=max_steps if max_steps is not None else budget.limit + DEFAULT_STEP_SLACK,
        verbosity_level=verbosity_level,
        add_base_tools=False,
    )


def solve(
    question: str,
    model,
    tools,
    tool_budget: int = 3,
    system_prompt: str = SOLVER_SYSTEM_PROMPT,
    instructions: str | None = None,
    max_steps: int | None = None,
    initial_search: bool = False,
) -> Trajectory:
    """Run a search agent on ``question`` with at most ``tool_budget`` executed tool calls.

    Args:
        question (`str`): the task given to the agent.
        model: any smolagents ``Model``.
        tools (`list[smolagents.Tool]`): e.g. :func:`~hfx.agents.heavy.search_tools` (offline) or smolagents'
            ``WebSearchTool()`` and ``VisitWebpageTool()``; each is wrapped in the shared budget.
        tool_budget (`int`, *optional*, defaults to 3): the most tool calls that execute (``final_answer`` excluded);
            later calls are refused (see :mod:`~hfx.agents.heavy.budget`).
        system_prompt (`str`, *optional*): a Jinja template (smolagents' variables ``tools``, ``custom_instructions``).
        instructions (`str`, *optional*): appended to the system prompt (defaults to the budget sentence).
        max_steps (`int`, *optional*): agent steps (defaults to ``tool_budget + 2``).
        initial_search (`bool`, *optional*, defaults to `False`): the environment runs the ``search`` tool on the
            question first (charged to the budget) and gives the agent the results with the task: "strong
            retrieval" for small models that do not call tools on their own [hfx addition, not in the paper].

    Returns:
        :class:`Trajectory`.

    Raises:
        ValueError: if ``tool_budget`` is not an integer >= 0 or ``question`` is empty.
    """
    return solve_budget_forcing(
        question,
        model,
        tools,
        tool_budget=tool_budget,
        rounds=0,
        system_prompt=system_prompt,
        instructions=instructions,
        max_steps=max_steps,
        initial_search=initial_search,
    )


def solve_budget_forcing(
    question: str,
    model,
    tools,
    tool_budget: int = 3,
    rounds: int = 1,
    extra_budget: int | None = None,
    forcing_prompt: str = BUDGET_FORCING_PROMPT,
    system_prompt: str = SOLVER_SYSTEM_PROMPT,
    instructions: str | None = None,
    max_steps: int | None = None,
    initial_search: bool = False,
) -> Trajectory:
    """Budget forcing for agents: after the final answer, grant extra tool budget and make the agent continue.

    The agent first runs as :func:`solve`. Then, ``rounds`` times, the budget is raised by ``extra_budget`` and the
    same agent (same memory: ``run(..., reset=False)``) gets ``forcing_prompt`` as a new user turn; it may search
    again and must answer again. The **last final answer** is kept (a round without one keeps the previous answer).
    ``rounds=0`` is exactly :func:`solve` (tested).

    Args:
        rounds (`int`, *optional*, defaults to 1): forcing rounds (>= 0).
        extra_budget (`int`, *optional*): tool calls granted per round (defaults to ``tool_budget``).
        forcing_prompt (`str`, *optional*): the user turn; ``{extra}`` is replaced by ``extra_budget`` [paper's
            wording paraphrased, see :mod:`~hfx.agents.heavy.prompts`].
        (other arguments as in :func:`solve`)

    Returns:
        :class:`Trajectory` whose ``answers`` holds the answer after the first run and after each round and whose
        ``cost`` covers all rounds.
    """
    if not isinstance(question, str) or not question.strip():
        raise ValueError(f"`question` must be a non-empty string, but is {question!r}")
    _check_budget(tool_budget, "tool_budget")
    _check_budget(rounds, "rounds")
    extra_budget = tool_budget if extra_budget is None else extra_budget
    _check_budget(extra_budget, "extra_budget")
    budget = ToolBudget(tool_budget)
    agent = build_agent(model, tools, budget, system_prompt, instructions, max_steps)
    start = time.perf_counter()
    answer, fallback, answers, round_costs = None, None, [], []
    for r in range(rounds + 1):
        if r == 0:
            task, steps = (
                with_initial_search(question, question, tools, budget) if initial_search else question,
                max_steps,
            )
        else:
            budget.grant(extra_budget)
            task, steps = forcing_prompt.format(extra=extra_budget), extra_budget + DEFAULT_STEP_SLACK
        result = agent.run(task, reset=(r == 0), max_steps=steps, return_full_result=True)
        if _gave_final_answer(agent):
            answer = _as_text(result.output)
        elif answer is None:
            fallback = _as_text(result.output)
        answers.append(answer if answer is not None else fallback)
        round_costs.append(agent_cost(agent, budget, time.perf_counter() - start))
    wall = time.perf_counter() - start
    return Trajectory(
        question=question,
        answer=answer,
        answers=answers,
        fallback_answer=fallback,
        cost=agent_cost(agent, budget, wall),
        tool_calls=list(budget.calls),
        observations=[s.observations for s in agent.memory.steps if isinstance(s, ActionStep) and s.observations],
        messages=[m.dict() for m in agent.write_memory_to_messages()],
        round_costs=round_costs,
    )


def with_initial_search(task: str, query: str, tools, budget: ToolBudget) -> str:
    """``task`` followed by the ``search`` tool's results for ``query`` (one call charged to ``budget``).

    Raises:
        ValueError: if no tool is named ``search``.
    """
    search = next((t for t in tools if getattr(t, "name", None) == "search"), None)
    if search is None:
        raise ValueError("`initial_search=True` needs a tool named 'search' in `tools`")
    if not budget.try_use("search", {"query": query}):
        return task
    return f"{task}\nObservation: {search(query=query)}"


def agent_cost(agent, budget: ToolBudget, wall_time: float) -> Cost:
    """Tokens and model calls summed over the agent's memory steps, tool calls from ``budget``."""
    cost = Cost(tool_calls=budget.used, refused_tool_calls=budget.refused, wall_time=wall_time)
    for step in agent.memory.steps:
        if isinstance(step, (ActionStep, PlanningStep)) and step.token_usage is not None:
            cost.model_calls += 1
            cost.input_tokens += int(step.token_usage.input_tokens)
            cost.output_tokens += int(step.token_usage.output_tokens)
    return cost


def _gave_final_answer(agent) -> bool:
    """Whether the last run ended with the ``final_answer`` tool (not smolagents' forced answer at max_steps)."""
    for step in reversed(agent.memory.steps):
        if isinstance(step, ActionStep):
            return bool(getattr(step, "is_final_answer", False))
    return False


def _as_text(value) -> str:
    return "" if value is None else str(value).strip()
