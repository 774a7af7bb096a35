"""Artifact identity (issue 30 item 1, issue 30 item 6): every hfx loader and saver runs the one guard of
:mod:`hfx.utils.artifacts`.

One saved folder per artifact kind is written by its real writer (tiny models); then, for every pair:

* each loader refuses each other kind's folder with one line naming both types, before building anything;
* each saver refuses to write into each other kind's folder, and the folder's bytes stay the same;
* each loader says "no such folder" for a missing path, names a truncated safetensors file or a corrupt JSON file,
  and names a required field deleted from the saved config;

plus the CLI's ``--model`` checks (``hfx generate`` / ``hfx federate`` on an SC-GNN folder, an unreachable Hub),
DevFT given a SLAO adapter folder (no Hub look-up) and ``hfx publish memgas`` without its encoder (nothing written).
On the code before this change the pairs loaded freshly initialised models, wrote mixed folders, and the CLI blamed
the tokenizer.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import hfx  # noqa: F401 -- the registrations hfx arranges on import (PEFT's SLAO type, Auto classes)
from hfx.utils.artifacts import ARTIFACTS, ArtifactTypeError, artifact_type


REPO = Path(__file__).resolve().parent.parent

# --------------------------------------------------------------------------------------------------------------------
# one saved folder per kind, written by its real writer
# --------------------------------------------------------------------------------------------------------------------


def _tiny_llama_config():
    from hfx.testing import tiny_llama

    return tiny_llama()[0].config


def _fake_embedder(texts):
    """A deterministic ``list[str] -> (n, 8)`` embedder (no model)."""
    rows = [torch.randn(8, generator=torch.Generator().manual_seed(sum(map(ord, t)) % 10_007)) for t in texts]
    return torch.nn.functional.normalize(torch.stack(rows), dim=-1)


def _build_selective_ssm():
    from hfx.models.selective_ssm import SelectiveSSMConfig, SelectiveSSMForSequenceClassification

    return SelectiveSSMForSequenceClassification(SelectiveSSMConfig(hidden_size=4, mlp_hidden_size=4))


def _build_mmtem():
    from hfx.models.hippoformer import MMTEMConfig, MMTEMModel

    return MMTEMModel(MMTEMConfig())


def _build_hippoformer():
    from hfx.models.hippoformer import HippoformerConfig, HippoformerForNextObservation

    return HippoformerForNextObservation(HippoformerConfig())


def _build_si_gnn():
    from hfx.gnn.self_consistency import SelfInterpretableGNN, SelfInterpretableGNNConfig

    return SelfInterpretableGNN(SelfInterpretableGNNConfig(hidden_size=8))


def _build_rmod():
    from hfx.generation.rmod import MultiObjectiveValueConfig, MultiObjectiveValueModel

    return MultiObjectiveValueModel(
        MultiObjectiveValueConfig(backbone_config=_tiny_llama_config().to_dict(), num_objectives=2)
    )


def _build_prunesid():
    from hfx.prunesid.configuration import PruneSIDLlavaConfig, as_prunesid_config
    from hfx.prunesid.modeling import PruneSIDLlavaForConditionalGeneration
    from hfx.testing import tiny_llava

    config = as_prunesid_config(tiny_llava()[0].config, PruneSIDLlavaConfig)
    return PruneSIDLlavaForConditionalGeneration(config)


def _build_celo2():
    from hfx.optim.celo2 import Celo2MetaWeights

    return Celo2MetaWeights()


def _build_offline_router():
    from hfx.routing import OfflineRouter

    return OfflineRouter(encoder_config=_tiny_llama_config().to_dict(), rm_names=["rm_a", "rm_b"])


def _build_online_router():
    from hfx.routing import ThompsonRouter

    return ThompsonRouter(torch.eye(2, 4))


def _build_memgas():
    from hfx.memory import MemGAS, MemGASConfig
    from hfx.memory.memgas.hub import DEMO_SESSIONS

    memory = MemGAS(MemGASConfig(association_start_session=1), embedder=_fake_embedder)
    sessions, summaries, keywords = zip(*DEMO_SESSIONS)
    memory.add_sessions(list(sessions), summaries=list(summaries), keywords=list(keywords))
    return memory


def _build_clip_pipeline():
    from hfx.pipelines.clip_inversion import CLIPInversionPipeline
    from hfx.testing import tiny_clip

    model, processor = tiny_clip()
    return CLIPInversionPipeline(model, processor, inr_hidden_features=8, inr_hidden_layers=1)


def _save_peft(config_cls, folder: Path) -> None:
    from peft import get_peft_model

    from hfx.testing import tiny_llama

    get_peft_model(tiny_llama()[0], config_cls(r=2, target_modules=["q_proj"])).save_pretrained(str(folder))


def _write_slao(folder: Path) -> None:
    from hfx.tuners.slao import SLAOConfig

    _save_peft(SLAOConfig, folder)


def _write_lora(folder: Path) -> None:
    from peft import LoraConfig

    _save_peft(LoraConfig, folder)


def _write_llama(folder: Path) -> None:
    from hfx.testing import tiny_llama

    model, tok = tiny_llama()
    model.save_pretrained(folder)
    tok.save_pretrained(folder)


def _publish(name):
    def write(folder: Path) -> None:
        from hfx.hub import publish

        publish(name, folder)

    return write


def _save_with(build):
    def write(folder: Path) -> None:
        obj = build()
        (obj.save if hasattr(obj, "save") and not hasattr(obj, "save_pretrained") else obj.save_pretrained)(folder)

    return write


# kind -> (artifact type its folder has, writer)
KINDS = {
    "selective_ssm": ("hfx_selective_ssm", _save_with(_build_selective_ssm)),
    "mmtem": ("mmtem", _save_with(_build_mmtem)),
    "hippoformer": ("hippoformer", _save_with(_build_hippoformer)),
    "si_gnn": ("si_gnn", _save_with(_build_si_gnn)),
    "rmod_value": ("hfx_rmod_value", _save_with(_build_rmod)),
    "prunesid": ("prunesid_llava", _publish("prunesid-llava")),
    "celo2": ("hfx_celo2", _save_with(_build_celo2)),
    "offline_router": ("hfx_bayesian_router", _save_with(_build_offline_router)),
    "online_router": ("hfx_online_router", _save_with(_build_online_router)),
    "memgas": ("hfx_memgas", _save_with(_build_memgas)),
    "devft": ("hfx_devft", _publish("devft")),
    "clip_pipeline": ("diffusers:CLIPInversionPipeline", _save_with(_build_clip_pipeline)),
    "slao": ("peft:slao", _write_slao),
    "lora": ("peft:lora", _write_lora),
    "thr": ("llama", _publish("thr-grpo")),
    "llama": ("llama", _write_llama),
    "thinkmerge": ("hfx_thinkmerge", _publish("thinkmerge")),
}


@pytest.fixture(scope="session")
def folder(tmp_path_factory):
    """``folder(kind)``: the kind's saved folder (written once per session, on first use)."""
    root = tmp_path_factory.mktemp("artifacts")
    made: dict[str, Path] = {}

    def get(kind: str) -> Path:
        if kind not in made:
            path = root / kind
            KINDS[kind][1](path)
            made[kind] = path
        return made[kind]

    return get


def _digest(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): hashlib.sha1(p.read_bytes()).hexdigest() for p in sorted(folder.rglob("*"))
        if p.is_file()
    }  # fmt: skip


# --------------------------------------------------------------------------------------------------------------------
# loaders: name -> (kinds whose folder it accepts, load(folder))
# --------------------------------------------------------------------------------------------------------------------


def _celo2_optimizer(folder):
    from hfx.optim import Celo2

    return Celo2.from_pretrained(folder, [torch.nn.Parameter(torch.zeros(2, 2))])


def _cls(path: str, method: str = "from_pretrained"):
    module, name = path.split(":")

    def load(folder):
        import importlib

        return getattr(getattr(importlib.import_module(module), name), method)(folder)

    return load


LOADERS = {
    "SelectiveSSMForSequenceClassification": (
        ("selective_ssm",), _cls("hfx.models.selective_ssm:SelectiveSSMForSequenceClassification")
    ),
    "SelectiveSSMConfig": (("selective_ssm",), _cls("hfx.models.selective_ssm:SelectiveSSMConfig")),
    "MMTEMModel": (("mmtem",), _cls("hfx.models.hippoformer:MMTEMModel")),
    "HippoformerForNextObservation": (("hippoformer",), _cls("hfx.models.hippoformer:HippoformerForNextObservation")),
    "SelfInterpretableGNN": (("si_gnn",), _cls("hfx.gnn.self_consistency:SelfInterpretableGNN")),
    "MultiObjectiveValueModel": (("rmod_value",), _cls("hfx.generation.rmod:MultiObjectiveValueModel")),
    "PruneSIDLlavaConfig": (("prunesid",), _cls("hfx.prunesid.configuration:PruneSIDLlavaConfig")),
    "PruneSIDLlavaForConditionalGeneration": (
        ("prunesid",), _cls("hfx.prunesid.modeling:PruneSIDLlavaForConditionalGeneration")
    ),
    "Celo2MetaWeights": (("celo2",), _cls("hfx.optim.celo2:Celo2MetaWeights")),
    "Celo2.from_pretrained": (("celo2",), _celo2_optimizer),
    "OfflineRouter": (("offline_router",), _cls("hfx.routing:OfflineRouter")),
    "ThompsonRouter.load": (("online_router",), _cls("hfx.routing:ThompsonRouter", "load")),
    "BaseRouter.load": (("online_router",), _cls("hfx.routing:BaseRouter", "load")),
    "MemGAS": (("memgas",), _cls("hfx.memory:MemGAS")),
    "DevFTResult": (("devft",), _cls("hfx.federated.devft.flower:DevFTResult")),
    "CLIPInversionPipeline": (("clip_pipeline",), _cls("hfx.pipelines.clip_inversion:CLIPInversionPipeline")),
}  # fmt: skip
# the artifact types a loader expects (named in its refusal)
LOADER_TYPES = {name: tuple(KINDS[k][0] for k in kinds) for name, (kinds, _) in LOADERS.items()}
CONFIG_ONLY = {"PruneSIDLlavaForConditionalGeneration"}  # its published folder has no weights: refusals only

# `hfx publish NAME --source FOLDER`: the kinds each accepts (the rest are refused naming `source`)
PUBLISH_SOURCES = {
    "rmod-value": ("rmod_value",),
    "thr-grpo": ("thr", "llama", "lora", "devft"),
    "prunesid-llava": ("prunesid",),
    "slao": ("slao",),
    "clip-inversion": ("clip_pipeline",),
    "bayesian-router": ("offline_router",),
    "celo2": ("celo2",),
    "selective-ssm-theory": ("selective_ssm",),
    "memgas": ("memgas",),
    "devft": ("devft",),
    "sc-gnn": ("si_gnn",),
    "hippoformer": ("hippoformer",),
    "mmtem": ("mmtem",),
    "thinkmerge": ("thr", "llama"),
}


def _refused_pairs(accepts: dict[str, tuple[str, ...]]):
    return [pytest.param(name, kind, id=f"{name}-{kind}") for name in accepts for kind in KINDS if kind not in accepts[name]]


def _one_line(err: BaseException) -> str:
    text = str(err)
    assert "\n" not in text, f"the error is not one line: {text!r}"
    return text


# --------------------------------------------------------------------------------------------------------------------
# the pairs
# --------------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", list(KINDS))
def test_every_saved_folder_is_recognised(folder, kind):
    assert artifact_type(folder(kind)) == KINDS[kind][0]


@pytest.mark.parametrize("name", [n for n in LOADERS if n not in CONFIG_ONLY])
def test_each_loader_loads_its_own_folder(folder, name):
    """The control of the refusals below: the same call on its own folder works."""
    kinds, load = LOADERS[name]
    assert load(folder(kinds[0])) is not None


@pytest.mark.parametrize(("name", "kind"), _refused_pairs({n: k for n, (k, _) in LOADERS.items()}))
def test_each_loader_refuses_every_other_artifact(folder, name, kind):
    path = folder(kind)
    before = _digest(path)
    with pytest.raises(ValueError) as info:
        LOADERS[name][1](path)
    text = _one_line(info.value)
    assert isinstance(info.value, ArtifactTypeError), text
    assert repr(KINDS[kind][0]) in text, f"the folder's type {KINDS[kind][0]!r} is not named: {text}"
    assert any(repr(t) in text for t in LOADER_TYPES[name]), f"the expected type is not named: {text}"
    assert _digest(path) == before


@pytest.mark.parametrize(("name", "kind"), _refused_pairs(PUBLISH_SOURCES))
def test_publish_refuses_every_other_artifact_as_source(folder, tmp_path, name, kind):
    from hfx.hub import publish

    out = tmp_path / "out"
    with pytest.raises(ValueError) as info:
        publish(name, out, source=str(folder(kind)))
    text = _one_line(info.value)
    assert "`source`" in text and repr(KINDS[kind][0]) in text, text
    assert not out.exists()


# savers: name -> (the kind it saves, build() -> object)
SAVERS = {
    "SelectiveSSMForSequenceClassification": ("selective_ssm", _build_selective_ssm),
    "SelectiveSSMConfig": ("selective_ssm", lambda: _build_selective_ssm().config),
    "MMTEMModel": ("mmtem", _build_mmtem),
    "HippoformerForNextObservation": ("hippoformer", _build_hippoformer),
    "SelfInterpretableGNN": ("si_gnn", _build_si_gnn),
    "MultiObjectiveValueModel": ("rmod_value", _build_rmod),
    "PruneSIDLlavaForConditionalGeneration": ("prunesid", _build_prunesid),
    "Celo2MetaWeights": ("celo2", _build_celo2),
    "OfflineRouter": ("offline_router", _build_offline_router),
    "ThompsonRouter": ("online_router", _build_online_router),
    "MemGAS": ("memgas", _build_memgas),
    "CLIPInversionPipeline": ("clip_pipeline", _build_clip_pipeline),
}


@pytest.fixture(scope="session")
def saver():
    made: dict[str, object] = {}

    def get(name: str):
        if name not in made:
            made[name] = SAVERS[name][1]()
        return made[name]

    return get


def _save(obj, path):
    return obj.save(path) if hasattr(obj, "save") and not hasattr(obj, "save_pretrained") else obj.save_pretrained(path)


@pytest.mark.parametrize(("name", "kind"), _refused_pairs({n: (k,) for n, (k, _) in SAVERS.items()}))
def test_each_saver_refuses_every_other_artifacts_folder_and_writes_nothing(folder, saver, name, kind):
    path = folder(kind)
    before = _digest(path)
    with pytest.raises(ValueError) as info:
        _save(saver(name), path)
    text = _one_line(info.value)
    assert repr(KINDS[kind][0]) in text and repr(KINDS[SAVERS[name][0]][0]) in text, text
    assert "nothing was written" in text
    assert _digest(path) == before, "the refused save changed the folder"


def test_devft_result_refuses_other_folders_and_resaves_its_own(folder, tmp_path):
    from hfx.federated.devft.flower import DevFTResult

    result = DevFTResult.from_pretrained(folder("devft"))
    before = _digest(folder("memgas"))
    with pytest.raises(ArtifactTypeError, match="'hfx_memgas'.*nothing was written"):
        result.save_pretrained(folder("memgas"))
    assert _digest(folder("memgas")) == before
    copy = tmp_path / "devft"
    shutil.copytree(folder("devft"), copy)
    result.save_pretrained(copy)  # the same type: re-saving is fine
    assert DevFTResult.from_pretrained(copy).lora_config == result.lora_config


@pytest.mark.parametrize("name", ["SelectiveSSMForSequenceClassification", "MemGAS", "ThompsonRouter"])
def test_resaving_into_a_folder_of_the_same_type_works(folder, saver, tmp_path, name):
    copy = tmp_path / "same"
    shutil.copytree(folder(SAVERS[name][0]), copy)
    _save(saver(name), copy)
    assert artifact_type(copy) == KINDS[SAVERS[name][0]][0]


# --------------------------------------------------------------------------------------------------------------------
# missing paths, corrupt files, deleted fields
# --------------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", list(LOADERS))
def test_a_missing_local_path_says_no_such_folder(tmp_path, name):
    with pytest.raises(FileNotFoundError, match="no such folder") as info:
        LOADERS[name][1](tmp_path / "missing" / "model")
    _one_line(info.value)


@pytest.mark.parametrize("name", list(LOADERS))
def test_an_empty_path_is_refused_not_read_as_the_current_folder(tmp_path, monkeypatch, name):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match="must name a folder"):
        LOADERS[name][1]("")


def _copy_own(folder, tmp_path, name) -> Path:
    copy = tmp_path / "copy"
    shutil.copytree(folder(LOADERS[name][0][0]), copy)
    return copy


WEIGHTS = {  # loader -> the safetensors file of its folder
    "SelectiveSSMForSequenceClassification": "model.safetensors",
    "MMTEMModel": "model.safetensors",
    "HippoformerForNextObservation": "model.safetensors",
    "SelfInterpretableGNN": "model.safetensors",
    "MultiObjectiveValueModel": "model.safetensors",
    "Celo2MetaWeights": "model.safetensors",
    "Celo2.from_pretrained": "model.safetensors",
    "OfflineRouter": "model.safetensors",
    "ThompsonRouter.load": "router.safetensors",
    "MemGAS": "embeddings.safetensors",
    "DevFTResult": "adapter_model.safetensors",
    "CLIPInversionPipeline": "clip_model/model.safetensors",
}


@pytest.mark.parametrize("name", list(WEIGHTS))
def test_a_truncated_safetensors_file_is_named(folder, tmp_path, name):
    copy = _copy_own(folder, tmp_path, name)
    target = copy / WEIGHTS[name]
    data = target.read_bytes()
    target.write_bytes(data[: len(data) - 5])
    with pytest.raises(ValueError, match="not a complete safetensors file") as info:
        LOADERS[name][1](copy)
    assert str(target) in _one_line(info.value)


IDENTITY_JSON = {  # loader -> the JSON file that says what its folder is
    **dict.fromkeys(
        ["SelectiveSSMForSequenceClassification", "SelectiveSSMConfig", "MMTEMModel", "HippoformerForNextObservation",
         "SelfInterpretableGNN", "MultiObjectiveValueModel", "PruneSIDLlavaConfig", "Celo2MetaWeights",
         "Celo2.from_pretrained", "OfflineRouter", "MemGAS"],
        "config.json",
    ),
    "ThompsonRouter.load": "router_config.json",
    "BaseRouter.load": "router_config.json",
    "DevFTResult": "devft_history.json",
    "CLIPInversionPipeline": "model_index.json",
}  # fmt: skip


@pytest.mark.parametrize("name", list(IDENTITY_JSON))
def test_a_corrupt_json_file_is_named(folder, tmp_path, name):
    copy = _copy_own(folder, tmp_path, name)
    target = copy / IDENTITY_JSON[name]
    target.write_text(target.read_text()[:-7])  # cut mid-object
    with pytest.raises(ValueError, match="is not valid JSON") as info:
        LOADERS[name][1](copy)
    assert str(target) in _one_line(info.value)


# loader -> a field of its saved config the loader would otherwise fill with an invented default
REQUIRED_FIELD = {
    "SelectiveSSMForSequenceClassification": "recurrence",
    "SelectiveSSMConfig": "state_normalization",
    "MMTEMModel": "memory_type",
    "HippoformerForNextObservation": "fusion",
    "SelfInterpretableGNN": "si_gnn",
    "MultiObjectiveValueModel": "num_objectives",  # issue 30 item 6: invented objective names before
    "PruneSIDLlavaConfig": "prunesid",
    "Celo2MetaWeights": "hidden_size",
    "Celo2.from_pretrained": "momentum_decays",
    "OfflineRouter": "rm_names",
    "ThompsonRouter.load": "prior_precision",
    "BaseRouter.load": "router_class",
    "MemGAS": "top_k",
    "DevFTResult": "plans",
    "CLIPInversionPipeline": "inr_hidden_features",
}


@pytest.mark.parametrize("name", list(REQUIRED_FIELD))
def test_a_deleted_required_field_is_named(folder, tmp_path, name):
    copy = _copy_own(folder, tmp_path, name)
    target = copy / IDENTITY_JSON[name]
    data = json.loads(target.read_text())
    del data[REQUIRED_FIELD[name]]
    target.write_text(json.dumps(data))
    with pytest.raises(ValueError, match=f"lacks `{REQUIRED_FIELD[name]}`") as info:
        LOADERS[name][1](copy)
    _one_line(info.value)


def test_rmod_value_folder_without_num_objectives_is_refused_also_through_auto_config(folder, tmp_path):
    from transformers import AutoConfig

    from hfx.generation.rmod import MultiObjectiveValueConfig

    copy = _copy_own(folder, tmp_path, "MultiObjectiveValueModel")
    data = json.loads((copy / "config.json").read_text())
    del data["num_objectives"]
    (copy / "config.json").write_text(json.dumps(data))
    for load in (MultiObjectiveValueConfig.from_pretrained, AutoConfig.from_pretrained):
        with pytest.raises(ValueError, match="lacks `num_objectives`"):
            load(copy)


# --------------------------------------------------------------------------------------------------------------------
# the CLI, DevFT, publish
# --------------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("command", ["generate", "federate"])
def test_cli_model_check_says_what_an_sc_gnn_folder_is(folder, tmp_path, capsys, command):
    from hfx import cli

    model = str(folder("si_gnn"))
    if command == "generate":
        argv = ["generate", "2+2?", "--model", model]
    else:
        argv = ["federate", "--out", str(tmp_path / "run"), "--data-dir", str(tmp_path), "--model", model]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"hfx {command}: error: `--model` must be a causal LM"), err
    assert "'si_gnn'" in err and "SC-GNN" in err and "tokenizer" not in err
    assert len(err.splitlines()) == 1


@pytest.mark.parametrize("kind", ["mmtem", "hippoformer", "selective_ssm", "rmod_value", "prunesid", "memgas"])
def test_cli_generate_refuses_other_hfx_architectures(folder, capsys, kind):
    from hfx import cli

    assert cli.main(["generate", "2+2?", "--model", str(folder(kind))]) == 2
    err = capsys.readouterr().err
    assert repr(KINDS[kind][0]) in err and "`--model` must be a causal LM" in err


def test_cli_generate_accepts_a_causal_lm_folder_type_check(folder):
    from hfx.utils.artifacts import resolve_model

    path = str(folder("llama"))
    assert resolve_model(path, allowed=("transformers:causal_lm",)) == path


def test_devft_refuses_a_slao_adapter_folder_without_asking_the_hub(folder, monkeypatch):
    from hfx.federated.devft import DevFTConfig, run_devft

    def no_network(*args, **kwargs):
        raise AssertionError("DevFT reached for the network")

    monkeypatch.setattr(socket, "getaddrinfo", no_network)
    monkeypatch.setattr(socket.socket, "connect", no_network)
    with pytest.raises(ValueError, match=r"`base_model` must be a causal LM folder.*'peft:slao'"):
        run_devft(DevFTConfig(), str(folder("slao")), None)


def test_resolve_model_fails_fast_and_names_the_option_when_the_hub_is_unreachable(monkeypatch):
    import httpx
    from huggingface_hub import HfApi
    from huggingface_hub.errors import RepositoryNotFoundError

    from hfx.utils.artifacts import resolve_model

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    calls = []

    def unreachable(self, repo_id, **kwargs):
        calls.append(kwargs.get("timeout"))
        raise httpx.ConnectError("[Errno -2] Name or service not known")

    monkeypatch.setattr(HfApi, "model_info", unreachable)
    with pytest.raises(FileNotFoundError, match=r"`--model` 'org/not-a-model'.*the Hub cannot be reached"):
        resolve_model("org/not-a-model")
    assert calls == [10.0]  # one request with a timeout, no retries

    def missing(self, repo_id, **kwargs):
        raise RepositoryNotFoundError("404", response=httpx.Response(404, request=httpx.Request("GET", "http://x")))

    monkeypatch.setattr(HfApi, "model_info", missing)
    with pytest.raises(FileNotFoundError, match=r"`--model` 'org/not-a-model'.*the Hub has no model repo"):
        resolve_model("org/not-a-model")
    monkeypatch.setattr(HfApi, "model_info", lambda self, repo_id, **kw: object())
    assert resolve_model("org/a-model") == "org/a-model"  # it exists: the loader is asked


def test_cli_generate_with_an_unreachable_hub_exits_at_once_naming_model(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")}
    env.update(HF_ENDPOINT="http://127.0.0.1:9", HF_HOME=str(tmp_path / "hf"), PYTHONPATH=str(REPO / "src"))
    proc = subprocess.run(
        [sys.executable, "-m", "hfx", "generate", "2+2?", "--model", "hfx-test-org/not-a-model"],
        capture_output=True, text=True, env=env, timeout=300, cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    assert "Retrying" not in proc.stderr
    assert proc.stderr.strip().startswith("hfx generate: error: `--model` 'hfx-test-org/not-a-model'"), proc.stderr
    assert "cannot be reached" in proc.stderr


def test_publish_memgas_without_its_encoder_writes_nothing(tmp_path, monkeypatch):
    import hfx.models
    from hfx.hub import publish

    def missing():
        raise FileNotFoundError("the embedded sentence encoder is not installed")

    monkeypatch.setattr(hfx.models, "default_sentence_encoder_path", missing)
    out = tmp_path / "memgas"
    with pytest.raises(FileNotFoundError, match="not installed"):
        publish("memgas", out)
    assert not out.exists()
    out.mkdir()  # an existing empty folder stays empty
    with pytest.raises(FileNotFoundError):
        publish("memgas", out)
    assert list(out.iterdir()) == []


def test_hfx_types_are_never_taken_for_transformers_models(folder):
    from hfx.utils.artifacts import require_artifact

    for kind in ("si_gnn", "mmtem", "hippoformer", "selective_ssm", "rmod_value", "prunesid", "celo2", "memgas"):
        with pytest.raises(ValueError, match="must be an LM"):
            require_artifact(folder(kind), ("transformers:",), arg="--model", what="an LM")
    assert require_artifact(folder("llama"), ("transformers:",), arg="--model", what="an LM") == "llama"


def test_every_hfx_type_of_the_table_is_described():
    from hfx.utils.artifacts import describe_type

    for kind, info in ARTIFACTS.items():
        assert info.name in describe_type(kind) and repr(kind) in describe_type(kind)
