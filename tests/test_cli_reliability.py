"""Reliability of the ``hfx`` command line and of artifact loading (issue 24).

The CLI cases run the real entry point (``hfx.cli.main``) in one child process (``tests/_cli_runner.py``) under a
memory limit (``RLIMIT_AS``), each in a fresh empty working directory, recording the exit status, stderr and every
file written outside the case's declared outputs. The artifact folders are tiny stand-ins holding only the JSON files
that name what they are: every check must refuse them before any model is built.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import subprocess
import sys
import textwrap
import types
from pathlib import Path

import pytest

from hfx import cli
from hfx._artifacts import artifact_type, check_output_file, prepare_output_dir, require_artifact, resolve_model


REPO = Path(__file__).resolve().parent.parent
MEMORY_LIMIT = 3 * 1024**3  # a default 4096-wide / 32-layer model (the old fallback) needs ~27 GB
ERROR_LINE = re.compile(r"^hfx[\w -]*: error: \S")


# --------------------------------------------------------------------------------------------------------------------
# stand-in artifact folders
# --------------------------------------------------------------------------------------------------------------------


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def make_artifacts(root: Path) -> dict[str, Path]:
    """One folder per artifact kind, as its writer lays it out (JSON only; no weights are needed to be refused)."""
    a = {}
    a["bayesian-router"] = root / "router"
    _write(
        a["bayesian-router"] / "config.json", json.dumps({"encoder_config": {"model_type": "llama"}, "lambda_bt": 1})
    )
    a["rmod-value"] = root / "rmod"
    _write(a["rmod-value"] / "config.json", json.dumps({"model_type": "hfx_rmod_value", "backbone_config": {}}))
    a["thr-grpo"] = root / "thr"
    _write(a["thr-grpo"] / "config.json", json.dumps({"model_type": "llama", "hidden_size": 32}))
    a["slao"] = root / "slao"
    _write(a["slao"] / "adapter_config.json", json.dumps({"peft_type": "SLAO", "base_model_name_or_path": "x"}))
    _write(a["slao"] / "adapter_model.safetensors", "trained adapter bytes")
    a["clip-inversion"] = root / "clip_pipe"
    _write(
        a["clip-inversion"] / "model_index.json",
        json.dumps({"_class_name": ["pipeline_clip_inversion", "CLIPInversionPipeline"]}),
    )
    a["celo2"] = root / "celo2"
    _write(a["celo2"] / "config.json", json.dumps({"features": ["g"], "adafactor_decays": [0.9], "hidden_size": 8}))
    a["thinkmerge"] = root / "thinkmerge"
    _write(a["thinkmerge"] / "custom_generate" / "generate.py", "# stand-in\n")
    a["prunesid-llava"] = root / "prunesid"
    _write(a["prunesid-llava"] / "config.json", json.dumps({"model_type": "prunesid_llava", "prunesid": None}))
    a["junk"] = root / "junk"
    _write(a["junk"] / "config.json", "this is not json")
    a["empty_dir"] = root / "empty_dir"
    a["empty_dir"].mkdir()
    return a


def make_files(root: Path) -> dict[str, Path]:
    from PIL import Image

    f = {"image": root / "photo.png"}
    root.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", (16, 16), (200, 20, 20)).save(f["image"])
    f["mt_bench"] = _write(root / "mt_bench.jsonl", json.dumps({"question_id": 81, "turns": ["Write a poem."]}) + "\n")
    f["empty"] = _write(root / "empty.jsonl", "")
    f["garbage"] = _write(root / "garbage.jsonl", "\x00\x01 not json at all\n")
    f["a_file"] = _write(root / "a_file.txt", "keep me\n")
    f["gsm8k"] = _write(root / "gsm8k.jsonl", json.dumps({"question": "1+1?", "answer": "#### 2"}) + "\n")
    f["old_results"] = _write(root / "old_eval" / "results.json", '{"keep": true}\n')
    return f


# --------------------------------------------------------------------------------------------------------------------
# the defects listed in issue 24, each as a CLI case: (argv, substring the one-line error must contain)
# --------------------------------------------------------------------------------------------------------------------


def issue_cases(a: dict, f: dict, out: Path) -> list[tuple[list[str], str]]:
    return [
        # out of memory before: another artifact's config fell back to a default 4096-wide model
        (["publish", "rmod-value", "--source", str(a["bayesian-router"]), "--out", str(out / "o1")], "--source"),
        (["prune", str(f["image"]), "--model", str(a["thr-grpo"]), "--out", str(out / "o2.png")], "--model"),
        # overwrites
        (["publish", "slao", "--out", str(a["slao"])], "--overwrite"),
        (["publish", "thinkmerge", "--out", ""], "--out"),
        (["eval", "gsm8k", "--data-file", str(f["gsm8k"]), "--out-dir", str(f["old_results"].parent)], "--overwrite"),
        # outputs validated before the compute
        (["eval", "gsm8k", "--data-file", str(f["gsm8k"]), "--out-dir", str(f["a_file"])], "--out-dir"),
        (["synthesize", "an apple", "--steps", "1", "--out", str(out / "apple.bad")], "--out"),
        (["synthesize", "an apple", "--steps", "1", "--out", str(out / "apple")], "--out"),
        # raw tracebacks before
        (["eval", "gsm8k", "--data-file", str(f["empty"]), "--out-dir", str(out / "e1")], "--data-file"),
        (["eval", "gsm8k", "--data-file", str(f["garbage"]), "--out-dir", str(out / "e2")], "--data-file"),
        (["eval", "gsm8k", "--data-file", str(f["mt_bench"]), "--out-dir", str(out / "e3")], "`question`"),
        (["eval", "gsm8k", "--data-file", str(f["a_file"].parent), "--out-dir", str(out / "e4")], "folder"),
        (["prune", str(f["a_file"].parent)], "IMAGE"),
        (["prune", str(f["image"]), "--model", "/nonexistent/llava", "--out", str(out / "p.png")], "--model"),
        (["synthesize", "an apple", "--model", "/nonexistent/clip", "--out", str(out / "s.png")], "--model"),
        (["generate", "2+2?", "--model", "hfx-test-org/not-a-model"], "HF_HUB_OFFLINE"),
        (["publish", "thinkmerge", "--out", str(out / "o3"), "--push", "someone/thinkmerge"], "--push"),
        # misleading before
        (["generate", "2+2?", "--model", str(a["slao"])], "peft:slao"),
        (["generate", "2+2?", "--model", str(a["clip-inversion"])], "CLIPInversionPipeline"),
        (["generate", "2+2?", "--seed", "100000000000000000000"], "--seed"),
        (["eval", "gsm8k", "--data-file", str(f["a_file"].parent), "--out-dir", str(out / "e5")], "is a folder"),
        (["generate", "2+2?", "--temperature", "0"], "--temperature"),
        # silent wrong results before
        (["generate", "  "], "QUESTION"),
        (["generate", "2+2?", "--top-p", "2"], "--top-p"),
        (["eval", "gsm8k", "--strategies", "greedy,greedy", "--data-file", str(f["gsm8k"])], "--strategies"),
        (["publish", "thr-grpo", "--source", str(a["slao"]), "--out", str(out / "o4")], "--source"),
        (["publish", "thinkmerge", "--source", str(a["slao"]), "--out", str(out / "o5")], "--source"),
    ]


# --------------------------------------------------------------------------------------------------------------------
# the fuzz cases: hostile arguments for every sub-command in hfx.cli.COMMANDS
# --------------------------------------------------------------------------------------------------------------------

INPUT_WORDS = ("model", "source", "data", "file", "image", "input", "checkpoint", "path", "config", "weights")
FUZZ_SEED = 24
CASES_PER_COMMAND = 12


def _subparsers() -> dict[str, argparse.ArgumentParser]:
    parser = cli.build_parser()
    action = next(x for x in parser._actions if isinstance(x, argparse._SubParsersAction))
    return {name: action.choices[name] for name in cli.COMMANDS if name in action.choices}


def _is_output(action) -> bool:
    return "out" in action.dest.split("_") or action.dest.startswith("out")


def _is_input(action) -> bool:
    return not _is_output(action) and any(w in action.dest for w in INPUT_WORDS)


def _type_name(action) -> str | None:
    kind = action.type
    return getattr(kind, "__name__", None) if kind is not None else None


def _hostile_values(action, a: dict, f: dict, out: Path, model_like_commands: bool) -> list[str]:
    """Values that no sub-command may accept for ``action`` (so every case must end in a clean refusal)."""
    if action.choices is not None:
        return ["not-a-choice", "", "x" * 300]
    kind = _type_name(action)
    if kind == "int":
        return ["abc", "1.5", "", "nan", "9" * 30, "-" + "9" * 30, "0x10"]
    if kind == "float":
        return ["abc", "nan", "inf", "-inf", "1e999", ""]
    if _is_output(action):
        return ["", str(f["a_file"] / "below_a_file"), str(a["slao"])]
    if _is_input(action):
        values = ["", "/nonexistent/hfx-fuzz", str(a["junk"]), str(a["empty_dir"])]
        if model_like_commands and "model" in action.dest:  # none of these is a model for generate/eval/prune/synth
            values += [str(a[k]) for k in ("bayesian-router", "rmod-value", "slao", "clip-inversion", "celo2")]
        return values
    return []


OUR_MODEL_COMMANDS = ("generate", "eval", "prune", "synthesize")


def fuzz_cases(a: dict, f: dict, out: Path) -> list[dict]:
    rng = random.Random(FUZZ_SEED)
    cases = []
    for name, sub in _subparsers().items():
        actions = [x for x in sub._actions if not isinstance(x, argparse._HelpAction)]
        positionals = [x for x in actions if not x.option_strings]
        optionals = [x for x in actions if x.option_strings and x.nargs != 0]
        mutable = [
            x for x in positionals + optionals if _hostile_values(x, a, f, out, name in OUR_MODEL_COMMANDS)
        ]  # fmt: skip
        cases.append({"argv": [name], "outputs": []})  # missing positionals
        cases.append({"argv": [name, "--no-such-flag", "1"], "outputs": []})
        for i in range(CASES_PER_COMMAND):
            if not mutable:
                break
            targets = rng.sample(mutable, k=min(len(mutable), rng.choice((1, 1, 2))))
            values, outputs = {}, []
            for action in positionals + [x for x in optionals if x.required]:
                if action in targets:
                    continue
                if action.choices is not None:
                    values[action] = rng.choice(sorted(action.choices))
                elif _is_output(action):
                    values[action] = str(out / f"fuzz-{name}-{i}")
                    outputs.append(values[action])
                elif "image" in action.dest:
                    values[action] = str(f["image"])
                else:
                    values[action] = "What is 2 + 2?"
            for action in targets:
                values[action] = rng.choice(_hostile_values(action, a, f, out, name in OUR_MODEL_COMMANDS))
                if _is_output(action):
                    outputs.append(values[action])
            argv = [name]
            for action in positionals:
                argv.append(values[action])
            for action in optionals:
                if action in values:
                    argv += [action.option_strings[-1], values[action]]
            cases.append({"argv": argv, "outputs": [o for o in outputs if o]})
    return cases


# --------------------------------------------------------------------------------------------------------------------
# one child process for all CLI cases
# --------------------------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def cli_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("cli_fixtures")
    artifacts = make_artifacts(root / "artifacts")
    files = make_files(root / "files")
    out = tmp_path_factory.mktemp("cli_out")
    issue = issue_cases(artifacts, files, out)
    fuzz = fuzz_cases(artifacts, files, out)
    spec = {
        "memory_bytes": MEMORY_LIMIT,
        "watch": [str(root)],
        "cases": [{"argv": argv, "outputs": [str(out)]} for argv, _ in issue] + fuzz,
    }
    spec_path = out.parent / f"{out.name}-cases.json"
    result_path = out.parent / f"{out.name}-results.json"
    spec_path.write_text(json.dumps(spec))
    env = {**os.environ, "PYTHONPATH": str(REPO / "src"), "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    env.pop("HFX_DEBUG", None)
    proc = subprocess.run(
        [sys.executable, str(REPO / "tests" / "_cli_runner.py"), str(spec_path), str(result_path)],
        env=env, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = json.loads(result_path.read_text())
    assert len(results) == len(spec["cases"])
    return {
        "issue": list(zip(issue, results[: len(issue)], strict=True)),
        "fuzz": results[len(issue) :],
        "artifacts": artifacts,
        "files": files,
        "out": out,
    }


def _assert_clean_refusal(r: dict) -> None:
    where = f"hfx {' '.join(map(repr, r['argv']))}"
    assert r["escaped"] is None, f"{where}: an exception escaped main:\n{r['escaped']}"
    assert "Traceback" not in r["stderr"], f"{where}: traceback printed:\n{r['stderr']}"
    errors = [line for line in r["stderr"].splitlines() if ERROR_LINE.match(line)]
    assert len(errors) == 1, f"{where}: expected one `hfx ...: error: ...` line, got:\n{r['stderr']}"
    assert r["rc"] == 2, f"{where}: exit status {r['rc']} (bad input must give 2):\n{r['stderr']}"
    assert not r["strays"], f"{where}: wrote outside its output: {r['strays']}"


@pytest.mark.slow
def test_issue_24_cli_defects_give_one_line_errors_before_any_work(cli_run):
    for (argv, expected), r in cli_run["issue"]:
        _assert_clean_refusal(r)
        assert expected in r["stderr"], f"hfx {argv}: the error should mention {expected!r}:\n{r['stderr']}"
    a, f, out = cli_run["artifacts"], cli_run["files"], cli_run["out"]
    # nothing was overwritten or created by the refused commands
    assert (a["slao"] / "adapter_model.safetensors").read_text() == "trained adapter bytes"
    assert not (a["slao"] / "README.md").exists()
    assert f["old_results"].read_text() == '{"keep": true}\n'
    assert not (out / "o3").exists(), "--push without a token must be refused before the folder is written"
    assert not any(out.glob("o*")) and not any(out.glob("*.png")) and not any(out.glob("apple*"))


@pytest.mark.slow
def test_cli_fuzz_every_command_refuses_hostile_arguments_cleanly(cli_run):
    results = cli_run["fuzz"]
    commands = {r["argv"][0] for r in results}
    assert set(_subparsers()) <= commands
    assert len(results) >= 2 * len(commands)
    failures = []
    for r in results:
        try:
            _assert_clean_refusal(r)
        except AssertionError as err:
            failures.append(str(err).split("\nassert")[0])
    assert not failures, "\n\n".join(failures)


# --------------------------------------------------------------------------------------------------------------------
# the dispatcher: errors are a property of hfx.cli.main, inherited by every command
# --------------------------------------------------------------------------------------------------------------------


@pytest.fixture
def fake_command(monkeypatch):
    module = types.ModuleType("hfx_fake_command")
    module.HELP = "a command that fails"
    module.add_arguments = lambda p: p.add_argument("--raise", dest="to_raise", default="value")

    def run(args):
        errors = {
            "value": ValueError("`--x` must be >= 1,\nbut is 0"),
            "type": TypeError("bad type"),
            "os": PermissionError(13, "Permission denied"),
            "key": KeyError("question"),
            "runtime": RuntimeError("shape mismatch"),
        }
        raise errors[args.to_raise]

    module.run = run
    monkeypatch.setitem(sys.modules, "hfx_fake_command", module)
    monkeypatch.setitem(cli.COMMANDS, "fake", "hfx_fake_command")
    monkeypatch.delenv("HFX_DEBUG", raising=False)
    return module


@pytest.mark.parametrize(("kind", "rc"), [("value", 2), ("type", 2), ("os", 2), ("key", 2), ("runtime", 1)])
def test_dispatcher_prints_one_line_and_no_traceback(fake_command, capsys, kind, rc):
    assert cli.main(["fake", "--raise", kind]) == rc
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert len(err.strip().splitlines()) == 1 and err.startswith("hfx fake: error: ")
    if kind == "value":
        assert err.strip() == "hfx fake: error: `--x` must be >= 1, but is 0"
    if kind == "runtime":
        assert "RuntimeError: shape mismatch" in err and "--debug" in err


def test_dispatcher_debug_flag_and_env_reraise(fake_command, monkeypatch):
    with pytest.raises(ValueError, match="must be >= 1"):
        cli.main(["--debug", "fake", "--raise", "value"])
    monkeypatch.setenv("HFX_DEBUG", "1")
    with pytest.raises(RuntimeError, match="shape mismatch"):
        cli.main(["fake", "--raise", "runtime"])


def test_python_m_hfx_runs_the_cli():
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    proc = subprocess.run(
        [sys.executable, "-m", "hfx", "generate", "2+2?", "--top-p", "1.5"],
        env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert proc.returncode == 2 and "argument --top-p" in proc.stderr and "Traceback" not in proc.stderr


# --------------------------------------------------------------------------------------------------------------------
# hfx._artifacts: the shared checks
# --------------------------------------------------------------------------------------------------------------------


def test_artifact_type_names_every_artifact(tmp_path):
    a = make_artifacts(tmp_path)
    assert artifact_type(a["bayesian-router"]) == "hfx_bayesian_router"
    assert artifact_type(a["rmod-value"]) == "hfx_rmod_value"
    assert artifact_type(a["thr-grpo"]) == "llama"
    assert artifact_type(a["slao"]) == "peft:slao"
    assert artifact_type(a["clip-inversion"]) == "diffusers:CLIPInversionPipeline"
    assert artifact_type(a["celo2"]) == "hfx_celo2"
    assert artifact_type(a["thinkmerge"]) == "hfx_thinkmerge"
    assert artifact_type(a["prunesid-llava"]) == "prunesid_llava"
    assert artifact_type(a["junk"]) == "config:unreadable"
    assert artifact_type(a["empty_dir"]) is None
    assert require_artifact(a["thr-grpo"], ("transformers:",), arg="--model", what="an LM") == "llama"
    for key in ("bayesian-router", "rmod-value", "slao", "clip-inversion", "celo2", "prunesid-llava", "junk"):
        with pytest.raises(ValueError, match="`--model` must be an LM"):
            require_artifact(a[key], ("transformers:",), arg="--model", what="an LM")


def test_output_guards(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "keep.txt").write_text("x")
    for bad in ("", "  "):
        with pytest.raises(ValueError, match="`--out` must name"):
            prepare_output_dir(bad)
    with pytest.raises(ValueError, match="current directory.*--overwrite"):
        prepare_output_dir(".")
    with pytest.raises(ValueError, match="existing file"):
        prepare_output_dir(tmp_path / "keep.txt")
    with pytest.raises(ValueError, match="is a file"):
        prepare_output_dir(tmp_path / "keep.txt" / "sub")
    assert prepare_output_dir(tmp_path / "new" / "dir").is_dir()
    assert prepare_output_dir(".", overwrite=True) == Path(".")
    with pytest.raises(ValueError, match=r"must end in one of \.png"):
        check_output_file(tmp_path / "image", suffixes=(".png",))
    with pytest.raises(ValueError, match="exists.*--overwrite"):
        check_output_file(tmp_path / "keep.txt", suffixes=(".txt",))
    with pytest.raises(ValueError, match="is a folder"):
        check_output_file(tmp_path / "new", suffixes=(".png",))
    assert check_output_file(tmp_path / "keep.txt", suffixes=(".txt",), overwrite=True).name == "keep.txt"


def test_resolve_model_offline_is_immediate_and_says_how_to_fix(tmp_path, monkeypatch):
    import socket

    def no_network(*args, **kwargs):
        raise AssertionError("resolve_model must not touch the network")

    monkeypatch.setattr(socket, "getaddrinfo", no_network)
    monkeypatch.setattr(socket.socket, "connect", no_network)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(FileNotFoundError, match="HF_HUB_OFFLINE.*local folder"):
        resolve_model("hfx-test-org/not-a-model")
    with pytest.raises(FileNotFoundError, match="does not exist"):
        resolve_model(str(tmp_path / "missing"))
    with pytest.raises(ValueError, match="is a file"):
        resolve_model(str(_write(tmp_path / "f.txt", "x")))
    a = make_artifacts(tmp_path / "a")
    assert resolve_model(str(a["thr-grpo"]), allowed=("transformers:",)) == str(a["thr-grpo"])


# --------------------------------------------------------------------------------------------------------------------
# the Python loaders refuse another artifact's folder before allocating
# --------------------------------------------------------------------------------------------------------------------


def test_value_model_refuses_other_artifacts_and_missing_backbone(tmp_path):
    from hfx.generation.rmod import MultiObjectiveValueModel

    a = make_artifacts(tmp_path)
    for key in ("bayesian-router", "thr-grpo", "celo2"):
        with pytest.raises(ValueError, match="cannot load"):
            MultiObjectiveValueModel.from_pretrained(a[key])
    folder = _write(tmp_path / "nobackbone" / "config.json", json.dumps({"model_type": "hfx_rmod_value"})).parent
    with pytest.raises(ValueError, match="backbone_config"):
        MultiObjectiveValueModel.from_pretrained(folder)


def test_prunesid_config_refuses_a_missing_prunesid_key(tmp_path):
    from transformers import AutoConfig, LlavaConfig

    import hfx  # noqa: F401 -- registers the prunesid_llava type
    from hfx.prunesid.configuration import PruneSIDLlavaConfig

    config = PruneSIDLlavaConfig(prunesid={"num_visual_tokens": 64})
    config.save_pretrained(tmp_path / "ok")
    assert AutoConfig.from_pretrained(tmp_path / "ok").prunesid == {"num_visual_tokens": 64}
    data = json.loads((tmp_path / "ok" / "config.json").read_text())
    data.pop("prunesid")
    _write(tmp_path / "nokey" / "config.json", json.dumps(data))
    with pytest.raises(ValueError, match="prunesid"):
        AutoConfig.from_pretrained(tmp_path / "nokey")
    with pytest.raises(ValueError, match="prunesid"):
        PruneSIDLlavaConfig.from_pretrained(tmp_path / "nokey")
    data["prunesid"] = None  # explicitly unpruned: allowed
    _write(tmp_path / "null" / "config.json", json.dumps(data))
    assert AutoConfig.from_pretrained(tmp_path / "null").prunesid is None
    LlavaConfig().save_pretrained(tmp_path / "stock")  # a stock llava folder still converts
    assert PruneSIDLlavaConfig.from_pretrained(tmp_path / "stock").prunesid is None
    with pytest.raises(ValueError, match="model_type 'llama'"):
        PruneSIDLlavaConfig.from_pretrained(make_artifacts(tmp_path / "a")["thr-grpo"])


def test_offline_router_refuses_another_artifacts_folder(tmp_path):
    from hfx.routing import OfflineRouter

    a = make_artifacts(tmp_path)
    for key in ("rmod-value", "thr-grpo", "celo2"):
        with pytest.raises(ValueError, match="OfflineRouter.from_pretrained cannot load .*not a BayesianRouter offline"):
            OfflineRouter.from_pretrained(str(a[key]))


def test_rmod_refuses_nan_values():
    import torch

    from hfx.generation.rmod.generate import _call_value_function

    ids, mask = torch.ones(2, 3, dtype=torch.long), torch.ones(2, 3, dtype=torch.long)
    good = _call_value_function(lambda i, m: torch.zeros(2, 2), ids, mask, 1, None, False)
    assert good.shape == (2, 2)
    for bad in (float("nan"), float("inf")):
        with pytest.raises(ValueError, match="NaN or infinite"):
            _call_value_function(lambda i, m, b=bad: torch.full((2, 2), b), ids, mask, 1, None, False)


def test_thinkmerge_refuses_out_of_vocabulary_think_end_and_empty_input(tiny_llama):
    import torch

    import hfx

    model, tok = tiny_llama
    ids = tok(["2+2?"], return_tensors="pt").input_ids
    with pytest.raises(ValueError, match="`think_end` holds token ids outside the vocabulary"):
        model.generate(ids, custom_generate=hfx.thinkmerge, think_end=[10**9], num_traces=2, max_new_tokens=2)
    with pytest.raises(ValueError, match="`input_ids` is empty"):
        model.generate(
            torch.ones(1, 0, dtype=torch.long), custom_generate=hfx.thinkmerge, think_end=[5], num_traces=2,
            max_new_tokens=2,
        )  # fmt: skip


# --------------------------------------------------------------------------------------------------------------------
# progress, partial results, strays
# --------------------------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tiny_lm_folder(tmp_path_factory):
    from hfx.testing import tiny_llama

    model, tok = tiny_llama()
    folder = tmp_path_factory.mktemp("tiny_lm")
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    return str(folder)


def test_generate_shows_per_token_progress(tiny_lm_folder, capsys):
    argv = ["generate", "2+2?", "--strategy", "greedy", "--model", tiny_lm_folder, "--max-thinking-tokens", "3",
            "--max-new-tokens", "2"]  # fmt: skip
    assert cli.main(argv) == 0
    err = capsys.readouterr().err
    counts = [int(n) for n in re.findall(r"\| *(\d+)/5 ", err)]
    assert "decoding steps" in err and counts and max(counts) >= 2, err


def test_eval_writes_partial_results_as_it_goes(tiny_lm_folder, tmp_path, monkeypatch, capsys):
    from hfx.generation.thinkmerge import baselines

    real, calls = baselines.run_strategies, []

    def interrupted_after_first_batch(*args, **kwargs):
        calls.append(1)
        if len(calls) > 1:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(baselines, "run_strategies", interrupted_after_first_batch)
    data = _write(
        tmp_path / "g.jsonl", "\n".join(json.dumps({"question": f"{i}+1?", "answer": "#### 1"}) for i in range(3))
    )
    out = tmp_path / "eval"
    argv = ["eval", "gsm8k", "--strategies", "greedy", "--limit", "3", "--batch-size", "1", "--data-file", str(data),
            "--model", tiny_lm_folder, "--max-thinking-tokens", "2", "--max-new-tokens", "2", "--out-dir", str(out)]  # fmt: skip
    assert cli.main(argv) == 130
    partial = json.loads((out / "results.partial.json").read_text())
    assert [q["question"] for q in partial["questions"]] == ["0+1?"] and "greedy" in partial["questions"][0]
    assert not (out / "results.json").exists()
    assert "decoding steps" in capsys.readouterr().err


def test_offline_router_trainer_default_args_leave_no_stray_folder(tmp_path, monkeypatch):
    from hfx.routing import OfflineRouterTrainer
    from hfx.routing.hub import _demo_router

    monkeypatch.chdir(tmp_path)
    trainer = OfflineRouterTrainer(_demo_router(), train_dataset=None)
    assert not Path(trainer.args.output_dir).resolve().is_relative_to(tmp_path.resolve())
    assert list(tmp_path.iterdir()) == []


def test_prune_picture_methods_follow_prunesid_methods():
    from hfx.commands.prune import PICTURE_METHODS
    from hfx.prunesid.config import METHODS

    assert set(PICTURE_METHODS) == set(METHODS) - {"fastv"}


def test_publish_push_checks_the_token_before_writing(tmp_path, monkeypatch):
    import huggingface_hub

    from hfx.hub import publish

    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    monkeypatch.setattr(huggingface_hub, "get_token", lambda: None)
    with pytest.raises(ValueError, match="--push` needs a Hugging Face token"):
        publish("thinkmerge", tmp_path / "out", push_to="someone/thinkmerge")
    with pytest.raises(ValueError, match="not a valid Hub repo id"):
        publish("thinkmerge", tmp_path / "out", push_to="not a repo id!")
    assert not (tmp_path / "out").exists()


def test_rmod_refuses_empty_input_ids(tiny_llama):
    import torch

    import hfx

    model, _ = tiny_llama
    with pytest.raises(ValueError, match="`input_ids` is empty"):
        model.generate(
            torch.ones(1, 0, dtype=torch.long), custom_generate=hfx.rmod, value_function=lambda i, m: torch.zeros(1, 2),
            num_branches=2, do_sample=True, max_new_tokens=2,
        )  # fmt: skip


def test_default_clip_never_asks_transformers_to_resolve_a_hub_id(monkeypatch):
    import transformers

    import hfx._artifacts
    from hfx.pipelines.clip_inversion import hub

    monkeypatch.setattr(hfx._artifacts, "_cached_snapshot", lambda repo_id: None)  # the paper's CLIP is not cached

    def refuse(name, *args, **kwargs):
        raise AssertionError(f"from_pretrained({name!r}) would look the Hub up when the CLIP is not cached")

    monkeypatch.setattr(transformers.CLIPModel, "from_pretrained", refuse)
    monkeypatch.setattr(transformers.CLIPProcessor, "from_pretrained", refuse)
    pipe, _, _, description = hub.load_clip(None)
    assert pipe is None and "tiny random CLIP" in description


@pytest.mark.slow
@pytest.mark.real_model
def test_publish_slao_default_makes_no_network_lookup(tmp_path):
    """`hfx publish slao` on the embedded default model, with the HF offline switches unset, never resolves a host
    name (issue 24: PEFT used to fetch the base model's config from the Hub)."""
    from hfx.models import is_default_model_available

    if not is_default_model_available():
        pytest.skip("the embedded default model is not installed")
    code = textwrap.dedent(
        f"""
        import socket, sys
        lookups = []
        def refuse(host, *args, **kwargs):
            lookups.append(host)
            raise OSError("network disabled by the test")
        socket.getaddrinfo = refuse
        from hfx.cli import main
        rc = main(["publish", "slao", "--out", {str(tmp_path / "slao")!r}])
        print("RC", rc, "LOOKUPS", sorted(set(map(str, lookups))))
        """
    )
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE")
    }
    env["PYTHONPATH"] = str(REPO / "src")
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=600)
    assert "RC 0 LOOKUPS []" in proc.stdout, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert (tmp_path / "slao" / "adapter_config.json").is_file()
