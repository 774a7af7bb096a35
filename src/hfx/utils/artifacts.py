"""Artifact identity: what a saved folder holds, and the one guard every hfx loader and saver runs.

Every hfx artifact is a folder (a transformers / PEFT / diffusers layout, or a ``huggingface_hub`` mixin layout). One
table, :data:`ARTIFACTS`, names each hfx artifact type; :func:`artifact_type` reads a folder's small JSON files only
(nothing is built or allocated) and returns its type. On top of it:

* :class:`ArtifactMixin` (and :class:`ConfigArtifactMixin` / :class:`ModelArtifactMixin` for transformers configs
  and models) -- mixed into every hfx artifact class: ``from_pretrained`` refuses, before anything is built, a
  missing local path ("no such folder"), a corrupt JSON or truncated safetensors file (naming the file), another
  artifact's folder (one line naming both types) and a config without a field the class would otherwise invent;
  ``save_pretrained`` refuses a folder that holds a different artifact (nothing is written). For hfx's own
  architectures (:data:`ARCHITECTURES`) ``save_pretrained`` also writes the code and ``auto_map``
  (:mod:`hfx.utils.remote_code`), so the folder loads with plain transformers and ``trust_remote_code=True``.
* :func:`check_load_source` / :func:`check_save_target` -- the same guards as functions, for loaders that are not
  classes (``Celo2.from_pretrained``, the online routers' ``load``, ``DevFTResult``).
* :data:`ARCHITECTURES` + :func:`register_auto_configs` / :func:`register_auto_models` / :func:`register_module` --
  the hfx architectures' Auto classes, registered with transformers after ``import hfx`` (lazily: see
  :mod:`hfx._import_hooks`), from the same table that fills ``auto_map``.
* :func:`require_artifact`, :func:`resolve_model`, :func:`prepare_output_dir`, :func:`check_output_file` -- the CLI's
  input / output guards (a ``--model`` Hub id that is not cached fails fast when the Hub cannot be reached).

Nothing heavy is imported at module level (this module is imported by ``import hfx`` and copied into the folders of
hfx architectures, so it imports nothing from hfx either).
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import os
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import ClassVar


# --------------------------------------------------------------------------------------------------------------------
# the table of hfx artifact types
# --------------------------------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class ArtifactInfo:
    """One hfx artifact type.

    Args:
        name (`str`): what it is, in words (``"a selective-SSM theory model"``).
        saved_by (`str`): the class / command that writes it.
        signature (`tuple[str, ...]`, *optional*): ``config.json`` keys that identify it when the file has no
            ``model_type`` (``huggingface_hub`` mixin configs).
        marker (`str`, *optional*): a file only this artifact writes (checked before ``config.json``).
        parent (`str`, *optional*): the more general type it also is (a DevFT run is a ``peft:lora`` adapter).
    """

    name: str
    saved_by: str
    signature: tuple[str, ...] = ()
    marker: str | None = None
    parent: str | None = None


ARTIFACTS: dict[str, ArtifactInfo] = {
    "hfx_selective_ssm": ArtifactInfo(
        "a selective-SSM theory model", "SelectiveSSMForSequenceClassification / SelectiveSSMModel"
    ),
    "mmtem": ArtifactInfo("an mm-TEM model", "MMTEMModel"),
    "hippoformer": ArtifactInfo("a Hippoformer model", "HippoformerForNextObservation"),
    "si_gnn": ArtifactInfo("a self-interpretable GNN (SC-GNN)", "SelfInterpretableGNN"),
    "hfx_rmod_value": ArtifactInfo("an RMOD multi-objective value model", "MultiObjectiveValueModel"),
    "prunesid_llava": ArtifactInfo("a PruneSID LLaVA model", "PruneSIDLlavaForConditionalGeneration"),
    "prunesid_llava_next": ArtifactInfo("a PruneSID LLaVA-NeXT model", "PruneSIDLlavaNextForConditionalGeneration"),
    "prunesid_llava_next_video": ArtifactInfo(
        "a PruneSID LLaVA-NeXT-Video model", "PruneSIDLlavaNextVideoForConditionalGeneration"
    ),
    "hfx_celo2": ArtifactInfo("Celo2 meta-weights", "Celo2MetaWeights", signature=("features", "adafactor_decays")),
    "hfx_bayesian_router": ArtifactInfo(
        "a BayesianRouter offline router", "OfflineRouter", signature=("encoder_config", "lambda_bt")
    ),
    "hfx_memgas": ArtifactInfo(
        "a MemGAS memory", "MemGAS", signature=("num_seednodes", "mem_threshold"), marker="memory.json"
    ),
    "hfx_online_router": ArtifactInfo(
        "an online router (Thompson / LinUCB / random)",
        "ThompsonRouter / LinUCBRouter / RandomRouter.save",
        marker="router_config.json",
    ),
    "hfx_devft": ArtifactInfo(
        "a DevFT run (LoRA adapter + devft_history.json)",
        "DevFTResult.save_pretrained",
        marker="devft_history.json",
        parent="peft:lora",
    ),
    "hfx_thinkmerge": ArtifactInfo("a ThinkMerge custom_generate folder", "hfx publish thinkmerge"),
    "peft:slao": ArtifactInfo("an SLAO adapter", "a PeftModel built from an SLAOConfig"),
    "diffusers:CLIPInversionPipeline": ArtifactInfo("a CLIP^-1 pipeline", "CLIPInversionPipeline.save_pretrained"),
}

# hfx's own architectures: model_type -> Auto class -> "module:Class" (AutoConfig first). `import hfx` registers them
# with transformers' Auto classes (lazily), and `save_pretrained` writes their code and this `auto_map` into the folder.
ARCHITECTURES: dict[str, dict[str, str]] = {
    "hfx_selective_ssm": {
        "AutoConfig": "hfx.models.selective_ssm.configuration_selective_ssm:SelectiveSSMConfig",
        "AutoModel": "hfx.models.selective_ssm.modeling_selective_ssm:SelectiveSSMModel",
        "AutoModelForSequenceClassification": (
            "hfx.models.selective_ssm.modeling_selective_ssm:SelectiveSSMForSequenceClassification"
        ),
    },
    "mmtem": {
        "AutoConfig": "hfx.models.hippoformer.configuration_hippoformer:MMTEMConfig",
        "AutoModel": "hfx.models.hippoformer.modeling_hippoformer:MMTEMModel",
    },
    "hippoformer": {
        "AutoConfig": "hfx.models.hippoformer.configuration_hippoformer:HippoformerConfig",
        "AutoModel": "hfx.models.hippoformer.modeling_hippoformer:HippoformerForNextObservation",
    },
    "si_gnn": {
        "AutoConfig": "hfx.gnn.self_consistency.configuration:SelfInterpretableGNNConfig",
        "AutoModel": "hfx.gnn.self_consistency.modeling:SelfInterpretableGNN",
    },
    "hfx_rmod_value": {
        "AutoConfig": "hfx.generation.rmod.value_functions:MultiObjectiveValueConfig",
        "AutoModel": "hfx.generation.rmod.value_functions:MultiObjectiveValueModel",
    },
}
# model classes not registered when `transformers.models.auto.modeling_auto` is imported, only once their module is:
# importing PyTorch Geometric (SC-GNN) takes seconds, too much for every `from transformers import AutoModel`
LAZY_MODEL_REGISTRATION = frozenset({"si_gnn"})

# transformers modules whose import (re)tries the registrations (see `hfx/__init__.py`): a registration waits until
# both modules of its stage are fully imported
AUTO_TRIGGERS: dict[str, str] = {
    "transformers.configuration_utils": "register_auto_configs",
    "transformers.models.auto.configuration_auto": "register_auto_configs",
    "transformers.modeling_utils": "register_auto_models",
    "transformers.models.auto.modeling_auto": "register_auto_models",
}

LOCAL_MODEL_HINT = (
    "pass a local folder instead (e.g. one written by `save_pretrained`, or `hf download REPO_ID --local-dir DIR` on "
    "a machine with network access)"
)
HUB_TIMEOUT = 10.0  # seconds: the one request that checks a `--model` Hub id before anything loads

# the files whose contents are checked before a load (JSON parses, safetensors are complete)
_MAX_JSON_BYTES = 64 * 2**20
_CHECK_DEPTH = 2


class ArtifactNotFoundError(FileNotFoundError, ValueError):
    """A named input folder / file / Hub id that does not exist (a `FileNotFoundError` that is also a `ValueError`,
    so callers catching either bad-input error see it)."""


class ArtifactTypeError(ValueError):
    """A folder that holds another artifact than the one expected (or a corrupt / incomplete one)."""


# --------------------------------------------------------------------------------------------------------------------
# what a folder holds
# --------------------------------------------------------------------------------------------------------------------


def _read_json(path: Path) -> dict | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None
    return data if isinstance(data, dict) else None


def artifact_type(folder: str | Path) -> str | None:
    """What ``folder`` holds, from its small JSON files only (nothing is built or allocated).

    Returns:
        `str` or `None`: a key of :data:`ARTIFACTS` (``"hfx_memgas"``, ``"hfx_online_router"``, ``"hfx_devft"``,
        ``"hfx_celo2"``, ...), ``"peft:<peft_type>"`` (an adapter folder, e.g. ``"peft:slao"``),
        ``"diffusers:<class>"`` (a pipeline folder with ``model_index.json``), the ``model_type`` of ``config.json``
        (``"llama"``, ``"si_gnn"``, ``"prunesid_llava"``, ...), ``"config:unknown"`` (a ``config.json`` of no known
        kind), ``"config:unreadable"`` (an identifying JSON file that does not parse) or ``None`` (none of these).
    """
    folder = Path(folder)
    if not folder.is_dir():
        return None
    if (folder / "adapter_config.json").is_file():
        adapter = _read_json(folder / "adapter_config.json")
        if adapter is None:
            return "config:unreadable"
        if (folder / ARTIFACTS["hfx_devft"].marker).is_file():
            return "hfx_devft"
        return f"peft:{str(adapter.get('peft_type', 'unknown')).lower()}"
    if (folder / "model_index.json").is_file():
        index = _read_json(folder / "model_index.json")
        if index is None:
            return "config:unreadable"
        name = index.get("_class_name")
        name = name[-1] if isinstance(name, list) and name else name
        return f"diffusers:{name}"
    for kind, info in ARTIFACTS.items():
        if info.marker and info.parent is None and (folder / info.marker).is_file():
            return kind if _read_json(folder / info.marker) is not None else "config:unreadable"
    if (folder / "config.json").is_file():
        config = _read_json(folder / "config.json")
        if config is None:
            return "config:unreadable"
        if isinstance(config.get("model_type"), str) and config["model_type"]:
            return config["model_type"]
        for kind, info in ARTIFACTS.items():
            if info.signature and all(k in config for k in info.signature):
                return kind
        return "config:unknown"
    if (folder / "custom_generate" / "generate.py").is_file():
        return "hfx_thinkmerge"
    return None


def lineage(kind: str | None) -> tuple[str, ...]:
    """``kind`` and the more general types it also is (``"hfx_devft"`` -> ``("hfx_devft", "peft:lora")``)."""
    out = []
    while kind is not None and kind not in out:
        out.append(kind)
        info = ARTIFACTS.get(kind)
        kind = info.parent if info is not None else None
    return tuple(out)


def is_hfx_type(kind: str | None) -> bool:
    """Whether ``kind`` is one of hfx's own artifact types (:data:`ARTIFACTS`)."""
    return kind is not None and (kind in ARTIFACTS or kind.startswith("hfx_"))


def describe_type(kind: str | None) -> str:
    """``kind`` in words, with the type itself: ``"an mm-TEM model ('mmtem', saved by MMTEMModel)"``."""
    if kind is None:
        return "no artifact (no config.json / adapter_config.json / model_index.json)"
    info = ARTIFACTS.get(kind)
    if info is not None:
        return f"{info.name} ({kind!r}, saved by {info.saved_by})"
    if kind == "config:unreadable":
        return "an unreadable config (a JSON file that does not parse, or not a JSON object)"
    if kind == "config:unknown":
        return "a config.json of no known kind (no `model_type`)"
    if kind.startswith("peft:"):
        return f"a PEFT {kind[5:].upper()} adapter ({kind!r})"
    if kind.startswith("diffusers:"):
        return f"a diffusers pipeline ({kind!r})"
    if kind.startswith("hfx_"):
        return f"an hfx artifact ({kind!r})"
    return f"a transformers model (model_type {kind!r})"


def describe_folder(folder: str | Path, kind: str | None = None) -> str:
    """What ``folder`` holds, in words (:func:`describe_type`, plus what its extra files say it is)."""
    folder = Path(folder)
    kind = artifact_type(folder) if kind is None else kind
    text = describe_type(kind)
    if (folder / "thr_config.json").is_file():
        text += " (a THR-GRPO policy: thr_config.json)"
    return text


def model_artifact_type(model) -> str:
    """The artifact type a loaded model saves as: ``"peft:<peft_type>"`` for a PEFT model, else its ``model_type``
    (unwrapping an ``accelerate`` / DDP wrapper)."""
    model = getattr(model, "module", model)
    peft_config = getattr(model, "peft_config", None)
    if isinstance(peft_config, dict) and peft_config:
        peft_type = getattr(next(iter(peft_config.values())), "peft_type", "unknown")
        return f"peft:{str(getattr(peft_type, 'value', peft_type)).lower()}"
    return str(getattr(getattr(model, "config", None), "model_type", None) or "config:unknown")


def _is_transformers_type(kind: str) -> bool:
    return ":" not in kind and not is_hfx_type(kind)


def _is_causal_lm_type(kind: str) -> bool:
    """A transformers ``model_type`` that ``AutoModelForCausalLM`` builds (imports transformers' name tables)."""
    if not _is_transformers_type(kind):
        return False
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    return kind in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES


def _matches(kind: str | None, allowed: Iterable[str]) -> bool:
    """``kind`` (or a type it also is) is one of ``allowed``; ``"transformers:"`` stands for any plain transformers
    ``model_type``, ``"transformers:causal_lm"`` for one ``AutoModelForCausalLM`` builds, and an entry ending in
    ``":"`` for a prefix (``"peft:"``)."""
    if kind is None:
        return False
    for k in lineage(kind):
        for a in allowed:
            if k == a or (a == "transformers:" and _is_transformers_type(k)):
                return True
            if a == "transformers:causal_lm" and _is_causal_lm_type(k):
                return True
            if a.endswith(":") and not a.startswith("transformers:") and k.startswith(a):
                return True
    return False


def require_artifact(folder: str | Path, allowed: Iterable[str], *, arg: str, what: str) -> str:
    """Check that ``folder`` is a folder holding one of the ``allowed`` artifact types (see :func:`artifact_type`
    and :func:`_matches` for the wildcard entries).

    Returns:
        `str`: the artifact type found.

    Raises:
        ArtifactNotFoundError: if ``folder`` does not exist.
        ValueError: if it is a file, or holds another artifact (the message names ``arg``, what the folder holds
            and ``what`` was expected).
    """
    allowed = tuple(allowed)
    path = Path(folder)
    if not path.exists():
        raise ArtifactNotFoundError(f"`{arg}` {str(folder)!r} does not exist (no such folder)")
    if not path.is_dir():
        raise ValueError(f"`{arg}` must be a folder ({what}), but {str(folder)!r} is a file")
    kind = artifact_type(path)
    if not _matches(kind, allowed):
        raise ArtifactTypeError(f"`{arg}` must be {what}, but {str(folder)!r} holds {describe_folder(path, kind)}")
    return kind


# --------------------------------------------------------------------------------------------------------------------
# file contents: a corrupt JSON or a truncated safetensors file is named before anything reads it
# --------------------------------------------------------------------------------------------------------------------


def _safetensors_problem(path: Path) -> str | None:
    """Why ``path`` is not a complete safetensors file (``None`` when its header and sizes agree)."""
    try:
        size = path.stat().st_size
        with path.open("rb") as f:
            head = f.read(8)
            if len(head) < 8:
                return f"it holds {size} bytes, fewer than the 8-byte header length"
            n = int.from_bytes(head, "little")
            if n > size - 8:
                return f"its header needs {n} bytes but only {size - 8} follow (truncated)"
            header = json.loads(f.read(n))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        return f"its header does not parse ({err})"
    if not isinstance(header, dict):
        return "its header is not a JSON object"
    try:
        end = max((v["data_offsets"][1] for k, v in header.items() if k != "__metadata__"), default=0)
    except (KeyError, TypeError, IndexError):
        return "its header has no valid `data_offsets`"
    if 8 + n + end > size:
        return f"its tensors need {8 + n + end} bytes but the file holds {size} (truncated)"
    return None


def check_files(folder: str | Path, *, who: str) -> None:
    """Refuse a folder whose JSON files do not parse or whose safetensors files are incomplete, naming the file.

    Checks every ``*.json`` (up to 64 MiB) and ``*.safetensors`` file in ``folder`` and its sub-folders (2 levels).

    Raises:
        ArtifactTypeError: naming ``who`` and the file.
    """
    folder = Path(folder)
    stack = [(folder, 0)]
    while stack:
        current, depth = stack.pop()
        try:
            entries = sorted(current.iterdir())
        except OSError:
            continue
        for path in entries:
            if path.name.startswith("."):
                continue
            if path.is_dir():
                if depth + 1 < _CHECK_DEPTH:
                    stack.append((path, depth + 1))
                continue
            if path.suffix == ".json" and path.stat().st_size <= _MAX_JSON_BYTES:
                try:
                    json.loads(path.read_text(encoding="utf-8"))
                except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
                    raise ArtifactTypeError(
                        f"{who} cannot load {str(folder)!r}: {str(path)!r} is not valid JSON ({err})"
                    ) from None
            elif path.suffix == ".safetensors":
                problem = _safetensors_problem(path)
                if problem is not None:
                    raise ArtifactTypeError(
                        f"{who} cannot load {str(folder)!r}: {str(path)!r} is not a complete safetensors file: "
                        f"{problem}"
                    )


def check_required_keys(config: dict, required: Iterable[str], *, who: str, where: str, file: str = "config") -> None:
    """Refuse a saved config that lacks a field the loader would otherwise fill with an invented default.

    Raises:
        ArtifactTypeError: naming the missing field(s).
    """
    missing = [k for k in required if k not in config]
    if missing:
        fields = ", ".join(f"`{k}`" for k in missing)
        raise ArtifactTypeError(
            f"{who} cannot load {where}: its {file} lacks {fields}; refusing to invent "
            f"{'a default for it' if len(missing) == 1 else 'defaults for them'} (was the file edited?)"
        )


# --------------------------------------------------------------------------------------------------------------------
# the load and save guards
# --------------------------------------------------------------------------------------------------------------------


def _is_hub_id(name: str) -> bool:
    """``name`` could be a Hub repo id (``org/name`` or ``name``) rather than a local path."""
    return not (
        looks_like_path(name)
        or name.count("/") > 1
        or any(c in name for c in ' \\:*?"<>|')
        or len(name) > 96
        or not name.strip()
    )


def check_load_source(
    source,
    expected: Iterable[str],
    *,
    who: str,
    arg: str = "pretrained_model_name_or_path",
    cache_dir: str | os.PathLike | None = None,
    allow_file: bool = False,
    allow_untyped: bool = False,
) -> Path | None:
    """The load guard: check ``source`` before a loader reads or builds anything.

    Args:
        source (`str` or `os.PathLike`): a local folder, or a Hub repo id (checked when it is in the local HF cache).
        expected (`Iterable[str]`): artifact types the loader accepts (see :func:`require_artifact`).
        who (`str`): the loader, for the messages (``"SelfInterpretableGNN.from_pretrained"``).
        arg (`str`, *optional*): the argument's name, for the messages.
        cache_dir (*optional*): the HF cache to look a repo id up in.
        allow_file (`bool`, *optional*, defaults to `False`): a file is acceptable (the caller reads it).
        allow_untyped (`bool`, *optional*, defaults to `False`): a folder with no identifying JSON file is
            acceptable (e.g. weights only, with a config passed in).

    Returns:
        `Path` or `None`: the local folder (or file) that was checked, or ``None`` for a Hub id that is not cached
        (the loader asks the Hub).

    Raises:
        ArtifactNotFoundError: a missing local path ("no such folder"), or a Hub id that is not cached while
            ``HF_HUB_OFFLINE`` is set.
        ArtifactTypeError: a folder holding another artifact (naming both types), a corrupt JSON / truncated
            safetensors file (naming the file).
        TypeError: ``source`` is not a string or path.
    """
    expected = tuple(expected)
    if not isinstance(source, (str, os.PathLike)):
        raise TypeError(f"{who}: `{arg}` must be a folder or a Hub repo id (a str or path), but is {type(source)}")
    name = os.fspath(source)
    if not name.strip():
        raise ValueError(f"{who}: `{arg}` must name a folder or a Hub repo id, but is {name!r}")
    path = Path(name).expanduser()
    if not path.exists():
        if not isinstance(source, str) or not _is_hub_id(name):
            raise ArtifactNotFoundError(f"{who}: `{arg}` {name!r}: no such folder")
        snapshot = _cached_snapshot(name, cache_dir=cache_dir)
        if snapshot is None:
            if hub_offline():
                raise ArtifactNotFoundError(
                    f"{who}: `{arg}` {name!r}: no such folder, and no Hub repo of that name in the local Hugging Face "
                    "cache (HF_HUB_OFFLINE is set, so nothing is downloaded)"
                )
            return None
        path = Path(snapshot)
    if path.is_file():
        if allow_file:
            return path
        raise ArtifactTypeError(f"{who}: `{arg}` must be a folder, but {name!r} is a file")
    check_files(path, who=who)
    kind = artifact_type(path)
    if kind is None and allow_untyped:
        return path
    if not _matches(kind, expected):
        wanted = " or ".join(describe_type(e) for e in expected if not e.endswith(":")) or ", ".join(expected)
        raise ArtifactTypeError(f"{who} cannot load {name!r}: it holds {describe_folder(path, kind)}, not {wanted}")
    return path


def check_save_target(folder, own_type: str, *, who: str, arg: str = "save_directory") -> Path:
    """The save guard: refuse, before anything is written, a ``folder`` that is a file or holds a different artifact.

    A new or empty folder, a folder holding the same artifact type (re-saving) or only unrelated files (a Trainer
    ``output_dir`` with ``checkpoint-*`` folders) is fine.

    Returns:
        `Path`: ``folder``.

    Raises:
        ArtifactTypeError: naming ``who``, the folder's artifact and ``own_type``; nothing is written.
        TypeError / ValueError: ``folder`` is not a path, is empty or is a file.
    """
    if not isinstance(folder, (str, os.PathLike)):
        raise TypeError(f"{who}: `{arg}` must be a folder path (a str or path), but is {type(folder)}")
    name = os.fspath(folder)
    if not name.strip():
        raise ValueError(f"{who}: `{arg}` must name a folder, but is {name!r}")
    path = Path(name).expanduser()
    if path.exists() and not path.is_dir():
        raise ArtifactTypeError(f"{who}: `{arg}` {name!r} is a file, not a folder")
    kind = artifact_type(path)
    if kind is not None and own_type not in lineage(kind) and kind not in lineage(own_type):
        raise ArtifactTypeError(
            f"{who} refuses {name!r}: it holds {describe_folder(path, kind)}; saving {describe_type(own_type)} there "
            "would leave a folder that loads as neither. Choose another folder (nothing was written)"
        )
    return path


# --------------------------------------------------------------------------------------------------------------------
# the mixins every hfx artifact class uses
# --------------------------------------------------------------------------------------------------------------------


class ArtifactMixin:
    """Identity checks for an artifact class's ``from_pretrained`` / ``save_pretrained`` (put it first in the bases).

    Class attributes:
        _hfx_artifact (`str`): the type this class saves (a key of :data:`ARTIFACTS`; transformers classes default
            to their ``model_type``).
        _hfx_loads (`tuple[str, ...]`): other types it may load (e.g. the stock type a PruneSID model converts).
        _hfx_config_file (`str` or `None`): the JSON file whose keys :meth:`_hfx_required_keys` must all be present
            (``"config.json"`` for the ``huggingface_hub`` mixins; transformers configs check in ``get_config_dict``).
    """

    _hfx_artifact: ClassVar[str | None] = None
    _hfx_loads: ClassVar[tuple[str, ...]] = ()
    _hfx_config_file: ClassVar[str | None] = "config.json"

    @classmethod
    def _hfx_type(cls) -> str:
        if cls._hfx_artifact is None:
            raise TypeError(f"{cls.__name__} uses ArtifactMixin but sets no `_hfx_artifact`")
        return cls._hfx_artifact

    @classmethod
    def _hfx_required_keys(cls) -> tuple[str, ...]:
        """Keys the saved config must hold: by default the ``__init__`` arguments a ``huggingface_hub`` mixin saves."""
        params = getattr(cls, "_hub_mixin_init_parameters", None) or {}
        return tuple(
            name for name, p in params.items() if name != "self" and p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)
        )

    @classmethod
    def _hfx_check_load(cls, source, **kwargs) -> Path | None:
        """Run the load guard for ``source`` (see :func:`check_load_source`); then the required-keys check."""
        who = f"{cls.__name__}.from_pretrained"
        path = check_load_source(source, (cls._hfx_type(), *cls._hfx_loads), who=who, **kwargs)
        if path is not None and path.is_dir() and cls._hfx_config_file:
            config = _read_json(path / cls._hfx_config_file)
            if config is not None:
                where = repr(os.fspath(source))
                check_required_keys(config, cls._hfx_required_keys(), who=who, where=where, file=cls._hfx_config_file)
        return path

    @classmethod
    def from_pretrained(cls, pretrained_model_name_or_path, *args, **kwargs):
        """Check the folder (see :class:`ArtifactMixin`), then load it with the parent class's ``from_pretrained``
        (a ``huggingface_hub`` PyTorch mixin loads its weights with ``strict=True``: a missing tensor is an error,
        not a freshly initialised one)."""
        cls._hfx_check_load(pretrained_model_name_or_path, cache_dir=kwargs.get("cache_dir"))
        if getattr(cls, "_hub_mixin_init_parameters", None) is not None and "strict" not in kwargs:
            import inspect

            if "strict" in inspect.signature(cls._from_pretrained).parameters:
                kwargs["strict"] = True
        return super().from_pretrained(pretrained_model_name_or_path, *args, **kwargs)

    def save_pretrained(self, save_directory, *args, **kwargs):
        """Refuse a folder holding another artifact (nothing is written), then save with the parent class."""
        check_save_target(save_directory, type(self)._hfx_type(), who=f"{type(self).__name__}.save_pretrained")
        return super().save_pretrained(save_directory, *args, **kwargs)


def _own_config_keys(cls) -> tuple[str, ...]:
    """The keys a transformers config class writes on top of ``PreTrainedConfig`` (``save_pretrained`` always
    writes them: ``to_diff_dict`` keeps every key the base config lacks)."""
    cached = vars(cls).get("_hfx_own_keys_cache")
    if cached is not None:
        return cached
    from transformers import PreTrainedConfig

    base = set(PreTrainedConfig().to_dict())
    keys = tuple(sorted(set(cls().to_dict()) - base - {"model_type", "transformers_version", "auto_map"}))
    cls._hfx_own_keys_cache = keys
    return keys


class ConfigArtifactMixin(ArtifactMixin):
    """:class:`ArtifactMixin` for transformers ``PreTrainedConfig`` subclasses (put it first in the bases).

    ``get_config_dict`` (the file path of ``from_pretrained`` and of the models' ``from_pretrained``) and
    ``from_dict`` (what ``AutoConfig`` calls) refuse another artifact's config (a ``model_type`` not in
    ``(model_type, *_hfx_loads)``) and a config missing one of the class's own fields (:meth:`_hfx_required_keys`;
    ``_hfx_required_for`` limits that check to one ``model_type``). ``save_pretrained`` of an hfx architecture
    (:data:`ARCHITECTURES`) writes the code and ``auto_map`` (:func:`hfx.utils.remote_code.save_code`).
    """

    _hfx_config_file: ClassVar[str | None] = None  # checked in get_config_dict / from_dict instead
    _hfx_required: ClassVar[tuple[str, ...] | None] = None  # default: every field of the class (see below)
    _hfx_required_for: ClassVar[str | None] = None

    @classmethod
    def _hfx_type(cls) -> str:
        return cls._hfx_artifact or cls.model_type

    @classmethod
    def _hfx_required_keys(cls) -> tuple[str, ...]:
        """``_hfx_required`` when set, else every key the class writes on top of ``PreTrainedConfig``."""
        return cls._hfx_required if cls._hfx_required is not None else _own_config_keys(cls)

    @classmethod
    def _hfx_check_config_dict(cls, config_dict: dict, where: str, need_type: bool) -> None:
        who = f"{cls.__name__}.from_pretrained"
        allowed = (cls._hfx_type(), *cls._hfx_loads)
        found = config_dict.get("model_type")
        if (found is not None or need_type) and found not in allowed:
            described = describe_type(found) if found else "a config.json without `model_type`"
            raise ArtifactTypeError(
                f"{who} cannot load {where}: its config has model_type {found!r} ({described}), expected "
                f"{' or '.join(repr(a) for a in allowed)} ({describe_type(cls._hfx_type())})"
            )
        if found is not None and (cls._hfx_required_for is None or found == cls._hfx_required_for):
            check_required_keys(config_dict, cls._hfx_required_keys(), who=who, where=where)

    @classmethod
    def from_pretrained(cls, pretrained_model_name_or_path, *args, **kwargs):
        """Check the folder, then load the config (see :class:`ConfigArtifactMixin`)."""
        cls._hfx_check_load(pretrained_model_name_or_path, cache_dir=kwargs.get("cache_dir"))
        return super().from_pretrained(pretrained_model_name_or_path, *args, **kwargs)

    @classmethod
    def get_config_dict(cls, pretrained_model_name_or_path, **kwargs):
        config_dict, kwargs = super().get_config_dict(pretrained_model_name_or_path, **kwargs)
        cls._hfx_check_config_dict(config_dict, repr(os.fspath(pretrained_model_name_or_path)), need_type=True)
        return config_dict, kwargs

    @classmethod
    def from_dict(cls, config_dict, **kwargs):
        if isinstance(config_dict, dict):
            cls._hfx_check_config_dict(config_dict, "this dict", need_type=False)
        return super().from_dict(config_dict, **kwargs)

    def save_pretrained(self, save_directory, *args, **kwargs):
        """Refuse a folder holding another artifact; save; for an hfx architecture also write its code + auto_map."""
        check_save_target(save_directory, type(self)._hfx_type(), who=f"{type(self).__name__}.save_pretrained")
        classes = _bundled_classes(self)
        if classes:
            from .remote_code import auto_map_for

            self.auto_map = {**(getattr(self, "auto_map", None) or {}), **auto_map_for(classes)}
        result = super().save_pretrained(save_directory, *args, **kwargs)
        if classes:
            from .remote_code import save_code

            save_code(classes, save_directory)
        return result


class ModelArtifactMixin(ArtifactMixin):
    """:class:`ArtifactMixin` for transformers ``PreTrainedModel`` subclasses (put it first in the bases).

    ``from_pretrained`` runs the load guard (the config class then checks the ``config.json`` itself);
    ``save_pretrained`` the save guard, and the config's ``save_pretrained`` writes the code of an hfx architecture.
    """

    _hfx_config_file: ClassVar[str | None] = None  # the config class checks its own file

    @classmethod
    def _hfx_type(cls) -> str:
        return cls._hfx_artifact or cls.config_class.model_type

    @classmethod
    def from_pretrained(cls, pretrained_model_name_or_path, *args, **kwargs):
        """Check the folder, then load the model (see :class:`ArtifactMixin`)."""
        cls._hfx_check_load(
            pretrained_model_name_or_path,
            cache_dir=kwargs.get("cache_dir"),
            allow_untyped=kwargs.get("config") is not None,
        )
        return super().from_pretrained(pretrained_model_name_or_path, *args, **kwargs)


def _bundled_classes(config) -> list[type]:
    """The classes of ``config``'s architecture whose code goes into a saved folder: its config class and the model
    classes already imported (a config saved alone gets no model code). Empty for a class that is not one of
    :data:`ARCHITECTURES`, or that runs from a bundled copy (transformers then copies its files itself)."""
    entries = ARCHITECTURES.get(getattr(config, "model_type", None))
    if not entries or not type(config).__module__.startswith("hfx."):
        return []
    classes = []
    for target in entries.values():
        module, _, name = target.partition(":")
        loaded = sys.modules.get(module)
        if loaded is not None and name in vars(loaded):
            classes.append(vars(loaded)[name])
    return classes if classes and classes[0] is type(config) else []


# --------------------------------------------------------------------------------------------------------------------
# transformers Auto classes: the architectures registered after `import hfx`
# --------------------------------------------------------------------------------------------------------------------


def _defined(module: str, name: str) -> bool:
    """``module`` is imported and already defines ``name`` (not merely half-way through its import)."""
    loaded = sys.modules.get(module)
    return loaded is not None and name in vars(loaded)


def _half_imported(module: str, name: str) -> bool:
    return module in sys.modules and not _defined(module, name)


def _register(model_type: str, auto_class: str, target: str) -> bool:
    """Register one entry of :data:`ARCHITECTURES` (importing its module); ``False`` when it has to wait."""
    module, _, name = target.partition(":")
    if _half_imported(module, name):
        return False  # the module registers itself as its last statement (see `register_module`)
    cls = getattr(importlib.import_module(module), name)
    if auto_class == "AutoConfig":
        from transformers.models.auto.configuration_auto import AutoConfig

        AutoConfig.register(model_type, cls, exist_ok=True)
    else:
        auto = getattr(importlib.import_module("transformers.models.auto.modeling_auto"), auto_class)
        config_module, _, config_name = ARCHITECTURES[model_type]["AutoConfig"].partition(":")
        if not _defined(config_module, config_name):
            return False
        _register(model_type, "AutoConfig", ARCHITECTURES[model_type]["AutoConfig"])
        auto.register(vars(sys.modules[config_module])[config_name], cls, exist_ok=True)
    return True


def _model_modules(model_type: str) -> set[str]:
    return {t.partition(":")[0] for a, t in ARCHITECTURES[model_type].items() if a != "AutoConfig"}


def register_auto_configs() -> None:
    """``AutoConfig.register`` for every hfx architecture whose config has a module of its own (no torch model code
    is imported); waits until ``transformers.configuration_utils`` and the Auto config module are fully imported."""
    if not (
        _defined("transformers.configuration_utils", "PreTrainedConfig")
        and _defined("transformers.models.auto.configuration_auto", "AutoConfig")
    ):
        return
    for model_type, entries in ARCHITECTURES.items():
        if entries["AutoConfig"].partition(":")[0] not in _model_modules(model_type):
            _register(model_type, "AutoConfig", entries["AutoConfig"])


def register_auto_models() -> None:
    """``AutoConfig`` + ``AutoModel*`` registration of every hfx architecture (imports their modelling code, except
    :data:`LAZY_MODEL_REGISTRATION`, registered once imported); waits until ``transformers.modeling_utils`` and the
    Auto model module are fully imported."""
    if not (
        _defined("transformers.modeling_utils", "PreTrainedModel")
        and _defined("transformers.models.auto.modeling_auto", "AutoModel")
    ):
        return
    register_auto_configs()
    for model_type, entries in ARCHITECTURES.items():
        if model_type in LAZY_MODEL_REGISTRATION and not all(m in sys.modules for m in _model_modules(model_type)):
            continue
        for auto_class, target in entries.items():
            _register(model_type, auto_class, target)


def register_module(module_name: str) -> None:
    """Register the :data:`ARCHITECTURES` entries defined in ``module_name`` (the last statement of each hfx
    configuration / modelling module, so a registration that had to wait for the module happens).

    A copy of the module running from a saved folder (``trust_remote_code=True``; its name is not ``hfx.*``)
    registers nothing: transformers registers the classes it loads itself.
    """
    if not module_name.startswith("hfx."):
        return
    for model_type, entries in ARCHITECTURES.items():
        for auto_class, target in entries.items():
            if target.partition(":")[0] == module_name:
                _register(model_type, auto_class, target)


# --------------------------------------------------------------------------------------------------------------------
# the CLI's input and output guards
# --------------------------------------------------------------------------------------------------------------------


def prepare_output_dir(path: str | Path, *, overwrite: bool = False, arg: str = "--out", create: bool = True) -> Path:
    """Validate (before any compute) and create (unless ``create=False``) the output folder ``path``.

    Raises:
        ValueError: if ``path`` is empty, is an existing file, or is a non-empty folder and ``overwrite`` is false
        (the message names ``arg`` and ``--overwrite``).
    """
    if path is None or not str(path).strip():
        raise ValueError(f"`{arg}` must name an output folder, but is {str(path)!r}")
    out = Path(path).expanduser()
    if out.exists() and not out.is_dir():
        raise ValueError(f"`{arg}` must be a folder, but {str(path)!r} is an existing file")
    if out.is_dir() and any(out.iterdir()) and not overwrite:
        where = " (the current directory)" if out.resolve() == Path.cwd().resolve() else ""
        raise ValueError(
            f"`{arg}` {str(path)!r}{where} is not empty; choose a new folder or pass --overwrite (`overwrite=True` in "
            "Python) to replace its files"
        )
    for parent in (out, *out.parents):
        if parent.exists():
            if not parent.is_dir():
                raise ValueError(f"`{arg}` {str(path)!r} cannot be created: {str(parent)!r} is a file")
            if not os.access(parent, os.W_OK):
                raise ValueError(f"`{arg}` {str(path)!r} is not writable")
            break
    if not create:
        return out
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise ValueError(f"`{arg}` {str(path)!r} cannot be created: {err.strerror or err}") from err
    if not os.access(out, os.W_OK):
        raise ValueError(f"`{arg}` {str(path)!r} is not writable")
    return out


def check_output_file(
    path: str | Path, *, suffixes: Iterable[str], overwrite: bool = False, arg: str = "--out"
) -> Path:
    """Validate an output file path before any compute: a non-empty name, an allowed extension, not a folder, not an
    existing file unless ``overwrite``, a parent folder that exists or can be created (it is created).

    Raises:
        ValueError: naming ``arg``, the allowed extensions and ``--overwrite``.
    """
    suffixes = tuple(s.lower() for s in suffixes)
    if path is None or not str(path).strip():
        raise ValueError(f"`{arg}` must name an output file, but is {str(path)!r}")
    out = Path(path).expanduser()
    if out.is_dir():
        raise ValueError(f"`{arg}` must be a file path ({', '.join(suffixes)}), but {str(path)!r} is a folder")
    if out.suffix.lower() not in suffixes:
        raise ValueError(f"`{arg}` must end in one of {', '.join(suffixes)}, but is {str(path)!r}")
    if out.exists() and not overwrite:
        raise ValueError(f"`{arg}` {str(path)!r} exists; choose another path or pass --overwrite to replace it")
    if out.parent.exists() and not out.parent.is_dir():
        raise ValueError(f"`{arg}` {str(path)!r}: its parent {str(out.parent)!r} is a file")
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise ValueError(f"`{arg}` {str(path)!r}: cannot create its folder: {err.strerror or err}") from err
    return out


def hub_offline() -> bool:
    """Whether ``HF_HUB_OFFLINE`` is set (read the way ``huggingface_hub`` reads it)."""
    return os.environ.get("HF_HUB_OFFLINE", "0").strip().upper() in ("1", "ON", "YES", "TRUE")


def looks_like_path(name: str) -> bool:
    """Whether ``name`` is meant as a local path rather than a Hub id (``org/name`` or ``name``)."""
    return (
        name.startswith((".", "/", "~"))
        or name.count("/") > 1
        or (os.sep != "/" and os.sep in name)
        or Path(name).suffix.lower() in (".json", ".safetensors", ".bin", ".png", ".jpg", ".jpeg")
    )


def resolve_model(
    name: str, *, arg: str = "--model", allowed: Iterable[str] | None = None, what: str = "a model folder"
) -> str:
    """Resolve a ``--model`` value to a local folder (or a Hub id the Hub may be asked for) before loading anything.

    * a local folder: checked with :func:`require_artifact` when ``allowed`` is given;
    * something path-like that does not exist: `FileNotFoundError`;
    * a Hub id: its snapshot in the local HF cache when there is one (checked like a folder); else, with
      ``HF_HUB_OFFLINE`` set, a `FileNotFoundError` saying so and how to pass a local folder (no retries); else one
      request to the Hub (``HUB_TIMEOUT`` seconds, no retries): a repo that does not exist, or a Hub that cannot be
      reached, fails at once naming ``arg``; a repo that exists is returned as the id.

    Raises:
        FileNotFoundError, ValueError: as above, naming ``arg``.
    """
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"`{arg}` must be a local folder or a Hub id, but is {name!r}")
    path = Path(name).expanduser()
    if path.exists() or looks_like_path(name):
        if not path.exists():
            raise ArtifactNotFoundError(f"`{arg}` {name!r} does not exist (no such folder)")
        if not path.is_dir():
            raise ValueError(f"`{arg}` must be a folder or a Hub id, but {name!r} is a file")
        if allowed is not None:
            require_artifact(path, allowed, arg=arg, what=what)
        return str(path)
    if not _is_hub_id(name):
        raise ValueError(f"`{arg}` {name!r} is neither an existing folder nor a valid Hub id (`org/name`)")
    snapshot = _cached_snapshot(name)
    if snapshot is not None:
        if allowed is not None:
            require_artifact(snapshot, allowed, arg=arg, what=what)
        return snapshot
    if hub_offline():
        raise ArtifactNotFoundError(
            f"`{arg}` {name!r} is not a local folder and is not in the local Hugging Face cache, and HF_HUB_OFFLINE=1 "
            f"forbids downloading it; {LOCAL_MODEL_HINT}, or unset HF_HUB_OFFLINE where the Hub is reachable"
        )
    _check_hub_repo(name, arg=arg)
    return name


def _check_hub_repo(repo_id: str, *, arg: str) -> None:
    """One request to the Hub (no retries): refuse a repo that does not exist or a Hub that cannot be reached."""
    from huggingface_hub import HfApi
    from huggingface_hub.errors import GatedRepoError, HfHubHTTPError, RepositoryNotFoundError

    try:
        HfApi().model_info(repo_id, timeout=HUB_TIMEOUT)
    except GatedRepoError:
        return  # it exists; the loader reports the access problem with its own message
    except RepositoryNotFoundError:
        raise ArtifactNotFoundError(
            f"`{arg}` {repo_id!r} is not a local folder, and the Hub has no model repo of that name (or it is "
            "private and no token with access is set)"
        ) from None
    except HfHubHTTPError as err:
        raise ArtifactNotFoundError(f"`{arg}` {repo_id!r}: the Hub answered {err}; {LOCAL_MODEL_HINT}") from None
    except Exception as err:  # noqa: BLE001 -- httpx / OS network errors: the Hub cannot be reached
        raise ArtifactNotFoundError(
            f"`{arg}` {repo_id!r} is not a local folder and not in the local Hugging Face cache, and the Hub cannot be "
            f"reached ({type(err).__name__}: {err}); {LOCAL_MODEL_HINT}, or set HF_HUB_OFFLINE=1 to use only the cache"
        ) from None


def _cached_snapshot(repo_id: str, cache_dir: str | os.PathLike | None = None) -> str | None:
    """The local HF-cache snapshot folder of ``repo_id`` (no network), or ``None`` when it is not cached."""
    try:
        from huggingface_hub import snapshot_download, try_to_load_from_cache

        for filename in ("config.json", "adapter_config.json", "model_index.json"):
            found = try_to_load_from_cache(repo_id, filename, cache_dir=cache_dir)
            if isinstance(found, str):
                return str(Path(found).parent)
        # a repo without those files (e.g. an official Celo2 checkpoint): the cached snapshot of its main ref
        return str(snapshot_download(repo_id, cache_dir=cache_dir, local_files_only=True))
    except Exception:  # noqa: BLE001 -- an invalid repo id, an unreadable cache, not cached: "not cached"
        return None


__all__ = [
    "ARCHITECTURES",
    "ARTIFACTS",
    "AUTO_TRIGGERS",
    "ArtifactInfo",
    "ArtifactMixin",
    "ArtifactNotFoundError",
    "ArtifactTypeError",
    "ConfigArtifactMixin",
    "ModelArtifactMixin",
    "artifact_type",
    "check_files",
    "check_load_source",
    "check_output_file",
    "check_required_keys",
    "check_save_target",
    "describe_folder",
    "describe_type",
    "hub_offline",
    "is_hfx_type",
    "lineage",
    "looks_like_path",
    "model_artifact_type",
    "prepare_output_dir",
    "register_auto_configs",
    "register_auto_models",
    "register_module",
    "require_artifact",
    "resolve_model",
]
