"""examples/slao_cl_benchmark.py: the two shortcuts its numbers rest on are exact.

1. All label words of an example are scored in one packed sequence (4-D mask, restarted position ids); this must give
   the log-probabilities of scoring each candidate on its own.
2. LoRA sits only in the top layers, which run on cached hidden states of the frozen layers below; with the same LoRA
   weights this must give what the full model with LoRA on those layers gives.

A tiny random Llama (4 layers) stands in for SmolLM2; no network.
"""

import importlib.util
import math
from pathlib import Path

import pytest


torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
peft = pytest.importorskip("peft")

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "slao_cl_benchmark.py"


@pytest.fixture(scope="module")
def ex():
    spec = importlib.util.spec_from_file_location("slao_cl_benchmark_example", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def tiny_llama():
    torch.manual_seed(0)
    config = transformers.LlamaConfig(
        vocab_size=97,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=4,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
        tie_word_embeddings=True,
    )
    return transformers.LlamaForCausalLM(config).eval()


def _examples(ex):
    candidates = [[5], [7, 8], [7, 9, 10], [11, 12]]
    prompts = [[3, 4, 20, 21, 22], [30, 31], [40, 41, 42, 43, 44, 45, 46]]
    out = []
    for y, prompt in enumerate(prompts):
        e = ex.pack(prompt, candidates)
        e["label"] = y
        out.append(e)
    return out


def test_pack_layout(ex):
    e = ex.pack([1, 2, 3], [[5], [7, 8]])
    assert e["input_ids"] == [1, 2, 3, 5, 7, 8]
    assert e["position_ids"] == [0, 1, 2, 3, 3, 4]
    assert e["segment"] == [0, 0, 0, 1, 2, 2]
    # (predecessor position, target, candidate): first tokens from the last prompt token, then the own previous token
    assert e["score"] == [(2, 5, 0), (2, 7, 1), (4, 8, 1)]


def test_packed_scoring_equals_separate_scoring(ex, tiny_llama):
    examples = _examples(ex)
    with torch.no_grad():
        batch = ex.collate(examples)  # right-padded batch of different lengths
        hidden = tiny_llama.model(
            input_ids=batch["input_ids"], attention_mask=batch["attention_mask"], position_ids=batch["position_ids"]
        ).last_hidden_state
        logp, bi, ci = ex.token_logprobs(hidden, tiny_llama.lm_head.weight, examples)
        for b, e in enumerate(examples):
            packed = torch.zeros(e["n_candidates"]).index_add_(0, ci[bi == b], logp[bi == b])
            P = e["segment"].count(0)
            for j in range(e["n_candidates"]):
                toks = [t for t, s in zip(e["input_ids"], e["segment"], strict=True) if s == j + 1]
                lp = tiny_llama(input_ids=torch.tensor([e["input_ids"][:P] + toks])).logits[0].log_softmax(-1)
                alone = sum(float(lp[P - 1 + t, tok]) for t, tok in enumerate(toks))
                assert packed[j].item() == pytest.approx(alone, abs=1e-5)


def test_cached_top_layers_with_lora_equal_full_model(ex, tiny_llama):
    from hfx.tuners.slao import SLAOConfig

    examples = _examples(ex)
    n_bottom = 2
    states = ex.bottom_states(tiny_llama, examples, n_bottom, batch_size=2)
    top = ex.top_model(tiny_llama, n_bottom)
    config = dict(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], init_lora_weights=False)
    torch.manual_seed(1)
    top_peft = peft.get_peft_model(top, SLAOConfig(**config))
    full_peft = peft.get_peft_model(
        tiny_llama, SLAOConfig(**config, layers_to_transform=[2, 3], layers_pattern="layers")
    )
    top_lora = {k.replace("layers.0.", "layers.2.").replace("layers.1.", "layers.3."): v for k, v in
                top_peft.state_dict().items() if "lora_" in k}  # fmt: skip
    full_lora = {k: v for k, v in full_peft.state_dict().items() if "lora_" in k}
    assert set(top_lora) == set(full_lora)
    full_peft.load_state_dict(top_lora, strict=False)
    assert all(torch.equal(full_peft.state_dict()[k], v) for k, v in top_lora.items())
    with torch.no_grad():
        batch = ex.collate(examples)
        decoder, lm_head = ex.inner_model(full_peft)
        hidden = decoder(
            input_ids=batch["input_ids"], attention_mask=batch["attention_mask"], position_ids=batch["position_ids"]
        ).last_hidden_state
        full_lp, _, _ = ex.token_logprobs(hidden, lm_head, examples)
        top_hidden, top_head = ex.forward_hidden(top_peft, examples, states)
        top_lp, _, _ = ex.token_logprobs(top_hidden, top_head, examples)
    assert torch.allclose(full_lp, top_lp, atol=1e-5)
    # the LoRA is not a no-op here, so the equality above is not trivial
    with full_peft.disable_adapter(), torch.no_grad():
        base_hidden = decoder(
            input_ids=batch["input_ids"], attention_mask=batch["attention_mask"], position_ids=batch["position_ids"]
        ).last_hidden_state
        base_lp, _, _ = ex.token_logprobs(base_hidden, lm_head, examples)
    assert (base_lp - full_lp).abs().max() > 1e-3


def test_train_task_moves_only_lora_and_merge_matches_continual_semantics(ex, tiny_llama):
    from hfx.tuners.slao import SLAOConfig

    examples = _examples(ex)
    states = ex.bottom_states(tiny_llama, examples, 2, batch_size=3)
    model = peft.get_peft_model(ex.top_model(tiny_llama, 2), SLAOConfig(r=4, lora_alpha=8, target_modules=["q_proj"]))
    frozen = {k: v.clone() for k, v in model.state_dict().items() if "lora_" not in k}
    for task in (1, 2):
        assert model.start_task() == task
        losses = ex.train_task(model, examples, states, lr=1e-2, batch_size=2, seed=0)
        assert len(losses) == 2 and all(math.isfinite(x) for x in losses)
        coefficient = model.finish_task()
        assert coefficient == pytest.approx(1.0 if task == 1 else 2**-0.5)
    assert all(torch.equal(model.state_dict()[k], v) for k, v in frozen.items())
    correct = ex.evaluate(model, examples, states)
    assert correct.shape == (3,) and correct.dtype == bool


def test_aa_bwt_on_hand_made_correctness(ex):
    import numpy as np

    nan = np.nan
    # 2 tasks x 2 test examples each; stage 1 scores task 1 only
    correct = np.array([[1.0, 0.0, nan, nan], [0.0, 0.0, 1.0, 1.0]])
    slices = [slice(0, 2), slice(2, 4)]
    a, aa, bwt = ex.aa_bwt(correct, slices)
    assert a[0].tolist() == [0.5, 0.0] and a[1, 1] == 1.0
    assert aa == pytest.approx((0.0 + 1.0) / 2)
    assert bwt == pytest.approx(0.0 - 0.5)
