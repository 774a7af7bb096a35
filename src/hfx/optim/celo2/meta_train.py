"""Meta-train Celo2's MLP with truncated Persistent Evolution Strategies (PES) on CPU-sized tasks.

The paper's recipe [code: ``celo.train --trainer=pes``]: PES (Vicol et al., 2021) with antithetic perturbations,
8 task instances per family, unroll lengths log-uniform in [100, 2000] cut into truncations of 50 steps, AdamW as the
outer optimizer (lr 5e-5), 100k outer iterations, global "reparam" augmentation, inner step multiplier 1e-3; about
4.5 GPU-hours. Here, shrunk to what 2 CPU cores do in tens of minutes ([reconstruction] choices, all in
:class:`MetaTrainConfig`):

* task families from :mod:`hfx.optim.celo2.tasks` (4x4 digits MLP, teacher-student MLP, character MLP LM);
* unrolls log-uniform in ``[min_unroll, max_unroll]`` = [50, 400], truncations of ``trunc_length`` = 20 steps;
* outer Adam, lr ``3e-4``, PES std ``0.01`` (learned_optimization's default), gradient-norm clip 1;
* the meta-loss of a truncation is the mean inner training loss over its steps, divided by ``log(num_classes)``
  and capped at 3 (a diverged member counts as 3);
* start from the ``"adam_like"`` rule (:class:`~hfx.optim.celo2.Celo2MetaWeights`) instead of a random MLP;
* inner biases use AdamW(0.9, 0.95) with the same LR (the optimizer's defaults), not the reference meta-training's
  Adam without bias correction at 20x the LR;
* the reparam augmentation scales every parameter of an instance by one log-uniform factor in ``reparam_range``
  ([0.1, 10] instead of [1e-3, 1e3]): the learned rule sees ``p / s`` and ``g * s``.

PES estimator (for particle i with accumulated perturbation ``xi_i``): each truncation draws ``eps_i ~ N(0, std^2 I)``,
sets ``xi_i += eps_i``, unrolls the ``+`` member with ``theta + eps_i`` and the ``-`` member with ``theta - eps_i``
from their own persistent states, and estimates ``grad = sum_i xi_i (L+_i - L-_i) / (2 std^2 K)``. When an unroll
reaches its length, both members restart from a fresh task instance and ``xi_i = 0``.

Run: ``python -m hfx.optim.celo2.meta_train --max-minutes 40 --output-dir outputs/celo2_meta`` (tqdm bar,
checkpoints every ``checkpoint_every`` iterations, ``history.jsonl``; ``--resume`` continues from the latest
checkpoint with fresh particles). Publish with ``hfx publish celo2 --source outputs/celo2_meta/final --out DIR``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch

from .functional import celo2_step_direction, init_state
from .meta_weights import Celo2MetaWeights, batched_mlp_weights
from .tasks import FAMILIES, Population, TaskFamily


@dataclass
class MetaTrainConfig:
    """Settings of :class:`MetaTrainer` (see the module docstring for which are the paper's and which are ours)."""

    families: tuple[str, ...] = ("digits_mlp", "teacher_mlp", "char_mlp")
    num_particles: int = 8
    trunc_length: int = 20
    min_unroll: int = 50
    max_unroll: int = 400
    pes_std: float = 0.01
    outer_lr: float = 3e-4
    outer_grad_clip: float | None = 1.0
    outer_iterations: int = 100_000
    max_minutes: float | None = None
    inner_lr: float = 3e-3
    adamw_betas: tuple[float, float] = (0.9, 0.95)
    reparam_range: tuple[float, float] = (0.1, 10.0)
    loss_cap: float = 3.0
    init: str = "adam_like"
    init_from: str | None = None
    orthogonalize: bool = True
    seed: int = 0
    checkpoint_every: int = 200
    eval_every: int = 250
    eval_instances: int = 4
    eval_steps: int = 150
    output_dir: str = "outputs/celo2_meta"
    meta_weights_kwargs: dict = field(default_factory=dict)

    def __post_init__(self):
        unknown = [f for f in self.families if f not in FAMILIES]
        if unknown or not self.families:
            raise ValueError(f"`families` must be a non-empty subset of {sorted(FAMILIES)}, got {self.families}")
        if self.num_particles < 1 or self.trunc_length < 1 or not 1 <= self.min_unroll <= self.max_unroll:
            raise ValueError("need num_particles >= 1, trunc_length >= 1 and 1 <= min_unroll <= max_unroll")
        if not self.pes_std > 0 or not self.outer_lr > 0 or not self.inner_lr > 0:
            raise ValueError("`pes_std`, `outer_lr` and `inner_lr` must be > 0")
        lo, hi = self.reparam_range
        if not 0 < lo <= hi:
            raise ValueError(f"`reparam_range` must satisfy 0 < low <= high, but is {self.reparam_range}")


class _FamilyRun:
    """Persistent PES particles of one task family: ``K`` particles = ``M = 2K`` members ([+ ..., - ...])."""

    def __init__(self, family: TaskFamily, meta: Celo2MetaWeights, K: int, cfg: MetaTrainConfig, gen):
        self.family, self.meta, self.K, self.M, self.cfg, self.gen = family, meta, K, 2 * K, cfg, gen
        self.shapes = family.shapes()
        self.roles = {n: "adamw" if n.endswith(".bias") else "celo2" for n in self.shapes}
        self.pop = Population(params={}, scale=torch.ones(self.M), extra={})
        self.state: dict[str, dict[str, torch.Tensor]] = {}
        self.step = torch.zeros(self.M, dtype=torch.long)
        self.length = torch.zeros(K, dtype=torch.long)
        self.xi = torch.zeros(K, meta.num_parameters())
        self._alloc()
        self.reset(torch.arange(K))
        # de-synchronise the particles (reference: random_initial_iteration_offset)
        self.length = (self.length * torch.rand(K, generator=gen)).long().clamp_min(1)

    def _alloc(self):
        mw = self.meta
        for name, shape in self.shapes.items():
            self.pop.params[name] = torch.zeros(self.M, *shape)
            if self.roles[name] == "adamw":
                self.state[name] = {"exp_avg": torch.zeros(self.M, *shape), "exp_avg_sq": torch.zeros(self.M, *shape)}
            else:
                one = init_state(shape, len(mw.momentum_decays), len(mw.rms_decays), len(mw.adafactor_decays))
                self.state[name] = {k: torch.zeros(self.M, *v.shape) for k, v in one.items()}

    def _sample_length(self, n: int) -> torch.Tensor:
        lo, hi = math.log(self.cfg.min_unroll), math.log(self.cfg.max_unroll)
        return torch.exp(lo + (hi - lo) * torch.rand(n, generator=self.gen)).round().long()

    def reset(self, particles: torch.Tensor) -> None:
        """Fresh task instances for ``particles`` (both members, identical), zero state, ``xi = 0``."""
        if len(particles) == 0:
            return
        n = len(particles)
        members = torch.cat([particles, particles + self.K])
        init = self.family.init_params(n, self.gen)
        lo, hi = (math.log(v) for v in self.cfg.reparam_range)
        scale = torch.exp(lo + (hi - lo) * torch.rand(n, generator=self.gen))
        extra = self.family.init_extra(n, self.gen)
        with torch.no_grad():
            for name, value in init.items():
                p_prime = value / scale.view(n, *([1] * (value.ndim - 1)))
                self.pop.params[name][members] = torch.cat([p_prime, p_prime])
                for tensor in self.state[name].values():
                    tensor[members] = 0
            self.pop.scale[members] = torch.cat([scale, scale])
            for key, value in extra.items():
                if key not in self.pop.extra:
                    self.pop.extra[key] = torch.zeros(self.M, *value.shape[1:])
                self.pop.extra[key][members] = torch.cat([value, value])
        self.step[members] = 0
        self.length[particles] = self._sample_length(n)
        self.xi[particles] = 0

    def inner_step(self, weights, lr: float, batch) -> torch.Tensor:
        """One training step of every member; returns the losses ``(M,)`` before the step."""
        params = {k: v.requires_grad_(True) for k, v in self.pop.params.items()}
        losses = self.family.loss(self.pop, batch)
        grads = torch.autograd.grad(losses.sum(), list(params.values()))
        b1, b2 = self.cfg.adamw_betas
        with torch.no_grad():
            self.step += 1
            t = self.step.to(torch.float32)
            for (name, p), g in zip(params.items(), grads):
                g = torch.nan_to_num(g, nan=0.0, posinf=1e3, neginf=-1e3)
                st = self.state[name]
                if self.roles[name] == "adamw":
                    st["exp_avg"].lerp_(g, 1 - b1)
                    st["exp_avg_sq"].mul_(b2).addcmul_(g, g, value=1 - b2)
                    view = (self.M,) + (1,) * (p.ndim - 1)
                    m_hat = st["exp_avg"] / (1 - b1**t).view(view)
                    v_hat = st["exp_avg_sq"] / (1 - b2**t).view(view)
                    p.sub_(lr * m_hat / (v_hat.sqrt() + 1e-8))
                else:
                    d = celo2_step_direction(
                        p.detach(), g, st, weights, **self.meta.rule_config(), orthogonalize=self.cfg.orthogonalize
                    )
                    p.sub_(lr * d)
                p.nan_to_num_(nan=0.0, posinf=1e6, neginf=-1e6)
        return losses.detach()

    def normalised(self, losses: torch.Tensor) -> torch.Tensor:
        scaled = losses / math.log(self.family.num_classes)
        cap = self.cfg.loss_cap
        return torch.nan_to_num(scaled, nan=cap, posinf=cap).clamp(max=cap)

    def truncation(self, theta: torch.Tensor, std: float) -> tuple[torch.Tensor, torch.Tensor, float]:
        """One PES truncation; returns ``(xi (K, P), L+ - L- (K,), mean meta-loss)``."""
        done = torch.nonzero(self.step[: self.K] >= self.length).flatten()
        self.reset(done)
        eps = torch.randn(self.K, theta.numel(), generator=self.gen) * std
        self.xi += eps
        thetas = torch.cat([theta + eps, theta - eps])
        weights = batched_mlp_weights(self.meta, thetas)
        total = torch.zeros(self.M)
        for _ in range(self.cfg.trunc_length):
            total += self.normalised(self.inner_step(weights, self.cfg.inner_lr, self.family.sample_batch(self.gen)))
        mean = total / self.cfg.trunc_length
        return self.xi.clone(), mean[: self.K] - mean[self.K :], mean.mean().item()


class MetaTrainer:
    """PES meta-training of :class:`~hfx.optim.celo2.Celo2MetaWeights` (see the module docstring).

    Args:
        config (:class:`MetaTrainConfig`): settings.

    Example:

    ```python
    >>> from hfx.optim.celo2.meta_train import MetaTrainConfig, MetaTrainer
    >>> MetaTrainer(MetaTrainConfig(max_minutes=5, output_dir="outputs/celo2_meta")).train()
    ```
    """

    def __init__(self, config: MetaTrainConfig):
        self.cfg = config
        torch.manual_seed(config.seed)
        self.gen = torch.Generator().manual_seed(config.seed)
        if config.init_from:
            from .optimizer import load_meta_weights

            self.meta = load_meta_weights(config.init_from)
        else:
            self.meta = Celo2MetaWeights(init=config.init, seed=config.seed, **config.meta_weights_kwargs)
        self.theta = self.meta.flat_parameters().clone()
        self.adam_m = torch.zeros_like(self.theta)
        self.adam_v = torch.zeros_like(self.theta)
        self.iteration, self.elapsed, self.history = 0, 0.0, []
        self.families = [FAMILIES[name]() for name in config.families]
        self.out = Path(config.output_dir)
        self.best = math.inf
        self.initial_eval: dict | None = None
        self.adamw_eval: dict | None = None

    # ------------------------------------------------------------------------------------------------ estimator
    def estimate(self, runs: list[_FamilyRun]) -> tuple[torch.Tensor, float]:
        """PES gradient averaged over families, and the mean meta-loss of the truncation."""
        grad, loss = torch.zeros_like(self.theta), 0.0
        for run in runs:
            xi, delta, mean = run.truncation(self.theta, self.cfg.pes_std)
            grad += (xi * delta.unsqueeze(1)).sum(0) / (2 * self.cfg.pes_std**2 * run.K)
            loss += mean / len(runs)
        return grad / len(runs), loss

    def _outer_step(self, grad: torch.Tensor) -> float:
        norm = grad.norm().item()
        if self.cfg.outer_grad_clip and norm > self.cfg.outer_grad_clip:
            grad = grad * (self.cfg.outer_grad_clip / norm)
        t = self.iteration + 1
        self.adam_m.mul_(0.9).add_(grad, alpha=0.1)
        self.adam_v.mul_(0.999).addcmul_(grad, grad, value=0.001)
        m_hat, v_hat = self.adam_m / (1 - 0.9**t), self.adam_v / (1 - 0.999**t)
        self.theta -= self.cfg.outer_lr * m_hat / (v_hat.sqrt() + 1e-8)
        return norm

    # -------------------------------------------------------------------------------------------------- evaluate
    @torch.no_grad()
    def evaluate(self, theta: torch.Tensor | None = None, baseline: str | None = None) -> dict[str, float]:
        """Mean normalised training loss over the last 10 of ``eval_steps`` steps, fixed task instances per family.

        ``baseline="adamw"`` trains every tensor with AdamW at ``inner_lr`` instead (context for the numbers).
        """
        theta = self.theta if theta is None else theta
        out = {}
        for family in self.families:
            gen = torch.Generator().manual_seed(10_000 + self.cfg.seed)
            run = _FamilyRun(family, self.meta, self.cfg.eval_instances, self.cfg, gen)
            run.reset(torch.arange(run.K))
            if baseline == "adamw":
                run.roles = dict.fromkeys(run.shapes, "adamw")
                for name, shape in run.shapes.items():
                    run.state[name] = {"exp_avg": torch.zeros(run.M, *shape), "exp_avg_sq": torch.zeros(run.M, *shape)}
            weights = batched_mlp_weights(self.meta, theta.expand(run.M, -1).contiguous())
            tail = []
            for step in range(self.cfg.eval_steps):
                with torch.enable_grad():
                    losses = run.inner_step(weights, self.cfg.inner_lr, family.sample_batch(gen))
                if step >= self.cfg.eval_steps - 10:
                    tail.append(run.normalised(losses).mean().item())
            out[family.name] = sum(tail) / len(tail)
        out["mean"] = sum(out.values()) / len(self.families)
        return out

    # ------------------------------------------------------------------------------------------------ checkpoints
    def _meta_with(self, theta: torch.Tensor) -> Celo2MetaWeights:
        meta = Celo2MetaWeights(**self.meta._hub_mixin_config)
        return meta.load_flat_parameters_(theta)

    def save(self, name: str) -> Path:
        """Write ``output_dir/name``: the meta-weights (``save_pretrained``) and the resumable trainer state."""
        folder = self.out / name
        self._meta_with(self.theta).save_pretrained(folder)
        torch.save(
            {
                "theta": self.theta,
                "adam_m": self.adam_m,
                "adam_v": self.adam_v,
                "iteration": self.iteration,
                "elapsed": self.elapsed,
                "best": self.best,
                "initial_eval": self.initial_eval,
                "adamw_eval": self.adamw_eval,
                "generator": self.gen.get_state(),
                "config": dataclasses.asdict(self.cfg),
            },
            folder / "meta_train_state.pt",
        )
        (folder / "meta_train_config.json").write_text(json.dumps(self.summary(), indent=2))
        return folder

    def load(self, folder) -> None:
        """Resume from a folder written by :meth:`save` (particles restart from fresh instances)."""
        state = torch.load(Path(folder) / "meta_train_state.pt", weights_only=False)
        self.theta, self.adam_m, self.adam_v = state["theta"], state["adam_m"], state["adam_v"]
        self.iteration, self.elapsed, self.best = state["iteration"], state["elapsed"], state["best"]
        self.initial_eval, self.adamw_eval = state.get("initial_eval"), state.get("adamw_eval")
        self.gen.set_state(state["generator"])

    def summary(self) -> dict:
        return {
            "config": dataclasses.asdict(self.cfg),
            "outer_iterations_done": self.iteration,
            "wall_minutes": round(self.elapsed / 60, 2),
            "inner_steps_per_member": self.iteration * self.cfg.trunc_length,
            "meta_parameters": self.meta.num_parameters(),
            "eval_initial_rule": self.initial_eval,
            "eval_adamw_baseline": self.adamw_eval,
            "eval_best": self.best,
            "torch": torch.__version__,
            "threads": torch.get_num_threads(),
        }

    # ------------------------------------------------------------------------------------------------------ train
    def train(self, resume: bool = False) -> Path:
        """Run PES until ``outer_iterations`` or ``max_minutes``; returns the ``final`` meta-weights folder."""
        from tqdm.auto import tqdm

        self.out.mkdir(parents=True, exist_ok=True)
        if resume and (self.out / "checkpoint-latest" / "meta_train_state.pt").is_file():
            self.load(self.out / "checkpoint-latest")
        log = (self.out / "history.jsonl").open("a")
        if self.iteration == 0:
            self.initial_eval = self.evaluate(self.theta)
            self.adamw_eval = self.evaluate(baseline="adamw")
            self.best = self.initial_eval["mean"]
            log.write(json.dumps({"iteration": 0, "eval": self.initial_eval, "eval_adamw": self.adamw_eval}) + "\n")
            log.flush()
            self.save("best")
        runs = [_FamilyRun(f, self.meta, self.cfg.num_particles, self.cfg, self.gen) for f in self.families]
        start = time.monotonic() - self.elapsed
        budget = None if self.cfg.max_minutes is None else self.cfg.max_minutes * 60
        bar = tqdm(total=self.cfg.outer_iterations, initial=self.iteration, desc="Celo2 PES", dynamic_ncols=True)
        try:
            while self.iteration < self.cfg.outer_iterations:
                if budget is not None and time.monotonic() - start >= budget:
                    break
                grad, meta_loss = self.estimate(runs)
                norm = self._outer_step(grad)
                self.iteration += 1
                self.elapsed = time.monotonic() - start
                record = {
                    "iteration": self.iteration,
                    "meta_loss": round(meta_loss, 5),
                    "grad_norm": round(norm, 5),
                    "elapsed_s": round(self.elapsed, 1),
                }
                if self.iteration % self.cfg.eval_every == 0:
                    record["eval"] = self.evaluate()
                    if record["eval"]["mean"] < self.best:
                        self.best = record["eval"]["mean"]
                        self.save("best")
                    bar.set_postfix(eval=f"{record['eval']['mean']:.3f}", best=f"{self.best:.3f}")
                if self.iteration % self.cfg.checkpoint_every == 0:
                    self.save("checkpoint-latest")
                log.write(json.dumps(record) + "\n")
                log.flush()
                bar.update(1)
        finally:
            bar.close()
            log.flush()
            log.close()
        self.elapsed = time.monotonic() - start
        final_eval = self.evaluate()
        if final_eval["mean"] < self.best:
            self.best = final_eval["mean"]
            self.save("best")
        self.save("checkpoint-latest")
        folder = self.save("final")
        summary = {**self.summary(), "final_eval": final_eval, "best_eval": self.best}
        (self.out / "summary.json").write_text(json.dumps(summary, indent=2))
        return folder


def _parse(argv=None) -> tuple[MetaTrainConfig, bool]:
    parser = argparse.ArgumentParser(description="Meta-train Celo2 with PES on CPU-sized tasks.")
    for f in dataclasses.fields(MetaTrainConfig):
        if f.name == "meta_weights_kwargs":
            continue
        flag = "--" + f.name.replace("_", "-")
        default = f.default if f.default is not dataclasses.MISSING else None
        if isinstance(default, bool):
            parser.add_argument(flag, type=lambda s: s.lower() in ("1", "true", "yes"), default=default)
        elif isinstance(default, tuple):
            parser.add_argument(flag, nargs="+", type=type(default[0]), default=default)
        elif default is None:
            parser.add_argument(flag, type=float if "minutes" in f.name or "clip" in f.name else str, default=None)
        else:
            parser.add_argument(flag, type=type(default), default=default)
    parser.add_argument("--resume", action="store_true", help="continue from output_dir/checkpoint-latest")
    args = vars(parser.parse_args(argv))
    resume = args.pop("resume")
    args = {k: tuple(v) if isinstance(v, list) else v for k, v in args.items()}
    return MetaTrainConfig(**args), resume


def main(argv=None) -> int:
    """``python -m hfx.optim.celo2.meta_train [--max-minutes M] [--output-dir DIR] [--resume] ...``."""
    cfg, resume = _parse(argv)
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", torch.get_num_threads())))
    folder = MetaTrainer(cfg).train(resume=resume)
    print(f"meta-weights: {folder}")  # noqa: T201
    print((Path(cfg.output_dir) / "summary.json").read_text())  # noqa: T201
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())


__all__ = ["MetaTrainConfig", "MetaTrainer", "main"]
