"""Selecting one answer among K candidates (arXiv 2510.06135, Sec. 5: parallel scaling with a verifier).

* ``"score_argmax"`` -- the candidate with the highest verifier score;
* ``"weighted_vote"`` -- the answer whose candidates' verifier scores add up to the most;
* ``"best_of_k"`` -- [reconstruction] sequential Best-of-K: candidates are verified in sampling order and the first
  whose score reaches ``accept_threshold`` is returned, so the verifier's compute stops at the first acceptance; if
  none is accepted, the score argmax. (The authors' repository does not include its selection code; with
  ``accept_threshold > 1`` this is exactly ``score_argmax``.)
* ``"majority"`` -- plain majority vote over normalised answers (the verifier-free baseline).

Answers are compared after :func:`normalize_answer`. Ties [reconstruction, ``tie_break``]: ``"vote"`` prefers the
answer with more votes, then the earliest candidate; ``"first"`` prefers the earliest candidate. Empty answers never
win a vote while a non-empty one exists.
"""

from __future__ import annotations

import re
import string
from collections.abc import Sequence


SELECTORS = ("score_argmax", "weighted_vote", "best_of_k", "majority")
TIE_BREAKS = ("vote", "first")


def normalize_answer(text) -> str:
    """Lower case, no punctuation, no articles (a / an / the), single spaces (the SQuAD normalisation)."""
    text = "" if text is None else str(text).lower()
    text = "".join(ch for ch in text if ch not in set(string.punctuation))
    text = re.sub(r"\b(a|an|the)\b", " ", text)
    return " ".join(text.split())


def select(
    answers: Sequence[str],
    scores: Sequence[float | None] | None = None,
    selector: str = "score_argmax",
    tie_break: str = "vote",
    accept_threshold: float = 1.0,
    unparsable_score: float = 0.0,
) -> int:
    """Index of the selected candidate.

    Args:
        answers (`Sequence[str]`): the K candidate answers, in sampling order.
        scores (`Sequence[float]`, *optional*): verifier scores in [0, 1] (``None`` = unparsable, replaced by
            ``unparsable_score``); required by every selector but ``"majority"``.
        selector (`str`, *optional*, defaults to `"score_argmax"`): one of :data:`SELECTORS`.
        tie_break (`str`, *optional*, defaults to `"vote"`): one of :data:`TIE_BREAKS`.
        accept_threshold (`float`, *optional*, defaults to 1.0): ``"best_of_k"``'s acceptance score.
        unparsable_score (`float`, *optional*, defaults to 0.0).

    Raises:
        ValueError: for no candidates, an unknown ``selector`` / ``tie_break``, or missing / mismatched ``scores``.
    """
    if len(answers) == 0:
        raise ValueError("`answers` is empty; there is nothing to select")
    if selector not in SELECTORS:
        raise ValueError(f"`selector` must be one of {SELECTORS}, but is {selector!r}")
    if tie_break not in TIE_BREAKS:
        raise ValueError(f"`tie_break` must be one of {TIE_BREAKS}, but is {tie_break!r}")
    keys = [normalize_answer(a) for a in answers]
    votes = {}
    for k in keys:
        votes[k] = votes.get(k, 0) + 1
    first = {}
    for i, k in enumerate(keys):
        first.setdefault(k, i)
    if selector == "majority":
        return first[_best(votes, first, votes, "vote")]
    if scores is None or len(scores) != len(answers):
        raise ValueError(
            f"`selector`={selector!r} needs one verifier score per answer: got "
            f"{'no scores' if scores is None else len(scores)} for {len(answers)} answers"
        )
    s = [unparsable_score if v is None else float(v) for v in scores]
    if selector == "best_of_k":
        for i, v in enumerate(s):
            if v >= accept_threshold:
                return i
        selector = "score_argmax"
    if selector == "score_argmax":
        top = max(s)
        tied = [i for i, v in enumerate(s) if v == top]
        if tie_break == "first" or len(tied) == 1:
            return tied[0]
        return max(tied, key=lambda i: (votes[keys[i]] if keys[i] else 0, -i))
    totals = {}
    for k, v in zip(keys, s, strict=True):
        totals[k] = totals.get(k, 0.0) + v
    return first[_best(totals, first, votes, tie_break)]


def _best(values: dict, first: dict, votes: dict, tie_break: str) -> str:
    """The key with the largest value; empty answers last; ties by votes (``"vote"``) then earliest candidate."""

    def rank(k):
        secondary = votes[k] if tie_break == "vote" else 0
        return (k != "", values[k], secondary, -first[k])

    return max(values, key=rank)
