"""ThinkMerge (arXiv 2512.02874): the 8 conformance cases of the spec, bad input, and the three custom_generate forms.

Every model here is ``hfx.testing.tiny_llama()`` (random weights): behaviour is checked against independent
computations (per-context forward passes without a cache, plain ``model.generate``), never against stored outputs.
"""

from __future__ import annotations

import functools
from pathlib import Path

import pytest
import torch
from transformers import DynamicCache, LogitsProcessor, LogitsProcessorList, TextStreamer

import hfx
from hfx.generation.thinkmerge import (
    Delimiter,
    ThinkMergeOutput,
    left_pad,
    merge_logits,
    trim_repetitive_suffix,
)
from hfx.generation.thinkmerge.answer import extract_numeric_answer, gsm8k_reference, is_correct, normalize_number
from hfx.generation.thinkmerge.baselines import build_prompt, majority_vote, run_strategies


@pytest.fixture(scope="module", autouse=True)
def _one_thread():
    # tiny matrices: one intra-op thread is ~30x faster than two on a loaded 2-core machine (restored afterwards)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def lm():
    from hfx.testing import tiny_llama

    return tiny_llama()


@pytest.fixture(scope="module")
def enc(lm):
    _, tok = lm
    return tok(["Tom has 3 apples and buys 5 more.", "two plus two ?"], return_tensors="pt", padding=True)


@pytest.fixture(scope="module")
def think_id(lm):
    return lm[1].convert_tokens_to_ids("</think>")


class BoostToken(LogitsProcessor):
    """Adds ``bias`` to one token's logit (makes the delimiter likely in stage I)."""

    def __init__(self, token_id: int, bias: float):
        self.token_id, self.bias = token_id, bias

    def __call__(self, input_ids, scores):
        scores = scores.clone()
        scores[:, self.token_id] += self.bias
        return scores


class Script(LogitsProcessor):
    """Forces row-independent token ``script[i]`` at generated position ``i`` (after ``start`` tokens)."""

    def __init__(self, script: list[int], start: int):
        self.script, self.start = script, start

    def __call__(self, input_ids, scores):
        i = input_ids.shape[1] - self.start
        if i < len(self.script):
            scores = torch.full_like(scores, -1e9)
            scores[:, self.script[i]] = 0.0
        return scores


def _context_logits(model, ids: torch.Tensor) -> torch.Tensor:
    """Next-token logits of one unpadded context, without any cache (the reference computation)."""
    return model(input_ids=ids[None]).logits[0, -1].float()


def _gen(model, enc, **kw):
    kw.setdefault("custom_generate", hfx.thinkmerge)
    kw.setdefault("max_new_tokens", 6)
    kw.setdefault("max_thinking_tokens", 8)
    return model.generate(**enc, **kw)


# ---------------------------------------------------------------------------------------------------------------
# conformance cases
# ---------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("answer_do_sample", [True, False])
def test_case1_k1_is_ordinary_decoding(lm, think_id, answer_do_sample):
    model, tok = lm
    enc1 = tok(["Tom has 3 apples"], return_tensors="pt")
    torch.manual_seed(123)
    out = _gen(
        model,
        enc1,
        num_traces=1,
        think_end=[think_id],
        do_sample=False,
        answer_do_sample=answer_do_sample,
        answer_temperature=0.8,
        answer_top_k=7,
        max_new_tokens=8,
        return_dict_in_generate=True,
    )
    context = torch.cat([enc1["input_ids"][0], out.traces[0][0]])[None]
    torch.manual_seed(123)
    ref = model.generate(
        input_ids=context,
        attention_mask=torch.ones_like(context),
        do_sample=answer_do_sample,
        temperature=0.8,
        top_k=7,
        top_p=1.0,
        max_new_tokens=8,
    )
    prompt_length = enc1["input_ids"].shape[1]
    assert out.traces[0][0][-1].item() == think_id
    assert out.sequences[0, prompt_length:].tolist() == ref[0, context.shape[1] :].tolist()


def test_case1_sampled_trace_then_sampled_answer(lm, enc, think_id):
    """K = 1 with a sampled trace: the answer equals ordinary sampling from the same trace (traces= reuses it)."""
    model, _ = lm
    torch.manual_seed(5)
    first = _gen(model, enc, num_traces=1, think_end=[think_id], do_sample=True, return_dict_in_generate=True)
    for b in range(2):
        prompt = enc["input_ids"][b][enc["attention_mask"][b].bool()]
        context = torch.cat([prompt, first.traces[b][0]])[None]
        single = {k: v[b : b + 1] for k, v in enc.items()}
        torch.manual_seed(9)
        ours = _gen(model, single, num_traces=1, traces=[first.traces[b]], do_sample=True, top_k=5, max_new_tokens=7)
        torch.manual_seed(9)
        ref = model.generate(input_ids=context, do_sample=True, top_k=5, max_new_tokens=7)
        assert ours[0, single["input_ids"].shape[1] :].tolist() == ref[0, context.shape[1] :].tolist()


def test_case2_identical_contexts_equal_single_context(lm, enc, think_id):
    model, _ = lm
    torch.manual_seed(0)
    first = _gen(model, enc, num_traces=1, think_end=[think_id], do_sample=True, return_dict_in_generate=True)
    kw = dict(do_sample=True, temperature=0.9, max_new_tokens=8, return_dict_in_generate=True, output_logits=True)
    torch.manual_seed(42)
    one = _gen(model, enc, num_traces=1, traces=first.traces, **kw)
    torch.manual_seed(42)
    four = _gen(model, enc, num_traces=4, traces=[t * 4 for t in first.traces], **kw)
    assert torch.equal(one.sequences, four.sequences)
    for a, b in zip(one.logits, four.logits, strict=True):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)


def test_case3_shared_suffix_one_stream_per_prompt(lm, enc, think_id):
    model, _ = lm
    steps = []

    class Record(LogitsProcessor):
        def __call__(self, input_ids, scores):
            steps.append(input_ids.clone())
            return scores

    torch.manual_seed(1)
    out = _gen(
        model,
        enc,
        num_traces=3,
        think_end=[think_id],
        do_sample=True,
        max_new_tokens=5,
        logits_processor=LogitsProcessorList([Record()]),
        return_dict_in_generate=True,
    )
    prompt_length = enc["input_ids"].shape[1]
    answer = out.sequences[:, prompt_length:]
    assert out.sequences.shape[0] == 2 and out.contexts.shape[:2] == (2, 3)
    # every context = its prompt + its own trace + the shared answer
    for b in range(2):
        prompt = enc["input_ids"][b][enc["attention_mask"][b].bool()]
        for k in range(3):
            expected = torch.cat([prompt, out.traces[b][k], answer[b]])
            row = out.contexts[b, k]
            assert torch.equal(row[len(row) - len(expected) :], expected)
    # every processor call saw one row per prompt (the layout generate built the processors for); the last
    # answer-length calls are the answer stage: one stream per prompt, each extending the last
    assert all(s.shape[0] == 2 for s in steps)
    answer_steps = steps[-answer.shape[1] :]
    for i, s in enumerate(answer_steps):
        assert torch.equal(s, out.sequences[:, : prompt_length + i])


def test_case4_geometric_mean_identity():
    torch.manual_seed(0)
    B, K, V = 3, 4, 50
    logits = torch.randn(B * K, V, dtype=torch.float64) * 3
    merged = merge_logits(logits, K)
    p = logits.softmax(-1).view(B, K, V)
    geometric = p.prod(dim=1).pow(1.0 / K)
    geometric = geometric / geometric.sum(-1, keepdim=True)
    assert (merged.softmax(-1) - geometric).abs().max() < 1e-6
    arithmetic = p.mean(dim=1)
    assert (merged.softmax(-1) - arithmetic).abs().max() > 1e-3
    # float32 on real model logits too
    z = torch.randn(2 * 3, 400) * 5
    g = z.softmax(-1).view(2, 3, -1).log().mean(1).softmax(-1)
    assert (merge_logits(z, 3).softmax(-1) - g).abs().max() < 1e-6


def test_case5_processors_act_after_averaging_unit(lm, think_id, monkeypatch):
    """Controlled logits for K = 2 contexts: ThinkMerge must hand z̄, not the per-context logits, to the processors."""
    model, _ = lm
    V = model.config.vocab_size
    A, B, C, D = 40, 41, 42, 43
    z = torch.full((2, V), -20.0)
    z[:, [A, B, C]] = torch.tensor([[3.0, 0.0, 2.5], [0.0, 3.0, 2.5]])  # argmax per context: A, B; of the mean: C
    z[:, D] = torch.tensor([2.6, -2.0])  # opposite signs: a repetition penalty before averaging would differ
    forward = model.forward

    @functools.wraps(forward)
    def controlled(*args, **kwargs):
        out = forward(*args, **kwargs)  # the real pass keeps the caches consistent; only the logits are replaced
        out.logits = z[:, None, :].expand(2, out.logits.shape[1], V).clone()
        return out

    monkeypatch.setattr(model, "forward", controlled)
    prompt = {"input_ids": torch.tensor([[5, D, 7]]), "attention_mask": torch.ones(1, 3, dtype=torch.long)}
    traces = [[torch.tensor([think_id]), torch.tensor([9, think_id])]]
    kw = dict(num_traces=2, traces=traces, max_new_tokens=2, return_dict_in_generate=True, output_scores=True,
              output_logits=True)  # fmt: skip
    z_bar = z.mean(0)

    out = _gen(model, prompt, do_sample=False, repetition_penalty=2.0, **kw)
    for step, seen in enumerate([[5, D, 7], [5, D, 7, C]]):
        torch.testing.assert_close(out.logits[step][0], z_bar)
        expected = z_bar.clone()  # HF's penalty on z̄: seen positive logits / 2, seen negative logits * 2
        expected[seen] = torch.where(z_bar[seen] > 0, z_bar[seen] / 2.0, z_bar[seen] * 2.0)
        torch.testing.assert_close(out.scores[step][0], expected)
    assert out.scores[0][0, D].item() == pytest.approx(0.15)  # (2.6 - 2.0) / 2 / 2, not (2.6/2 - 2.0*2) / 2
    # step 0: C (2.5) beats A and B (1.5 each), though each context alone prefers A or B; step 1: C is penalised
    assert out.sequences[0, 3:].tolist() == [C, A]

    out = _gen(model, prompt, do_sample=True, temperature=0.5, top_k=1, **kw)  # warpers on z̄: C / 0.5 kept alone
    assert out.sequences[0, 3:].tolist() == [C, C]
    kept = out.scores[0][0].isfinite()
    assert kept.nonzero().flatten().tolist() == [C] and out.scores[0][0, C].item() == pytest.approx(5.0)


def test_case5_processors_act_after_averaging_end_to_end(lm, enc, think_id):
    model, _ = lm
    torch.manual_seed(3)
    out = _gen(
        model,
        enc,
        num_traces=3,
        think_end=[think_id],
        do_sample=True,
        answer_top_k=1,
        answer_temperature=0.5,
        max_new_tokens=6,
        return_dict_in_generate=True,
        output_logits=True,
        output_scores=True,
    )
    prompt_length = enc["input_ids"].shape[1]
    answer = out.sequences[:, prompt_length:]
    disagreements = 0
    for b in range(2):
        prompt = enc["input_ids"][b][enc["attention_mask"][b].bool()]
        for i in range(answer.shape[1]):
            if i > 0 and answer[b, i - 1].item() == model.generation_config.eos_token_id:
                break
            per_context = torch.stack(
                [_context_logits(model, torch.cat([prompt, t, answer[b, :i]])) for t in out.traces[b]]
            )
            z_bar = per_context.mean(0)
            torch.testing.assert_close(out.logits[i][b], z_bar, atol=1e-4, rtol=1e-4)
            assert answer[b, i].item() == z_bar.argmax().item()  # top-k = 1 after averaging
            disagreements += int(any(z.argmax().item() != answer[b, i].item() for z in per_context))
            # temperature scales z̄ (top-k keeps only the argmax entry finite)
            kept = out.scores[i][b].isfinite()
            assert kept.sum() == 1
            torch.testing.assert_close(out.scores[i][b][kept], z_bar[kept] / 0.5, atol=1e-4, rtol=1e-4)
    assert disagreements > 0  # some merged tokens are not the argmax of every single context


def test_case6_padding_invariance_prefill_and_decode(lm):
    model, _ = lm
    torch.manual_seed(0)
    contexts = [torch.randint(8, 300, (n,)) for n in (5, 11, 8)]
    ids, mask, pos = left_pad(contexts, pad_token_id=3)
    assert ids.shape == (3, 11) and mask.sum(1).tolist() == [5, 11, 8]
    cache = DynamicCache(config=model.config)
    batched = model(input_ids=ids, attention_mask=mask, position_ids=pos, cache=cache).logits[:, -1]
    step = torch.tensor([[17], [17], [17]])
    mask2 = torch.cat([mask, torch.ones(3, 1, dtype=torch.long)], 1)
    batched2 = model(input_ids=step, attention_mask=mask2, position_ids=pos[:, -1:] + 1, cache=cache).logits[:, -1]
    for k, c in enumerate(contexts):
        torch.testing.assert_close(batched[k], _context_logits(model, c), atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(batched2[k], _context_logits(model, torch.cat([c, step[k]])), atol=1e-5, rtol=1e-5)


def test_case6_merged_answer_matches_cache_free_reference(lm, enc):
    """Traces of different lengths: the greedy merged answer equals a per-context, cache-free recomputation."""
    model, _ = lm
    torch.manual_seed(0)
    traces = [[torch.randint(8, 300, (n,)) for n in (2, 9, 5)], [torch.randint(8, 300, (n,)) for n in (7, 1, 4)]]
    out = _gen(
        model, enc, num_traces=3, traces=traces, do_sample=False, max_new_tokens=5, return_dict_in_generate=True
    )
    prompt_length = enc["input_ids"].shape[1]
    for b in range(2):
        prompt = enc["input_ids"][b][enc["attention_mask"][b].bool()]
        answer = []
        for _ in range(5):
            z = torch.stack(
                [
                    _context_logits(model, torch.cat([prompt, t, torch.tensor(answer, dtype=torch.long)]))
                    for t in traces[b]
                ]
            ).mean(0)
            answer.append(z.argmax().item())
            if answer[-1] == model.generation_config.eos_token_id:
                break
        assert out.sequences[b, prompt_length : prompt_length + len(answer)].tolist() == answer


def test_batch_equals_each_prompt_alone(lm, enc, think_id):
    """B prompts of different lengths (left padding, B*K rows) give the same result as each prompt alone."""
    model, _ = lm
    kw = dict(num_traces=2, think_end=[think_id], do_sample=False, max_new_tokens=5, return_dict_in_generate=True)
    both = _gen(model, enc, **kw)
    prompt_length = enc["input_ids"].shape[1]
    for b in range(2):
        n_pad = int((enc["attention_mask"][b] == 0).sum())
        single = {k: v[b : b + 1, n_pad:] for k, v in enc.items()}
        alone = _gen(model, single, **kw)
        assert [t.tolist() for t in alone.traces[0]] == [t.tolist() for t in both.traces[b]]
        assert alone.sequences[0, prompt_length - n_pad :].tolist() == both.sequences[b, prompt_length:].tolist()


def test_case7_direct_merge_waits_for_all_traces(lm, enc, think_id):
    model, _ = lm
    torch.manual_seed(0)
    out = _gen(
        model,
        enc,
        num_traces=3,
        think_end=[think_id],
        do_sample=True,
        max_thinking_tokens=30,
        logits_processor=LogitsProcessorList([BoostToken(think_id, 4.0)]),
        return_dict_in_generate=True,
    )
    lengths = out.candidate_lengths
    assert (lengths < 30).any() and len(set(lengths.flatten().tolist())) > 1  # traces end at different steps
    for b in range(2):
        for k, trace in enumerate(out.traces[b]):
            assert trace[-1].item() == think_id and len(trace) == lengths[b, k] + 1
            assert think_id not in trace[:-1].tolist()  # each trace stops at its first delimiter
    assert out.merged_indices.tolist() == [[0, 1, 2], [0, 1, 2]]


def test_case7_early_ready_uses_first_k_ready(lm, enc, think_id):
    model, _ = lm
    torch.manual_seed(1)
    K, N = 2, 6
    out = _gen(
        model,
        enc,
        num_traces=K,
        num_candidates=N,
        merge="early_ready",
        think_end=[think_id],
        do_sample=True,
        max_thinking_tokens=40,
        logits_processor=LogitsProcessorList([BoostToken(think_id, 3.0)]),
        return_dict_in_generate=True,
    )
    assert out.ready_steps.shape == (2, N) and len(out.candidate_traces[0]) == N
    for b in range(2):
        ready = out.ready_steps[b].tolist()
        expected = sorted((s, n) for n, s in enumerate(ready) if s >= 0)[:K]
        assert out.merged_indices[b].tolist() == [n for _, n in expected]
        kth_step = expected[-1][0]
        # the answer starts when the K-th trace finishes: nobody thought past that step
        assert max(out.candidate_lengths[b].tolist()) <= kth_step + 1
        for n in range(N):
            if n not in out.merged_indices[b].tolist():
                assert ready[n] < 0 or ready[n] >= kth_step
        for k, n in enumerate(out.merged_indices[b].tolist()):
            assert torch.equal(out.traces[b][k], out.candidate_traces[b][n]) and out.traces[b][k][-1] == think_id


def test_case8_shortest_k(lm, enc, think_id):
    model, _ = lm
    torch.manual_seed(2)
    K, N = 3, 8
    out = _gen(
        model,
        enc,
        num_traces=K,
        num_candidates=N,
        merge="shortest_k",
        think_end=[think_id],
        do_sample=True,
        max_thinking_tokens=12,
        logits_processor=LogitsProcessorList([BoostToken(think_id, 2.5)]),
        return_dict_in_generate=True,
    )
    for b in range(2):
        lengths = out.candidate_lengths[b].tolist()
        assert lengths == [len(t) - 1 for t in out.candidate_traces[b]]  # all N ran to the delimiter or budget
        expected = [n for _, n in sorted((length, n) for n, length in enumerate(lengths))[:K]]  # ties: sampling order
        assert out.merged_indices[b].tolist() == expected
    assert len(set(out.candidate_lengths.flatten().tolist())) > 1  # lengths differ, so the choice matters


def test_case8_tie_break_is_sampling_order(lm, enc, think_id):
    model, _ = lm
    # greedy thinking: all N traces are identical, so every length ties and the first K rows are merged
    out = _gen(
        model,
        enc,
        num_traces=2,
        num_candidates=5,
        merge="shortest_k",
        think_end=[think_id],
        do_sample=False,
        return_dict_in_generate=True,
    )
    assert out.merged_indices.tolist() == [[0, 1], [0, 1]]


# ---------------------------------------------------------------------------------------------------------------
# delimiter, budget, trimming, answer settings
# ---------------------------------------------------------------------------------------------------------------


def test_budget_force_appends_delimiter(lm, enc, think_id):
    model, _ = lm
    out = _gen(
        model,
        enc,
        num_traces=2,
        think_end=[think_id],
        do_sample=True,
        max_thinking_tokens=4,
        logits_processor=LogitsProcessorList([BoostToken(think_id, -1e4)]),
        return_dict_in_generate=True,
    )
    assert (out.candidate_lengths == 4).all()
    assert all(len(t) == 5 and t[-1] == think_id for tr in out.traces for t in tr)
    assert (out.ready_steps == 4).all()


def test_text_delimiter_matches_decoded_phrase(lm):
    model, tok = lm
    enc1 = tok(["two plus two ?"], return_tensors="pt")
    script = tok.encode(" so the result. Final answer: 7 more words", add_special_tokens=False)
    phrase = "Final answer:"
    out = _gen(
        model,
        enc1,
        num_traces=2,
        think_end=phrase,
        think_end_tokenizer=tok,
        do_sample=True,
        max_thinking_tokens=40,
        logits_processor=LogitsProcessorList([Script(script, enc1["input_ids"].shape[1])]),
        return_dict_in_generate=True,
    )
    for trace in out.traces[0]:
        text = tok.decode(trace)
        assert text.endswith(phrase) or text.rstrip().endswith(phrase)
        assert phrase not in tok.decode(trace[:-1])  # stops at the first token completing the phrase
    assert (out.candidate_lengths < len(script)).all()


def test_single_token_string_delimiter_is_id_match(lm):
    _, tok = lm
    d = Delimiter("</think>", tok)
    assert d.ids == [tok.convert_tokens_to_ids("</think>")] and d.text is None
    assert Delimiter("Final answer:", tok).text == "Final answer:"


def test_eos_before_delimiter_is_replaced_by_forced_delimiter(lm, enc, think_id):
    model, tok = lm
    eos = tok.eos_token_id
    script = [50, 60, eos]
    out = _gen(
        model,
        enc,
        num_traces=2,
        think_end=[think_id],
        do_sample=False,
        max_thinking_tokens=10,
        logits_processor=LogitsProcessorList([Script(script, enc["input_ids"].shape[1])]),
        return_dict_in_generate=True,
    )
    for tr in out.traces:
        for t in tr:
            assert t.tolist() == [50, 60, think_id]


def test_trim_repetitive_suffix_unit():
    assert trim_repetitive_suffix([1, 2, 3, 4, 5, 4, 5, 4, 5]) == [1, 2, 3, 4, 5]
    assert trim_repetitive_suffix([9, 7, 7, 7, 7]) == [9, 7]
    assert trim_repetitive_suffix([1, 2, 3, 4, 5, 4, 5]) == [1, 2, 3, 4, 5, 4, 5]  # only 2 repeats
    assert trim_repetitive_suffix([1, 2, 3, 4, 5, 4, 5], min_repeats=2) == [1, 2, 3, 4, 5]
    # the longest removal wins: block (8, 8, 6) x3 removes 6 tokens, block (6,) x1 removes none
    assert trim_repetitive_suffix([1, 8, 8, 6, 8, 8, 6, 8, 8, 6]) == [1, 8, 8, 6]


def test_trim_repetitions_end_to_end(lm, enc, think_id):
    model, _ = lm
    loop = [40, 41, 40, 41, 40, 41, 40, 41, think_id]
    kw = dict(
        num_traces=2, think_end=[think_id], do_sample=False, max_thinking_tokens=20, return_dict_in_generate=True
    )
    procs = LogitsProcessorList([Script([30] + loop, enc["input_ids"].shape[1])])
    plain = _gen(model, enc, logits_processor=procs, **kw)
    trimmed = _gen(model, enc, logits_processor=procs, trim_repetitions=True, **kw)
    assert plain.traces[0][0].tolist() == [30, *loop]
    assert trimmed.traces[0][0].tolist() == [30, 40, 41, think_id]
    assert trimmed.candidate_lengths.tolist() == plain.candidate_lengths.tolist()  # lengths are as sampled


def test_answer_settings_default_to_thinking_and_override(lm, enc, think_id):
    model, _ = lm
    kw = dict(
        num_traces=2,
        think_end=[think_id],
        do_sample=True,
        temperature=0.7,
        top_k=5,
        max_new_tokens=4,
        return_dict_in_generate=True,
        output_scores=True,
        output_logits=True,
    )
    torch.manual_seed(0)
    default = _gen(model, enc, **kw)
    for s, z in zip(default.scores, default.logits, strict=True):  # thinking warpers (T=0.7, top-5) on z̄
        kept = s.isfinite()
        assert (kept.sum(-1) == 5).all()
        torch.testing.assert_close(s[kept], (z / 0.7)[kept])
    torch.manual_seed(0)
    greedy = _gen(model, enc, answer_do_sample=False, **kw)
    prompt_length = enc["input_ids"].shape[1]
    for i, z in enumerate(greedy.logits):
        torch.testing.assert_close(greedy.scores[i], z)  # no warpers when the answer is greedy
        running = (greedy.sequences[:, prompt_length : prompt_length + i] != model.generation_config.eos_token_id).all(
            1
        )
        assert torch.equal(greedy.sequences[running, prompt_length + i], z[running].argmax(-1))
    torch.manual_seed(0)
    hot = _gen(model, enc, answer_temperature=2.0, answer_top_k=0, answer_top_p=1.0, **kw)
    for s, z in zip(hot.scores, hot.logits, strict=True):
        torch.testing.assert_close(s, z / 2.0)


def test_returns_tensor_without_dict_and_output_type(lm, enc, think_id):
    model, _ = lm
    out = _gen(model, enc, num_traces=2, think_end=[think_id], do_sample=True)
    assert isinstance(out, torch.Tensor) and out.shape[0] == 2 and out.shape[1] <= enc["input_ids"].shape[1] + 6
    out = _gen(model, enc, num_traces=2, think_end=[think_id], do_sample=True, return_dict_in_generate=True)
    assert isinstance(out, ThinkMergeOutput) and hfx.ThinkMergeOutput is ThinkMergeOutput
    assert torch.equal(out[0], out.sequences)


def test_independent_answers_mode(lm, enc, think_id):
    """answer_mode='independent' answers each trace alone: row b*K+k equals K = 1 merging of trace k."""
    model, _ = lm
    torch.manual_seed(0)
    first = _gen(model, enc, num_traces=3, think_end=[think_id], do_sample=True, return_dict_in_generate=True)
    ind = _gen(model, enc, num_traces=3, traces=first.traces, answer_mode="independent", do_sample=False)
    assert ind.shape[0] == 6
    for b in range(2):
        for k in range(3):
            solo = _gen(
                model,
                {n: v[b : b + 1] for n, v in enc.items()},
                num_traces=1,
                traces=[[first.traces[b][k]]],
                do_sample=False,
            )
            assert ind[b * 3 + k, : solo.shape[1]].tolist() == solo[0].tolist()


# ---------------------------------------------------------------------------------------------------------------
# bad input
# ---------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "error", "name"),
    [
        ({"num_traces": 0}, ValueError, "num_traces"),
        ({"num_traces": -2}, ValueError, "num_traces"),
        ({"num_traces": 4, "num_candidates": 2, "merge": "shortest_k"}, ValueError, "num_candidates"),
        ({"num_traces": 3, "num_candidates": 1, "merge": "early_ready"}, ValueError, "num_candidates"),
        ({"num_candidates": 6}, ValueError, "num_candidates"),
        ({"think_end": ""}, ValueError, "think_end"),
        ({"think_end": "   "}, ValueError, "think_end"),
        ({"think_end": []}, ValueError, "think_end"),
        ({"think_end": "</think>", "think_end_tokenizer": None}, ValueError, "think_end_tokenizer"),
        ({"think_end": 3.5}, TypeError, "think_end"),
        ({"num_beams": 2}, ValueError, "num_beams"),
        ({"merge": "vote"}, ValueError, "merge"),
        ({"max_thinking_tokens": 0}, ValueError, "max_thinking_tokens"),
        ({"answer_temperature": 0.0}, ValueError, "answer_temperature"),
        ({"answer_top_p": 1.5}, ValueError, "answer_top_p"),
        ({"trim_repetitions": 1}, ValueError, "trim_repetitions"),
    ],
)
def test_bad_input(lm, enc, kwargs, error, name):
    model, tok = lm
    kwargs = {"num_traces": 2, "think_end": "</think>", "think_end_tokenizer": tok, **kwargs}
    with pytest.raises(error, match=name):
        _gen(model, enc, **kwargs)


def test_streamer_is_rejected(lm, think_id):
    model, tok = lm
    one = tok(["two plus two ?"], return_tensors="pt")  # TextStreamer takes one row
    with pytest.raises(NotImplementedError, match="streamer"):
        _gen(model, one, num_traces=2, think_end=[think_id], streamer=TextStreamer(tok, skip_prompt=True))


# ---------------------------------------------------------------------------------------------------------------
# the three custom_generate forms
# ---------------------------------------------------------------------------------------------------------------


def test_name_hook_equals_callable(lm, enc, think_id):
    model, _ = lm
    kw = dict(num_traces=2, think_end=[think_id], do_sample=True, max_new_tokens=5, max_thinking_tokens=6)
    torch.manual_seed(7)
    by_callable = model.generate(**enc, custom_generate=hfx.thinkmerge, **kw)
    for name in ("thinkmerge", "hfx/thinkmerge"):
        torch.manual_seed(7)
        by_name = model.generate(**enc, custom_generate=name, **kw)
        assert torch.equal(by_name, by_callable)


def test_other_custom_generate_strings_reach_transformers(lm, enc, think_id, tmp_path, monkeypatch):
    """Resolution order: a local folder wins over an hfx name; unregistered strings reach transformers untouched;
    registered names never reach transformers' loader."""
    from hfx.generation import registry

    model, _ = lm
    assert registry.is_installed()
    seen = []
    original = registry._ORIGINAL_LOAD

    def spy(self, name, trust_remote_code=None, **kwargs):
        seen.append(name)
        return original(self, name, trust_remote_code=trust_remote_code, **kwargs)

    monkeypatch.setattr(registry, "_ORIGINAL_LOAD", spy)
    for folder, answer in ((tmp_path / "thinkmerge", "local folder"), (tmp_path / "other_method", "other")):
        (folder / "custom_generate").mkdir(parents=True)
        (folder / "custom_generate" / "generate.py").write_text(
            f"def generate(model, **kwargs):\n    return {answer!r}\n"
        )
    monkeypatch.chdir(tmp_path)  # ./thinkmerge exists here
    assert model.generate(**enc, custom_generate="thinkmerge", trust_remote_code=True) == "local folder"
    assert model.generate(**enc, custom_generate=str(tmp_path / "other_method"), trust_remote_code=True) == "other"
    assert seen == ["thinkmerge", str(tmp_path / "other_method")]
    monkeypatch.chdir(tmp_path / "other_method")  # no ./thinkmerge: the name is hfx's
    out = model.generate(**enc, custom_generate="thinkmerge", num_traces=1, think_end=[think_id], max_new_tokens=2,
                         max_thinking_tokens=2)  # fmt: skip
    assert isinstance(out, torch.Tensor) and len(seen) == 2


def test_published_folder_loads_by_local_path(lm, enc, think_id, tmp_path):
    from hfx.generation.thinkmerge import generate as package_generate
    from hfx.hub import publish

    model, tok = lm
    folder = publish("thinkmerge", tmp_path / "thinkmerge")
    assert (folder / "custom_generate" / "generate.py").read_text() == Path(package_generate.__file__).read_text()
    card = (folder / "README.md").read_text()
    assert "custom_generate" in card.split("---")[1] and "arxiv:2512.02874" in card
    kw = dict(num_traces=2, think_end="</think>", do_sample=True, max_new_tokens=5, max_thinking_tokens=6)
    torch.manual_seed(11)
    by_folder = model.generate(**enc, custom_generate=str(folder), trust_remote_code=True, tokenizer=tok, **kw)
    torch.manual_seed(11)
    by_callable = model.generate(**enc, custom_generate=hfx.thinkmerge, think_end_tokenizer=tok, **kw)
    assert torch.equal(by_folder, by_callable)


# ---------------------------------------------------------------------------------------------------------------
# answers, voting, strategies
# ---------------------------------------------------------------------------------------------------------------


def test_answer_extraction():
    assert extract_numeric_answer("3 + 4 = 7. Final answer: 18") == "18"
    assert extract_numeric_answer("so \\boxed{1,234} and 5") == "1234"
    assert extract_numeric_answer("#### 72\nthen 3") == "72"
    assert extract_numeric_answer("It costs $18.00.") == "18"
    assert extract_numeric_answer("no number here") is None
    assert normalize_number("-3.50") == "-3.5"
    assert gsm8k_reference("He pays 10 * 2 = <<10*2=20>>20\n#### 20") == "20"
    assert is_correct("20", "20") and is_correct("20.0", "20") and not is_correct(None, "20")
    with pytest.raises(ValueError, match="answer"):
        gsm8k_reference("no reference")


def test_majority_vote():
    assert majority_vote(["3", "5", "5", None]) == ("5", {"3": 1, "5": 2})
    assert majority_vote(["7", "3", "3", "7"])[0] == "7"  # ties: first in trace order
    assert majority_vote([None, None])[0] is None


def test_build_prompt_picks_delimiter(lm):
    _, tok = lm
    prompt, think_end = build_prompt(tok, "What is 2+2?")
    assert think_end == "</think>" and prompt.endswith("assistant: ")  # tiny tokenizer has think tags


def test_run_strategies_shares_traces(lm):
    model, tok = lm
    results, seconds = run_strategies(
        model,
        tok,
        ["Tom has 3 apples.", "two plus two ?"],
        strategies=["greedy", "sample", "majority", "thinkmerge"],
        num_traces=3,
        max_thinking_tokens=6,
        max_new_tokens=4,
    )
    assert set(results) == set(seconds) == {"greedy", "sample", "majority", "thinkmerge"}
    for b in range(2):
        assert results["majority"][b].traces == results["thinkmerge"][b].traces  # same sampled traces
        assert len(results["majority"][b].answers) == 3
        assert results["greedy"][b].generated_tokens <= 6 + 4
