"""The documentation site (mkdocs-material + mkdocstrings over the docstrings) builds in strict mode.

Strict mode turns every broken ``::: hfx.x.Name`` reference, missing page, broken link or missing figure into an
error, so a renamed class or a moved module breaks this test rather than the published API reference.
"""

import subprocess
import sys
from pathlib import Path

import pytest


ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_docs_build_strict(tmp_path):
    pytest.importorskip("mkdocs")
    pytest.importorskip("mkdocstrings")
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={"NO_MKDOCS_2_WARNING": "1", "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
        timeout=900,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert (tmp_path / "site" / "index.html").is_file()


def test_every_method_has_a_docs_page_with_api_reference():
    readme = (ROOT / "README.md").read_text()
    pages = sorted((ROOT / "docs" / "methods").glob("*.md"))
    assert len(pages) >= 8
    for page in pages:
        text = page.read_text()
        if page.stem == "vllm":
            continue
        assert "::: hfx." in text, f"{page.name} has no API reference block"
        assert "arxiv.org" in text.lower() or "huggingface.co/papers" in text or "arXiv" in text, page.name
    assert "## Results" in readme
