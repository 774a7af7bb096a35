"""``hfx publish thinkmerge``: the self-contained Hub folder of the ThinkMerge ``custom_generate`` method.

Layout (transformers' ``custom_generate`` convention)::

    <out_dir>/
      custom_generate/generate.py   # a verbatim copy of hfx/generation/thinkmerge/generate.py (torch + transformers)
      README.md                     # rendered from model_cards/thinkmerge/README.md, tagged `custom_generate`
      (model files)                 # when `source=` names a model folder, its files are copied alongside

Load it by local path with ``model.generate(custom_generate=str(out_dir), trust_remote_code=True, ...)`` or push it
with ``hfx publish thinkmerge --out DIR --push ORG/NAME``.

The repo id must not be one of hfx's ``custom_generate`` names (``"thinkmerge"``, ``"hfx/thinkmerge"``, ...): in a
process that imported hfx those names resolve to the in-package method before any Hub repo (see
:mod:`hfx.generation.registry` for the resolution order), so such a repo's own code would never run there.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from . import generate as _generate_module


ARXIV_ID = "2512.02874"
DEFAULT_REPO_ID = "your-username/thinkmerge"
"""The placeholder repo id of the card's example: not an hfx ``custom_generate`` name, so it cannot be shadowed."""


def generate_source_path() -> Path:
    """Path of the self-contained ``generate.py`` that is published as ``custom_generate/generate.py``."""
    return Path(_generate_module.__file__)


def publish(out_dir: str | Path, source: str | Path | None = None, repo_id: str = DEFAULT_REPO_ID, **kwargs) -> Path:
    """Write the Hub-ready ThinkMerge folder.

    Args:
        out_dir (`str` or `Path`): destination (created).
        source (`str` or `Path`, *optional*): a model folder whose files (config, weights, tokenizer) are copied into
            ``out_dir`` so the repo is a model with ThinkMerge as its ``custom_generate``.
        repo_id (`str`, *optional*, defaults to `"your-username/thinkmerge"`): the id shown in the card's example
            (``hfx publish thinkmerge --push ORG/NAME`` passes ``ORG/NAME``).
        **kwargs: extra template variables for the card.

    Returns:
        `Path`: ``out_dir``.

    Raises:
        ValueError: if ``source`` is given but is not a folder, or ``repo_id`` is an hfx ``custom_generate`` name.
    """
    from hfx.generation.registry import CUSTOM_GENERATE_NAMES
    from hfx.hub import card_data, write_model_card

    if repo_id in CUSTOM_GENERATE_NAMES:
        raise ValueError(
            f"`repo_id`={repo_id!r} is an hfx custom_generate name: where hfx is imported, "
            f"`custom_generate={repo_id!r}` runs the in-package ThinkMerge, never this repo's code. Pick another id "
            f"(e.g. {DEFAULT_REPO_ID!r})."
        )

    out_dir = Path(out_dir)
    base_model = None
    if source is not None:
        source = Path(source)
        if not source.is_dir():
            raise ValueError(f"`source` must be a model folder, but is {str(source)!r}")
        shutil.copytree(
            source, out_dir, dirs_exist_ok=True, ignore=shutil.ignore_patterns("custom_generate", "README.md")
        )
        base_model = _base_model_of(source)
    target = out_dir / "custom_generate" / "generate.py"
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(generate_source_path(), target)
    data = card_data(
        method="thinkmerge",
        arxiv_id=ARXIV_ID,
        base_model=base_model,
        pipeline_tag="text-generation",
        library_name="transformers",
        tags=["custom_generate", "reasoning", "ensembling"],
    )
    write_model_card(out_dir, "thinkmerge", data, repo_id=repo_id, **kwargs)
    return out_dir


def _base_model_of(folder: Path) -> str | None:
    import json

    config = folder / "config.json"
    if not config.is_file():
        return None
    name = json.loads(config.read_text()).get("_name_or_path")
    return name if name and "/" in name and not Path(name).exists() else None


__all__ = ["ARXIV_ID", "DEFAULT_REPO_ID", "generate_source_path", "publish"]
