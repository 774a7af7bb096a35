"""TRL's online trainers with the fluent-alignment provenance guard and a ``judge=`` argument.

``FluentOnlineDPOTrainer`` and ``FluentGRPOTrainer`` add two things to their parents and change nothing else (their
training step is the parent's, see the parity tests):

* the provenance guard (:class:`~hfx.recipes.fluent.provenance.ProvenanceGuard`) checks ``train_dataset`` before
  the parent loads or copies any model, and refuses target-language text that is not a native prompt or the policy's
  own samples;
* ``judge=`` takes a [`~hfx.recipes.fluent.ConstitutionJudge`] (the ``judge=`` of TRL < 1.0's ``OnlineDPOTrainer``),
  turned into a reward function with :meth:`~hfx.recipes.fluent.ConstitutionJudge.as_reward_function`; the judge's
  counters are logged as ``judge/forward_prompts`` and ``judge/tie_fraction``.
"""

from __future__ import annotations

from typing import Any, ClassVar

from trl import GRPOTrainer
from trl.experimental.online_dpo import OnlineDPOTrainer

from .judge import ConstitutionJudge
from .provenance import ProvenanceGuard


_DEFAULT = object()


def _resolve_reward_funcs(reward_funcs, judge, judge_mode: str, trainer: str):
    if judge is None:
        return reward_funcs
    if not isinstance(judge, ConstitutionJudge):
        raise TypeError(f"`judge` has to be a `ConstitutionJudge`, but is {type(judge).__name__}")
    if reward_funcs is not None:
        raise ValueError(f"{trainer} takes `judge` or `reward_funcs`, not both (the judge becomes the reward function)")
    return judge.as_reward_function(mode=judge_mode)


def _resolve_guard(provenance_guard) -> ProvenanceGuard | None:
    if provenance_guard is _DEFAULT:
        return ProvenanceGuard()
    if provenance_guard is not None and not isinstance(provenance_guard, ProvenanceGuard):
        raise TypeError(
            f"`provenance_guard` has to be a `ProvenanceGuard` or None, but is {type(provenance_guard).__name__}"
        )
    return provenance_guard


def _judges_of(reward_funcs) -> list[ConstitutionJudge]:
    funcs = reward_funcs if isinstance(reward_funcs, list) else [reward_funcs]
    return [f.judge for f in funcs if isinstance(getattr(f, "judge", None), ConstitutionJudge)]


class FluentOnlineDPOTrainer(OnlineDPOTrainer):
    r"""[`~trl.experimental.online_dpo.OnlineDPOTrainer`] for the on-policy stage of fluent alignment (arXiv 2512.08777).

    Same constructor as the parent plus:

    Args:
        judge ([`ConstitutionJudge`], *optional*):
            A pairwise judge, used as ``reward_funcs=judge.as_reward_function(judge_mode)`` (give ``judge`` or
            ``reward_funcs``, not both).
        judge_mode (`str`, *optional*, defaults to `"pairwise"`):
            ``"pairwise"`` or ``"pointwise"``, see :meth:`ConstitutionJudge.as_reward_function`.
        provenance_guard ([`ProvenanceGuard`] or `None`, *optional*, defaults to `ProvenanceGuard()`):
            The data rule checked on ``train_dataset`` (and ``eval_dataset``) before any model work; ``None``
            disables it (the trainer is then exactly the parent).

    Raises:
        ProvenanceError: (a `ValueError`) when the data breaks the rule, naming the column and the provenance.
    """

    _tag_names: ClassVar[list[str]] = ["trl", "online-dpo", "hfx", "fluent-alignment"]
    _name = "Fluent Online DPO"

    def __init__(
        self,
        model,
        ref_model=None,
        reward_funcs=None,
        args=None,
        *pargs,
        judge: ConstitutionJudge | None = None,
        judge_mode: str = "pairwise",
        provenance_guard: Any = _DEFAULT,
        **kwargs,
    ):
        reward_funcs = _resolve_reward_funcs(reward_funcs, judge, judge_mode, type(self).__name__)
        self.provenance_guard = _resolve_guard(provenance_guard)
        self.provenance_report = None
        if self.provenance_guard is not None:
            train_dataset = kwargs.get("train_dataset", pargs[1] if len(pargs) > 1 else None)
            if train_dataset is not None:
                self.provenance_report = self.provenance_guard.check(train_dataset, arg="train_dataset")
            eval_dataset = kwargs.get("eval_dataset")
            if eval_dataset is not None and hasattr(eval_dataset, "column_names"):
                self.provenance_guard.check(eval_dataset, arg="eval_dataset")
        super().__init__(model, ref_model, reward_funcs, args, *pargs, **kwargs)
        self._fluent_judges = _judges_of(self.reward_funcs)
        if self._fluent_judges:
            self.stats["judge/forward_prompts"] = []
            self.stats["judge/tie_fraction"] = []

    def training_step(self, model, inputs, num_items_in_batch=None):
        """The parent's step; then the judge's counters for this step are appended to ``self.stats``.

        ``judge/forward_prompts`` is the number of judge prompts run in the step (summed over judges);
        ``judge/tie_fraction`` the fraction of this step's pairs that were ties (NaN when no pair was judged, e.g.
        ``judge_mode="pointwise"``).
        """
        before = [(j.stats.forward_prompts, j.stats.comparisons, j.stats.ties) for j in self._fluent_judges]
        loss = super().training_step(model, inputs, num_items_in_batch)
        if self._fluent_judges:
            prompts = sum(j.stats.forward_prompts - b[0] for j, b in zip(self._fluent_judges, before))
            pairs = sum(j.stats.comparisons - b[1] for j, b in zip(self._fluent_judges, before))
            ties = sum(j.stats.ties - b[2] for j, b in zip(self._fluent_judges, before))
            self.stats.setdefault("judge/forward_prompts", []).append(float(prompts))
            self.stats.setdefault("judge/tie_fraction", []).append(ties / pairs if pairs else float("nan"))
        return loss


class FluentGRPOTrainer(GRPOTrainer):
    r"""[`~trl.GRPOTrainer`] for the on-policy stage of fluent alignment with GRPO as the optimiser (arXiv 2512.08777).

    Same constructor as the parent plus ``judge``, ``judge_mode`` and ``provenance_guard`` (see
    [`FluentOnlineDPOTrainer`]). With ``judge_mode="pairwise"`` each completion's reward is its win rate against the
    other completions of its prompt (``num_generations`` per prompt; ``G (G - 1)`` judge prompts per group with both
    orders); the judge logs ``judge/forward_prompts`` and ``judge/tie_fraction`` through TRL's ``log_metric``.

    Raises:
        ProvenanceError: (a `ValueError`) when the data breaks the rule, naming the column and the provenance.
    """

    _tag_names: ClassVar[list[str]] = ["trl", "grpo", "hfx", "fluent-alignment"]
    _name = "Fluent GRPO"

    def __init__(
        self,
        model,
        reward_funcs=None,
        args=None,
        *pargs,
        judge: ConstitutionJudge | None = None,
        judge_mode: str = "pairwise",
        provenance_guard: Any = _DEFAULT,
        **kwargs,
    ):
        reward_funcs = _resolve_reward_funcs(reward_funcs, judge, judge_mode, type(self).__name__)
        if reward_funcs is None:
            raise ValueError("FluentGRPOTrainer needs `judge` or `reward_funcs`")
        self.provenance_guard = _resolve_guard(provenance_guard)
        self.provenance_report = None
        if self.provenance_guard is not None:
            train_dataset = kwargs.get("train_dataset", pargs[0] if pargs else None)
            if train_dataset is not None:
                self.provenance_report = self.provenance_guard.check(train_dataset, arg="train_dataset")
            eval_dataset = kwargs.get("eval_dataset")
            if eval_dataset is not None and hasattr(eval_dataset, "column_names"):
                self.provenance_guard.check(eval_dataset, arg="eval_dataset")
        super().__init__(model, reward_funcs, args, *pargs, **kwargs)


__all__ = ["FluentGRPOTrainer", "FluentOnlineDPOTrainer"]
