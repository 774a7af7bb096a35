"""Light checks shared by the CLI and the artifact loaders (no heavy imports here).

* :func:`artifact_type` -- what a folder holds, read from its small JSON files only (``config.json``'s
  ``model_type`` or hfx's own config keys, ``adapter_config.json``, ``model_index.json``, a ``custom_generate``
  folder), so a loader can refuse another artifact's folder *before* it builds (and allocates) a model.
* :func:`require_artifact` -- raise a clear error naming the argument when a folder is not the expected artifact.
* :func:`prepare_output_dir` / :func:`check_output_file` -- the single output guard of every writer: refuse ``""``,
  an existing file given as a folder, a non-empty folder (or an existing file) unless ``overwrite``.
* :func:`resolve_model` -- an offline-aware ``--model`` resolver: a local folder, or a Hub id found in the local HF
  cache when ``HF_HUB_OFFLINE`` is set (a clear error instead of retries and a traceback when it is not cached).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path


# config.json without `model_type`: hfx's own configs, recognised by keys only they write
_CONFIG_SIGNATURES = {
    "hfx_bayesian_router": ("encoder_config", "lambda_bt"),
    "hfx_celo2": ("features", "adafactor_decays"),
    "hfx_memgas": ("num_seednodes", "mem_threshold"),
}

LOCAL_MODEL_HINT = (
    "pass a local folder instead (e.g. one written by `save_pretrained`, or `hf download REPO_ID --local-dir DIR` on "
    "a machine with network access)"
)


class ArtifactNotFoundError(FileNotFoundError, ValueError):
    """A named input folder / file / Hub id that does not exist (a `FileNotFoundError` that is also a `ValueError`,
    so callers catching either bad-input error see it)."""


def _read_json(path: Path) -> dict | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None
    return data if isinstance(data, dict) else None


def artifact_type(folder: str | Path) -> str | None:
    """What ``folder`` holds, from its small JSON files only (nothing is built or allocated).

    Returns:
        `str` or `None`: ``"peft:<peft_type>"`` (an adapter folder, e.g. ``"peft:slao"``), ``"diffusers:<class>"``
        (a pipeline folder with ``model_index.json``), the ``model_type`` of ``config.json`` (``"llama"``,
        ``"llava"``, ``"prunesid_llava"``, ``"hfx_rmod_value"``, ...), ``"hfx_bayesian_router"`` /
        ``"hfx_celo2"`` (hfx configs without a ``model_type``), ``"hfx_thinkmerge"`` (a ``custom_generate`` folder
        only), ``"config:unknown"`` (a ``config.json`` of no known kind) or ``None`` (none of these files).
    """
    folder = Path(folder)
    if not folder.is_dir():
        return None
    adapter = _read_json(folder / "adapter_config.json")
    if adapter is not None:
        return f"peft:{str(adapter.get('peft_type', 'unknown')).lower()}"
    index = _read_json(folder / "model_index.json")
    if index is not None:
        name = index.get("_class_name")
        name = name[-1] if isinstance(name, list) and name else name
        return f"diffusers:{name}"
    config = _read_json(folder / "config.json")
    if config is not None:
        if isinstance(config.get("model_type"), str) and config["model_type"]:
            return config["model_type"]
        for kind, keys in _CONFIG_SIGNATURES.items():
            if all(k in config for k in keys):
                return kind
        return "config:unknown"
    if (folder / "config.json").is_file():
        return "config:unreadable"
    if (folder / "custom_generate" / "generate.py").is_file():
        return "hfx_thinkmerge"
    return None


def _is_transformers_type(kind: str) -> bool:
    return ":" not in kind and not kind.startswith("hfx_") and kind != "prunesid_llava"


def _matches(kind: str | None, allowed: Iterable[str]) -> bool:
    """``kind`` is one of ``allowed``; ``"transformers:"`` stands for any plain transformers ``model_type``."""
    if kind is None:
        return False
    for a in allowed:
        if kind == a or (a == "transformers:" and _is_transformers_type(kind)):
            return True
        if a.endswith(":") and a != "transformers:" and kind.startswith(a):
            return True
    return False


def require_artifact(folder: str | Path, allowed: Iterable[str], *, arg: str, what: str) -> str:
    """Check that ``folder`` is a folder holding one of the ``allowed`` artifact types (see :func:`artifact_type`;
    an entry ending in ``":"`` is a prefix, e.g. ``"peft:"``).

    Returns:
        `str`: the artifact type found.

    Raises:
        FileNotFoundError: if ``folder`` does not exist.
        ValueError: if it is a file, or holds another artifact (the message names ``arg``, the type found and
        ``what`` was expected).
    """
    allowed = tuple(allowed)
    path = Path(folder)
    if not path.exists():
        raise ArtifactNotFoundError(f"`{arg}` {str(folder)!r} does not exist")
    if not path.is_dir():
        raise ValueError(f"`{arg}` must be a folder ({what}), but {str(folder)!r} is a file")
    kind = artifact_type(path)
    if not _matches(kind, allowed):
        found = f"a {kind!r} folder" if kind else "a folder without config.json / adapter_config.json"
        raise ValueError(f"`{arg}` must be {what}, but {str(folder)!r} is {found}")
    return kind


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
      ``HF_HUB_OFFLINE`` set, a `FileNotFoundError` saying so and how to pass a local folder (no retries); else the
      id itself (the Hub is asked).

    Raises:
        FileNotFoundError, ValueError: as above, naming ``arg``.
    """
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"`{arg}` must be a local folder or a Hub id, but is {name!r}")
    path = Path(name).expanduser()
    if path.exists() or looks_like_path(name):
        if not path.exists():
            raise ArtifactNotFoundError(f"`{arg}` {name!r} does not exist (a local folder was expected)")
        if not path.is_dir():
            raise ValueError(f"`{arg}` must be a folder or a Hub id, but {name!r} is a file")
        if allowed is not None:
            require_artifact(path, allowed, arg=arg, what=what)
        return str(path)
    if name.count("/") > 1 or any(c in name for c in ' \\:*?"<>|') or len(name) > 96:
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
    return name


def _cached_snapshot(repo_id: str) -> str | None:
    """The local HF-cache snapshot folder of ``repo_id`` (one with a ``config.json``), or ``None``."""
    try:
        from huggingface_hub import try_to_load_from_cache

        for filename in ("config.json", "adapter_config.json", "model_index.json"):
            found = try_to_load_from_cache(repo_id, filename)
            if isinstance(found, str):
                return str(Path(found).parent)
    except Exception:  # noqa: BLE001 -- an invalid repo id, an unreadable cache: treat as "not cached"
        return None
    return None


def _check_config_dict(cls, config_dict: dict, where: str, allowed, required, required_for, need_type: bool) -> None:
    found = config_dict.get("model_type")
    if (found is not None or need_type) and found not in allowed:
        raise ValueError(
            f"{cls.__name__} cannot load {where}: its config has model_type {found!r}, expected one of {list(allowed)} "
            "(is it another artifact's folder?)"
        )
    if found is not None and (required_for is None or found == required_for):
        missing = [k for k in required if k not in config_dict]
        if missing:
            raise ValueError(
                f"{cls.__name__} cannot load {where}: its config lacks {missing}; refusing to invent defaults for them"
            )


def strict_config_loading(
    allowed_model_types: Iterable[str], required_keys: Iterable[str] = (), *, required_for: str | None = None
):
    """``(get_config_dict, from_dict)`` classmethods for hfx ``PreTrainedConfig`` subclasses that refuse, before any
    model is built, a ``config.json`` of another artifact (a ``model_type`` not in ``allowed_model_types``, or none
    in a file) and a config missing a key the model would otherwise invent a default for (a 4096-wide backbone,
    pruning silently off). ``from_dict`` covers ``AutoConfig``, which reads the file without the class.

    Args:
        allowed_model_types: the ``model_type`` values this class may load (its own, plus e.g. the stock type it
            converts from).
        required_keys: keys that must be present (``null`` is allowed where the class allows it).
        required_for (`str`, *optional*): only require the keys when the ``model_type`` is this one.

    Usage (in the class body)::

        get_config_dict, from_dict = strict_config_loading(("hfx_rmod_value",), ("backbone_config",))
    """
    allowed = tuple(allowed_model_types)
    required = tuple(required_keys)

    def get_config_dict(cls, pretrained_model_name_or_path, **kwargs):
        from transformers import PreTrainedConfig

        config_dict, kwargs = PreTrainedConfig.get_config_dict.__func__(cls, pretrained_model_name_or_path, **kwargs)
        where = repr(str(pretrained_model_name_or_path))
        _check_config_dict(cls, config_dict, where, allowed, required, required_for, need_type=True)
        return config_dict, kwargs

    def from_dict(cls, config_dict, **kwargs):
        from transformers import PreTrainedConfig

        if isinstance(config_dict, dict):
            _check_config_dict(cls, config_dict, "this dict", allowed, required, required_for, need_type=False)
        return PreTrainedConfig.from_dict.__func__(cls, config_dict, **kwargs)

    return classmethod(get_config_dict), classmethod(from_dict)


__all__ = [
    "ArtifactNotFoundError",
    "artifact_type",
    "check_output_file",
    "hub_offline",
    "looks_like_path",
    "prepare_output_dir",
    "require_artifact",
    "resolve_model",
    "strict_config_loading",
]
