"""MemGAS (arXiv 2505.19549): GMM association, entropy router, PPR, the memory API, save/load, baselines,
integrations (chat template, smolagents tool, CLI, publish) and the data loaders / benchmark builder.

Fast tests use a bag-of-words hashing embedder and scripted chat callables; one ``real_model`` test uses MiniLM.
"""

import json
import math
import re
import subprocess
import sys

import numpy as np
import pytest
import torch

from hfx.memory.memgas import (
    BM25Memory,
    FlatDenseMemory,
    MemGAS,
    MemGASConfig,
    entropy_router_weights,
    gmm_accept_mask,
    personalized_pagerank,
)
from hfx.memory.memgas.graph import associate
from hfx.memory.memgas.metrics import answer_matches, paired_bootstrap, retrieval_metrics, wilson_interval


# ------------------------------------------------------------------------------------------------------ fixtures
STOP = {
    "the",
    "a",
    "an",
    "my",
    "i",
    "is",
    "what",
    "did",
    "do",
    "to",
    "of",
    "in",
    "and",
    "on",
    "at",
    "for",
    "with",
    "can",
    "you",
    "help",
    "me",
    "sure",
    "user",
    "assistant",
    "let",
    "us",
    "talk",
    "about",
    "so",
    "does",
    "matters",
    "which",
    "how",
}


class HashEmbedder:
    """Bag of words, one dimension per distinct word (stop words dropped; no collisions up to d words); records every
    text it embeds."""

    def __init__(self, d: int = 2048):
        self.d, self.seen, self.vocab = d, [], {}

    def __call__(self, texts):
        self.seen.extend(texts)
        out = torch.zeros(len(texts), self.d)
        for i, t in enumerate(texts):
            for w in re.findall(r"[a-z]+", t.lower()):
                if w not in STOP:
                    out[i, self.vocab.setdefault(w, len(self.vocab))] += 1.0
        assert len(self.vocab) < self.d
        return out


def scripted_llm(messages):
    """Summary / keywords: the capitalised words of the session; filter: lines sharing a word with the question;
    answer: the context's first capitalised word after 'named' / 'called', else 'unknown'."""
    prompt = messages[-1]["content"]
    if prompt.endswith(("Keywords:", "Summary:")):
        body = prompt.split("\n\n", 1)[1].rsplit("\n\n", 1)[0]
        return "; ".join(dict.fromkeys(re.findall(r"\b[A-Z][a-z]{2,}\b", body)))
    if prompt.endswith("Relevant parts:"):
        question = set(re.findall(r"[a-z]+", prompt.rsplit("Question:", 1)[1].lower())) - STOP
        lines = [ln for ln in prompt.split("\n") if set(re.findall(r"[a-z]+", ln.lower())) & question]
        return "\n".join(ln for ln in lines if not ln.startswith("Question"))
    m = re.search(r"(?:named|called) ([A-Z][a-z]+)", prompt)
    return m.group(1) if m else "unknown"


TOPICS = [
    "baking sourdough bread flour oven crust",
    "repairing bicycle chain gears brakes",
    "learning chess openings tactics endgame",
    "planting tulips garden soil spring",
    "budget spreadsheet savings taxes income",
    "hiking mountains trail boots map",
    "painting watercolour brushes canvas colours",
    "cooking curry spices rice lentils",
    "fixing laptop keyboard battery screen",
    "training marathon running pace shoes",
    "knitting scarf wool needles pattern",
    "astronomy telescope planets stars night",
    "aquarium fish filter water plants",
    "photography camera lens aperture light",
]


def make_sessions(planted=None):
    """Chat-format sessions on distinct topics; ``planted`` = {session index: extra user message}."""
    sessions = []
    for i, topic in enumerate(TOPICS):
        words = topic.split()
        msgs = [
            {"role": "user", "content": f"Can you help me with {topic}?"},
            {"role": "assistant", "content": f"Sure, let us talk about {words[0]} and {words[1]}."},
            {"role": "user", "content": f"What about the {words[2]} and {words[3]}?"},
            {"role": "assistant", "content": f"The {words[2]} matters, and so does the {words[4]}."},
        ]
        if planted and i in planted:
            msgs[2:2] = [{"role": "user", "content": planted[i]}, {"role": "assistant", "content": "Noted."}]
        sessions.append(msgs)
    return sessions


PLANTED = {
    2: "My dog is named Biscuit and he loves the park.",
    5: "My sister Ingrid works as a pharmacist downtown.",
    9: "Our neighbour Oskar adopted a ferret yesterday.",
    12: "My favourite novel is Middlemarch, I reread it yearly.",
}


@pytest.fixture
def embedder():
    return HashEmbedder()


def build(embedder, **config):
    mem = MemGAS(MemGASConfig(association_start_session=1, **config), embedder=embedder, llm=scripted_llm)
    mem.add_sessions(make_sessions(PLANTED))
    return mem


@pytest.fixture(scope="module")
def shared_memory():
    """Built once for the read-only tests (do not add to it)."""
    return build(HashEmbedder())


@pytest.fixture
def memory(embedder):
    return build(embedder)


def test_import_is_light():
    code = (
        "import sys, hfx, hfx.memory, hfx.memory.memgas\n"
        "from hfx.memory import MemGASConfig\n"
        "assert 'MemGAS' in dir(hfx) and 'memory' in dir(hfx)\n"
        "heavy = ('torch', 'sklearn', 'sentence_transformers', 'smolagents', 'rank_bm25', 'transformers')\n"
        "print(','.join(m for m in heavy if m in sys.modules))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == ""


# ----------------------------------------------------------------------------------------------- GMM association
def test_gmm_links_only_the_high_mean_cluster_on_bimodal_scores():
    rng = np.random.default_rng(0)
    high, low = 0.85 + 0.02 * rng.standard_normal(8), 0.20 + 0.05 * rng.standard_normal(22)
    scores = np.concatenate([low[:11], high, low[11:]])  # high cluster in the middle
    mask = gmm_accept_mask(scores, n_components=2)
    assert mask.tolist() == [False] * 11 + [True] * 8 + [False] * 11
    # through `associate`: candidates whose cosine to the node is bimodal; only the high ones are linked
    node = torch.tensor([1.0, 0.0])
    angles = torch.tensor(np.arccos(np.clip(scores, -1, 1)), dtype=torch.float32)
    cands = torch.stack([torch.cos(angles), torch.sin(angles)], dim=1)
    linked = associate(node, cands, method="gmm", mem_threshold=30)
    assert sorted(linked.tolist()) == list(range(11, 19))
    # the candidate cap: among the 12 most similar (8 high + 4 low) the GMM still keeps exactly the high ones
    linked = associate(node, cands, method="gmm", mem_threshold=12)
    assert sorted(linked.tolist()) == list(range(11, 19))
    assert associate(node, cands, method="topk", top_k=3).tolist() == np.argsort(-scores, kind="stable")[:3].tolist()
    assert associate(node, cands, method="none").numel() == 0
    assert not gmm_accept_mask([0.5]).any() and not gmm_accept_mask([0.3, 0.3, 0.3]).any()  # no mixture fits


def test_association_is_incremental_and_looks_only_backwards(embedder):
    sessions = make_sessions(PLANTED)
    batch = MemGAS(MemGASConfig(association_start_session=2), embedder=embedder, llm=scripted_llm)
    batch.add_sessions(sessions)
    inc_embedder = HashEmbedder()
    inc = MemGAS(MemGASConfig(association_start_session=2), embedder=inc_embedder, llm=scripted_llm)
    inc.add_sessions(sessions[:6])
    before = len(inc_embedder.seen)
    inc.add(sessions[6])
    # only the new session's texts are embedded: its text, its turns, its summary and keywords
    assert len(inc_embedder.seen) - before == 1 + 2 + 1 + 1
    for s in sessions[7:]:
        inc.add(s)
    assert inc.edge_index.tolist() == batch.edge_index.tolist()
    for g in batch.config.granularities:
        assert torch.allclose(inc.unit_embeddings(g), batch.unit_embeddings(g))
    g_count = batch.num_granularities
    edges = batch.edge_index
    assert len(edges) > 0
    assert (edges[:, 0] // g_count > edges[:, 1] // g_count).all()  # new node -> node of an earlier session
    assert (edges[:, 0] // g_count >= 2).all()  # association starts at session index 2
    # the turn unit is the mean of the session's (normalised) turn embeddings
    t = batch._turn_embeddings[batch._turn_offsets[3] : batch._turn_offsets[4]]
    assert torch.allclose(batch.unit_embeddings("turn")[3], t.mean(0))


# ---------------------------------------------------------------------------------------------------- router
def test_entropy_router_is_monotone_in_peakedness_and_matches_hand_computation():
    n = 6
    flat = torch.zeros(n)
    rows = []
    for gap in (0.0, 0.05, 0.1, 0.2, 0.4):
        peaked = torch.zeros(n)
        peaked[0] = gap
        rows.append(entropy_router_weights(torch.stack([peaked, flat]), temperature=0.1)[0])
    weights = torch.stack(rows)
    assert torch.allclose(weights[0], torch.tensor(0.5))  # equal distributions -> equal weights
    assert (weights[1:] > weights[:-1]).all()  # a more peaked granularity gets strictly more weight
    # hand computation for one case (numpy, independent of the implementation)
    sims = np.array([[0.9, 0.1, 0.0, 0.2], [0.3, 0.31, 0.29, 0.3], [0.5, 0.4, 0.0, 0.0]])
    p = np.exp(sims / 0.1) / np.exp(sims / 0.1).sum(1, keepdims=True)
    h = -(p * np.log(p)).sum(1)
    conf = 1 - h / np.log(4)
    expected = conf / conf.sum()
    got = entropy_router_weights(torch.tensor(sims), temperature=0.1).numpy()
    assert np.allclose(got, expected, atol=1e-6)
    raw_conf = 1 - h
    got_raw = entropy_router_weights(torch.tensor(sims), temperature=0.1, normalization="none").numpy()
    assert np.allclose(got_raw, raw_conf / raw_conf.sum(), atol=1e-6)
    # the spec's deviation: with many flat-ish memories the raw form goes negative, the normalised one cannot
    peaked = torch.zeros(50)
    peaked[7] = 2.0
    many = torch.stack([peaked, torch.linspace(0, 0.05, 50)])  # one confident granularity, one flat
    assert (entropy_router_weights(many, normalization="none") < 0).any()
    assert (entropy_router_weights(many, normalization="log_n") >= 0).all()
    # batched input (B, G, N) and validation
    assert entropy_router_weights(torch.rand(3, 4, 7)).shape == (3, 4)
    with pytest.raises(ValueError, match="normalization"):
        entropy_router_weights(torch.rand(2, 3), normalization="l2")


# ------------------------------------------------------------------------------------------------------- PPR
def test_ppr_sums_to_one_ranks_neighbours_first_and_matches_networkx_and_igraph():
    import networkx as nx

    # seed 0 with neighbours 1, 2; a separate component 3-4-5; 6 isolated (dangling)
    edges = torch.tensor([[0, 1], [0, 2], [1, 2], [3, 4], [4, 5], [2, 7], [7, 8]])
    n = 9
    reset = torch.zeros(n)
    reset[0], reset[3], reset[6] = 1.0, 0.2, 0.1  # the isolated node 6 has reset mass: its walk returns to reset
    for damping in (0.1, 0.5, 0.85):
        p = personalized_pagerank(edges, n, reset, damping=damping, tol=1e-14, max_iter=1000)
        assert torch.isclose(p.sum(), torch.tensor(1.0, dtype=torch.float64))
        assert min(p[1], p[2]) > max(p[4], p[5])  # the seed's neighbours beat unrelated nodes
        assert p[7] > p[8] > 0  # mass decays with distance from the seed
        g = nx.Graph()
        g.add_nodes_from(range(n))
        g.add_edges_from(edges.tolist())
        ref = nx.pagerank(g, alpha=damping, personalization=dict(enumerate(reset.tolist())), tol=1e-14, max_iter=1000)
        assert np.allclose(p.numpy(), [ref[i] for i in range(n)], atol=1e-9)
    ig = pytest.importorskip("igraph")
    graph = ig.Graph(n, edges.tolist(), directed=False)
    ref = graph.personalized_pagerank(damping=0.1, directed=False, reset=reset.tolist(), implementation="prpack")
    assert np.allclose(personalized_pagerank(edges, n, reset, damping=0.1).numpy(), ref, atol=1e-9)
    # batched resets equal row-by-row calls
    resets = torch.rand(3, n)
    batched = personalized_pagerank(edges, n, resets, damping=0.3)
    assert torch.allclose(batched[1], personalized_pagerank(edges, n, resets[1], damping=0.3))
    with pytest.raises(ValueError, match="positive sum"):
        personalized_pagerank(edges, n, torch.zeros(n))
    with pytest.raises(ValueError, match="damping"):
        personalized_pagerank(edges, n, reset, damping=1.0)


# ---------------------------------------------------------------------------------------------- memory behaviour
QUESTIONS = {
    "What is the name of my dog?": 2,
    "Where does my sister Ingrid work as a pharmacist?": 5,
    "What pet did our neighbour Oskar adopt, a ferret?": 9,
    "Which novel do I reread yearly?": 12,
    "How do I fix my laptop battery?": 8,
    "Tips for a telescope to see planets?": 11,
}


def test_recall_at_k_on_planted_answers(shared_memory):
    memory = shared_memory
    from hfx.memory.memgas.metrics import retrieval_metrics

    rankings = memory.rank_sessions(list(QUESTIONS)).tolist()
    recall1 = [retrieval_metrics(r, [gold], 1)["recall_any"] for r, gold in zip(rankings, QUESTIONS.values())]
    recall3 = [retrieval_metrics(r, [gold], 3)["recall_any"] for r, gold in zip(rankings, QUESTIONS.values())]
    assert sum(recall1) >= 5 and sum(recall3) == len(QUESTIONS)
    top = memory.retrieve("What is the name of my dog?", top_k=2)
    assert top[0].session_id == "session_3" and top[0].rank == 0 and top[0].score >= top[1].score
    assert "Biscuit" in top[0].text and "Biscuit" in top[0].summary
    # scores are PPR mass summed over each session's nodes
    scores, details = memory.score_sessions(["dog"], return_details=True)
    assert torch.allclose(scores.double().sum(-1), torch.ones(1, dtype=torch.float64), atol=1e-6)
    ppr = details["ppr"].reshape(1, len(memory), memory.num_granularities).sum(-1)
    assert torch.allclose(scores, ppr.float())
    # the reset vector: the num_seednodes best router-weighted node scores (node = session * G + g), others 0
    broad = "bread chain chess tulips budget hiking painting curry laptop marathon scarf telescope fish camera"
    _, details = memory.score_sessions([broad], return_details=True)
    node_scores = (details["router_weights"][0][:, None] * details["similarities"][0]).T.reshape(-1)
    assert (node_scores > 0).sum() > memory.config.num_seednodes  # more candidates than seeds
    kth = node_scores.sort(descending=True).values[memory.config.num_seednodes - 1]
    expected = torch.where(node_scores >= kth, node_scores, 0.0)  # ties at the cut stay in, as in the code
    assert torch.allclose(details["seeds"][0], expected)
    assert torch.allclose(details["router_weights"].sum(-1), torch.ones(1))


def test_ppr_brings_an_associated_second_hop_session(embedder):
    """A question naming only the relation finds the intro session; the session about the named person comes in
    only through the association graph (no word of the question occurs in it)."""
    planted = {3: "My cousin is called Oskar Lindqvist.", 10: "Oskar Lindqvist adopted a ferret yesterday."}
    cfg = MemGASConfig(association_start_session=1, num_seednodes=4, damping=0.5, granularities=("session", "turn"))
    sessions = make_sessions(planted)
    full = MemGAS(cfg, embedder=embedder, llm=scripted_llm)
    full.add_sessions(sessions)
    assert any({a // 2, b // 2} == {3, 10} for a, b in full.edge_index.tolist())
    no_ppr = MemGAS(cfg.replace(use_ppr=False), embedder=embedder, llm=scripted_llm)
    no_ppr.add_sessions(sessions)
    question = ["Which pet did my cousin get?"]
    assert full.rank_sessions(question)[0, :2].sort().values.tolist() == [3, 10]
    assert 10 not in no_ppr.rank_sessions(question)[0, :2].tolist()


def test_ablation_switches_and_their_scores(embedder):
    sessions = make_sessions(PLANTED)
    assert MemGASConfig.for_ablation("no_router").router == "uniform"
    assert MemGASConfig.for_ablation("no_gmm").association == "topk"
    assert MemGASConfig.for_ablation("no_ppr").use_ppr is False
    assert MemGASConfig.for_ablation("no_filter").use_filter is False
    with pytest.raises(ValueError, match="must be one of"):
        MemGASConfig.for_ablation("no_memory")
    mem = MemGAS(MemGASConfig.for_ablation("no_ppr"), embedder=embedder, llm=scripted_llm)
    mem.add_sessions(sessions)
    scores, details = mem.score_sessions(["dog named Biscuit"], return_details=True)
    sims, w = details["similarities"], details["router_weights"]
    assert torch.allclose(scores, (w[..., None] * sims).sum(1))  # w/o PPR: weighted node similarities per session
    uni = MemGAS(MemGASConfig.for_ablation("no_router"), embedder=embedder, llm=scripted_llm)
    uni.add_sessions(sessions)
    _, details = uni.score_sessions(["dog"], return_details=True)
    assert torch.allclose(details["router_weights"], torch.full((1, 4), 0.25))
    topk = MemGAS(
        MemGASConfig.for_ablation("no_gmm", association_start_session=1), embedder=embedder, llm=scripted_llm
    )
    topk.add_sessions(sessions)
    # min(5, #earlier nodes) edges per associated node: session 1 has only the 4 nodes of session 0 before it
    assert len(topk.edge_index) == sum(4 * min(5, 4 * s) for s in range(1, len(sessions)))


def test_answer_filters_then_answers_and_no_filter_ablation(embedder):
    calls = []

    def spy(messages):
        calls.append(messages[-1]["content"])
        return scripted_llm(messages)

    mem = MemGAS(
        MemGASConfig(association_start_session=1), embedder=embedder, llm=scripted_llm, memory_filter=spy, answerer=spy
    )
    mem.add_sessions(make_sessions(PLANTED))
    out = mem.answer("What is the name of my dog?")
    assert out.answer == "Biscuit"
    assert len(calls) == 2 and "Relevant parts:" in calls[0] and "Summary:" in calls[0]  # filter sees the units
    assert out.context in calls[1] and "Biscuit" in out.context and "sourdough" not in out.context
    calls.clear()
    mem.config.use_filter = False
    out = mem.answer("What is the name of my dog?", top_k=2)
    assert len(calls) == 1 and "Relevant parts:" not in calls[0] and len(out.memories) == 2
    assert "### Session session_3" in out.context


def test_save_load_round_trip_gives_equal_retrieval(memory, embedder, tmp_path):
    from hfx.hub import add_to_hf_cache

    memory.save_pretrained(tmp_path / "mem")
    assert {p.name for p in (tmp_path / "mem").iterdir()} == {
        "config.json",
        "memory.json",
        "embeddings.safetensors",
        "README.md",
    }
    cache = tmp_path / "cache"
    add_to_hf_cache(tmp_path / "mem", "org/memgas-test", cache_dir=cache)
    queries = list(QUESTIONS)
    for source in (str(tmp_path / "mem"), "org/memgas-test"):
        loaded = MemGAS.from_pretrained(source, embedder=embedder, llm=scripted_llm, cache_dir=cache)
        assert loaded.config == memory.config and loaded.session_ids == memory.session_ids
        assert loaded.turns == memory.turns and loaded.summaries == memory.summaries
        assert torch.equal(loaded.edge_index, memory.edge_index)
        assert torch.equal(loaded.node_embeddings(), memory.node_embeddings())
        assert torch.equal(loaded.score_sessions(queries), memory.score_sessions(queries))
        assert loaded.retrieve(queries[0]) == memory.retrieve(queries[0])
    # incremental add after loading continues exactly like the original
    extra = make_sessions({0: "I bought a kayak called Otter."})[0]
    memory.add(extra, session_id="late")
    loaded.add(extra, session_id="late")
    assert torch.equal(loaded.edge_index, memory.edge_index)
    assert torch.equal(loaded.score_sessions(queries), memory.score_sessions(queries))
    config = json.loads((tmp_path / "mem" / "config.json").read_text())
    assert config["damping"] == 0.1 and config["granularities"] == ["session", "turn", "summary", "keyword"]


def test_push_to_hub_uploads_the_saved_folder(shared_memory, monkeypatch):
    from huggingface_hub import hub_mixin

    uploaded = {}

    class FakeApi:
        def __init__(self, token=None):
            pass

        def create_repo(self, repo_id, private=None, exist_ok=False):
            return type("Repo", (), {"repo_id": repo_id})()

        def upload_folder(self, repo_id, folder_path, **kwargs):
            from pathlib import Path

            uploaded.update({p.name: p.read_bytes() for p in Path(folder_path).iterdir()}, repo_id=repo_id)
            return "https://huggingface.co/me/mem/commit/0"

    monkeypatch.setattr(hub_mixin, "HfApi", FakeApi)
    shared_memory.push_to_hub("me/mem")
    assert uploaded["repo_id"] == "me/mem"
    assert {"config.json", "memory.json", "embeddings.safetensors", "README.md"} <= set(uploaded)
    assert b"arxiv:2505.19549" in uploaded["README.md"]


def test_input_validation(embedder):
    with pytest.raises(ValueError, match="granularities"):
        MemGASConfig(granularities=("session", "paragraph"))
    with pytest.raises(ValueError, match="damping"):
        MemGASConfig(damping=1.5)
    with pytest.raises(ValueError, match="mem_threshold"):
        MemGASConfig(mem_threshold=0)
    with pytest.raises(ValueError, match="unknown MemGASConfig keys"):
        MemGASConfig.from_dict({"temprature": 0.1})
    mem = MemGAS(MemGASConfig(granularities=("session", "turn")), embedder=embedder)
    with pytest.raises(ValueError, match="empty"):
        mem.retrieve("anything")
    mem.add("hello there", session_id="a")
    with pytest.raises(ValueError, match="already in the memory"):
        mem.add("again", session_id="a")
    with pytest.raises(TypeError, match="session must be"):
        mem.add(42)
    with pytest.raises(ValueError, match="`top_k`"):
        mem.retrieve("hello", top_k=0)
    with pytest.raises(TypeError, match="`query` must be a str"):
        mem.retrieve(["hello"])
    with pytest.raises(ValueError, match="summaries"):
        MemGAS(embedder=embedder, llm=scripted_llm).add_sessions(["x", "y"], summaries=["only one"])
    with pytest.raises(TypeError, match="with its tokenizer"):
        from hfx.testing import tiny_llama

        MemGAS(embedder=tiny_llama()[0], llm=scripted_llm).add("x")


# ------------------------------------------------------------------------------------------------------ baselines
def test_baselines_share_the_api_and_find_planted_facts(embedder):
    sessions = make_sessions(PLANTED)
    for memory in (
        FlatDenseMemory("turn", embedder=embedder, llm=scripted_llm),
        FlatDenseMemory("session", embedder=embedder, llm=scripted_llm),
        BM25Memory(llm=scripted_llm),
        BM25Memory(unit="turn", llm=scripted_llm),
    ):
        memory.add_sessions(sessions[:7])
        memory.add_sessions(sessions[7:])  # incremental
        top = memory.retrieve("dog named Biscuit", top_k=3)
        assert top[0].session_index == 2, type(memory).__name__
        assert memory.answer("What is the name of my dog?").answer == "Biscuit"
    turn = FlatDenseMemory("turn", embedder=embedder)
    turn.add_sessions(sessions)
    best = turn.retrieve("Biscuit loves the park", top_k=1)[0]
    assert best.text.startswith("[user]: My dog is named Biscuit")  # the best turn only, not the whole session
    scores = turn.score_sessions(["Biscuit"])
    per_turn = torch.nn.functional.normalize(embedder(["Biscuit"]), dim=-1) @ turn._emb.T
    assert torch.allclose(scores[0, 2], per_turn[0, turn._owner == 2].max())  # session score = best turn
    with pytest.raises(ValueError, match="granularity"):
        FlatDenseMemory("summary")


# ---------------------------------------------------------------------------------------------- integrations
def test_chat_template_helper_prepends_memories(shared_memory):
    memory = shared_memory
    from hfx.memory.memgas import add_memories_to_messages, apply_chat_template_with_memory
    from hfx.testing import tiny_tokenizer

    chat = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "What is my dog's name?"}]
    messages, retrieved = add_memories_to_messages(memory, chat, top_k=1)
    assert retrieved[0].session_id == "session_3" and messages[1:] == chat[1:]
    assert messages[0]["content"].startswith("Be brief.") and "Biscuit" in messages[0]["content"]
    assert chat[0]["content"] == "Be brief."  # the caller's list is not modified
    tok = tiny_tokenizer()
    enc = apply_chat_template_with_memory(tok, memory, "What is my dog's name?", top_k=1)
    text = tok.decode(enc["input_ids"][0])
    assert "Biscuit" in text and text.rstrip().endswith("assistant:")
    with pytest.raises(ValueError, match="no user message"):
        add_memories_to_messages(memory, [{"role": "system", "content": "x"}])


def test_smolagents_tool(shared_memory):
    memory = shared_memory
    from smolagents import Tool

    from hfx.memory import MemGASRetrieverTool

    tool = MemGASRetrieverTool(memory, top_k=2)
    assert isinstance(tool, Tool) and tool.name == "memory_retriever" and tool.inputs["query"]["type"] == "string"
    out = tool("What is the name of my dog?")
    assert out.startswith("### Session session_3") and "Biscuit" in out and "Summary:" in out
    assert out.count("### Session") == 2
    assert "empty" in MemGASRetrieverTool(MemGAS()).forward("x")
    with pytest.raises(TypeError, match="retrieve"):
        MemGASRetrieverTool(object())


def test_automodel_embedder_from_a_random_bert_pools_over_real_tokens():
    from transformers import BertConfig, BertModel

    from hfx.memory.memgas.components import AutoModelEmbedder
    from hfx.testing import tiny_tokenizer

    tok = tiny_tokenizer()
    tok.padding_side = "right"
    cfg = BertConfig(
        vocab_size=len(tok),
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=64,
        pad_token_id=tok.pad_token_id,
    )
    bert = BertModel(cfg).eval()
    emb = AutoModelEmbedder(bert, tok, batch_size=2)
    texts = ["a cat", "a much longer sentence about a dog in the park", "hi"]
    batch = emb.encode(texts)
    alone = torch.cat([emb.encode([t]) for t in texts])
    assert batch.shape == (3, 32) and torch.allclose(batch, alone, atol=1e-5)  # padding does not leak in
    mem = MemGAS(MemGASConfig(granularities=("session", "turn"), association_start_session=1), embedder=(bert, tok))
    mem.add_sessions(["a cat on a mat", "a dog in a park", "the sun is hot"])
    assert len(mem.retrieve("cat", top_k=2)) == 2


# ------------------------------------------------------------------------------------------------------ metrics
def test_metrics():
    m = retrieval_metrics([4, 2, 0, 1], [2, 1], k=2)
    assert m["recall_any"] == 1.0 and m["recall_all"] == 0.0
    assert math.isclose(m["ndcg_any"], (1 / math.log2(3)) / (1 + 1 / math.log2(3)))
    assert retrieval_metrics([4, 2, 0, 1], [2, 1], k=4)["recall_all"] == 1.0
    assert answer_matches("It is the Subaru Outback.", ["subaru outback"])
    assert not answer_matches("Portuguese only", ["Portuguese", "Finnish"])
    assert not answer_matches("Mochiko", ["Mochi"])  # whole words
    lo, hi = wilson_interval(8, 10)
    assert math.isclose(lo, 0.4902, abs_tol=1e-3) and math.isclose(hi, 0.9433, abs_tol=1e-3)
    res = paired_bootstrap([1, 1, 1, 0] * 10, [0, 1, 0, 0] * 10)
    assert math.isclose(res["diff"], 0.5) and res["low"] > 0 and res["p_value"] < 0.05


# -------------------------------------------------------------------------------------------------------- data
def test_loaders_read_longmemeval_and_locomo_json(tmp_path):
    from hfx.memory import load_long_memory_json

    lme = [
        {
            "question_id": "q1",
            "question_type": "single-session-user",
            "question": "Where do I work?",
            "answer": "a bakery",
            "question_date": "2023/05/01",
            "haystack_dates": ["2023/04/01", "2023/04/02"],
            "haystack_session_ids": ["s1", "answer_s2"],
            "haystack_sessions": [
                [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}],
                [{"role": "user", "content": "I work at a bakery", "has_answer": True}],
            ],
            "answer_session_ids": ["answer_s2"],
        }
    ]
    (tmp_path / "lme.json").write_text(json.dumps(lme))
    ds = load_long_memory_json(tmp_path / "lme.json")
    row = ds[0]
    assert row["session_ids"] == ["s1", "s2"] and row["qa"][0]["evidence_session_ids"] == ["s2"]
    assert row["sessions"][1] == [{"role": "user", "content": "I work at a bakery"}]
    locomo = [
        {
            "sample_id": "conv-1",
            "conversation": {
                "speaker_a": "Ann",
                "speaker_b": "Bob",
                "session_1_date_time": "1 May 2023",
                "session_1": [
                    {"speaker": "Ann", "dia_id": "D1:1", "text": "I got a cat."},
                    {"speaker": "Bob", "dia_id": "D1:2", "text": "Cute!", "blip_caption": "a cat"},
                ],
                "session_2": [{"speaker": "Bob", "dia_id": "D2:1", "text": "How is the cat?"}],
            },
            "qa": [
                {"question": "What pet?", "answer": "a cat", "evidence": ["D1:1", "D1:2"], "category": 1},
                {"question": "Dog?", "adversarial_answer": "no", "evidence": ["D2:1"], "category": 5},
            ],
        }
    ]
    (tmp_path / "locomo10.json").write_text(json.dumps(locomo))
    ds = load_long_memory_json(tmp_path / "locomo10.json")
    row = ds[0]
    assert row["session_ids"] == ["session_1", "session_2"] and row["session_dates"][0] == "1 May 2023"
    assert row["sessions"][0][1] == {"role": "assistant", "content": "Bob: Cute!\nThe image caption: a cat"}
    assert [q["evidence_session_ids"] for q in row["qa"]] == [["session_1"], ["session_2"]]
    assert row["qa"][1]["answers"] == ["no"]
    (tmp_path / "other.json").write_text(json.dumps([{"x": 1}]))
    with pytest.raises(ValueError, match="neither LoCoMo"):
        load_long_memory_json(tmp_path / "other.json")
    with pytest.raises(FileNotFoundError):
        load_long_memory_json(tmp_path / "missing.json")


def test_benchmark_builder_nests_histories_and_plants_every_fact(shared_data):
    from hfx.memory import build_long_memory_benchmark
    from hfx.memory.memgas.components import normalize_session

    ds = build_long_memory_benchmark(
        shared_data, history_lengths=(8, 16), num_conversations=2, num_dev_conversations=1, seed=3
    )
    again = build_long_memory_benchmark(
        shared_data, history_lengths=(8, 16), num_conversations=2, num_dev_conversations=1, seed=3
    )
    assert ds["test"].to_list() == again["test"].to_list()  # seeded
    assert len(ds["dev"]) == 2 and len(ds["test"]) == 4
    dev_ids = {s for r in ds["dev"] for s in r["session_ids"] if "-ev" in s}
    by_conv = {}
    for row in ds["test"]:
        assert len(row["sessions"]) == row["history_length"] == len(row["session_ids"])
        by_conv.setdefault(row["conversation_id"], {})[row["history_length"]] = row
        texts = {sid: "\n".join(normalize_session(s)) for sid, s in zip(row["session_ids"], row["sessions"])}
        assert len(row["qa"]) == 12
        for q in row["qa"]:
            evidence = [texts[s] for s in q["evidence_session_ids"]]
            assert all(any(a in e for e in evidence) for a in q["answers"]) or q["question_type"] == "multi-hop"
            if q["question_type"] == "multi-hop":
                assert q["answers"][0] in evidence[1] and len(set(q["evidence_session_ids"])) == 2
            others = [t for s, t in texts.items() if s not in q["evidence_session_ids"] and "-ev" in s]
            assert not any(a in t for a in q["answers"] for t in others)  # the answer lives only in its evidence
    for rows in by_conv.values():
        short, long = rows[8]["session_ids"], rows[16]["session_ids"]
        assert [s for s in long if s in short] == short  # shorter history = ordered subset of the longer one
        assert not dev_ids & set(long)


# --------------------------------------------------------------------------------------- CLI, publish, real model
def test_cli_errors_are_one_line(tmp_path):
    missing = subprocess.run(
        [sys.executable, "-m", "hfx.cli", "memory", "ask", str(tmp_path / "nothing"), "hi"],
        capture_output=True,
        text=True,
    )
    assert missing.returncode == 2 and "Traceback" not in missing.stderr
    assert missing.stderr.strip().count("\n") == 0 and "holds no MemGAS memory" in missing.stderr
    (tmp_path / "bad.json").write_text("{not json")
    bad = subprocess.run(
        [sys.executable, "-m", "hfx.cli", "memory", "add", str(tmp_path / "m"), str(tmp_path / "bad.json")],
        capture_output=True,
        text=True,
    )
    assert bad.returncode == 2 and "not valid JSON" in bad.stderr and "Traceback" not in bad.stderr


def test_cli_add_refuses_a_non_empty_folder_that_is_no_memory(tmp_path, capsys):
    from hfx.cli import main

    other = tmp_path / "adapter"
    other.mkdir()
    (other / "adapter_config.json").write_text("{}")
    (tmp_path / "s.txt").write_text("hello\nhi\n")
    assert main(["memory", "add", str(other), str(tmp_path / "s.txt"), "--no-llm"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("hfx memory: error:") and "MEMORY_DIR" in err and "\n" not in err
    assert sorted(p.name for p in other.iterdir()) == ["adapter_config.json"]


def test_publish_writes_a_loadable_folder_with_a_card(tmp_path, embedder):
    from huggingface_hub import ModelCard

    from hfx.hub import publish

    out = publish("memgas", tmp_path / "pub", embedder=embedder, repo_id="me/my-memory")
    card = ModelCard.load(out / "README.md")
    assert "arxiv:2505.19549" in card.data.tags and card.data.library_name == "hfx"
    assert "Demo memory" in card.text and "me/my-memory" in card.text and "{{" not in card.text
    loaded = MemGAS.from_pretrained(out, embedder=embedder)
    assert len(loaded) == 3 and loaded.retrieve("Biscuit puppy", top_k=1)[0].session_id == "session_1"


@pytest.mark.real_model
@pytest.mark.slow
def test_minilm_default_embedder_and_cli_round_trip(tmp_path):
    pytest.importorskip("sentence_transformers")
    from hfx.models import default_sentence_encoder_path

    try:
        default_sentence_encoder_path()
    except FileNotFoundError:
        pytest.skip("the offline MiniLM encoder is not installed")
    sessions = [
        [
            {"role": "user", "content": "We adopted a beagle puppy called Biscuit."},
            {"role": "assistant", "content": "Lovely!"},
        ],
        [
            {"role": "user", "content": "My tax return is due next week."},
            {"role": "assistant", "content": "Good luck."},
        ],
        [
            {"role": "user", "content": "I'm training for the Lisbon marathon."},
            {"role": "assistant", "content": "Great."},
        ],
    ]
    (tmp_path / "s.json").write_text(json.dumps(sessions))
    cli = [sys.executable, "-m", "hfx.cli", "memory"]
    add = subprocess.run(
        [*cli, "add", str(tmp_path / "m"), str(tmp_path / "s.json"), "--no-llm"], capture_output=True, text=True
    )
    assert add.returncode == 0, add.stderr
    ask = subprocess.run(
        [*cli, "ask", str(tmp_path / "m"), "What is my dog called?", "--top-k", "1"], capture_output=True, text=True
    )
    assert ask.returncode == 0, ask.stderr
    assert ask.stdout.startswith("1. session_1")
    loaded = MemGAS.from_pretrained(tmp_path / "m")
    assert loaded.embedder_name == "sentence-transformers/all-MiniLM-L6-v2"
    assert loaded.retrieve("When is my tax return due?", top_k=1)[0].session_id == "session_2"


def test_saved_memory_is_recognised_as_its_artifact_type(shared_memory, tmp_path):
    """`hfx publish memgas --source` accepts a saved memory folder and refuses another artifact's folder before
    loading anything (hfx._artifacts reads only the small JSON files)."""
    from hfx._artifacts import artifact_type
    from hfx.hub import publish

    shared_memory.save_pretrained(tmp_path / "mem")
    assert artifact_type(tmp_path / "mem") == "hfx_memgas"
    other = tmp_path / "llama"
    other.mkdir()
    (other / "config.json").write_text(json.dumps({"model_type": "llama"}))
    with pytest.raises(ValueError, match="source"):
        publish("memgas", tmp_path / "out", source=str(other))
    assert not (tmp_path / "out").exists()
