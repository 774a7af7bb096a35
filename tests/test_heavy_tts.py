"""Heavy test-time scaling for search agents (arXiv 2510.06135) with scripted smolagents models."""

import random
import re

import pytest


pytest.importorskip("smolagents")  # the agents extra (absent from the separate vLLM environment)

from hfx.agents.heavy import (
    BatchedTransformersModel,
    HeavyConfig,
    LocalCorpus,
    ScriptedModel,
    ToolBudget,
    Trajectory,
    action,
    heavy,
    normalize_answer,
    parse_score,
    search_tools,
    select,
    solve,
    solve_budget_forcing,
    verify,
)
from hfx.agents.heavy.budget import BudgetedTool
from hfx.agents.heavy.scripted import task_of


PAGES = [
    {"title": "Ostra", "text": "The Ostra is a river that rises in the mountains of Velmar."},
    {"title": "Velmar", "text": "Velmar is a small country. Its capital is Dunholt."},
    {"title": "Karl Holm", "text": "Karl Holm (born 3 May 1811) is a Danish painter of harbour scenes."},
]


@pytest.fixture
def corpus():
    return LocalCorpus(PAGES)


class CountingTools:
    """The search tools, with a count of calls that really executed."""

    def __init__(self, corpus, top_k=1):
        self.tools = search_tools(corpus, top_k=top_k)
        self.executed = 0
        for tool in self.tools:
            original = tool.forward

            def forward(*a, _original=original, **k):
                self.executed += 1
                return _original(*a, **k)

            tool.forward = forward


def two_hop_policy(messages):
    """Search the river, then the country, then answer from the last observation (deterministic)."""
    text = "\n".join(m["content"] for m in messages[1:])  # not the system prompt (its example has the answer)
    if "Its capital is" in text:
        return action("final_answer", answer=re.search(r"Its capital is (\w+)", text).group(1))
    if "rises in the mountains of" in text:
        return action("search", query="Velmar capital")
    return action("search", query="river Ostra rises")


def greedy_searcher(messages):
    """Always searches (tests that the budget holds whatever the model does)."""
    return action("search", query="capital")


# ------------------------------------------------------------------------------------------------ search environment
def test_bm25_search_and_browse(corpus):
    search, browse = search_tools(corpus, top_k=2)
    hits = search(query="danish painter harbour")
    assert hits.splitlines()[0].startswith("[1] Karl Holm:")
    assert "born 3 May 1811" in browse(title="karl holm")  # case-insensitive title
    assert browse(title="Karl Holmm").startswith("Karl Holm")  # a near-miss title: closest page
    assert search(query="   ") == "No results. Try other keywords."
    with pytest.raises(ValueError, match="duplicate"):
        LocalCorpus(PAGES + PAGES[:1])


@pytest.mark.slow  # loads the MiniLM encoder
def test_dense_retrieval_ranks_the_relevant_page_first():
    dense = LocalCorpus(PAGES, retriever="dense")
    assert dense.search("What is the capital city of Velmar?", top_k=1)[0][0].title == "Velmar"


# ------------------------------------------------------------------------------------------------------------ solve
def test_solve_two_hops_and_cost(corpus):
    counting = CountingTools(corpus)
    model = ScriptedModel(two_hop_policy)
    traj = solve(
        "What is the capital of the country where the river Ostra rises?", model, counting.tools, tool_budget=3
    )
    assert traj.answer == "Dunholt"
    assert traj.cost.tool_calls == 2 == counting.executed and [c[0] for c in traj.tool_calls] == ["search"] * 2
    assert traj.cost.model_calls == 3 == model.calls
    assert traj.cost.output_tokens > 0 and traj.cost.input_tokens > traj.cost.output_tokens


@pytest.mark.parametrize("budget", [0, 1, 3])
def test_tool_calls_never_exceed_the_budget(corpus, budget):
    counting = CountingTools(corpus)
    traj = solve("q?", ScriptedModel(greedy_searcher), counting.tools, tool_budget=budget, max_steps=budget + 3)
    assert counting.executed == traj.cost.tool_calls == budget
    assert traj.cost.refused_tool_calls == 3  # every call past the budget was refused, not run
    forced = solve_budget_forcing("q?", ScriptedModel(greedy_searcher), counting.tools, tool_budget=budget,
                                  rounds=2, extra_budget=1)  # fmt: skip
    assert forced.cost.tool_calls == budget + 2 and counting.executed == 2 * budget + 2


def test_budget_tool_refuses_without_calling():
    budget = ToolBudget(1)

    class Boom(search_tools(LocalCorpus(PAGES))[0].__class__):
        pass

    tool = BudgetedTool(Boom(LocalCorpus(PAGES)), budget)
    assert "[1]" in tool(query="Velmar")
    assert "maximum number of tool calls (1)" in tool(query="Velmar")
    assert (budget.used, budget.refused) == (1, 1)
    with pytest.raises(ValueError):
        ToolBudget(-1)


# --------------------------------------------------------------------------------------------------- budget forcing
def forcing_policy(messages):
    """Answers 'A' at first; after a budget-forcing turn, searches once and answers 'B'."""
    forced = sum("Do not stop yet" in m["content"] for m in messages)
    if forced == 0:
        return action("final_answer", answer="A")
    last = messages[-1]["content"]
    if "Do not stop yet" in last:
        return action("search", query="Velmar")
    return action("final_answer", answer=f"B{forced}")


def test_budget_forcing_zero_rounds_equals_solve(corpus):
    a = solve("What is the capital?", ScriptedModel(two_hop_policy), search_tools(corpus), tool_budget=3)
    b = solve_budget_forcing("What is the capital?", ScriptedModel(two_hop_policy), search_tools(corpus), tool_budget=3,
                             rounds=0)  # fmt: skip
    assert (a.answer, a.answers, a.tool_calls) == (b.answer, b.answers, b.tool_calls)
    assert (a.cost.tool_calls, a.cost.model_calls, a.cost.input_tokens, a.cost.output_tokens) == (
        b.cost.tool_calls, b.cost.model_calls, b.cost.input_tokens, b.cost.output_tokens)  # fmt: skip


def test_budget_forcing_continues_and_keeps_the_last_answer(corpus):
    traj = solve_budget_forcing("q?", ScriptedModel(forcing_policy), search_tools(corpus), tool_budget=1, rounds=2,
                                extra_budget=1)  # fmt: skip
    assert traj.answers == ["A", "B1", "B2"] and traj.answer == "B2"
    assert traj.cost.tool_calls == 2  # one search per forcing round, none before
    assert [c.tool_calls for c in traj.round_costs] == [0, 1, 2]
    assert traj.round_costs[0].model_calls < traj.round_costs[1].model_calls < traj.round_costs[2].model_calls


# ----------------------------------------------------------------------------------------------------------- heavy
def test_heavy_k1_without_verifier_equals_solve(corpus):
    q = "What is the capital of the country where the river Ostra rises?"
    ref = solve(q, ScriptedModel(two_hop_policy), search_tools(corpus, top_k=1), tool_budget=3)
    out = heavy(q, ScriptedModel(two_hop_policy), search_tools(corpus, top_k=1), num_trajectories=1, verify=False,
                selector="majority", solver_tool_budget=3)  # fmt: skip
    t = out.trajectories[0]
    assert out.answer == ref.answer and t.tool_calls == ref.tool_calls and t.answers == ref.answers
    assert (
        out.solver_cost.tool_calls == ref.cost.tool_calls and out.solver_cost.output_tokens == ref.cost.output_tokens
    )
    assert out.verifier_cost.model_calls == 0 and out.verifications == []
    # also when the budget binds: same tool calls, refusals and fallback answer
    ref = solve(q, ScriptedModel(greedy_searcher), search_tools(corpus), tool_budget=2)
    out = heavy(q, ScriptedModel(greedy_searcher), search_tools(corpus), num_trajectories=1, verify=False,
                selector="majority", solver_tool_budget=2)  # fmt: skip
    t = out.trajectories[0]
    assert (t.cost.tool_calls, t.cost.refused_tool_calls, t.final) == (2, ref.cost.refused_tool_calls, ref.final)


def oracle_verifier(truth):
    """A verifier that scores 1 only for the true answer (after one search), else 0."""

    def policy(messages):
        if not any("Observation" in m["content"] for m in messages[2:]):
            return action("search", query="check")
        predicted = re.search(r"Predicted answer: (.*)", task_of(messages)).group(1).strip()
        return action("final_answer", answer="1.0" if normalize_answer(predicted) == normalize_answer(truth) else "0")

    return policy


@pytest.mark.parametrize("selector", ["score_argmax", "weighted_vote", "best_of_k"])
def test_oracle_verifier_makes_the_selector_pick_the_truth_whenever_present(corpus, selector):
    rng = random.Random(0)
    verifier = ScriptedModel(oracle_verifier("Dunholt"))
    tools = search_tools(corpus)
    for _ in range(12):
        K = rng.randint(1, 5)
        answers = [rng.choice(["Velmar", "Ostra", "Dunholt", "", "Holm"]) for _ in range(K)]
        trajs = [Trajectory(question="q", answer=a, answers=[a]) for a in answers]
        out = heavy("q", ScriptedModel(greedy_searcher), tools, num_trajectories=K, selector=selector,
                    trajectories=trajs, verifier_model=verifier, verifier_tool_budget=1)  # fmt: skip
        if "Dunholt" in answers:
            assert out.answer == "Dunholt", (answers, out.scores)
        assert out.verifier_cost.tool_calls <= len(out.verifications) * 1  # the verifier's budget holds per candidate
        assert len(out.verifications) <= len({normalize_answer(a) for a in answers})


def test_heavy_threads_match_sequential_and_costs_split(corpus):
    q = "What is the capital of the country where the river Ostra rises?"
    kw = dict(num_trajectories=3, solver_tool_budget=2, verifier_tool_budget=1)
    verifier = ScriptedModel(oracle_verifier("Dunholt"))
    tools = search_tools(corpus, top_k=1)
    a = heavy(q, ScriptedModel(two_hop_policy), tools, verifier_model=verifier, concurrency="auto", **kw)
    b = heavy(q, ScriptedModel(two_hop_policy), tools, verifier_model=verifier,
              concurrency="sequential", **kw)  # fmt: skip
    assert a.answers == b.answers == ["Dunholt"] * 3 and a.scores == b.scores == [1.0] * 3
    assert a.solver_cost.tool_calls == 3 * 2 and a.verifier_cost.tool_calls == 1  # one distinct answer verified once
    assert a.cost.tool_calls == a.solver_cost.tool_calls + a.verifier_cost.tool_calls


def test_heavy_config_rejects_bad_values():
    with pytest.raises(ValueError, match="num_trajectories"):
        HeavyConfig(num_trajectories=0)
    with pytest.raises(ValueError, match="selector"):
        HeavyConfig(selector="best")
    with pytest.raises(ValueError, match="verify=False"):
        HeavyConfig(verify=False, selector="score_argmax")
    with pytest.raises(ValueError, match="solver_tool_budget"):
        HeavyConfig(solver_tool_budget=-1)


# -------------------------------------------------------------------------------------------------------- selectors
def test_selectors_on_hand_made_candidates():
    answers = ["Paris", "paris.", "Lyon", "Nice", "Lyon"]
    scores = [0.3, 0.3, 0.2, 0.9, 0.2]
    assert select(answers, selector="majority") == 0  # Paris x2 vs Lyon x2: tie -> earliest
    assert select(answers, scores, "score_argmax") == 3  # Nice has the top score
    assert select(answers, scores, "weighted_vote") == 3  # Nice 0.9 > Paris 0.3 + 0.3 > Lyon 0.2 + 0.2
    assert select(["a", "b", "b"], [0.5, 0.4, 0.4], "weighted_vote") == 1  # b: 0.8 > a: 0.5
    assert select(["a", "b", "c"], [0.4, 1.0, 1.0], "best_of_k") == 1  # first accepted in sampling order
    assert select(["a", "b", "c"], [0.4, 0.6, 0.5], "best_of_k") == 1  # none accepted: score argmax
    assert select(["a", "b", "c"], [0.4, 0.6, 0.9], "best_of_k", accept_threshold=0.5) == 1  # not the argmax
    assert select(["a", "b", "b"], [1.0, 1.0, 1.0], "score_argmax", tie_break="vote") == 1
    assert select(["a", "b", "b"], [1.0, 1.0, 1.0], "score_argmax", tie_break="first") == 0
    assert select(["", "", "x"], selector="majority") == 2  # an empty answer never wins a vote
    assert select(["a", "b"], [None, 0.1], "score_argmax") == 1  # unparsable counts as unparsable_score=0
    with pytest.raises(ValueError, match="score"):
        select(["a"], None, "score_argmax")
    with pytest.raises(ValueError, match="selector"):
        select(["a"], [1.0], "oracle")


def test_weighted_vote_differs_from_argmax():
    # the paper's point of voting: many moderately scored agreeing answers beat one high outlier
    answers, scores = ["x", "x", "x", "y"], [0.5, 0.5, 0.5, 0.9]
    assert answers[select(answers, scores, "weighted_vote")] == "x"
    assert answers[select(answers, scores, "score_argmax")] == "y"


@pytest.mark.parametrize(
    "text, score",
    [("0.75", 0.75), ("\\boxed{0.5}", 0.5), ("\\boxed{\\text{1}}", 1.0), ("2/3", 2 / 3), ("80%", 0.8), ("1", 1.0),
     ("yes", 1.0), ("Incorrect.", 0.0), ("In 2018 he was", None), ("no idea", 0.0), ("", None), ("3/0", None)],
)  # fmt: skip
def test_parse_score(text, score):
    got = parse_score(text)
    assert got == pytest.approx(score) if score is not None else got is None


def test_verify_scores_and_respects_its_budget(corpus):
    counting = CountingTools(corpus)
    v = verify("capital of Velmar?", "Dunholt", ScriptedModel(greedy_searcher), counting.tools, tool_budget=1,
               max_steps=3)  # fmt: skip
    assert counting.executed == 1 and v.cost.tool_calls == 1 and v.cost.refused_tool_calls == 2
    ok = verify("capital of Velmar?", "Dunholt", ScriptedModel(oracle_verifier("Dunholt")), search_tools(corpus))
    bad = verify("capital of Velmar?", "Ostra", ScriptedModel(oracle_verifier("Dunholt")), search_tools(corpus))
    assert (ok.score, bad.score) == (1.0, 0.0)


# ------------------------------------------------------------------------------------------------- batched HF model
def test_batched_model_merges_concurrent_calls_and_matches_single_calls():
    import threading

    from hfx.testing import tiny_llama

    lm, tok = tiny_llama()
    model = BatchedTransformersModel(lm, tok, max_new_tokens=6, max_wait=5.0)
    chats = [
        [{"role": "user", "content": [{"type": "text", "text": text}]}]
        for text in ("hello", "two plus two is four", "a much longer question")
    ]
    single = [model.generate(c).content for c in chats]
    assert model.batch_sizes == [1, 1, 1]
    results = [None] * 3
    model.expect(3)

    def run(i):
        try:
            results[i] = model.generate(chats[i])
        finally:
            model.leave()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert model.batch_sizes[3:] == [3]  # one batched generate for the three calls
    assert [r.content for r in results] == single  # left padding + masks: same greedy text as alone
    assert all(r.token_usage.output_tokens <= 6 for r in results)


def test_text_actions_parse():
    from hfx.agents.heavy.batching import parse_text_action

    assert parse_text_action("search: river Ostra").function.arguments == {"query": "river Ostra"}
    assert parse_text_action("browse: Velmar\nmore").function.name == "browse"
    assert parse_text_action("answer: 1811").function.arguments == {"answer": "1811"}
    assert parse_text_action("He was born in 1811.").function.name == "final_answer"
    assert parse_text_action('Action: {"name": "search"}') is None and parse_text_action("  ") is None


# -------------------------------------------------------------------------------------------------------------- CLI
@pytest.mark.parametrize(
    "argv, message",
    [(["heavy", "q?", "--k", "0"], "argument --k"), (["heavy", "q?", "--corpus", "/no/such.jsonl"], "--corpus")],
)
def test_cli_bad_input_is_a_one_line_error(argv, message, capsys):
    from hfx.cli import main

    try:
        rc = main(argv)
    except SystemExit as exit_:  # argparse refuses a bad flag value itself (usage line + one error line)
        rc = exit_.code
    assert rc == 2
    errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("hfx heavy: error:")]
    assert len(errors) == 1 and message in errors[0]
