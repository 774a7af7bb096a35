"""Publishing hfx artifacts to the Hugging Face Hub, and resolving them offline.

* :func:`render_model_card` / :func:`write_model_card` -- a model card rendered from the Jinja template
  ``model_cards/<name>/README.md`` with valid :class:`huggingface_hub.ModelCardData` metadata (library_name, tags,
  license, base_model, pipeline_tag, the arXiv id as an ``arxiv:<id>`` tag).
* :func:`publish` -- writes a Hub-ready folder for a named artifact (``hfx publish NAME --out DIR``); each method
  registers its folder writer in :data:`PUBLISHERS`.
* :func:`push_folder_to_hub` -- a thin call through ``huggingface_hub.HfApi`` (never called in tests).
* :func:`add_to_hf_cache` -- writes a folder into the HF cache layout so that ``from_pretrained("org/name")`` resolves
  offline with ``HF_HUB_OFFLINE=1``: the way every artifact's "pull from the Hub" path is tested here.
"""

from __future__ import annotations

import hashlib
import importlib
import inspect
import shutil
from pathlib import Path
from typing import Any


# artifact name -> "module:function" writing its Hub-ready folder: function(out_dir: Path, source=None, **kw) -> Path
PUBLISHERS: dict[str, str] = {
    "thinkmerge": "hfx.generation.thinkmerge.hub:publish",
    "rmod-value": "hfx.generation.rmod.hub:publish",
    "thr-grpo": "hfx.trainers.thr.hub:publish",
    "prunesid-llava": "hfx.prunesid.hub:publish",
    "slao": "hfx.tuners.slao.hub:publish",
    "clip-inversion": "hfx.pipelines.clip_inversion.hub:publish",
    "bayesian-router": "hfx.routing.hub:publish",
    "celo2": "hfx.optim.celo2.hub:publish",
    "tail-data": "hfx.data.tail.hub:publish",
    "selective-ssm-theory": "hfx.models.selective_ssm.hub:publish",
    "memgas": "hfx.memory.memgas.hub:publish",
    "devft": "hfx.federated.devft.hub:publish",
    "sc-gnn": "hfx.gnn.self_consistency.hub:publish",
    "hippoformer": "hfx.models.hippoformer.hub:publish",
    "mmtem": "hfx.models.hippoformer.hub:publish_mmtem",
    "crd": "hfx.vision.crd.hub:publish",
    "fluent-alignment": "hfx.recipes.fluent.hub:publish",
}

# artifact name -> (artifact types its `source=` may hold, see hfx.utils.artifacts.artifact_type; what that is, in words).
# `publish` checks a source against this before its writer loads (and allocates) anything.
SOURCE_TYPES: dict[str, tuple[tuple[str, ...], str]] = {
    "thinkmerge": (("transformers:",), "a transformers model folder (config.json with a model_type)"),
    "rmod-value": (("hfx_rmod_value",), "a folder saved by MultiObjectiveValueModel.save_pretrained"),
    "thr-grpo": (("transformers:", "peft:lora"), "a folder saved by THRGRPOTrainer.save_model (model or LoRA)"),
    "prunesid-llava": (("llava", "prunesid_llava"), "a llava-hf LLaVA-1.5 folder"),
    "slao": (("peft:slao",), "a saved SLAO adapter folder"),
    "clip-inversion": (("clip", "diffusers:CLIPInversionPipeline"), "a CLIP folder or a saved CLIP^-1 pipeline"),
    "bayesian-router": (("hfx_bayesian_router",), "a folder saved by OfflineRouter.save_pretrained"),
    "celo2": (("hfx_celo2",), "a Celo2 meta-weights folder"),
    "selective-ssm-theory": (("hfx_selective_ssm",), "a folder saved by SelectiveSSMForSequenceClassification"),
    "memgas": (("hfx_memgas",), "a folder saved by MemGAS.save_pretrained"),
    "devft": (("hfx_devft",), "a folder saved by DevFTResult.save_pretrained (the `hfx federate --out`)"),
    "sc-gnn": (("si_gnn",), "a folder saved by SelfInterpretableGNN.save_pretrained"),
    "hippoformer": (("hippoformer",), "a folder saved by HippoformerForNextObservation.save_pretrained"),
    "mmtem": (("mmtem",), "a folder saved by MMTEMModel.save_pretrained"),
    "crd": (("hfx_crd",), "a folder saved by CRDPipeline.save_pretrained"),
    "fluent-alignment": (("transformers:",), "a stage folder saved by run_fluent_alignment (a transformers model)"),
}
# publishers without an entry take no `source` (e.g. tail-data generates its data) and refuse one themselves

HFX_REPO_URL = "https://github.com/hfx-org/hfx"


def model_cards_dir() -> Path:
    """The folder holding the card templates (the repository's ``model_cards/``, or the copy in the wheel)."""
    here = Path(__file__).resolve().parent
    for candidate in (here.parent.parent / "model_cards", here / "_model_cards"):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError("hfx model card templates not found (expected `model_cards/` beside `src/`).")


def card_data(
    *,
    method: str,
    arxiv_id: str | None = None,
    base_model: str | list[str] | None = None,
    pipeline_tag: str | None = None,
    library_name: str = "hfx",
    license: str = "apache-2.0",
    tags: list[str] | None = None,
    **extra: Any,
):
    """Build :class:`huggingface_hub.ModelCardData` for an hfx artifact.

    Tags always include ``hfx``, ``method`` and, when given, ``arxiv:<arxiv_id>`` (the Hub links papers that way).
    Unknown keyword arguments are kept as extra metadata (e.g. ``hfx_method``).
    """
    from huggingface_hub import ModelCardData

    all_tags = ["hfx", method, *(tags or [])]
    if arxiv_id:
        all_tags.append(f"arxiv:{arxiv_id}")
    all_tags = list(dict.fromkeys(all_tags))
    return ModelCardData(
        library_name=library_name,
        license=license,
        base_model=base_model,
        pipeline_tag=pipeline_tag,
        tags=all_tags,
        hfx_method=method,
        **extra,
    )


def render_model_card(name: str, data, **template_vars: Any):
    """Render ``model_cards/<name>/README.md`` (a Jinja template) with ``data`` as its YAML front matter.

    Args:
        name (`str`): the card folder under ``model_cards/`` (e.g. ``"thinkmerge"``).
        data (`huggingface_hub.ModelCardData`): metadata, see :func:`card_data`.
        **template_vars: values the template uses (``{{ repo_id }}``, ...).

    Returns:
        `huggingface_hub.ModelCard`.

    Raises:
        FileNotFoundError: if there is no template for ``name``.
    """
    from huggingface_hub import ModelCard

    template = model_cards_dir() / name / "README.md"
    if not template.is_file():
        raise FileNotFoundError(f"No model card template for `name`={name!r} (looked for {template}).")
    template_vars.setdefault("repo_id", f"hfx/{name}")
    return ModelCard.from_template(data, template_str=template.read_text(encoding="utf-8"), **template_vars)


def write_model_card(out_dir: str | Path, name: str, data, **template_vars: Any) -> Path:
    """Render the card for ``name`` and save it as ``out_dir/README.md``; returns that path."""
    out = Path(out_dir) / "README.md"
    out.parent.mkdir(parents=True, exist_ok=True)
    render_model_card(name, data, **template_vars).save(out)
    return out


def publish(
    name: str, out_dir: str | Path, push_to: str | None = None, *, overwrite: bool = False, **kwargs: Any
) -> Path:
    """Write the Hub-ready folder of artifact ``name`` into ``out_dir`` (and push it when ``push_to`` is a repo id).

    Everything is checked before anything is loaded or written: the output folder (see
    :func:`hfx.utils.artifacts.prepare_output_dir`), the ``source`` folder's artifact type (:data:`SOURCE_TYPES`), and,
    with ``push_to``, that a Hub token is available. A writer that fails leaves nothing behind: what it added is
    removed, and so is ``out_dir`` when this call created it.

    Args:
        name (`str`): one of :data:`PUBLISHERS` (``thinkmerge``, ``rmod-value``, ``thr-grpo``, ``prunesid-llava``,
            ``slao``, ``clip-inversion``, ``bayesian-router``, ``celo2``, ``tail-data``, ``selective-ssm-theory``,
            ``memgas``, ``devft``, ``sc-gnn``, ``hippoformer``, ``mmtem``).
        out_dir (`str` or `Path`): destination folder (created); must be new or empty unless ``overwrite``.
        push_to (`str`, *optional*): a Hub repo id; the folder is uploaded with :func:`push_folder_to_hub`.
        overwrite (`bool`, *optional*, defaults to `False`): allow writing into a non-empty ``out_dir``.
        **kwargs: passed to the artifact's writer (e.g. ``source=`` a trained checkpoint folder).

    Raises:
        ValueError: for an unknown ``name``, an empty / non-empty (without ``overwrite``) / file ``out_dir``, a
            ``source`` holding another artifact, or ``push_to`` without a Hub token.
        FileNotFoundError: for a ``source`` that does not exist (or a Hub id not cached while offline).
    """
    from hfx.utils.artifacts import hub_offline, prepare_output_dir, resolve_model
    from hfx.utils.validation import check_choice

    check_choice("name", name, sorted(PUBLISHERS))
    if push_to is not None:
        _check_can_push(push_to, hub_offline())
    source = kwargs.get("source")
    if source is not None and name in SOURCE_TYPES and not (name == "celo2" and Path(source).is_file()):
        allowed, what = SOURCE_TYPES[name]
        kwargs["source"] = resolve_model(str(source), arg="source", allowed=allowed, what=what)
    existed = Path(out_dir).expanduser().is_dir()
    out_dir = prepare_output_dir(out_dir, overwrite=overwrite, arg="out_dir")
    before = {p.name for p in out_dir.iterdir()}
    module, function = PUBLISHERS[name].split(":")
    writer = getattr(importlib.import_module(module), function)
    if push_to and "repo_id" not in kwargs and "repo_id" in inspect.signature(writer).parameters:
        kwargs["repo_id"] = push_to  # the card's usage snippet names the repo the folder is pushed to
    try:
        out = Path(writer(Path(out_dir), **kwargs))
    except BaseException:
        _remove_new_entries(out_dir, before, remove_folder=not existed)  # a failed writer leaves nothing behind
        raise
    if push_to:
        push_folder_to_hub(out, push_to)
    return out


def _remove_new_entries(folder: Path, before: set[str], *, remove_folder: bool) -> None:
    """Undo a failed writer: delete what it added to ``folder`` (and ``folder`` itself when publish created it)."""
    if remove_folder:
        shutil.rmtree(folder, ignore_errors=True)
        return
    for path in folder.iterdir():
        if path.name not in before:
            shutil.rmtree(path, ignore_errors=True) if path.is_dir() else path.unlink(missing_ok=True)


def _check_can_push(repo_id: str, offline: bool) -> None:
    """Refuse ``--push`` / ``push_to`` before anything is written: an invalid repo id, ``HF_HUB_OFFLINE``, or no
    token."""
    from huggingface_hub import get_token
    from huggingface_hub.utils import HFValidationError, validate_repo_id

    try:
        validate_repo_id(repo_id)
    except HFValidationError as err:
        raise ValueError(f"`--push` {repo_id!r} is not a valid Hub repo id (`org/name`): {err}") from None
    if offline:
        raise ValueError("`--push` needs the Hub, but HF_HUB_OFFLINE is set; unset it to push")
    if not get_token():
        raise ValueError("`--push` needs a Hugging Face token: run `hf auth login` or set HF_TOKEN")


def push_folder_to_hub(
    folder: str | Path, repo_id: str, *, private: bool | None = None, token: str | None = None, commit_message=None
) -> str:
    """Create ``repo_id`` if needed and upload ``folder`` (a thin call through ``huggingface_hub.HfApi``).

    Returns:
        `str`: the URL of the commit.
    """
    from huggingface_hub import HfApi

    api = HfApi(token=token)
    api.create_repo(repo_id, private=private, exist_ok=True)
    info = api.upload_folder(
        folder_path=str(folder), repo_id=repo_id, commit_message=commit_message or "Upload with hfx publish"
    )
    return str(getattr(info, "commit_url", info))


def add_to_hf_cache(
    src: str | Path,
    repo_id: str,
    cache_dir: str | Path | None = None,
    revision: str = "main",
    repo_type: str = "model",
) -> str:
    """Copy folder ``src`` into the HF cache as if ``repo_id`` had been downloaded (for offline tests).

    The commit id is a deterministic SHA-1 of the files' paths and bytes. Afterwards, with ``HF_HUB_OFFLINE=1`` and
    ``HF_HUB_CACHE=cache_dir``, ``from_pretrained(repo_id)``, ``snapshot_download(repo_id)`` and
    ``generate(custom_generate=repo_id, trust_remote_code=True)`` resolve to the copy.

    Args:
        src: the folder to copy.
        repo_id (`str`): ``"org/name"``.
        cache_dir: the hub cache (defaults to ``huggingface_hub.constants.HF_HUB_CACHE``).
        revision (`str`, *optional*, defaults to `"main"`).
        repo_type (`str`, *optional*, defaults to `"model"`): ``"model"``, ``"dataset"`` or ``"space"``.

    Returns:
        `str`: the 40-hex commit id written to ``refs/<revision>``.
    """
    from huggingface_hub import constants
    from huggingface_hub.file_download import repo_folder_name

    src = Path(src)
    if not src.is_dir():
        raise ValueError(f"`src` must be an existing folder, but is {str(src)!r}")
    files = sorted(p for p in src.rglob("*") if p.is_file())
    digest = hashlib.sha1()
    for path in files:
        digest.update(str(path.relative_to(src)).encode())
        digest.update(path.read_bytes())
    commit = digest.hexdigest()
    root = Path(cache_dir or constants.HF_HUB_CACHE) / repo_folder_name(repo_id=repo_id, repo_type=repo_type)
    shutil.copytree(src, root / "snapshots" / commit, dirs_exist_ok=True)
    (root / "refs").mkdir(parents=True, exist_ok=True)
    (root / "refs" / revision).write_text(commit)
    return commit


__all__ = [
    "PUBLISHERS",
    "add_to_hf_cache",
    "card_data",
    "model_cards_dir",
    "publish",
    "push_folder_to_hub",
    "render_model_card",
    "write_model_card",
]
