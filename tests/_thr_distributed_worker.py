"""Worker for tests/test_thr_multiprocess.py: THR runs and sharded-head checks, on 1 process or under torchrun.

    python tests/_thr_distributed_worker.py OUT_DIR [CONFIG ...]                  # one process (the reference)
    python -m torch.distributed.run --nproc_per_node 2 tests/_thr_distributed_worker.py OUT_DIR [CONFIG ...] --fsdp

Each CONFIG (see ``CONFIGS``) trains a tiny Llama with `THRGRPOTrainer` for 2 steps (SGD, gloo) and writes, per
process, ``OUT_DIR/<config>.rank<r>.pt``: the world size, this process's global row offset, per step the completions,
THR, scores, dominant masks, token advantages, the loss and the exchange statistics, and the parameters at the end.

Completions are sampled reproducibly whatever the batch layout: the model's ``generate`` adds Gumbel noise seeded by
(step, global row, position) to the logits and decodes greedily (the Gumbel-max trick), so row ``i`` of the global
batch gets the same completion on 1 or 2 processes. Rewards depend on the global row index only.

``--fsdp`` (2 processes) adds a check of the sharded path with torch's FSDP2 (``fully_shard``) on CPU: hidden states
captured during ``generate`` on a sharded model, then ``pi_old`` from them through ``gathered_output_head`` +
``output_logits``, against a plain forward of an unsharded copy; each process calls the head a different number of
times inside one gathered context (a per-call collective would hang). Written to ``OUT_DIR/fsdp.rank<r>.pt``.
"""

from __future__ import annotations

import copy
import os
import sys
from pathlib import Path


os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")

import torch


PROMPTS = ["hello world", "two plus two ?", "the quick brown", "a photo of", "tom has 3 apples", "think step"]

# layout: per-process batch B and group size G (on 2 processes: whole groups when G divides B, else split)
LAYOUTS = {"whole": dict(per_device=4, num_generations=4), "split": dict(per_device=6, num_generations=4)}
CONFIGS = {
    f"{layout}-{mode}-{exchange}": dict(layout=layout, thr_mode=mode, thr_exchange=exchange)
    for layout, exchanges in (("whole", ["auto"]), ("split", ["hidden_states", "gram"]))
    for mode in ("reweight", "thr_only", "nthr")
    for exchange in exchanges
}
CONFIGS["split-reweight-auto-forward"] = dict(
    layout="split", thr_mode="reweight", thr_exchange="auto", thr_hidden_states="forward"
)
for _cfg in CONFIGS.values():  # without the self terms the dominant tokens are not just the correct ones
    _cfg["thr_include_self"] = _cfg["thr_mode"] != "thr_only"


def _rank() -> int:
    return int(os.environ.get("RANK", "0"))


class _RowGumbel:
    """Adds Gumbel(0, 1) noise seeded by (step, global row, position): greedy decoding then samples softmax(logits)
    identically for a row whatever the batch it is generated in."""

    def __init__(self, step: int, row_offset: int):
        self.step, self.row_offset, self.prompt_length = step, row_offset, None

    def __call__(self, input_ids, scores):
        if self.prompt_length is None:  # the prompts' padded length differs between layouts: count new tokens
            self.prompt_length = input_ids.size(1)
        position = input_ids.size(1) - self.prompt_length
        noise = torch.empty_like(scores)
        for i in range(scores.size(0)):
            gen = torch.Generator().manual_seed(1_000_003 * self.step + 1_009 * (self.row_offset + i) + position)
            u = torch.rand(scores.size(1), generator=gen, dtype=torch.float64).clamp(1e-12, 1 - 1e-12)
            noise[i] = (-torch.log(-torch.log(u))).to(scores.dtype)
        noise[:, 2] += 3.7  # favour </s> (id 2): completions of different lengths (~10 % per step)
        return scores + noise


def _row_sampled(model, local_batch: int):
    """Make ``model.generate`` sample with :class:`_RowGumbel` (an instance-level wrapper, test only)."""
    from transformers import LogitsProcessorList

    original = model.generate
    calls = {"n": 0}

    def generate(*args, **kwargs):
        calls["n"] += 1
        kwargs["logits_processor"] = LogitsProcessorList([_RowGumbel(calls["n"], _rank() * local_batch)])
        return original(*args, **kwargs)

    model.generate = generate
    return model


def _reward_for(local_batch: int):
    def reward(prompts, completions, completion_ids, **kwargs):
        # a mixed pattern over each group of 4 global rows, shifted by the prompt: groups are mixed, with their
        # correct responses on both processes when the group is split
        rows = range(_rank() * len(prompts), (_rank() + 1) * len(prompts))
        return [float((row + len(completion_ids[i]) // 3) % 3 != 1) for i, row in enumerate(rows)]

    return reward


def run_config(name: str, out_dir: Path, world: int) -> None:
    from datasets import Dataset

    from hfx.testing import tiny_llama
    from hfx.trainers.thr import THRGRPOConfig, THRGRPOTrainer

    cfg = dict(CONFIGS[name])
    layout = LAYOUTS[cfg.pop("layout")]
    local_batch = layout["per_device"] * 2 // world  # the same global batch on 1 or 2 processes
    records = []

    class RecordingTrainer(THRGRPOTrainer):
        def _generate_and_score_completions(self, inputs):
            out = super()._generate_and_score_completions(inputs)
            exchange = self.last_thr_exchange
            records.append(
                {
                    "completion_ids": out["completion_ids"].cpu(),
                    "completion_mask": out["completion_mask"].cpu(),
                    "thr": self.last_thr["thr"],
                    "scores": self.last_thr["scores"],
                    "dominant": self.last_thr["dominant"],
                    "advantages": out["advantages"].detach().cpu(),
                    "exchange": None if exchange is None else (exchange.kind, exchange.bytes_received),
                }
            )
            return out

        def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
            loss = super().compute_loss(model, inputs, return_outputs, num_items_in_batch)
            records[-1]["loss"] = loss.detach().cpu()
            return loss

    model, tok = tiny_llama()
    _row_sampled(model, local_batch)
    args = THRGRPOConfig(
        output_dir=str(out_dir / f"run-{name}-{world}"),
        max_steps=2,
        per_device_train_batch_size=local_batch,
        num_generations=layout["num_generations"],
        max_completion_length=8,
        generation_kwargs={"do_sample": False, "top_k": None, "top_p": None},
        learning_rate=0.5,
        optim="sgd",
        thr_p=0.5,
        thr_tau_beta=0.5,
        use_cpu=True,
        bf16=False,
        ddp_backend="gloo" if world > 1 else None,
        save_strategy="no",
        report_to="none",
        logging_steps=1,
        disable_tqdm=True,
        seed=0,
        **cfg,
    )
    trainer = RecordingTrainer(
        model=model,
        reward_funcs=_reward_for(local_batch),
        args=args,
        train_dataset=Dataset.from_dict({"prompt": PROMPTS * 4}),
        processing_class=tok,
    )
    assert trainer.accelerator.num_processes == world, (trainer.accelerator.num_processes, world)
    trainer.train()
    params = {
        n: p.detach().cpu().clone() for n, p in trainer.accelerator.unwrap_model(trainer.model).named_parameters()
    }
    torch.save(
        {
            "world_size": trainer.accelerator.num_processes,
            "row_offset": trainer.accelerator.process_index * local_batch,
            "steps": records,
            "params": params,
        },
        out_dir / f"{name}.rank{trainer.accelerator.process_index}.pt",
    )


def fsdp_check(out_dir: Path) -> None:
    """FSDP2 on CPU: capture during generate on the sharded model vs a plain forward of an unsharded copy."""
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    from hfx.testing import tiny_llama
    from hfx.trainers.thr.policy import capture_last_hidden_states, gathered_output_head, output_logits

    if not dist.is_initialized():
        dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    mesh = init_device_mesh("cpu", (world,))
    result = {"world_size": world}
    for head_unit in (False, True):  # the LM head in the root's unit, or its own unit
        model, tok = tiny_llama()
        reference = copy.deepcopy(model)
        for layer in model.model.layers:
            fully_shard(layer, mesh=mesh)
        if head_unit:
            fully_shard(model.lm_head, mesh=mesh)
        fully_shard(model, mesh=mesh)
        prompts = ["hello world", "two plus two ?"] if rank == 0 else ["the quick brown fox", "a"]
        enc = tok(prompts, return_tensors="pt", padding=True)
        with torch.no_grad(), capture_last_hidden_states(model.model) as steps:
            out = model.generate(**enc, max_new_tokens=5, do_sample=False, pad_token_id=tok.pad_token_id)
        completion = out[:, enc["input_ids"].size(1) :]
        hidden = torch.stack(steps[: completion.size(1)], dim=1)
        # make the head sharded again (after generate the root keeps it unsharded), then compute pi_old
        model.reshard()
        if head_unit:
            model.lm_head.reshard()
        sharded_before = type(model.lm_head.weight).__name__
        with torch.no_grad(), gathered_output_head(model) as head:
            calls = 1 + rank * 2  # different numbers of head calls per process: must not hang
            for _ in range(calls):
                logits = output_logits(model, hidden, head=head)
        with torch.no_grad():
            mask = torch.cat([enc["attention_mask"], torch.ones_like(completion)], dim=1)
            ref_logits = reference(input_ids=out, attention_mask=mask).logits[:, enc["input_ids"].size(1) - 1 : -1]
        result[f"head_unit={head_unit}"] = {
            "sharded_before": sharded_before,
            "head_type": type(head).__name__,
            "probs": torch.softmax(logits.float(), -1),
            "ref_probs": torch.softmax(ref_logits.float(), -1),
        }
    torch.save(result, out_dir / f"fsdp.rank{rank}.pt")


def main(argv: list[str]) -> None:
    out_dir = Path(argv[0])
    out_dir.mkdir(parents=True, exist_ok=True)
    names = [a for a in argv[1:] if not a.startswith("--")]
    world = int(os.environ.get("WORLD_SIZE", "1"))
    for name in names:
        run_config(name, out_dir, world)
    if "--fsdp" in argv:
        fsdp_check(out_dir)
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        dist.barrier()
        dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1:])
