"""DevFT on Flower's simulation engine: the ClientApp, the ServerApp, communication accounting and :func:`run_devft`.

* **Clients** (:func:`make_client_app`): each round a client receives the stage plan (JSON, in the ``ConfigRecord``)
  and the global LoRA tensors (the ``ArrayRecord``: LoRA only, never base weights). It builds the stage's sub-model
  from its own copy of the public base model (cached per process), loads the LoRA, trains ``local_steps`` steps on
  its partition (a ``flwr-datasets`` partitioner over the training set) and returns its LoRA tensors and metrics.
* **Server** (:func:`make_server_app`): for each stage, builds the same sub-model, initialises its LoRA (PEFT default
  for stage 0, :func:`~hfx.federated.devft.lora.transfer_lora` afterwards), runs Flower's
  :class:`~flwr.serverapp.strategy.FedAvg` (weighted by ``num-examples``) for the stage's rounds, and evaluates the
  global model centrally after each round. :class:`AccountingFedAvg` counts the LoRA bytes sent down and up.
* :func:`run_devft` runs both with :func:`flwr.simulation.run_simulation` on Ray actors and shuts Ray down (and waits
  for every process it started) before returning a :class:`DevFTResult`.

Flower's Ray backend is the only simulation backend of Flower 1.42; ``num_workers`` actors of ``client_num_cpus`` CPUs
each run the clients (on a 2-core machine: one or two).
"""

from __future__ import annotations

import copy
import dataclasses
import json
import logging
import math
import os
import tempfile
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from .configuration import DevFTConfig
from .lora import initialize_lora_from_state, lora_state, payload_bytes, transfer_lora, wrap_with_lora
from .stages import DevFTScheduler, StagePlan, build_submodel


logger = logging.getLogger(__name__)

_PLAN_KEY, _STAGE_KEY, _OFFSET_KEY = "devft-plan", "devft-stage", "devft-round-offset"
HISTORY_FILE = "devft_history.json"

# per-process client cache (a Ray actor runs many clients one after the other)
_CLIENT_CACHE: dict[str, Any] = {}


# ---------------------------------------------------------------------------------------------------------- results
@dataclass
class DevFTResult:
    """What a federated run returns (and :meth:`save_pretrained` writes).

    Attributes:
        config (`dict`): the :class:`DevFTConfig` as a dict.
        base_model (`str`): the base model's folder or Hub id.
        plans (`list[dict]`): each stage's :class:`StagePlan` (groups, anchors, fusion coefficients).
        history (`list[dict]`): one row per evaluation point: ``round`` (global, 0 = before training), ``stage``,
            ``num_layers``, ``bytes_down`` / ``bytes_up`` (LoRA payload of that round, all clients), ``cum_bytes``,
            ``client_seconds`` / ``client_flops`` (summed over the round's clients) and their cumulative sums,
            ``train_loss``, ``eval_loss``, ``eval_accuracy`` (``None`` where not evaluated).
        lora_state (`OrderedDict[str, Tensor]`): the final stage's aggregated LoRA (the full model's adapter).
        lora_config (`dict`): its ``peft.LoraConfig``.
        partition_sizes (`list[int]`): examples per client; partition_counts (`list[dict]`): rows per value of the
            partition column, per client.
        final_eval (`dict`, *optional*): per-example ``example_loss`` / ``example_correct`` of the last evaluation.
        wall_seconds (`float`): wall time of the simulation.
    """

    config: dict
    base_model: str
    plans: list
    history: list
    lora_state: OrderedDict = field(repr=False)
    lora_config: dict = field(repr=False)
    partition_sizes: list
    partition_counts: list
    final_eval: dict | None = field(default=None, repr=False)
    wall_seconds: float = 0.0

    @property
    def total_bytes(self) -> int:
        """LoRA bytes communicated over the run (down + up, all clients)."""
        return sum(r["bytes_down"] + r["bytes_up"] for r in self.history)

    @property
    def total_client_flops(self) -> float:
        return sum(r["client_flops"] for r in self.history)

    def save_pretrained(self, save_directory: str | Path) -> Path:
        """Write the final LoRA as a PEFT adapter (``adapter_config.json``, ``adapter_model.safetensors``; loads with
        ``PeftModel.from_pretrained(base, dir)``) and the run's history, plans and config as ``devft_history.json``."""
        from safetensors.torch import save_file

        from hfx.utils.artifacts import check_save_target

        out = check_save_target(save_directory, "hfx_devft", who="DevFTResult.save_pretrained")
        out.mkdir(parents=True, exist_ok=True)
        (out / "adapter_config.json").write_text(json.dumps(self.lora_config, indent=2), encoding="utf-8")
        save_file({k: v.contiguous() for k, v in self.lora_state.items()}, str(out / "adapter_model.safetensors"))
        meta = {k: getattr(self, k) for k in ("config", "base_model", "plans", "history", "partition_sizes")}
        meta.update(partition_counts=self.partition_counts, final_eval=self.final_eval, wall_seconds=self.wall_seconds)
        (out / HISTORY_FILE).write_text(json.dumps(meta, indent=1), encoding="utf-8")
        return out

    @classmethod
    def from_pretrained(cls, directory: str | Path) -> DevFTResult:
        """Load what :meth:`save_pretrained` wrote.

        Raises:
            FileNotFoundError: if ``directory`` does not exist or lacks the adapter or the history file.
            ValueError: if it holds another artifact (naming both) or a corrupt file.
        """
        from safetensors.torch import load_file

        from hfx.utils.artifacts import ArtifactNotFoundError, check_load_source

        who = "DevFTResult.from_pretrained"
        if check_load_source(directory, ("hfx_devft",), who=who, arg="directory") is None:
            raise ArtifactNotFoundError(f"{who}: `directory` {str(directory)!r}: no such folder")
        directory = Path(directory)
        for name in (HISTORY_FILE, "adapter_config.json", "adapter_model.safetensors"):
            if not (directory / name).is_file():
                raise FileNotFoundError(f"{directory / name} not found (not a saved DevFT run)")
        meta = json.loads((directory / HISTORY_FILE).read_text(encoding="utf-8"))
        from hfx.utils.artifacts import check_required_keys

        fields = [f.name for f in dataclasses.fields(cls) if f.name not in ("lora_state", "lora_config")]
        check_required_keys(meta, fields, who=who, where=repr(str(directory)), file=HISTORY_FILE)
        lora_config = json.loads((directory / "adapter_config.json").read_text(encoding="utf-8"))
        state = OrderedDict(load_file(str(directory / "adapter_model.safetensors")))
        return cls(lora_state=state, lora_config=lora_config, **meta)

    def plot(self, path: str | Path | None = None, x: str = "cum_bytes", **kwargs):
        """Eval loss / accuracy against ``x`` (see :func:`~hfx.federated.devft.plot.plot_runs`)."""
        from .plot import plot_runs

        return plot_runs({self.config.get("method", "run"): self}, path=path, x=x, **kwargs)


# -------------------------------------------------------------------------------------------------------- strategy
def _fedavg_class():
    from flwr.serverapp.strategy import FedAvg

    class AccountingFedAvg(FedAvg):
        """Flower's FedAvg plus a ledger: LoRA payload bytes per round (down: one copy per sampled client; up: each
        reply), the clients' compute metrics summed per round, and an error (not a silent skip) when a client fails."""

        def __init__(self, ledger: list, **kwargs):
            super().__init__(**kwargs)
            self.ledger = ledger

        def configure_train(self, server_round, arrays, config, grid):
            messages = list(super().configure_train(server_round, arrays, config, grid))
            self.ledger.append({"bytes_down": payload_bytes(arrays) * len(messages), "num_clients": len(messages)})
            return messages

        def aggregate_train(self, server_round, replies):
            replies = list(replies)
            errors = [m for m in replies if m.has_error()]
            if errors:
                raise RuntimeError(f"{len(errors)} client(s) failed in round {server_round}: {errors[0].error.reason}")
            metrics = [m.content["metrics"] for m in replies]
            self.ledger[-1].update(
                bytes_up=sum(payload_bytes(m.content["arrays"]) for m in replies),
                client_seconds=sum(float(mr["seconds"]) for mr in metrics),
                client_flops=sum(float(mr["flops"]) for mr in metrics),
                train_loss=sum(float(mr["train-loss"]) * float(mr["num-examples"]) for mr in metrics)
                / sum(float(mr["num-examples"]) for mr in metrics),
            )
            return super().aggregate_train(server_round, replies)

    return AccountingFedAvg


def AccountingFedAvg(ledger: list, **kwargs):
    """Flower :class:`~flwr.serverapp.strategy.FedAvg` with byte / compute accounting (see the returned class)."""
    return _fedavg_class()(ledger, **kwargs)


# ---------------------------------------------------------------------------------------------------------- client
def _client_model(base_path: str, plan: StagePlan, config: DevFTConfig):
    """The stage's PEFT model in this process (rebuilt when the plan changes) and the tokenizer."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if _CLIENT_CACHE.get("base_path") != base_path:
        _CLIENT_CACHE.clear()
        base = AutoModelForCausalLM.from_pretrained(base_path, dtype=torch.float32).eval()
        tokenizer = AutoTokenizer.from_pretrained(base_path)
        layer = base.get_submodule(_layers_path(base))[0]
        _CLIENT_CACHE.update(
            base_path=base_path,
            base=base,
            tokenizer=tokenizer,
            layer_params=sum(p.numel() for p in layer.parameters()),
        )
    key = plan.to_json()
    if _CLIENT_CACHE.get("plan") != key:
        _CLIENT_CACHE.pop("model", None)
        sub = build_submodel(_CLIENT_CACHE["base"], plan)
        _CLIENT_CACHE.update(plan=key, model=wrap_with_lora(sub, config, seed=config.seed))
    return _CLIENT_CACHE["model"], _CLIENT_CACHE["tokenizer"], _CLIENT_CACHE["layer_params"]


def _layers_path(model) -> str:
    from .grouping import decoder_layers_path

    return decoder_layers_path(model)


def _client_examples(spec: dict, tokenizer, partition_id: int, max_length: int) -> list[dict]:
    from .data import client_partition, encode_examples

    cache = _CLIENT_CACHE.setdefault("examples", {})
    key = (spec["data_key"], partition_id, max_length)
    if key not in cache:
        rows = client_partition(spec["train_dataset"], spec["partitioner"], partition_id)
        cache[key] = encode_examples(tokenizer, rows, max_length)
    return cache[key]


def client_train(spec: dict, message, context):
    """The ClientApp's train handler (exposed for tests): one round of local LoRA training on this client's data."""
    from flwr.app import ArrayRecord, Message, MetricRecord, RecordDict

    config = DevFTConfig.from_dict(spec["config"])
    torch.set_num_threads(config.torch_threads)
    partition_id = int(context.node_config["partition-id"])
    conf = message.content["config"]
    plan = StagePlan.from_json(str(conf[_PLAN_KEY]))
    global_round = int(conf[_OFFSET_KEY]) + int(conf["server-round"])
    model, tokenizer, layer_params = _client_model(spec["base_path"], plan, config)
    initialize_lora_from_state(model, message.content["arrays"].to_torch_state_dict())
    examples = _client_examples(spec, tokenizer, partition_id, config.max_length)
    stats = _local_train(model, examples, config, tokenizer, global_round, partition_id, layer_params)
    metrics = MetricRecord(
        {
            "num-examples": len(examples),
            "train-loss": stats["loss"],
            "seconds": stats["seconds"],
            "flops": stats["flops"],
            "tokens": stats["tokens"],
            "partition-id": partition_id,
        }
    )
    content = RecordDict({"arrays": ArrayRecord(lora_state(model)), "metrics": metrics})
    return Message(content=content, reply_to=message)


def _local_train(model, examples, config, tokenizer, global_round, partition_id, layer_params):
    from .training import local_train

    return local_train(
        model,
        examples,
        steps=config.local_steps,
        batch_size=config.batch_size,
        learning_rate=config.learning_rate,
        weight_decay=config.weight_decay,
        max_grad_norm=config.max_grad_norm,
        pad_token_id=_pad_id(tokenizer),
        seed=config.seed * 1_000_003 + global_round * 1_009 + partition_id,
        layer_params=layer_params,
    )


def _pad_id(tokenizer) -> int:
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    if pad is None:
        raise ValueError("the tokenizer has neither a pad nor an eos token")
    return int(pad)


def make_client_app(base_path: str, train_dataset, partitioner, config: DevFTConfig):
    """A Flower :class:`~flwr.clientapp.ClientApp` whose ``train`` handler is :func:`client_train`.

    Args:
        base_path (`str`): folder of the base model and its tokenizer (every client loads it locally).
        train_dataset (`datasets.Dataset`): ``prompt`` / ``completion`` rows (plus the partition column).
        partitioner (`flwr_datasets.partitioner.Partitioner`): unassigned; each client copies it, assigns the
            dataset and loads partition ``context.node_config["partition-id"]``.
        config (`DevFTConfig`).
    """
    from flwr.clientapp import ClientApp

    spec = {
        "base_path": str(base_path),
        "train_dataset": train_dataset,
        "partitioner": partitioner,
        "config": config.to_dict(),
        "data_key": f"{getattr(train_dataset, '_fingerprint', id(train_dataset))}:{partitioner!r}:{base_path}",
    }
    app = ClientApp()

    @app.train()
    def train(message, context):
        return client_train(spec, message, context)

    return app


# ---------------------------------------------------------------------------------------------------------- server
class _ServerRun:
    """State of the server across stages; its :meth:`main` is the ServerApp's main function."""

    def __init__(self, scheduler, tokenizer, eval_examples, *, eval_every, eval_stage_start, progress, round_timeout):
        self.scheduler, self.tokenizer, self.eval_examples = scheduler, tokenizer, eval_examples
        self.eval_every, self.eval_stage_start, self.progress = eval_every, eval_stage_start, progress
        self.round_timeout = round_timeout
        self.history: list[dict] = []
        self.final_state: OrderedDict | None = None
        self.final_eval: dict | None = None
        self.transfers: list[list[int] | None] = []

    def main(self, grid, context) -> None:
        from flwr.app import ArrayRecord, ConfigRecord, MetricRecord
        from tqdm.auto import tqdm

        from .training import evaluate

        sched, config = self.scheduler, self.scheduler.config
        total = sum(sched.rounds)
        bar = tqdm(total=total, desc=config.name, unit="round", disable=not self.progress)
        prev_state, prev_plan, offset = None, None, 0
        totals = {"cum_bytes": 0, "cum_client_seconds": 0.0, "cum_client_flops": 0.0}
        pad_id = _pad_id(self.tokenizer) if self.tokenizer is not None else 0
        try:
            for stage, plan in enumerate(sched.plans()):
                sub = build_submodel(sched.base_model, plan)
                if prev_state is None:
                    model = wrap_with_lora(sub, config, seed=config.seed)
                    self.transfers.append(None)
                else:
                    state, sources = transfer_lora(prev_state, prev_plan, plan, config.lora_transfer)
                    model = wrap_with_lora(sub, config, state=state)
                    self.transfers.append(sources)
                ledger: list[dict] = []
                rounds = sched.rounds[stage]

                def evaluate_fn(
                    server_round, arrays, _model=model, _stage=stage, _plan=plan, _offset=offset, _ledger=ledger
                ):
                    global_round = _offset + server_round
                    last = global_round == total
                    if server_round == 0:
                        row = {"bytes_down": 0, "bytes_up": 0, "client_seconds": 0.0, "client_flops": 0.0}
                        row.update(train_loss=None, num_clients=0)
                        do_eval = global_round == 0 or self.eval_stage_start
                        if global_round > 0 and not do_eval:
                            return None
                    else:
                        row = dict(_ledger[server_round - 1])
                        do_eval = last or global_round % self.eval_every == 0
                    totals["cum_bytes"] += row["bytes_down"] + row["bytes_up"]
                    totals["cum_client_seconds"] += row["client_seconds"]
                    totals["cum_client_flops"] += row["client_flops"]
                    row.update(round=global_round, stage=_stage, num_layers=_plan.num_layers, **totals)
                    row.update(eval_loss=None, eval_accuracy=None)
                    if do_eval and self.eval_examples:
                        initialize_lora_from_state(_model, arrays.to_torch_state_dict())
                        result = evaluate(_model, self.eval_examples, pad_id, config.eval_batch_size)
                        row.update(eval_loss=result["loss"], eval_accuracy=result["accuracy"])
                        self.final_eval = {k: result[k] for k in ("example_loss", "example_correct")}
                        self.final_eval["round"] = global_round
                    self.history.append(row)
                    if server_round > 0:
                        bar.update(1)
                    bar.set_postfix(stage=f"{_stage + 1}/{len(sched.stages)}", layers=_plan.num_layers,
                                    MB=f"{totals['cum_bytes'] / 2**20:.1f}",
                                    loss="-" if row["eval_loss"] is None else f"{row['eval_loss']:.3f}")  # fmt: skip
                    if row["eval_loss"] is None:
                        return None
                    return MetricRecord({"eval-loss": row["eval_loss"], "eval-accuracy": row["eval_accuracy"]})

                strategy = AccountingFedAvg(
                    ledger,
                    fraction_train=config.fraction_train,
                    fraction_evaluate=0.0,
                    min_train_nodes=max(1, math.ceil(config.fraction_train * config.num_clients)),
                    min_evaluate_nodes=0,
                    min_available_nodes=config.num_clients,
                )
                train_config = ConfigRecord({_PLAN_KEY: plan.to_json(), _STAGE_KEY: stage, _OFFSET_KEY: offset})
                result = strategy.start(
                    grid=grid,
                    initial_arrays=ArrayRecord(lora_state(model)),
                    num_rounds=rounds,
                    timeout=self.round_timeout,
                    train_config=train_config,
                    evaluate_fn=evaluate_fn,
                )
                prev_state = OrderedDict((k, v.clone()) for k, v in result.arrays.to_torch_state_dict().items())
                prev_plan, offset = plan, offset + rounds
                del model, sub
            self.final_state = prev_state
        finally:
            bar.close()


def make_server_app(server_run: _ServerRun):
    """A Flower :class:`~flwr.serverapp.ServerApp` whose main function runs every stage of ``server_run``."""
    from flwr.serverapp import ServerApp

    app = ServerApp()

    @app.main()
    def main(grid, context):
        server_run.main(grid, context)

    return app


# ------------------------------------------------------------------------------------------------------ simulation
def run_devft(
    config: DevFTConfig,
    base_model,
    train_dataset,
    *,
    tokenizer=None,
    eval_dataset=None,
    partitioner=None,
    partition_by: str = "task",
    dirichlet_alpha: float = 0.5,
    eval_every: int = 1,
    eval_stage_start: bool = True,
    progress: bool = True,
    verbose: bool = False,
    round_timeout: float = 3600.0,
) -> DevFTResult:
    """Run DevFT (or a baseline, per ``config``) on Flower's simulation engine with ``config.num_clients`` clients.

    Args:
        config (`DevFTConfig`): method, schedule and training settings.
        base_model (`str`, `Path` or `PreTrainedModel`): a local folder holding the model and its tokenizer (clients
            load it from there), or a model instance (then ``tokenizer`` is required and both are saved to a temporary
            folder for the clients).
        train_dataset (`datasets.Dataset`): ``prompt`` / ``completion`` rows, plus ``partition_by`` when no
            ``partitioner`` is given.
        tokenizer (*optional*): defaults to the one in ``base_model``'s folder.
        eval_dataset (`datasets.Dataset`, *optional*): the server's held-out set (centralised evaluation after each
            round); without it, no eval metrics are recorded.
        partitioner (`flwr_datasets.partitioner.Partitioner`, *optional*): defaults to
            :func:`~hfx.federated.devft.data.make_partitioner` (Dirichlet over ``partition_by`` with
            ``dirichlet_alpha``, seeded by ``config.seed``).
        eval_every (`int`, *optional*, defaults to 1): evaluate every this many global rounds (and after the last).
        eval_stage_start (`bool`, *optional*, defaults to True): also evaluate each stage's initial (transferred) model.
        progress (`bool`, *optional*, defaults to True): a tqdm bar over rounds (stage, layers, MB sent, eval loss).
        verbose (`bool`, *optional*, defaults to False): keep Flower's INFO logs and Ray's worker logs.
        round_timeout (`float`, *optional*, defaults to 3600): seconds the server waits for a round's replies.

    Returns:
        `DevFTResult`.

    Raises:
        ValueError: for a bad argument (the message names it).
        RuntimeError: if a client fails or Flower's simulation engine exits.
    """
    if not isinstance(config, DevFTConfig):
        raise TypeError(f"`config` must be a DevFTConfig, got {type(config).__name__}")
    if not isinstance(eval_every, int) or eval_every < 1:
        raise ValueError(f"`eval_every` must be a positive integer, but is {eval_every!r}")
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from .data import client_partition, encode_examples, make_partitioner

    start = time.perf_counter()
    torch.set_num_threads(config.torch_threads)
    with tempfile.TemporaryDirectory(prefix="hfx-devft-") as tmp:
        if isinstance(base_model, (str, Path)):
            base_path = str(base_model)
            if not Path(base_path).is_dir():
                raise ValueError(f"`base_model` must be a local folder (clients load it from disk), got {base_path!r}")
            from hfx.utils.artifacts import require_artifact

            # an adapter folder (SLAO, LoRA) would make transformers fetch its base model from the Hub
            require_artifact(base_path, ("transformers:causal_lm",), arg="base_model", what="a causal LM folder")
            model = AutoModelForCausalLM.from_pretrained(base_path, dtype=torch.float32).eval()
            tokenizer = tokenizer if tokenizer is not None else AutoTokenizer.from_pretrained(base_path)
        else:
            if tokenizer is None:
                raise ValueError("`tokenizer` is required when `base_model` is a model instance")
            model, base_path = base_model, tmp
            model.save_pretrained(tmp)
            tokenizer.save_pretrained(tmp)
        if partitioner is None:
            if partition_by not in train_dataset.column_names:
                raise ValueError(f"`partition_by`={partition_by!r} is not a column of `train_dataset`")
            partitioner = make_partitioner(config.num_clients, partition_by, dirichlet_alpha, config.seed)
        probe = copy.deepcopy(partitioner)
        probe.dataset = train_dataset
        if probe.num_partitions != config.num_clients:
            raise ValueError(
                f"the partitioner has {probe.num_partitions} partitions but `config.num_clients`={config.num_clients}"
            )
        parts = [client_partition(train_dataset, partitioner, i) for i in range(config.num_clients)]
        column = getattr(partitioner, "_partition_by", partition_by)
        counts = [
            dict(sorted(_count(p[column]).items())) if column in p.column_names else {} for p in parts
        ]  # fmt: skip
        eval_examples = encode_examples(tokenizer, eval_dataset, config.max_length) if eval_dataset is not None else []

        scheduler = DevFTScheduler(model, config)
        scheduler.plans()  # similarity + grouping once, before the clients start
        server_run = _ServerRun(
            scheduler,
            tokenizer,
            eval_examples,
            eval_every=eval_every,
            eval_stage_start=eval_stage_start,
            progress=progress,
            round_timeout=round_timeout,
        )
        client_app = make_client_app(base_path, train_dataset, partitioner, config)
        _simulate(make_server_app(server_run), client_app, config, verbose)
    if server_run.final_state is None:
        raise RuntimeError("the Flower simulation ended without a final model (see the log above)")
    lora_config = scheduler.lora_config().to_dict()
    lora_config["base_model_name_or_path"] = _model_id(model, base_path, isinstance(base_model, (str, Path)))
    lora_config = json.loads(json.dumps(lora_config, default=list))
    plans = [p.to_dict() for p in scheduler.plans()]
    for plan, sources in zip(plans, server_run.transfers):
        plan["lora_sources"] = sources
    return DevFTResult(
        config=config.to_dict(),
        base_model=lora_config["base_model_name_or_path"] or "(in-memory model)",
        plans=plans,
        history=server_run.history,
        lora_state=server_run.final_state,
        lora_config=lora_config,
        partition_sizes=[len(p) for p in parts],
        partition_counts=counts,
        final_eval=server_run.final_eval,
        wall_seconds=time.perf_counter() - start,
    )


def _count(values) -> dict:
    out: dict = {}
    for v in values:
        out[v] = out.get(v, 0) + 1
    return out


def _model_id(model, base_path: str, from_folder: bool) -> str | None:
    """The base model's Hub id or folder, for the adapter config (``None`` for an unnamed in-memory model)."""
    if from_folder:
        return str(base_path)
    name = getattr(model.config, "_name_or_path", "") or ""
    return name if name and not name.startswith(tempfile.gettempdir()) else None


def _simulate(server_app, client_app, config: DevFTConfig, verbose: bool) -> None:
    """``flwr.simulation.run_simulation`` on a fresh local Ray instance; Ray is shut down and every process started
    here has exited (or been terminated) when this returns, also on errors."""
    import psutil
    from flwr.simulation import run_simulation

    flwr_logger = logging.getLogger("flwr")
    old_level = flwr_logger.level
    if not verbose:
        flwr_logger.setLevel(logging.ERROR)
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    backend_config = {
        "client_resources": {"num_cpus": config.client_num_cpus, "num_gpus": 0.0},
        "init_args": {
            "address": "local",  # never join another user's Ray cluster
            "num_cpus": max(1, math.ceil(config.num_workers * config.client_num_cpus)),
            "num_gpus": 0,
            "include_dashboard": False,
            "object_store_memory": 200 * 2**20,
            "logging_level": "info" if verbose else "error",
            "log_to_driver": verbose,
        },
    }
    env_threads = os.environ.get("OMP_NUM_THREADS")
    os.environ["OMP_NUM_THREADS"] = str(config.torch_threads)  # inherited by the Ray actors
    try:
        run_simulation(
            server_app=server_app,
            client_app=client_app,
            num_supernodes=config.num_clients,
            backend_config=backend_config,
            verbose_logging=verbose,
        )
    except SystemExit as err:  # Flower's engine calls sys.exit on some failures
        raise RuntimeError(f"Flower's simulation engine exited with code {err.code}") from err
    finally:
        flwr_logger.setLevel(old_level)
        if env_threads is None:
            os.environ.pop("OMP_NUM_THREADS", None)
        else:
            os.environ["OMP_NUM_THREADS"] = env_threads
        shutdown_ray(before)


def shutdown_ray(keep: set[int] | None = None, timeout: float = 20.0) -> list[int]:
    """``ray.shutdown()``, then wait for this process's child processes not in ``keep`` (Ray's GCS, raylet and
    workers) to exit, terminating (then killing) by pid any that outlive ``timeout`` seconds.

    Returns:
        `list[int]`: pids that had to be terminated.
    """
    import psutil

    try:
        import ray

        if ray.is_initialized():
            ray.shutdown()
    except ImportError:
        pass
    keep = keep or set()
    deadline = time.monotonic() + timeout
    while True:
        alive = [p for p in psutil.Process().children(recursive=True) if p.pid not in keep and _alive(p)]
        if not alive or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    for p in alive:
        p.terminate()
    _, still = psutil.wait_procs(alive, timeout=5)
    for p in still:
        p.kill()
    return [p.pid for p in alive]


def _alive(proc) -> bool:
    import psutil

    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
