"""Conformance harness for the LLaVA classes: generic behaviour checks, the stock transformers classes as the control.

Modelled on what transformers checks for its own generative models (batched == unbatched generation with left
padding, KV cache == recomputation, save / reload through the Auto classes in a fresh process) and run on the same
tiny random models for every variant:

* ``stock-llava`` / ``stock-llava-next``: ``LlavaForConditionalGeneration`` / ``LlavaNextForConditionalGeneration``
  with the stock processors (the control: if a check fails here, the check is wrong, not hfx);
* ``prunesid`` / ``visionzip`` / ``divprune`` / ``random``: the hfx LLaVA-1.5 class with pre-LLM pruning;
* ``prunesid-next``: the hfx LLaVA-NeXT class (AnyRes, per-crop pruning);
* ``fastv``: the hfx LLaVA-1.5 class with FastV inside the LLM (decoder-layer hooks).

FastV is absent from "cache == no cache" on purpose: as published, FastV with a KV cache prunes once at the prompt
(static) while a forward without cache re-prunes from its own last token, so the two differ by design; the cached
path is checked against a hand-written static reference in ``tests/test_prunesid.py``
(``test_fastv_cached_greedy_equals_static_reference``).
"""

import copy
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image


VARIANTS = ["stock-llava", "prunesid", "visionzip", "divprune", "random", "fastv", "stock-llava-next", "prunesid-next"]
CACHED = [v for v in VARIANTS if v != "fastv"]
TEXTS = ["USER: <image>\ndescribe ASSISTANT:", "USER: <image>\nwhat is the answer? the final answer is ASSISTANT:"]
SRC = Path(__file__).resolve().parents[2] / "src"


def _image(h, w, seed):
    return Image.fromarray(np.random.RandomState(seed).randint(0, 255, (h, w, 3), dtype=np.uint8))


IMAGES = [_image(200, 300, 0), _image(96, 160, 1)]


@pytest.fixture(scope="module")
def bases():
    from hfx.testing import tiny_llava, tiny_llava_next

    return {"llava": tiny_llava(num_hidden_layers=3), "llava-next": tiny_llava_next()}


class _Variants(dict):
    """name -> (model, processor), built on first use (a variant that fails to build fails only its own tests)."""

    def __init__(self, bases):
        super().__init__()
        self.bases = bases

    def __missing__(self, name):
        from hfx.prunesid import apply

        family = "llava-next" if name.endswith("next") else "llava"
        model, processor = copy.deepcopy(self.bases[family][0]), self.bases[family][1]
        if name == "fastv":
            model, processor = apply(model, processor, None, method="fastv", fastv_k=1, fastv_ratio=0.5)
        elif not name.startswith("stock"):
            method = "prunesid" if name == "prunesid-next" else name
            model, processor = apply(model, processor, 6 if family == "llava-next" else 12, method=method)
        self[name] = (model, processor)
        return self[name]


@pytest.fixture(scope="module")
def variants(bases):
    return _Variants(bases)


def _greedy(model, inputs, steps=4, **kw):
    return model.generate(
        **inputs, max_new_tokens=steps, do_sample=False, output_logits=True, return_dict_in_generate=True, **kw
    )


@pytest.mark.parametrize("name", VARIANTS)
def test_batch_equals_single(variants, name):
    """Each row of a left-padded batch generates the same tokens and logits as the row alone."""
    model, processor = variants[name]
    batch = processor(images=IMAGES, text=TEXTS, return_tensors="pt", padding=True)
    assert (batch["attention_mask"] == 0).any()  # the shorter prompt is padded on the left
    out = _greedy(model, batch)
    for row in range(2):
        alone = _greedy(model, processor(images=[IMAGES[row]], text=[TEXTS[row]], return_tensors="pt"))
        assert alone.sequences[0, -4:].tolist() == out.sequences[row, -4:].tolist()
        for step in range(4):
            torch.testing.assert_close(alone.logits[step][0], out.logits[step][row], atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("name", CACHED)
def test_cache_equals_no_cache(variants, name):
    """Cached greedy decoding equals recomputing the whole forward (images included) at every step."""
    model, processor = variants[name]
    batch = processor(images=IMAGES, text=TEXTS, return_tensors="pt", padding=True)
    out = _greedy(model, batch, use_cache=True)
    nocache = _greedy(model, batch, use_cache=False)
    assert torch.equal(out.sequences, nocache.sequences)
    extra = {k: v for k, v in batch.items() if k not in ("input_ids", "attention_mask")}
    ids, mask = batch["input_ids"], batch["attention_mask"]
    for step in range(4):
        with torch.no_grad():
            last = model(input_ids=ids, attention_mask=mask, use_cache=False, **extra).logits[:, -1]
        torch.testing.assert_close(last, out.logits[step], atol=1e-4, rtol=1e-4)
        nxt = last.argmax(-1, keepdim=True)
        ids, mask = torch.cat([ids, nxt], 1), torch.cat([mask, torch.ones_like(nxt)], 1)


@pytest.fixture(scope="module")
def saved(variants, tmp_path_factory):
    """Every variant saved (model + processor) with its reference generation."""
    root = tmp_path_factory.mktemp("conformance")
    expected = {}
    for name in VARIANTS:
        model, processor = variants[name]
        model.save_pretrained(root / name)
        processor.save_pretrained(root / name)
        inputs = processor(images=IMAGES[:1], text=TEXTS[:1], return_tensors="pt")
        expected[name] = {
            "model": type(model).__name__,
            "processor": type(processor).__name__,
            "tokens": model.generate(**inputs, max_new_tokens=4, do_sample=False)[0, -4:].tolist(),
        }
    return root, expected


_LOAD = """
import json, sys
import numpy as np
from PIL import Image
{preamble}
from transformers import AutoModelForImageTextToText, AutoProcessor
image = Image.fromarray(np.random.RandomState(0).randint(0, 255, (200, 300, 3), dtype=np.uint8))
text = "USER: <image>\\ndescribe ASSISTANT:"
result = {{}}
for name in sys.argv[2:]:
    model = AutoModelForImageTextToText.from_pretrained(sys.argv[1] + "/" + name)
    processor = AutoProcessor.from_pretrained(sys.argv[1] + "/" + name)
    inputs = processor(images=[image], text=[text], return_tensors="pt")
    tokens = model.generate(**inputs, max_new_tokens=4, do_sample=False)[0, -4:].tolist()
    result[name] = {{"model": type(model).__name__, "processor": type(processor).__name__, "tokens": tokens}}
print("RESULT" + json.dumps(result))
"""


def _run(script: str, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(SRC), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    env["OMP_NUM_THREADS"] = "1"
    return subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True, env=env, timeout=300)


def test_save_then_auto_load_in_a_fresh_process(saved):
    """`import hfx`, then the Auto classes rebuild every saved variant as its own class, with the same generation.

    The fresh process imports the Auto model module first: its import pulls in ``configuration_auto`` half-way
    through, whose hook must not register yet (the LLaVA config modules read the Auto model mappings)."""
    root, expected = saved
    preamble = "import hfx"
    proc = _run(textwrap.dedent(_LOAD.format(preamble=preamble)), str(root), *VARIANTS)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "post-import hook" not in proc.stderr, proc.stderr[-3000:]
    got = json.loads(proc.stdout.split("RESULT", 1)[1])
    assert got == expected


def test_pruned_folder_without_hfx_fails_loudly_then_loads_after_import(saved):
    """Without hfx, transformers refuses the pruned folder (unknown model type) instead of silently building the stock
    class; importing hfx afterwards (Auto modules already loaded) registers the types at once."""
    root = saved[0]
    script = textwrap.dedent(
        """
        import json, sys
        from transformers import AutoModelForImageTextToText
        try:
            AutoModelForImageTextToText.from_pretrained(sys.argv[1] + "/prunesid")
            print("RESULT" + json.dumps("loaded without hfx"))
        except ValueError as err:
            assert "prunesid_llava" in str(err), err
            stock = type(AutoModelForImageTextToText.from_pretrained(sys.argv[1] + "/stock-llava")).__name__
            import hfx
            model = AutoModelForImageTextToText.from_pretrained(sys.argv[1] + "/prunesid")
            print("RESULT" + json.dumps([stock, type(model).__name__, model.config.prunesid["num_visual_tokens"]]))
        """
    )
    proc = _run(script, str(root))
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout.split("RESULT", 1)[1])
    assert got == ["LlavaForConditionalGeneration", "PruneSIDLlavaForConditionalGeneration", 12]
