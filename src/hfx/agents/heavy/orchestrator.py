"""Heavy: K parallel search-agent trajectories, a verifier agent per candidate, one selected answer (arXiv 2510.06135).

``heavy(question, model, tools, HeavyConfig(num_trajectories=4, verifier_tool_budget=1))`` samples K trajectories with
:func:`~hfx.agents.heavy.solve` (each with ``solver_tool_budget``), scores each distinct candidate answer with
:func:`~hfx.agents.heavy.verify` (``verifier_tool_budget`` per candidate), and returns the answer picked by the selector.
With K = 1 and ``verify=False`` it is exactly ``solve`` (tested).

**Concurrency** (``HeavyConfig.concurrency``): ``"auto"`` runs the K trajectories (and the verifications) in a thread
pool of K workers; with a :class:`BatchedTransformersModel` each worker holds a rendezvous session, so the model calls
of the K trajectories run as **one batched HF generate** per step (local models); with API models the threads overlap
their I/O. ``"sequential"`` runs them one after another (same results for a deterministic model).
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field

from .agent import SOLVER_SYSTEM_PROMPT, Trajectory, solve, solve_budget_forcing
from .budget import Cost, _check_budget
from .prompts import VERIFIER_SYSTEM_PROMPT
from .selectors import SELECTORS, TIE_BREAKS, normalize_answer, select
from .verifier import VERIFIER_CONTEXTS, Verification, verify


CONCURRENCY = ("auto", "sequential")


@dataclass
class HeavyConfig:
    """Settings of :func:`heavy` (every reconstructed choice of the spec is a field here).

    Args:
        num_trajectories (`int`, defaults to 4): K, solver trajectories per question.
        solver_tool_budget (`int`, defaults to 3): tool calls per trajectory.
        verify (`bool`, defaults to `True`): run the verifier (``False``: only ``selector="majority"`` is allowed).
        verifier_tool_budget (`int`, defaults to 1): the verifier's tool calls per candidate ("a modest budget").
        selector (`str`, defaults to `"score_argmax"`): see :mod:`~hfx.agents.heavy.selectors`.
        tie_break (`str`, defaults to `"vote"`), accept_threshold (`float`, defaults to 1.0), unparsable_score
            (`float`, defaults to 0.0): selector settings [reconstruction].
        verify_unique_answers (`bool`, defaults to `True`): verify each distinct normalised answer once and share
            its score (saves verifier compute; ``False`` verifies every candidate) [reconstruction].
        verifier_context (`str`, defaults to `"answer"`): ``"answer"`` (the verifier sees question + answer only,
            the asymmetric reading) or ``"answer_and_evidence"`` (plus the solver's observations) [reconstruction].
        solver_rounds (`int`, defaults to 0): budget-forcing rounds inside every trajectory (sequential + parallel).
        concurrency (`str`, defaults to `"auto"`): ``"auto"`` (threads; batched generate with a
            :class:`BatchedTransformersModel`) or ``"sequential"``.
        max_workers (`int`, *optional*): thread-pool size (defaults to K).
        solver_instructions / verifier_instructions (`str`, *optional*): extra system-prompt text (e.g. an example
            for the task's answer format); default: the budget sentence.
        initial_search (`bool`, defaults to `False`): solver and verifier start with the environment's search
            results (see :func:`~hfx.agents.heavy.solve`) [hfx addition for small models].

    Raises:
        ValueError: on construction, for any value outside the allowed ones.
    """

    num_trajectories: int = 4
    solver_tool_budget: int = 3
    verify: bool = True
    verifier_tool_budget: int = 1
    selector: str = "score_argmax"
    tie_break: str = "vote"
    accept_threshold: float = 1.0
    unparsable_score: float = 0.0
    verify_unique_answers: bool = True
    verifier_context: str = "answer"
    solver_rounds: int = 0
    concurrency: str = "auto"
    max_workers: int | None = None
    solver_instructions: str | None = None
    verifier_instructions: str | None = None
    initial_search: bool = False

    def __post_init__(self):
        if isinstance(self.num_trajectories, bool) or not isinstance(self.num_trajectories, int):
            raise TypeError(f"`num_trajectories` must be an integer >= 1, but is {self.num_trajectories!r}")
        if self.num_trajectories < 1:
            raise ValueError(f"`num_trajectories` must be an integer >= 1, but is {self.num_trajectories!r}")
        _check_budget(self.solver_tool_budget, "solver_tool_budget")
        _check_budget(self.verifier_tool_budget, "verifier_tool_budget")
        _check_budget(self.solver_rounds, "solver_rounds")
        if self.selector not in SELECTORS:
            raise ValueError(f"`selector` must be one of {SELECTORS}, but is {self.selector!r}")
        if not self.verify and self.selector != "majority":
            raise ValueError(f"`verify=False` allows only `selector='majority'`, but `selector` is {self.selector!r}")
        if self.tie_break not in TIE_BREAKS:
            raise ValueError(f"`tie_break` must be one of {TIE_BREAKS}, but is {self.tie_break!r}")
        if self.verifier_context not in VERIFIER_CONTEXTS:
            raise ValueError(
                f"`verifier_context` must be one of {VERIFIER_CONTEXTS}, but is {self.verifier_context!r}"
            )
        if self.concurrency not in CONCURRENCY:
            raise ValueError(f"`concurrency` must be one of {CONCURRENCY}, but is {self.concurrency!r}")
        if not 0.0 <= self.unparsable_score <= 1.0:
            raise ValueError(f"`unparsable_score` must be in [0, 1], but is {self.unparsable_score!r}")
        if self.max_workers is not None and (not isinstance(self.max_workers, int) or self.max_workers < 1):
            raise ValueError(f"`max_workers` must be None or an integer >= 1, but is {self.max_workers!r}")

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class HeavyResult:
    """The output of :func:`heavy`.

    Attributes:
        answer (`str`): the selected answer; selected (`int`): its candidate index.
        trajectories (`list[Trajectory]`): the K solver runs; answers (`list[str]`): their final answers.
        scores (`list[float | None]`): verifier score of each candidate (``None`` when not verified/unparsable).
        verifications (`list[Verification]`): the verifier runs (one per distinct answer by default).
        solver_cost / verifier_cost (:class:`Cost`): summed over trajectories / verifier runs (``wall_time`` is the
            sum of per-run times); wall_time (`float`): seconds for the whole call.
    """

    answer: str
    selected: int
    trajectories: list
    answers: list
    scores: list
    verifications: list = field(default_factory=list)
    solver_cost: Cost = field(default_factory=Cost)
    verifier_cost: Cost = field(default_factory=Cost)
    wall_time: float = 0.0

    @property
    def cost(self) -> Cost:
        """Solver + verifier."""
        return self.solver_cost + self.verifier_cost


def heavy(
    question: str,
    model,
    tools,
    config: HeavyConfig | None = None,
    verifier_model=None,
    verifier_tools=None,
    system_prompt: str = SOLVER_SYSTEM_PROMPT,
    verifier_system_prompt: str = VERIFIER_SYSTEM_PROMPT,
    trajectories: list[Trajectory] | None = None,
    **overrides,
) -> HeavyResult:
    """Heavy test-time scaling for one question.

    Args:
        question (`str`): the question.
        model: the solver's smolagents ``Model`` (see the module docstring on concurrency).
        tools (`list[smolagents.Tool]`): the solver's tools (e.g. :func:`~hfx.agents.heavy.search_tools`).
        config (:class:`HeavyConfig`, *optional*): settings; ``**overrides`` replace its fields
            (``heavy(q, m, t, num_trajectories=8)``).
        verifier_model / verifier_tools (*optional*): default to ``model`` / ``tools``.
        trajectories (`list[Trajectory]`, *optional*): reuse K already sampled trajectories (skip sampling; used to
            compare selectors and verifier budgets on the same samples).

    Returns:
        :class:`HeavyResult`.
    """
    config = HeavyConfig(**{**(config.to_dict() if config else {}), **overrides})
    start = time.perf_counter()
    K = config.num_trajectories
    if trajectories is None:
        trajectories = _parallel(
            model,
            [lambda: _sample(question, model, tools, config, system_prompt) for _ in range(K)],
            config,
        )
    elif len(trajectories) != K:
        raise ValueError(f"`trajectories` holds {len(trajectories)} runs but `num_trajectories` is {K}")
    answers = [t.final for t in trajectories]
    scores: list = [None] * K
    verifications: list[Verification] = []
    if config.verify:
        verifier_model = verifier_model if verifier_model is not None else model
        verifier_tools = verifier_tools if verifier_tools is not None else tools
        scores, verifications = verify_candidates(
            question, trajectories, verifier_model, verifier_tools, config, verifier_system_prompt
        )
    selected = select(
        answers,
        scores if config.verify else None,
        selector=config.selector,
        tie_break=config.tie_break,
        accept_threshold=config.accept_threshold,
        unparsable_score=config.unparsable_score,
    )
    solver_cost = sum((t.cost for t in trajectories), Cost())
    verifier_cost = sum((v.cost for v in verifications), Cost())
    return HeavyResult(
        answer=answers[selected],
        selected=selected,
        trajectories=trajectories,
        answers=answers,
        scores=scores,
        verifications=verifications,
        solver_cost=solver_cost,
        verifier_cost=verifier_cost,
        wall_time=time.perf_counter() - start,
    )


def verify_candidates(question, trajectories, model, tools, config: HeavyConfig, system_prompt=VERIFIER_SYSTEM_PROMPT):
    """Verifier scores for the candidates of ``trajectories`` (one run per distinct answer when
    ``config.verify_unique_answers``). ``"best_of_k"`` verifies in sampling order and stops at the first accepted one.

    Returns:
        `(scores, verifications)`: one score per trajectory (``None`` for candidates never verified), and the runs.
    """
    answers = [t.final for t in trajectories]
    keys = [normalize_answer(a) if config.verify_unique_answers else i for i, a in enumerate(answers)]
    order = list(dict.fromkeys(keys))  # distinct candidates in sampling order
    representative = {k: keys.index(k) for k in order}

    def run(k):
        i = representative[k]
        evidence = None
        if config.verifier_context == "answer_and_evidence":
            evidence = "\n".join(trajectories[i].observations)
        return verify(
            question,
            answers[i],
            model,
            tools,
            tool_budget=config.verifier_tool_budget,
            evidence=evidence,
            system_prompt=system_prompt,
            instructions=config.verifier_instructions,
            initial_search=config.initial_search,
        )

    results = {}
    if config.selector == "best_of_k":  # sequential: stop at the first accepted candidate
        for k in order:
            results[k] = run(k)
            score = results[k].score if results[k].score is not None else config.unparsable_score
            if score >= config.accept_threshold:
                break
    else:
        runs = _parallel(model, [lambda k=k: run(k) for k in order], config)
        results = dict(zip(order, runs, strict=True))
    scores = [results[k].score if k in results else None for k in keys]
    if config.selector == "best_of_k":  # never-verified candidates cannot be selected over verified ones
        scores = [s if k in results else None for s, k in zip(scores, keys, strict=True)]
    return scores, [results[k] for k in order if k in results]


def _sample(question, model, tools, config: HeavyConfig, system_prompt) -> Trajectory:
    if config.solver_rounds:
        return solve_budget_forcing(
            question,
            model,
            tools,
            tool_budget=config.solver_tool_budget,
            rounds=config.solver_rounds,
            system_prompt=system_prompt,
            instructions=config.solver_instructions,
            initial_search=config.initial_search,
        )
    return solve(
        question,
        model,
        tools,
        tool_budget=config.solver_tool_budget,
        system_prompt=system_prompt,
        instructions=config.solver_instructions,
        initial_search=config.initial_search,
    )


def _parallel(model, jobs, config: HeavyConfig) -> list:
    """Run ``jobs`` (callables) in a thread pool, each inside the model's rendezvous session when it has one."""
    if config.concurrency == "sequential" or len(jobs) == 1:
        return [job() for job in jobs]
    rendezvous = callable(getattr(model, "expect", None)) and callable(getattr(model, "leave", None))
    workers = config.max_workers or len(jobs)
    if rendezvous:  # announce every worker before any of them calls the model
        model.expect(min(workers, len(jobs)))

    def wrapped(job):
        try:
            return job()
        finally:
            if rendezvous:
                model.leave()

    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(wrapped, jobs))
