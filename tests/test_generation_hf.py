"""ThinkMerge and RMOD as an HF practitioner drives them (issue 11, items 1-5).

* ``tokenizer=tok`` (the HF convention) with a string ``think_end`` and ``stop_strings`` on every route;
* every processor transformers builds from a ``GenerationConfig`` flag, on B = 2 left-padded prompts, for both
  methods: each processor sees rows in the layout it was built for (one row per prompt);
* ``streamer`` / ``output_scores`` / ``output_logits`` / ``use_cache`` / ``cache_implementation`` / ``guidance_scale``;
* ``from_pretrained(..., trust_remote_code=True)`` (transformers' ``adjust_generation_fn``) and ``publish()`` ids.

Every model is ``hfx.testing.tiny_llama()``; expected values come from independent computations (plain forward
passes, HF's own ``generate``, each prompt decoded alone), never from stored outputs.
"""

from __future__ import annotations

import functools
import re

import pytest
import torch
from transformers import AutoModelForCausalLM, LogitsProcessor, LogitsProcessorList, StoppingCriteriaList
from transformers.generation.logits_process import (
    PrefixConstrainedLogitsProcessor,
    RepetitionPenaltyLogitsProcessor,
    TemperatureLogitsWarper,
)
from transformers.generation.stopping_criteria import StopStringCriteria
from transformers.generation.streamers import BaseStreamer

import hfx
import hfx.hub
from hfx.generation.rmod import MultiObjectiveValueModel, rmod


PROMPTS = ["Tom has 3 apples and buys 5 more.", "two plus two ?"]  # different lengths: row 1 is left-padded


@pytest.fixture(scope="module", autouse=True)
def _one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def lm():
    from hfx.testing import tiny_llama

    return tiny_llama()


@pytest.fixture(scope="module")
def vf(lm):
    torch.manual_seed(1)
    return MultiObjectiveValueModel.from_backbone(lm[0].model, num_objectives=2).eval()


@pytest.fixture(scope="module")
def enc(lm):
    enc = lm[1](PROMPTS, return_tensors="pt", padding=True)
    assert (enc["attention_mask"][1] == 0).any() and (enc["attention_mask"][:, -1] == 1).all()  # left padding
    return enc


def _think_id(tok) -> int:
    return tok.convert_tokens_to_ids("</think>")


def _kwargs(method, tok, vf, **kw):
    """Deterministic settings: greedy ThinkMerge; RMOD samples (as it must) with top_k=1."""
    if method == "thinkmerge":
        base = dict(custom_generate="thinkmerge", num_traces=2, think_end=[_think_id(tok)], do_sample=False,
                    max_thinking_tokens=6, max_new_tokens=4)  # fmt: skip
    else:
        base = dict(custom_generate="rmod", value_function=vf, num_branches=2, block_size=3, do_sample=True, top_k=1,
                    seed=0, max_new_tokens=6)  # fmt: skip
    base.update(kw)
    return base


def _single(enc, b):
    """Prompt b alone, without padding."""
    keep = enc["attention_mask"][b].bool()
    return {k: v[b : b + 1, keep] for k, v in enc.items()}


def _segments(method, out, prompt_length, eos):
    """Per prompt, the token runs each processor saw as "generated": ThinkMerge's trace bodies and answer; RMOD's
    continuation (up to and including EOS)."""
    runs = []
    for b in range(out.sequences.shape[0]):
        per_prompt = [t[:-1].tolist() for t in out.traces[b]] if method == "thinkmerge" else []
        generated = out.sequences[b, prompt_length:].tolist()
        if eos in generated:
            generated = generated[: generated.index(eos) + 1]
        per_prompt.append(generated)
        runs.append(per_prompt)
    return runs


def _greedy_first_token(model, enc, b) -> int:
    single = _single(enc, b)
    return int(model(**single).logits[0, -1].argmax())


# ---------------------------------------------------------------------------------------------------------------
# item 2: processors built from GenerationConfig flags, B = 2 left-padded prompts, both methods
# ---------------------------------------------------------------------------------------------------------------

BIASED = 50  # an ordinary token id of the tiny tokenizer


def _flag_kwargs(flag, banned, eos):
    return {
        "repetition_penalty": {"repetition_penalty": 1000.0},  # a seen token's logit is divided / multiplied by 1000
        "no_repeat_ngram_size": {"no_repeat_ngram_size": 1},  # no token may occur twice in the row
        "bad_words_ids": {"bad_words_ids": [[banned]]},
        "suppress_tokens": {"suppress_tokens": [banned]},
        "min_new_tokens": {"min_new_tokens": 3, "sequence_bias": {(eos,): 30.0}},  # EOS wanted, but only from 4th
        "sequence_bias": {"sequence_bias": {(BIASED,): 30.0}},
    }[flag]


def _check_flag_effect(flag, runs, prompts, banned, eos):
    for b, per_prompt in enumerate(runs):
        for run in per_prompt:
            if flag in ("repetition_penalty", "no_repeat_ngram_size"):
                assert len(set(run)) == len(run) and not set(run) & set(prompts[b]), (flag, run)
            elif flag in ("bad_words_ids", "suppress_tokens"):
                assert banned not in run, (flag, run)
            elif flag == "sequence_bias":
                assert run and set(run) == {BIASED}, (flag, run)
        if flag == "min_new_tokens":
            answer = per_prompt[-1]
            assert len(answer) == 4 and answer[-1] == eos and eos not in answer[:3], answer
            assert all(len(trace) == 3 for trace in per_prompt[:-1])  # ThinkMerge: EOS at step 3 ends the thought


@pytest.mark.parametrize(
    "flag",
    ["repetition_penalty", "no_repeat_ngram_size", "bad_words_ids", "min_new_tokens", "suppress_tokens",
     "sequence_bias"],
)  # fmt: skip
@pytest.mark.parametrize("method", ["thinkmerge", "rmod"])
def test_generation_config_processors_on_a_padded_batch(lm, vf, enc, method, flag):
    """The batch gives each prompt what it gets alone, and the flag's effect is there in every row."""
    model, tok = lm
    eos = tok.eos_token_id
    banned = _greedy_first_token(model, enc, 0)  # the token prompt 0 would start with
    kw = _kwargs(method, tok, vf, return_dict_in_generate=True, **_flag_kwargs(flag, banned, eos))
    batch = model.generate(**enc, **kw)
    prompt_length = enc["input_ids"].shape[1]
    runs = _segments(method, batch, prompt_length, eos)
    prompts = [enc["input_ids"][b][enc["attention_mask"][b].bool()].tolist() for b in range(2)]
    for b in range(2):
        single = _single(enc, b)
        alone = model.generate(**single, **kw)
        assert _segments(method, alone, single["input_ids"].shape[1], eos) == [runs[b]]
    _check_flag_effect(flag, runs, prompts, banned, eos)


class PerPromptBan(LogitsProcessor):
    """A user processor with per-prompt state, built (like generate's) for B rows: row b must hold prompt b."""

    def __init__(self, prompts: torch.Tensor, banned: list[int]):
        self.prompts, self.banned, self.calls = prompts, banned, 0

    def __call__(self, input_ids, scores):
        self.calls += 1
        assert input_ids.shape[0] == len(self.banned), f"built for {len(self.banned)} rows, got {input_ids.shape[0]}"
        assert torch.equal(input_ids[:, : self.prompts.shape[1]], self.prompts), "rows are not in prompt order"
        scores = scores.clone()
        scores[torch.arange(len(self.banned)), self.banned] = -float("inf")
        return scores


@pytest.mark.parametrize("method", ["thinkmerge", "rmod"])
def test_user_processor_and_prefix_fn_see_one_row_per_prompt(lm, vf, enc, method):
    model, tok = lm
    banned = [_greedy_first_token(model, enc, b) for b in range(2)]
    ban = PerPromptBan(enc["input_ids"], banned)
    batch_ids = set()

    def allowed(batch_id, ids):  # PrefixConstrainedLogitsProcessor passes the prompt's index
        batch_ids.add(batch_id)
        assert torch.equal(ids[: enc["input_ids"].shape[1]], enc["input_ids"][batch_id])
        return [t for t in range(model.config.vocab_size) if t != banned[1 - batch_id]]

    out = model.generate(**enc, **_kwargs(method, tok, vf, logits_processor=LogitsProcessorList([ban]),
                                          prefix_allowed_tokens_fn=allowed, return_dict_in_generate=True))  # fmt: skip
    assert ban.calls > 0 and batch_ids == {0, 1}
    runs = _segments(method, out, enc["input_ids"].shape[1], tok.eos_token_id)
    for b in range(2):  # both bans were applied to the right rows
        assert all(banned[b] not in run and banned[1 - b] not in run for run in runs[b])


def test_apply_logits_processors_unit():
    """Uneven layout (3 rows of prompt 0, 2 of prompt 1), against each row processed alone with its prompt's state."""
    from hfx.generation.thinkmerge.generate import apply_logits_processors

    gen = torch.Generator().manual_seed(0)
    V, prompt_index = 12, torch.tensor([0, 0, 0, 1, 1])
    ids = torch.randint(4, V, (5, 7), generator=gen)
    ids[3:, :3] = 3  # prompt 1 has 3 left pads
    scores = torch.randn(5, V, generator=gen)
    pad_counts, offsets = [0, 3], torch.tensor([10.0, -20.0])
    calls = []

    class PerPromptOffset(LogitsProcessor):
        def __call__(self, input_ids, s):
            calls.append(input_ids.shape[0])
            assert input_ids.shape[0] == 2
            return s + offsets[:, None]

    processors = LogitsProcessorList(
        [
            TemperatureLogitsWarper(0.5),
            RepetitionPenaltyLogitsProcessor(2.0, prompt_ignore_length=torch.tensor(pad_counts)),
            PerPromptOffset(),
            PrefixConstrainedLogitsProcessor(lambda batch_id, _: [batch_id + 5], num_beams=1),
        ]
    )
    out = apply_logits_processors(processors, ids, scores, prompt_index, batch_size=2)
    for r in range(5):
        b = int(prompt_index[r])
        ref = TemperatureLogitsWarper(0.5)(ids[r : r + 1], scores[r : r + 1])
        ref = RepetitionPenaltyLogitsProcessor(2.0, prompt_ignore_length=pad_counts[b])(ids[r : r + 1], ref)
        ref = ref + offsets[b]
        keep = torch.full_like(ref, -float("inf"))
        keep[0, b + 5] = ref[0, b + 5]
        torch.testing.assert_close(out[r], keep[0])
    assert calls == [2, 2, 2]  # one call per replica, each with one row per prompt
    # one row per prompt in prompt order: the list is called as it is
    first_two = LogitsProcessorList(processors[:2])
    two = apply_logits_processors(first_two, ids[[0, 3]], scores[[0, 3]], torch.tensor([0, 1]), 2)
    torch.testing.assert_close(two, first_two(ids[[0, 3]], scores[[0, 3]]))


# ---------------------------------------------------------------------------------------------------------------
# item 1: tokenizer=tok, string think_end and stop strings on every route
# ---------------------------------------------------------------------------------------------------------------


def _route_kwargs(route, tok, vf, tmp_path):
    if route.startswith("thinkmerge"):
        kw = dict(num_traces=2, think_end="</think>", do_sample=False, max_thinking_tokens=5, max_new_tokens=6)
        if route == "thinkmerge-folder":
            folder = hfx.hub.publish("thinkmerge", tmp_path / "thinkmerge-folder")
            return dict(custom_generate=str(folder), trust_remote_code=True, **kw), dict(custom_generate=hfx.thinkmerge,
                                                                                          think_end_tokenizer=tok, **kw)  # fmt: skip
        return dict(custom_generate="thinkmerge", **kw), dict(
            custom_generate=hfx.thinkmerge, think_end_tokenizer=tok, **kw
        )
    kw = dict(value_function=vf, num_branches=2, block_size=3, do_sample=True, top_k=1, seed=0, max_new_tokens=6)
    return dict(custom_generate="rmod", **kw), dict(custom_generate=rmod, **kw)


def _stop_string(tok, free, prompt_length):
    """A word that some row's unconstrained output first completes at its n-th generated token: (row, n, word)."""
    for row in range(free.shape[0]):
        generated = free[row, prompt_length:].tolist()
        for i in range(1, len(generated) - 1):
            text = tok.decode(generated[i : i + 1])
            if text.strip().isalnum() and text not in tok.decode(generated[:i]):
                return row, i + 1, text
    raise AssertionError(f"no usable stop string in {free[:, prompt_length:].tolist()}")


@pytest.mark.parametrize("route", ["thinkmerge-name", "thinkmerge-folder", "rmod-name"])
def test_tokenizer_kwarg_string_think_end_and_stop_strings(lm, vf, enc, route, tmp_path):
    model, tok = lm
    ours, reference = _route_kwargs(route, tok, vf, tmp_path)
    prompt_length = enc["input_ids"].shape[1]
    free = model.generate(**enc, tokenizer=tok, **ours)  # a string think_end with tokenizer=tok
    torch.testing.assert_close(free, model.generate(**enc, **reference))
    row, n, stop = _stop_string(tok, free, prompt_length)
    stopped = model.generate(**enc, tokenizer=tok, stop_strings=[stop], **ours)
    criteria = StoppingCriteriaList([StopStringCriteria(tokenizer=tok, stop_strings=[stop])])
    assert torch.equal(stopped, model.generate(**enc, stopping_criteria=criteria, **reference))
    assert (
        stopped[row, prompt_length : prompt_length + n].tolist()
        == free[row, prompt_length : prompt_length + n].tolist()
    )
    assert (stopped[row, prompt_length + n :] == tok.pad_token_id).all()  # that prompt stopped at the stop string
    assert (free[row, prompt_length + n :] != tok.pad_token_id).any()  # without the stop string it went on


def test_callable_form_says_it_cannot_receive_the_tokenizer(lm, enc):
    model, tok = lm
    with pytest.raises(ValueError, match="think_end_tokenizer") as err:
        model.generate(**enc, custom_generate=hfx.thinkmerge, think_end="</think>", tokenizer=tok, max_new_tokens=2)
    assert "callable" in str(err.value) and "drops" in str(err.value)


def test_think_end_tokenizer_alias_and_conflict(lm, enc):
    model, tok = lm
    kw = dict(custom_generate="thinkmerge", num_traces=2, think_end="</think>", do_sample=False, max_new_tokens=3,
              max_thinking_tokens=3)  # fmt: skip
    assert torch.equal(
        model.generate(**enc, think_end_tokenizer=tok, **kw), model.generate(**enc, tokenizer=tok, **kw)
    )
    from hfx.testing import tiny_tokenizer

    other = tiny_tokenizer()
    if other is tok:
        import copy

        other = copy.deepcopy(tok)
    with pytest.raises(ValueError, match="different tokenizers"):
        model.generate(**enc, tokenizer=tok, think_end_tokenizer=other, **kw)


# ---------------------------------------------------------------------------------------------------------------
# item 3: streamer, output_scores / output_logits, use_cache, cache_implementation, guidance_scale
# ---------------------------------------------------------------------------------------------------------------


class Recorder(BaseStreamer):
    def __init__(self):
        self.chunks, self.ended = [], False

    def put(self, value):
        self.chunks.append(value.clone())

    def end(self):
        self.ended = True


def test_rmod_streams_the_chosen_blocks(lm, vf):
    model, tok = lm
    one = tok(["hello world"], return_tensors="pt")
    recorder = Recorder()
    out = model.generate(**one, custom_generate="rmod", value_function=vf, num_branches=3, block_size=3,
                         do_sample=True, seed=0, max_new_tokens=7, streamer=recorder)  # fmt: skip
    prompt_length = one["input_ids"].shape[1]
    assert recorder.ended and torch.equal(recorder.chunks[0].reshape(-1), one["input_ids"][0])  # generate's prompt
    blocks = recorder.chunks[1:]
    assert [c.shape[-1] for c in blocks] == [3, 3, 1]  # one chunk per chosen block
    assert torch.cat([c.reshape(-1) for c in blocks]).tolist() == out[0, prompt_length:].tolist()


def test_rmod_output_scores_and_logits(lm, vf, enc):
    model, _ = lm
    kw = dict(do_sample=True, top_k=20, max_new_tokens=7, output_scores=True, output_logits=True,
              return_dict_in_generate=True)  # fmt: skip
    torch.manual_seed(0)
    ref = model.generate(**enc, **kw)  # K = 1 is ancestral sampling: HF's own scores and logits
    torch.manual_seed(0)
    out = model.generate(**enc, custom_generate=rmod, value_function=vf, num_branches=1, block_size=3, **kw)
    assert torch.equal(out.sequences, ref.sequences) and len(out.scores) == len(ref.scores) == 7
    for ours, theirs in zip(out.scores + out.logits, ref.scores + ref.logits, strict=True):
        torch.testing.assert_close(ours, theirs)
    # K = 3: the kept branch's logits are the model's logits on the returned prefix (a cache-free recomputation)
    out = model.generate(**enc, custom_generate=rmod, value_function=vf, num_branches=3, block_size=3, seed=2, **kw)
    prompt_length = enc["input_ids"].shape[1]
    assert len(out.scores) == len(out.logits) == out.sequences.shape[1] - prompt_length
    for t in range(len(out.logits)):
        prefix = out.sequences[:, : prompt_length + t]
        mask = torch.cat([enc["attention_mask"], torch.ones(2, t, dtype=torch.long)], dim=1)
        position_ids = (mask.cumsum(-1) - 1).clamp_min(0)
        expected = model(input_ids=prefix, attention_mask=mask, position_ids=position_ids).logits[:, -1]
        torch.testing.assert_close(out.logits[t], expected, atol=1e-4, rtol=1e-4)
        chosen = out.sequences[:, prompt_length + t]
        assert torch.isfinite(out.scores[t].gather(1, chosen[:, None])).all()  # the kept token was allowed


def test_thinkmerge_honours_use_cache_false(lm, enc, monkeypatch):
    model, tok = lm
    kw = dict(custom_generate="thinkmerge", num_traces=2, think_end=[_think_id(tok)], do_sample=False,
              max_thinking_tokens=5, max_new_tokens=4, return_dict_in_generate=True)  # fmt: skip
    cached = model.generate(**enc, **kw)
    caches = []
    forward = model.forward

    @functools.wraps(forward)
    def spy(*args, **kwargs):
        caches.append(kwargs.get("cache") is not None or bool(kwargs.get("use_cache")))
        return forward(*args, **kwargs)

    monkeypatch.setattr(model, "forward", spy)
    uncached = model.generate(**enc, use_cache=False, **kw)
    assert caches and not any(caches)  # no forward pass used or built a cache
    assert torch.equal(uncached.sequences, cached.sequences)
    assert [[t.tolist() for t in tr] for tr in uncached.traces] == [[t.tolist() for t in tr] for tr in cached.traces]


@pytest.mark.parametrize("method", ["thinkmerge", "rmod"])
@pytest.mark.parametrize(
    ("option", "error", "name"),
    [({"cache_implementation": "static"}, (NotImplementedError, TypeError), "(cache_implementation|static cache)"),
     ({"guidance_scale": 1.5}, NotImplementedError, "guidance_scale")],
)  # fmt: skip
def test_unsupported_options_are_rejected_by_name(lm, vf, enc, method, option, error, name):
    model, tok = lm
    with pytest.raises(error, match=name):
        model.generate(**enc, **_kwargs(method, tok, vf, **option))


# ---------------------------------------------------------------------------------------------------------------
# item 5: from_pretrained(..., trust_remote_code=True) (adjust_generation_fn) and publish() ids
# ---------------------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def published_model(lm, tmp_path_factory):
    model, tok = lm
    root = tmp_path_factory.mktemp("published")
    model.save_pretrained(root / "model")
    tok.save_pretrained(root / "model")
    return hfx.hub.publish("thinkmerge", root / "repo", source=root / "model", repo_id="my-org/thinkmerge")


def test_trust_remote_code_repo_whose_id_is_an_hfx_name(lm, enc, published_model, tmp_path):
    """transformers' adjust_generation_fn makes the resolved method the model's `generate`: it must not recurse."""
    model, tok = lm
    hfx.hub.add_to_hf_cache(published_model, "hfx/thinkmerge", cache_dir=tmp_path / "hub")
    loaded = AutoModelForCausalLM.from_pretrained("hfx/thinkmerge", cache_dir=tmp_path / "hub", trust_remote_code=True)
    assert isinstance(loaded.generate, functools.partial)  # transformers replaced generate
    kw = dict(num_traces=2, think_end="</think>", do_sample=False, max_new_tokens=4, max_thinking_tokens=5)
    expected = model.generate(**enc, custom_generate=hfx.thinkmerge, think_end_tokenizer=tok, **kw)
    assert torch.equal(loaded.generate(**enc, tokenizer=tok, **kw), expected)
    assert torch.equal(loaded.generate(enc["input_ids"], attention_mask=enc["attention_mask"], tokenizer=tok, **kw),
                       expected)  # fmt: skip
    marker = loaded.generate(**enc, custom_generate=lambda model, input_ids, **_: "other method", max_new_tokens=2)
    assert marker == "other method"  # an explicit custom_generate still wins


def test_trust_remote_code_local_folder_takes_tokenizer_and_stop_strings(lm, enc, published_model):
    model, tok = lm
    loaded = AutoModelForCausalLM.from_pretrained(published_model, trust_remote_code=True)
    kw = dict(num_traces=2, think_end="</think>", do_sample=False, max_new_tokens=6, max_thinking_tokens=5)
    free = loaded.generate(**enc, tokenizer=tok, **kw)
    _, _, stop = _stop_string(tok, free, enc["input_ids"].shape[1])
    criteria = StoppingCriteriaList([StopStringCriteria(tokenizer=tok, stop_strings=[stop])])
    expected = model.generate(**enc, custom_generate=hfx.thinkmerge, think_end_tokenizer=tok, stopping_criteria=criteria,
                              **kw)  # fmt: skip
    stopped = loaded.generate(enc["input_ids"], attention_mask=enc["attention_mask"], tokenizer=tok,
                              stop_strings=[stop], **kw)  # fmt: skip
    assert torch.equal(stopped, expected) and not torch.equal(stopped, free)


def test_publish_default_repo_id_cannot_collide_with_an_hfx_name(tmp_path, monkeypatch):
    from hfx.generation.registry import CUSTOM_GENERATE_NAMES

    card = (hfx.hub.publish("thinkmerge", tmp_path / "a") / "README.md").read_text()
    shown = re.findall(r'custom_generate="([^"]+)",', card)  # the card's usage snippet
    assert shown and not set(shown) & set(CUSTOM_GENERATE_NAMES)
    for name in ("hfx/thinkmerge", "thinkmerge"):
        with pytest.raises(ValueError, match="repo_id"):
            hfx.hub.publish("thinkmerge", tmp_path / "b", repo_id=name)
    pushed = []
    monkeypatch.setattr(hfx.hub, "push_folder_to_hub", lambda folder, repo_id: pushed.append(repo_id))
    monkeypatch.setattr(hfx.hub, "_check_can_push", lambda repo_id, offline: None)  # no token / Hub in tests
    card = (hfx.hub.publish("thinkmerge", tmp_path / "c", push_to="my-org/tm") / "README.md").read_text()
    assert pushed == ["my-org/tm"] and 'custom_generate="my-org/tm"' in card


def test_thinkmerge_passes_the_kv_cache_by_the_name_the_model_forward_takes(lm, enc):
    # transformers releases before the `cache=` rename (e.g. 5.17, which the vLLM CPU wheel pins) take the KV cache as
    # `past_key_values` and silently swallow an unknown `cache=` keyword: every cached decode step then ran without
    # its context. Simulate such a model: same weights, old keyword, `cache=` swallowed.
    model, tok = lm

    class OldKeywordModel(type(model)):
        def forward(self, input_ids=None, attention_mask=None, position_ids=None, past_key_values=None,
                    use_cache=None, logits_to_keep=0, **kwargs):  # fmt: skip
            kwargs.pop("cache", None)
            return super().forward(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids,
                                   cache=past_key_values, use_cache=use_cache, logits_to_keep=logits_to_keep,
                                   **kwargs)  # fmt: skip

    old = OldKeywordModel(model.config).eval()
    old.load_state_dict(model.state_dict())
    old.generation_config = model.generation_config
    kw = dict(custom_generate="thinkmerge", num_traces=2, think_end=[_think_id(tok)], do_sample=False,
              max_thinking_tokens=5, max_new_tokens=4, return_dict_in_generate=True)  # fmt: skip
    expected = model.generate(**enc, **kw)
    got = old.generate(**enc, **kw)
    assert torch.equal(got.sequences, expected.sequences)
    assert [[t.tolist() for t in tr] for tr in got.traces] == [[t.tolist() for t in tr] for tr in expected.traces]
