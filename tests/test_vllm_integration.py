"""The vLLM backend's main-environment side: light imports, the install hint, the CLI's `--backend vllm` error, the
setup script's guard. (The vLLM-dependent tests are in test_vllm_backend.py and run in .venv-vllm.)"""

import os
import subprocess
import sys
import types
from pathlib import Path

import pytest


ROOT = Path(__file__).resolve().parent.parent


def _python(code: str) -> str:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True).stdout


def test_integration_and_cli_modules_do_not_import_vllm():
    out = _python(
        "import sys, hfx, hfx.integrations.vllm as v, hfx.commands.generate, hfx.commands.eval\n"
        "v.is_vllm_available()\n"
        "print('vllm' in sys.modules, 'torch' in sys.modules)"
    )
    assert out.split() == ["False", "False"]


@pytest.fixture
def no_vllm(monkeypatch):
    import hfx.integrations.vllm as integration

    monkeypatch.setattr(integration, "is_vllm_available", lambda: False)
    return integration


def test_require_vllm_names_both_install_paths(no_vllm):
    assert not no_vllm.is_vllm_available()
    with pytest.raises(ImportError, match=r"pip install 'hfx\[vllm\]'.*scripts/setup --vllm"):
        no_vllm.require_vllm("thinkmerge_vllm")
    with pytest.raises(ImportError, match="load_vllm"):
        no_vllm.load_vllm()


@pytest.mark.parametrize(
    "argv", [["generate", "What is 2+2?", "--backend", "vllm"], ["eval", "gsm8k", "--backend", "vllm", "--limit", "1"]]
)
def test_cli_backend_vllm_fails_at_once_without_vllm(no_vllm, monkeypatch, capsys, argv):
    import hfx.models

    def boom(*args, **kwargs):
        raise AssertionError("no model may be loaded before the backend check")

    monkeypatch.setattr(hfx.models, "load_causal_lm", boom)
    from hfx.cli import main

    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert err.startswith(f"hfx {argv[0]}: error: `--backend vllm` needs vLLM") and "scripts/setup --vllm" in err


def test_cli_backend_option_defaults_to_hf():
    from hfx.cli import build_parser

    args = build_parser().parse_args(["generate", "Q"])
    assert args.backend == "hf"
    with pytest.raises(SystemExit):
        build_parser().parse_args(["generate", "Q", "--backend", "sglang"])


def test_has_logits_processor_accepts_class_or_qualified_name():
    from hfx.integrations.vllm import has_logits_processor

    class Proc:  # stands in for ThinkMergeLogitsProcessor
        pass

    def engine(processors):
        config = types.SimpleNamespace(model_config=types.SimpleNamespace(logits_processors=processors))
        return types.SimpleNamespace(llm_engine=types.SimpleNamespace(vllm_config=config))

    assert has_logits_processor(engine([Proc]), Proc)
    assert has_logits_processor(engine([f"{Proc.__module__}.{Proc.__qualname__}"]), Proc)
    assert not has_logits_processor(engine([]), Proc)
    assert not has_logits_processor(engine(None), Proc)
    assert not has_logits_processor(engine(["some.other.Processor"]), Proc)


def test_setup_vllm_refuses_the_main_environment(tmp_path):
    venv = tmp_path / "same"
    env = {**os.environ, "HFX_VENV": str(venv), "HFX_VLLM_VENV": str(venv)}
    result = subprocess.run(
        ["bash", str(ROOT / "scripts" / "setup"), "--vllm"], capture_output=True, text=True, env=env, timeout=60
    )
    assert result.returncode == 2
    assert "refusing to install vLLM into the main environment" in result.stderr
    assert not venv.exists()
