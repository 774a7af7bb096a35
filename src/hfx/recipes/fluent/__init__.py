"""Fluent alignment (Samuel, Øvrelid, Velldal, Kutuzov; ICLR 2026, arXiv 2512.08777): post-training for lower-resource
languages that keeps the model fluent by training it only on its own target-language samples, ranked by an LLM judge.

* :class:`ConstitutionJudge` -- a pairwise (both orders, stated tie rule) / pointwise judge over any local HF causal
  LM, with the pairwise ``judge(prompts, completions, shuffle_order)`` interface of TRL's former judges and
  :meth:`~ConstitutionJudge.as_reward_function` adapters for ``OnlineDPOTrainer`` / ``GRPOTrainer`` (and subclasses
  such as ``THRGRPOTrainer``).
* :class:`FluentOnlineDPOTrainer`, :class:`FluentGRPOTrainer` -- TRL's online trainers plus the provenance guard and
  ``judge=``.
* :class:`ProvenanceGuard`, :func:`with_provenance`, :func:`check_on_policy_dataset` -- datasets carry provenance
  (``native``, ``machine_translated``, ``judge_written``, ``model_generated``); the on-policy stage refuses
  target-language text that is not the policy's own samples.
* :class:`FluentAlignmentConfig`, :func:`run_fluent_alignment` -- base -> short English SFT -> on-policy online DPO
  (or GRPO), and the baselines (SFT on translated data, multilingual mix) as configs of the same runner.
* :func:`literal_translation`, :func:`completion_log_likelihood`, :class:`NgramFluencyModel` -- the case study's
  translationese transform and fluency measures.

Importing this package loads nothing heavy; torch / transformers / trl / peft / nltk load on first use.
"""

from hfx._lazy import attach


_LAZY = {
    "ConstitutionJudge": "hfx.recipes.fluent.judge",
    "JudgeStats": "hfx.recipes.fluent.judge",
    "DEFAULT_CONSTITUTION": "hfx.recipes.fluent.judge",
    "FluentOnlineDPOTrainer": "hfx.recipes.fluent.trainers",
    "FluentGRPOTrainer": "hfx.recipes.fluent.trainers",
    "PROVENANCES": "hfx.recipes.fluent.provenance",
    "ProvenanceError": "hfx.recipes.fluent.provenance",
    "ProvenanceGuard": "hfx.recipes.fluent.provenance",
    "check_on_policy_dataset": "hfx.recipes.fluent.provenance",
    "provenance_of": "hfx.recipes.fluent.provenance",
    "with_provenance": "hfx.recipes.fluent.provenance",
    "FluentAlignmentConfig": "hfx.recipes.fluent.configuration",
    "FluentAlignmentResult": "hfx.recipes.fluent.runner",
    "run_fluent_alignment": "hfx.recipes.fluent.runner",
    "check_recipe_sft_dataset": "hfx.recipes.fluent.runner",
    "literal_translation": "hfx.recipes.fluent.translationese",
    "completion_log_likelihood": "hfx.recipes.fluent.fluency",
    "NgramFluencyModel": "hfx.recipes.fluent.fluency",
    "publish": "hfx.recipes.fluent.hub",
}
_SUBMODULES = {"judge", "trainers", "provenance", "configuration", "runner", "translationese", "fluency", "hub"}

__all__ = sorted([*_LAZY, *_SUBMODULES])  # noqa: PLE0605

__getattr__, __dir__ = attach(__name__, _LAZY, __all__, submodules=_SUBMODULES)
