"""Packaging a user expects of an HF library: a license, a changelog, type information, one version."""

import importlib.metadata
import re
from pathlib import Path

import tomllib

import hfx


ROOT = Path(__file__).resolve().parents[1]


def test_license_is_apache_2_as_declared():
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert pyproject["project"]["license"] == "Apache-2.0"
    text = (ROOT / "LICENSE").read_text()
    assert "Apache License" in text and "Version 2.0, January 2004" in text


def test_version_lives_in_one_place():
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "version" not in pyproject["project"], "the version belongs in src/hfx/__init__.py only"
    assert "version" in pyproject["project"]["dynamic"]
    assert pyproject["tool"]["hatch"]["version"]["path"] == "src/hfx/__init__.py"
    assert re.fullmatch(r"\d+\.\d+\.\d+(\.dev\d+|rc\d+)?", hfx.__version__)
    assert importlib.metadata.version("hfx") == hfx.__version__


def test_changelog_names_the_current_version():
    text = (ROOT / "CHANGELOG.md").read_text()
    assert f"## [{hfx.__version__}]" in text
    assert "## [Unreleased]" in text


def test_py_typed_marker_ships():
    assert (ROOT / "src" / "hfx" / "py.typed").is_file()
