"""Conformance of hfx's ``PreTrainedModel`` classes with what transformers promises of a model (issue 31 item 12).

A stock transformers model (``LlamaForSequenceClassification``, tiny) is the control of every check; a check that
fails for it points at the harness, one that fails only for an hfx class at hfx.

* **Trainer**: a few ``transformers.Trainer`` steps (batch 4, gradient accumulation 2) run, every logged loss is
  finite and the trainable parameters change (``SelectiveSSMForSequenceClassification`` crashed on
  ``num_items_in_batch`` before; SC-GNN's forward computes no loss, so it trains with ``compute_loss_func``).
* **save / load round trip**: ``save_pretrained`` then ``from_pretrained`` gives the same tensors and outputs exactly.
* **plain transformers**: each hfx architecture's saved folder carries its code and ``auto_map``; in a process where
  ``hfx`` cannot be imported (a meta-path finder refuses it), ``AutoConfig`` / ``AutoModel`` /
  ``AutoModelForSequenceClassification`` with ``trust_remote_code=True`` load the copies, whose outputs equal the
  installed classes' exactly.
* **registration**: after ``import hfx`` (which loads no torch), ``AutoConfig.for_model`` knows every hfx type and
  ``AutoModel.from_config`` builds the hfx classes.

Every hfx ``PreTrainedModel`` subclass must appear in :data:`CASES` (or :data:`NO_TRAINER` with a reason): a new one
fails :func:`test_every_hfx_model_class_is_covered` until it is added.
"""

from __future__ import annotations

import importlib
import inspect
import json
import math
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch


SRC = Path(__file__).resolve().parents[2] / "src"
MODEL_MODULES = [  # every hfx module defining a PreTrainedModel subclass
    "hfx.models.selective_ssm.modeling_selective_ssm",
    "hfx.models.selective_ssm.mamba_baseline",
    "hfx.models.hippoformer.modeling_hippoformer",
    "hfx.gnn.self_consistency.modeling",
    "hfx.generation.rmod.value_functions",
    "hfx.prunesid.modeling",
]


# --------------------------------------------------------------------------------------------------------------------
# one tiny model + batch per class
# --------------------------------------------------------------------------------------------------------------------


def _walks(n, config, t=8, seed=0):
    g = torch.Generator().manual_seed(seed)
    obs = torch.randint(0, config.observation_vocab_size, (n, t), generator=g)
    actions = torch.randint(0, config.num_actions, (n, t), generator=g)
    actions[:, 0] = config.num_actions
    return [{"observations": obs[i], "actions": actions[i], "labels": obs[i]} for i in range(n)]


def _selective_ssm_head():
    from hfx.models.selective_ssm import SelectiveSSMConfig, SelectiveSSMForSequenceClassification

    model = SelectiveSSMForSequenceClassification(
        SelectiveSSMConfig(hidden_size=4, mlp_hidden_size=4, gate_init_std=0.5, loss_type="logistic")
    )
    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(16, 6, 4, generator=g), torch.randint(0, 2, (16,), generator=g)
    return model, [{"inputs_embeds": x[i], "labels": y[i]} for i in range(16)], {}


def _selective_ssm_base():
    from hfx.models.selective_ssm import SelectiveSSMConfig, SelectiveSSMModel

    model = SelectiveSSMModel(SelectiveSSMConfig(hidden_size=4, gate_init_std=0.5))
    return model, [{"inputs_embeds": torch.randn(6, 4)} for _ in range(4)], {}


def _mamba_baseline():
    from hfx.models.selective_ssm import tiny_mamba_classifier

    model = tiny_mamba_classifier(hidden_size=8)
    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(16, 6, 8, generator=g), torch.randint(0, 2, (16,), generator=g)
    return model, [{"inputs_embeds": x[i], "labels": y[i]} for i in range(16)], {}


def _mmtem():
    from hfx.models.hippoformer import MMTEMConfig, MMTEMModel

    config = MMTEMConfig(structural_size=8, sensory_size=8, memory_size=8, memory_hidden_size=8, transition_hidden_size=8)
    return MMTEMModel(config), _walks(16, config), {}


def _hippoformer():
    from hfx.models.hippoformer import HippoformerConfig, HippoformerForNextObservation

    config = HippoformerConfig(hidden_size=16, intermediate_size=16, fusion_hidden_size=16)
    return HippoformerForNextObservation(config), _walks(16, config), {}


def _si_gnn():
    from hfx.gnn.self_consistency import SelfInterpretableGNN, SelfInterpretableGNNConfig, ba_2motifs

    graphs = list(ba_2motifs(num_graphs=16, seed=0))
    model = SelfInterpretableGNN(SelfInterpretableGNNConfig(hidden_size=8))

    def collate(batch):
        from torch_geometric.data import Batch

        b = Batch.from_data_list(batch)
        return {"x": b.x.float(), "edge_index": b.edge_index, "batch": b.batch, "labels": b.y.float()}

    def loss(outputs, labels, num_items_in_batch=None):
        return torch.nn.functional.binary_cross_entropy_with_logits(outputs.logits.squeeze(-1), labels)

    return model, graphs, {"data_collator": collate, "compute_loss_func": loss}


def _rmod_value():
    from hfx.generation.rmod import MultiObjectiveValueConfig, MultiObjectiveValueModel
    from hfx.testing import tiny_llama

    backbone = tiny_llama()[0].config.to_dict()
    model = MultiObjectiveValueModel(MultiObjectiveValueConfig(backbone_config=backbone, num_objectives=2))
    g = torch.Generator().manual_seed(0)
    ids, rewards = torch.randint(5, 300, (16, 7), generator=g), torch.rand(16, 2, generator=g)
    return model, [{"input_ids": ids[i], "attention_mask": torch.ones(7), "rewards": rewards[i]} for i in range(16)], {}


def _prunesid():
    import numpy as np
    from PIL import Image

    from hfx.prunesid import apply
    from hfx.testing import tiny_llava

    model, processor = tiny_llava()
    model, processor = apply(model, processor, 12, method="prunesid")
    image = Image.fromarray(np.random.RandomState(0).randint(0, 255, (64, 64, 3), dtype=np.uint8))
    enc = processor(images=[image] * 4, text=["USER: <image>\ndescribe ASSISTANT: a cat"] * 4, return_tensors="pt")
    rows = [{k: v[i] for k, v in enc.items()} for i in range(4)]
    for row in rows:
        row["labels"] = row["input_ids"].clone()
    return model, rows * 2, {}


def _stock_control():
    from transformers import LlamaForSequenceClassification

    from hfx.testing import tiny_llama

    config = tiny_llama()[0].config
    config.num_labels, config.pad_token_id = 2, 0
    model = LlamaForSequenceClassification(config)
    g = torch.Generator().manual_seed(0)
    ids, y = torch.randint(5, 300, (16, 7), generator=g), torch.randint(0, 2, (16,), generator=g)
    return model, [{"input_ids": ids[i], "labels": y[i]} for i in range(16)], {}


# class name -> builder() -> (model, features, extra Trainer kwargs)
CASES = {
    "transformers.LlamaForSequenceClassification": _stock_control,  # the control
    "SelectiveSSMForSequenceClassification": _selective_ssm_head,
    "MambaForSequenceClassification": _mamba_baseline,
    "MMTEMModel": _mmtem,
    "HippoformerForNextObservation": _hippoformer,
    "SelfInterpretableGNN": _si_gnn,
    "MultiObjectiveValueModel": _rmod_value,
    "PruneSIDLlavaForConditionalGeneration": _prunesid,
}
# classes that compute no loss (Trainer needs one): the round trip only
NO_TRAINER = {"SelectiveSSMModel": _selective_ssm_base}
# abstract bases, inner models of a class above, and variants sharing its code
NOT_INSTANTIATED = {
    "SelectiveSSMPreTrainedModel", "MMTEMPreTrainedModel", "HippoformerPreTrainedModel",
    "MultiObjectiveValuePreTrainedModel", "PruneSIDLlavaModel", "PruneSIDLlavaNextModel",
    "PruneSIDLlavaNextVideoModel", "PruneSIDLlavaNextForConditionalGeneration",
    "PruneSIDLlavaNextVideoForConditionalGeneration",
}  # fmt: skip


@pytest.mark.slow  # imports every model module (PyTorch Geometric, the LLaVA classes)
def test_every_hfx_model_class_is_covered():
    from transformers import PreTrainedModel

    for module in MODEL_MODULES:
        importlib.import_module(module)
    found, todo = set(), [PreTrainedModel]
    while todo:
        cls = todo.pop()
        for sub in cls.__subclasses__():
            todo.append(sub)
            if sub.__module__.startswith("hfx."):
                found.add(sub.__name__)
    covered = {n.split(".")[-1] for n in CASES} | set(NO_TRAINER) | NOT_INSTANTIATED
    assert found - covered == set(), f"hfx PreTrainedModel classes without a conformance case: {found - covered}"


def _batch(features, extra):
    from transformers import default_data_collator

    return (extra.get("data_collator") or default_data_collator)(features[:4])


def _params(model):
    return {n: p.detach().clone() for n, p in model.named_parameters() if p.requires_grad}


@pytest.mark.parametrize("name", list(CASES))
def test_trains_under_transformers_trainer(tmp_path, name):
    from transformers import Trainer, TrainingArguments

    torch.manual_seed(0)
    model, features, extra = CASES[name]()
    before = _params(model)
    args = TrainingArguments(
        output_dir=str(tmp_path), max_steps=3, per_device_train_batch_size=4, gradient_accumulation_steps=2,
        learning_rate=1e-2, logging_steps=1, save_strategy="no", report_to=[], use_cpu=True, disable_tqdm=True,
        dataloader_num_workers=0, seed=0,
    )  # fmt: skip
    trainer = Trainer(model=model, args=args, train_dataset=features, **extra)
    trainer.train()
    losses = [row["loss"] for row in trainer.state.log_history if "loss" in row]
    assert len(losses) == 3 and all(math.isfinite(v) for v in losses), losses
    changed = [n for n, p in model.named_parameters() if p.requires_grad and not torch.equal(before[n], p.detach())]
    assert changed, "no trainable parameter changed"


def _outputs(model, batch):
    model.eval()
    with torch.no_grad():
        out = model(**{k: v for k, v in batch.items() if k not in ("labels", "rewards")})
    return {k: v for k, v in out.items() if isinstance(v, torch.Tensor)}


@pytest.mark.parametrize("name", [*CASES, *NO_TRAINER])
def test_save_load_round_trip_is_exact(tmp_path, name):
    torch.manual_seed(0)
    model, features, extra = {**CASES, **NO_TRAINER}[name]()
    batch = _batch(features, extra)
    expected = _outputs(model, batch)
    model.save_pretrained(tmp_path)
    loaded = type(model).from_pretrained(tmp_path)
    state, loaded_state = model.state_dict(), loaded.state_dict()
    assert state.keys() == loaded_state.keys()
    assert all(torch.equal(state[k], loaded_state[k]) for k in state)
    got = _outputs(loaded, batch)
    assert expected.keys() == got.keys() and all(torch.equal(expected[k], got[k]) for k in expected)


# --------------------------------------------------------------------------------------------------------------------
# the saved folders load with plain transformers (hfx not importable)
# --------------------------------------------------------------------------------------------------------------------

# folder -> (builder, the Auto class that must load the head, the architecture's Auto classes in auto_map)
ARCHITECTURE_FOLDERS = {
    "selective_ssm_head": (_selective_ssm_head, "AutoModelForSequenceClassification"),
    "selective_ssm_base": (_selective_ssm_base, "AutoModel"),
    "mmtem": (_mmtem, "AutoModel"),
    "hippoformer": (_hippoformer, "AutoModel"),
    "si_gnn": (_si_gnn, "AutoModel"),
    "rmod_value": (_rmod_value, "AutoModel"),
}

BLOCK_HFX = """
import importlib.abc, sys
class _NoHfx(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "hfx" or name.startswith("hfx."):
            raise ModuleNotFoundError(f"No module named {name!r} (blocked: plain transformers only)")
sys.meta_path.insert(0, _NoHfx())
"""


@pytest.fixture(scope="module")
def bundles(tmp_path_factory):
    """Each architecture saved by its hfx class, with the inputs and the installed class's outputs."""
    root = tmp_path_factory.mktemp("bundles")
    for name, (build, _) in ARCHITECTURE_FOLDERS.items():
        torch.manual_seed(0)
        model, features, extra = build()
        batch = {k: v for k, v in _batch(features, extra).items() if k not in ("labels", "rewards")}
        model.save_pretrained(root / name)
        torch.save({"batch": batch, "outputs": _outputs(model, batch)}, root / f"{name}.pt")
    return root


def test_saved_folders_carry_code_without_hfx_imports_and_an_auto_map(bundles):
    import ast

    from hfx.utils.artifacts import ARCHITECTURES

    for name, (_, auto_class) in ARCHITECTURE_FOLDERS.items():
        folder = bundles / name
        config = json.loads((folder / "config.json").read_text())
        auto_map = config["auto_map"]
        assert set(auto_map) == set(ARCHITECTURES[config["model_type"]]), (name, auto_map)
        assert auto_class in auto_map
        for ref in auto_map.values():
            assert (folder / (ref.rsplit(".", 1)[0] + ".py")).is_file(), ref
        for py in folder.glob("*.py"):
            for node in ast.walk(ast.parse(py.read_text())):
                if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    assert node.module.split(".")[0] != "hfx", f"{py.name} imports {node.module}"
                if isinstance(node, ast.Import):
                    assert all(a.name.split(".")[0] != "hfx" for a in node.names), py.name


@pytest.mark.slow  # a fresh process importing torch, transformers and PyTorch Geometric
def test_plain_transformers_loads_every_architecture_folder_and_its_outputs_are_identical(bundles, tmp_path):
    script = BLOCK_HFX + textwrap.dedent(
        """
        import json
        import torch
        import transformers
        root, names = sys.argv[1], json.loads(sys.argv[2])
        result = {}
        for name, auto_class in names.items():
            folder = f"{root}/{name}"
            config = transformers.AutoConfig.from_pretrained(folder, trust_remote_code=True)
            model = getattr(transformers, auto_class).from_pretrained(folder, trust_remote_code=True).eval()
            saved = torch.load(f"{root}/{name}.pt", weights_only=False)
            with torch.no_grad():
                out = model(**saved["batch"])
            same = {k: bool(torch.equal(v, getattr(out, k))) for k, v in saved["outputs"].items()}
            result[name] = [type(config).__module__, type(model).__module__, type(model).__name__, same]
        result["hfx_modules"] = sorted(m for m in sys.modules if m == "hfx" or m.startswith("hfx."))
        print("RESULT" + json.dumps(result))
        """
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(HF_MODULES_CACHE=str(tmp_path / "modules"), HF_HUB_OFFLINE="1", OMP_NUM_THREADS="1")
    names = {name: auto for name, (_, auto) in ARCHITECTURE_FOLDERS.items()}
    proc = subprocess.run(
        [sys.executable, "-c", script, str(bundles), json.dumps(names)],
        capture_output=True, text=True, env=env, timeout=900, cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-4000:]
    result = json.loads(proc.stdout.split("RESULT", 1)[1])
    assert result.pop("hfx_modules") == []
    for name, (config_module, model_module, class_name, same) in result.items():
        assert config_module.startswith("transformers_modules.") and model_module.startswith("transformers_modules.")
        assert same and all(same.values()), (name, class_name, same)


def test_a_module_object_import_of_hfx_is_refused_when_bundling(tmp_path, monkeypatch):
    from hfx.utils.remote_code import save_code

    pkg = tmp_path / "fakepkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "helper.py").write_text("VALUE = 1\n")
    (pkg / "modeling.py").write_text("import fakepkg.helper\n\n\nclass Model:\n    pass\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    from fakepkg.modeling import Model

    with pytest.raises(ValueError, match=r"cannot bundle fakepkg.modeling line 1: `import fakepkg.helper`"):
        save_code([Model], tmp_path / "out")


def test_bundled_imports_are_rewritten_to_flat_relative_ones(tmp_path, monkeypatch):
    from hfx.utils.remote_code import save_code

    pkg = tmp_path / "fakepkg2"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "util.py").write_text("def helper():\n    return 41\n")
    (pkg / "sub" / "modeling.py").write_text(
        "from fakepkg2.util import helper as h\n\n\nclass Model:\n    def f(self):\n"
        "        from ..util import helper\n\n        return h() + helper()  # noqa\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    from fakepkg2.sub.modeling import Model

    written = sorted(p.name for p in save_code([Model], tmp_path / "out"))
    assert written == ["modeling.py", "util.py"]
    text = (tmp_path / "out" / "modeling.py").read_text()
    assert "from .util import helper as h\n" in text and "        from .util import helper\n" in text


@pytest.mark.slow  # a fresh process
def test_import_hfx_registers_every_architecture_lazily():
    script = textwrap.dedent(
        """
        import json, sys, warnings
        warnings.simplefilter("error")
        import hfx
        torch_after_import = "torch" in sys.modules
        from transformers import AutoConfig, AutoModel
        names = {}
        for model_type in ("hfx_selective_ssm", "mmtem", "hippoformer", "si_gnn"):
            names[model_type] = type(AutoConfig.for_model(model_type)).__name__
        built = type(AutoModel.from_config(AutoConfig.for_model("hfx_selective_ssm", hidden_size=4))).__name__
        mmtem = type(AutoModel.from_config(AutoConfig.for_model("mmtem"))).__name__
        print("RESULT" + json.dumps([torch_after_import, names, built, mmtem]))
        """
    )
    env = {**os.environ, "PYTHONPATH": str(SRC), "OMP_NUM_THREADS": "1"}
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "post-import hook" not in proc.stderr
    torch_after_import, names, built, mmtem = json.loads(proc.stdout.split("RESULT", 1)[1])
    assert torch_after_import is False
    assert names == {
        "hfx_selective_ssm": "SelectiveSSMConfig",
        "mmtem": "MMTEMConfig",
        "hippoformer": "HippoformerConfig",
        "si_gnn": "SelfInterpretableGNNConfig",
    }
    assert (built, mmtem) == ("SelectiveSSMModel", "MMTEMModel")


def test_the_architecture_table_names_real_classes():
    from hfx.utils.artifacts import ARCHITECTURES

    for model_type, entries in ARCHITECTURES.items():
        assert next(iter(entries)) == "AutoConfig"
        for auto_class, target in entries.items():
            module, _, name = target.partition(":")
            cls = getattr(importlib.import_module(module), name)
            assert inspect.isclass(cls)
            kind = cls.model_type if auto_class == "AutoConfig" else cls.config_class.model_type
            assert kind == model_type, target
