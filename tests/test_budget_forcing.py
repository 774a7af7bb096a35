"""Budget forcing as a custom_generate method (s1 strategy; arXiv 2501.19393 / 2510.06135)."""

import pytest
import torch

import hfx
from hfx.testing import tiny_llama


@pytest.fixture(scope="module")
def lm():
    model, tok = tiny_llama()
    return model, tok


def _enc(tok, texts=("hello world", "two plus two is")):
    return tok(list(texts), return_tensors="pt", padding=True)


def _greedy(model, ids, n):
    """Plain greedy continuation of a single unpadded sequence."""
    out = model.generate(
        input_ids=ids[None], attention_mask=torch.ones_like(ids)[None], max_new_tokens=n, do_sample=False
    )
    return out[0, len(ids) :]


def test_zero_rounds_no_cap_equals_plain_generate(lm):
    model, tok = lm
    enc = _enc(tok)
    plain = model.generate(**enc, max_new_tokens=10, do_sample=False)
    ours = model.generate(**enc, max_new_tokens=10, do_sample=False, custom_generate="budget_forcing",
                          think_end="</think>", num_extra_rounds=0, tokenizer=tok)  # fmt: skip
    assert torch.equal(plain, ours)


def test_rounds_replace_the_delimiter_with_the_continuation(lm):
    model, tok = lm
    enc = _enc(tok, ["hello world"])
    P = enc["input_ids"].shape[1]
    plain = model.generate(**enc, max_new_tokens=12, do_sample=False)[0, P:]
    delim = int(plain[2])
    out = model.generate(**enc, max_new_tokens=12, do_sample=False, custom_generate=hfx.budget_forcing,
                         think_end=[delim], num_extra_rounds=1, continuation=[5, 6], return_dict_in_generate=True)  # fmt: skip
    gen = out.sequences[0, P:]
    assert gen[:2].tolist() == plain[:2].tolist() and gen[2:4].tolist() == [5, 6]
    # the rest is the model's greedy continuation of prompt + thought + continuation (cache consistent)
    ref = _greedy(model, torch.cat([enc["input_ids"][0], gen[:4]]), 8)
    assert gen[4:].tolist() == ref.tolist()
    assert int(out.num_rounds[0]) == 1
    later = [i for i, t in enumerate(gen.tolist()) if t == delim]
    expected_thinking = later[0] if later else 12  # thinking ends at the next (accepted) delimiter
    assert int(out.num_thinking_tokens[0]) == expected_thinking


def test_multi_token_delimiter_is_masked_out_of_the_cache(lm):
    model, tok = lm
    enc = _enc(tok, ["two plus two is"])
    P = enc["input_ids"].shape[1]
    plain = model.generate(**enc, max_new_tokens=12, do_sample=False)[0, P:]
    delim = plain[3:5].tolist()  # two tokens the model emits in a row
    out = model.generate(**enc, max_new_tokens=12, do_sample=False, custom_generate=hfx.budget_forcing,
                         think_end=delim, num_extra_rounds=1, continuation=[7], return_dict_in_generate=True,
                         output_logits=True)  # fmt: skip
    seq = out.sequences[0, P:]
    pad = model.generation_config.pad_token_id if model.generation_config.pad_token_id is not None else 0
    assert seq[:3].tolist() == plain[:3].tolist() and int(seq[3]) == pad and int(seq[4]) == 7
    # the model continues as if it had written thought (without the delimiter) + continuation
    context = torch.cat([enc["input_ids"][0], plain[:3], torch.tensor([7])])
    ref = _greedy(model, context, 7)
    assert seq[5:].tolist() == ref.tolist()
    # and exactly the same next-token logits (masked cache entries, shifted positions)
    with torch.no_grad():
        expected = model(input_ids=context[None]).logits[0, -1]
    torch.testing.assert_close(out.logits[5][0], expected, atol=1e-4, rtol=1e-4)


def test_thinking_cap_force_appends_the_delimiter(lm):
    model, tok = lm
    enc = _enc(tok)
    P = enc["input_ids"].shape[1]
    out = model.generate(**enc, max_new_tokens=9, do_sample=False, custom_generate=hfx.budget_forcing,
                         think_end=[11], num_extra_rounds=0, max_thinking_tokens=3, return_dict_in_generate=True)  # fmt: skip
    assert out.forced_think_end.tolist() == [True, True]
    assert out.num_thinking_tokens.tolist() == [3, 3]
    assert out.sequences[:, P + 3].tolist() == [11, 11] and out.think_end_positions.tolist() == [4, 4]
    assert [t.tolist() for t in out.traces] == [s[P : P + 4].tolist() for s in out.sequences]


def test_name_and_callable_agree_and_tokenizer_strings_work(lm):
    model, tok = lm
    enc = _enc(tok)
    kw = dict(max_new_tokens=8, do_sample=False, think_end="</think>", num_extra_rounds=2, max_thinking_tokens=4)
    by_name = model.generate(**enc, custom_generate="budget_forcing", tokenizer=tok, continuation="Wait", **kw)
    by_callable = model.generate(**enc, custom_generate=hfx.budget_forcing, think_end_tokenizer=tok, **kw)
    assert torch.equal(by_name, by_callable)
    assert (by_name[:, enc["input_ids"].shape[1] + 4] == tok.convert_tokens_to_ids("</think>")).all()


@pytest.mark.parametrize(
    "kwargs, error",
    [
        ({"num_extra_rounds": -1}, ValueError),
        ({"max_thinking_tokens": 0}, ValueError),
        ({"continuation": []}, ValueError),
        ({"continuation": 3.5}, TypeError),
        ({"think_end": "</think>"}, ValueError),  # a string without a tokenizer (callable form)
    ],
)
def test_bad_arguments(lm, kwargs, error):
    model, tok = lm
    args = {"think_end": [11], "num_extra_rounds": 1, "continuation": [5], **kwargs}
    with pytest.raises(error):
        model.generate(**_enc(tok), max_new_tokens=3, custom_generate=hfx.budget_forcing, **args)


def test_streamer_receives_every_token(lm):
    from transformers.generation.streamers import BaseStreamer

    class Collect(BaseStreamer):
        def __init__(self):
            self.tokens, self.ended = [], False

        def put(self, value):
            self.tokens += value.flatten().tolist()

        def end(self):
            self.ended = True

    model, tok = lm
    streamer = Collect()
    out = model.generate(**_enc(tok, ["hello world"]), max_new_tokens=6, do_sample=False, streamer=streamer,
                         custom_generate=hfx.budget_forcing, think_end=[11], num_extra_rounds=1, continuation=[5])  # fmt: skip
    assert streamer.tokens == out[0].tolist() and streamer.ended


def test_budget_forced_traces_merge_with_thinkmerge(lm):
    model, tok = lm
    K = 2
    enc = _enc(tok, ["hello world"])
    rep = {k: v.repeat_interleave(K, dim=0) for k, v in enc.items()}
    torch.manual_seed(0)
    bf = model.generate(**rep, max_new_tokens=20, do_sample=True, custom_generate=hfx.budget_forcing, think_end=[11],
                        num_extra_rounds=1, continuation=[5], max_thinking_tokens=6, stop_at_think_end=True,
                        return_dict_in_generate=True)  # fmt: skip
    assert all(int(t[-1]) == 11 for t in bf.traces)  # every trace ends with its delimiter
    out = model.generate(**enc, max_new_tokens=4, do_sample=False, custom_generate=hfx.thinkmerge, num_traces=K,
                         think_end=[11], traces=[bf.traces], return_dict_in_generate=True)  # fmt: skip
    assert [t.tolist() for t in out.traces[0]] == [t.tolist() for t in bf.traces]
    assert out.sequences.shape == (1, enc["input_ids"].shape[1] + 4)
