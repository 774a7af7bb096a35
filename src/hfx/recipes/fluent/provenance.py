"""Provenance of training text, and the guard of the on-policy stage ("never expose the model to translationese").

Fluent alignment (arXiv 2512.08777) keeps a model fluent in a lower-resource language by never training it on
target-language text that is not its own: no machine-translated instructions, no judge-written answers. hfx makes
that checkable: a dataset *carries* its provenance per row, and the on-policy stage refuses what breaks the rule.

Convention [reconstruction]:

* ``provenance`` (per-row string column): one of :data:`PROVENANCES`, the origin of the row's text; a column-specific
  ``<column>_provenance`` column overrides it for that column (e.g. ``prompt_provenance="native"`` beside
  ``completion_provenance="machine_translated"``).
* ``language`` (per-row string column, *optional*): the row's language code; without it every row counts as
  target-language text (the safe default).

Provenance values:

* ``"native"`` -- written by speakers of the language (e.g. native prompts, LIMA answers);
* ``"machine_translated"`` -- translated by a system (translationese);
* ``"judge_written"`` -- written by the judge or another teacher model (the policy would imitate it);
* ``"model_generated"`` -- sampled from the policy being trained (its own samples; on-policy).

:func:`with_provenance` labels a dataset, :func:`check_on_policy_dataset` is the guard (used by
[`~hfx.recipes.fluent.FluentOnlineDPOTrainer`], [`~hfx.recipes.fluent.FluentGRPOTrainer`] and
:func:`~hfx.recipes.fluent.run_fluent_alignment`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from hfx.utils.validation import check_choice, check_optional, check_sequence, check_str


PROVENANCES = ("native", "machine_translated", "judge_written", "model_generated")
PROVENANCE_COLUMN = "provenance"
LANGUAGE_COLUMN = "language"
# columns a TRL trainer would train on as text the policy imitates (SFT / offline preference formats)
TRAINED_TEXT_COLUMNS = ("completion", "chosen", "rejected", "response", "responses", "answer", "text", "messages")


class ProvenanceError(ValueError):
    """Raised when a dataset breaks the provenance rule of a stage (a `ValueError`, so the CLI reports it cleanly)."""


def _is_text(value) -> bool:
    return isinstance(value, str) or (
        isinstance(value, (list, tuple)) and len(value) > 0 and all(isinstance(m, dict) for m in value)
    )


def with_provenance(
    dataset,
    provenance: str,
    *,
    columns: Sequence[str] | None = None,
    language: str | None = None,
):
    """Label every row of ``dataset`` with a provenance (and, optionally, a language).

    Args:
        dataset (`datasets.Dataset`): the data.
        provenance (`str`): one of :data:`PROVENANCES`.
        columns (`Sequence[str]`, *optional*): label only these columns (adds ``<column>_provenance`` columns);
            by default the row-level ``provenance`` column is set.
        language (`str`, *optional*): also set the ``language`` column to this code (e.g. ``"nb"``).

    Returns:
        `datasets.Dataset`: a new dataset with the provenance (and language) columns set (replaced if present).

    Raises:
        ValueError: for an unknown provenance or a column that is not in the dataset.
        TypeError: when ``dataset`` is not a `datasets.Dataset`.
    """
    names = getattr(dataset, "column_names", None)
    if names is None or not hasattr(dataset, "add_column"):
        raise TypeError(f"`dataset` has to be a `datasets.Dataset`, but is {type(dataset).__name__}")
    provenance = check_choice("provenance", provenance, PROVENANCES)
    targets = [PROVENANCE_COLUMN]
    if columns is not None:
        columns = check_sequence("columns", columns, item_check=check_str, min_length=1)
        missing = [c for c in columns if c not in names]
        if missing:
            raise ValueError(f"`columns` {missing} are not columns of the dataset (it has {names})")
        targets = [f"{c}_provenance" for c in columns]
    n = len(dataset)
    for name in targets:
        if name in dataset.column_names:
            dataset = dataset.remove_columns(name)
        dataset = dataset.add_column(name, [provenance] * n)
    if language is not None:
        language = check_str("language", language)
        if LANGUAGE_COLUMN in dataset.column_names:
            dataset = dataset.remove_columns(LANGUAGE_COLUMN)
        dataset = dataset.add_column(LANGUAGE_COLUMN, [language] * n)
    return dataset


def provenance_of(dataset, column: str) -> list[str | None]:
    """Per-row provenance of ``column``: ``<column>_provenance`` if present, else ``provenance``, else ``None``s.

    Returns:
        `list[str | None]` of length ``len(dataset)``.
    """
    if f"{column}_provenance" in dataset.column_names:
        return list(dataset[f"{column}_provenance"])
    if PROVENANCE_COLUMN in dataset.column_names:
        return list(dataset[PROVENANCE_COLUMN])
    return [None] * len(dataset)


@dataclass
class ProvenanceGuard:
    """The on-policy stage's rule on training data (arXiv 2512.08777: "never expose the model to translationese").

    Args:
        target_language (`str`, *optional*):
            Language code of the target language; rows whose ``language`` differs are not checked. ``None`` (default)
            or a dataset without a ``language`` column: every row counts as target-language text.
        prompt_column (`str`, *optional*, defaults to `"prompt"`):
            The prompt column (the text the policy is conditioned on).
        allowed_prompt_provenance (`tuple[str, ...]`, *optional*, defaults to `("native",)`):
            Provenances allowed for target-language prompts (the spec: native prompts, never translated ones).
        reward_columns (`tuple[str, ...]`, *optional*, defaults to `()`):
            Columns only the reward function / judge reads (e.g. a reference answer): not checked.
        require_provenance (`bool`, *optional*, defaults to `True`):
            Refuse a dataset whose checked columns carry no provenance at all.

    Every other text column (strings or chat messages) is text the stage could train on, so its target-language rows
    must be ``"model_generated"`` (the policy's own samples).
    """

    target_language: str | None = None
    prompt_column: str = "prompt"
    allowed_prompt_provenance: tuple[str, ...] = ("native",)
    reward_columns: tuple[str, ...] = ()
    require_provenance: bool = True
    _checked: list[str] = field(default_factory=list, repr=False)

    def __post_init__(self):
        self.target_language = check_optional(check_str, "target_language", self.target_language)
        self.prompt_column = check_str("prompt_column", self.prompt_column)
        allowed = check_sequence(
            "allowed_prompt_provenance",
            self.allowed_prompt_provenance,
            item_check=lambda name, v: check_choice(name, v, PROVENANCES),
            min_length=1,
        )
        self.allowed_prompt_provenance = tuple(allowed)
        self.reward_columns = tuple(check_sequence("reward_columns", self.reward_columns, item_check=check_str))
        if not isinstance(self.require_provenance, bool):
            raise TypeError(f"`require_provenance` has to be a bool, but is {self.require_provenance!r}")

    def check(self, dataset, *, arg: str = "train_dataset") -> dict[str, Counter]:
        """Refuse ``dataset`` when its target-language text breaks the rule; see :func:`check_on_policy_dataset`.

        Returns:
            `dict[str, collections.Counter]`: per checked column, the provenance counts of its target-language rows.
        """
        return check_on_policy_dataset(
            dataset,
            target_language=self.target_language,
            prompt_column=self.prompt_column,
            allowed_prompt_provenance=self.allowed_prompt_provenance,
            reward_columns=self.reward_columns,
            require_provenance=self.require_provenance,
            arg=arg,
        )


def _fix_hint(column: str, prompt_column: str) -> str:
    if column == prompt_column:
        return (
            "Use prompts written in the target language (label them with `with_provenance(ds, 'native')`), or move "
            "translated data to a baseline (`FluentAlignmentConfig.for_baseline('sft_translated')`)."
        )
    return (
        "The on-policy stage trains only on the policy's own samples, which it generates itself: drop this column, "
        "list it in `reward_columns` if only the judge / reward function reads it, or train on it in an SFT "
        "baseline (`FluentAlignmentConfig.for_baseline(...)`)."
    )


def check_on_policy_dataset(
    dataset,
    *,
    target_language: str | None = None,
    prompt_column: str = "prompt",
    allowed_prompt_provenance: Iterable[str] = ("native",),
    reward_columns: Iterable[str] = (),
    require_provenance: bool = True,
    arg: str = "train_dataset",
) -> dict[str, Counter]:
    """The on-policy stage's guard: refuse target-language text that is not native prompts or the policy's samples.

    Checked columns: ``prompt_column`` (target-language rows must have a provenance in ``allowed_prompt_provenance``)
    and every other column holding text (strings or chat messages) except ``reward_columns`` and the provenance /
    language columns (target-language rows must be ``"model_generated"``). Runs before any model work.

    Args:
        dataset (`datasets.Dataset`): the on-policy stage's training data.
        target_language (`str`, *optional*): see [`ProvenanceGuard`].
        prompt_column (`str`, *optional*, defaults to `"prompt"`).
        allowed_prompt_provenance (`Iterable[str]`, *optional*, defaults to `("native",)`).
        reward_columns (`Iterable[str]`, *optional*): columns not checked (read by the judge only).
        require_provenance (`bool`, *optional*, defaults to `True`): refuse columns without provenance.
        arg (`str`, *optional*, defaults to `"train_dataset"`): the argument name used in messages.

    Returns:
        `dict[str, collections.Counter]`: per checked column, the provenance counts of its target-language rows.

    Raises:
        ProvenanceError: (a `ValueError`) naming the column, the offending provenance, how many rows and the first
            row index, when a target-language row breaks the rule, when a row's provenance is not one of
            :data:`PROVENANCES`, or when a checked column has no provenance and ``require_provenance``.
        ValueError: when ``prompt_column`` is not a column of the dataset.
        TypeError: when ``dataset`` is not a `datasets.Dataset`.
    """
    names = getattr(dataset, "column_names", None)
    if names is None:
        raise TypeError(f"`{arg}` has to be a `datasets.Dataset`, but is {type(dataset).__name__}")
    if isinstance(names, dict):  # a DatasetDict
        raise TypeError(f"`{arg}` has to be one `datasets.Dataset` split, but is a DatasetDict with {list(names)}")
    allowed = tuple(allowed_prompt_provenance)
    skip = set(reward_columns) | {PROVENANCE_COLUMN, LANGUAGE_COLUMN} | {c for c in names if c.endswith("_provenance")}
    if prompt_column not in names:
        raise ValueError(f"`{arg}` has no prompt column {prompt_column!r} (its columns are {names})")
    n = len(dataset)
    if n == 0:
        raise ValueError(f"`{arg}` is empty: the on-policy stage needs prompts")
    first = dataset[0]
    columns = [prompt_column] + [c for c in names if c != prompt_column and c not in skip and _is_text(first[c])]
    languages = list(dataset[LANGUAGE_COLUMN]) if LANGUAGE_COLUMN in names else [None] * n
    in_target = [target_language is None or lang is None or lang == target_language for lang in languages]
    report: dict[str, Counter] = {}
    for column in columns:
        provenance = provenance_of(dataset, column)
        rows = [i for i in range(n) if in_target[i]]
        unknown = [i for i in rows if provenance[i] is not None and provenance[i] not in PROVENANCES]
        if unknown:
            raise ProvenanceError(
                f"`{arg}` column `{column}` has provenance {provenance[unknown[0]]!r} at row {unknown[0]}, which is "
                f"not one of {list(PROVENANCES)}"
            )
        missing = [i for i in rows if provenance[i] is None]
        if missing and require_provenance:
            raise ProvenanceError(
                f"`{arg}` column `{column}` carries no provenance ({len(missing)} of {n} rows, first at row "
                f"{missing[0]}): the on-policy stage needs to know where target-language text comes from. Add a "
                f"`provenance` (or `{column}_provenance`) column with one of {list(PROVENANCES)}, e.g. "
                "`hfx.recipes.fluent.with_provenance(dataset, 'native')`."
            )
        ok = set(allowed) if column == prompt_column else {"model_generated"}
        bad = [i for i in rows if provenance[i] is not None and provenance[i] not in ok]
        if bad:
            offending = Counter(provenance[i] for i in bad)
            worst = offending.most_common(1)[0][0]
            where = f" (language {target_language!r})" if target_language else ""
            raise ProvenanceError(
                f"`{arg}` column `{column}` has target-language{where} text with provenance `{worst}` "
                f"({len(bad)} of {n} rows, first at row {bad[0]}; counts {dict(offending)}); the on-policy stage "
                f"allows only {sorted(ok)} there. {_fix_hint(column, prompt_column)}"
            )
        report[column] = Counter(provenance[i] for i in rows)
    return report


__all__ = [
    "LANGUAGE_COLUMN",
    "PROVENANCES",
    "PROVENANCE_COLUMN",
    "ProvenanceError",
    "ProvenanceGuard",
    "check_on_policy_dataset",
    "provenance_of",
    "with_provenance",
]
