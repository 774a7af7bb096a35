"""A deterministic literal-translation transform: native English -> "translationese" English (a simulation tool).

The fluent-alignment case study (arXiv 2512.08777 has Norwegian and native speakers; hfx has neither) uses English as
the target language and needs translated-looking text whose disfluency is known. This transform is a
[reconstruction]: rules that mimic a word-for-word translation from a Scandinavian source (Norwegian Bokmål), applied
in a fixed order, no randomness, so the same input always gives the same output:

1. ``calques`` -- literal renderings of Norwegian phrases: "spend money/time" -> "use money/time" (*bruke*),
   "there is/are/was/were" -> "it is/is/was/was" (*det er*), "wait for" -> "wait on" (*vente på*), "think about"
   -> "think on" (*tenke på*), "look at" -> "look on" (*se på*), "depends on" -> "comes an on" (*kommer an på*),
   "in total" / "altogether" -> "to together" (*til sammen*), "as much/many as" -> "so much/many as" (*så mye som*),
   "because" -> "because that" (*fordi at*), "want(s) to" -> "will" (*vil*), "in the morning/afternoon/evening" ->
   "on the morning/..." (*om morgenen*), "how much does X cost" -> "how much costs X".
2. ``v2_inversion`` -- verb-second order after a fronted adverb: "Then she buys" -> "Then buys she" (pronoun
   subject swapped with the next word after "Then", "Now", "So", "First", "Next", "Finally", "Today", "After that",
   "In total", ...).
3. ``negation_shift`` -- Norwegian negation placement: "does not like" -> "likes not", "do not know" -> "know not",
   "did not go" -> "went not" for a small list of irregular verbs, else "<verb>ed not" is avoided and "<verb> not"
   is used (both are disfluent English).
4. ``drop_articles`` -- every "a", "an", "the" is dropped (Norwegian marks definiteness with a suffix, and a literal
   rendering loses the article); sentence-initial capitalisation is restored.

:func:`literal_translation` applies the enabled rules; :data:`RULES` lists them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from hfx.utils.validation import check_sequence, check_str


RULES = ("calques", "v2_inversion", "negation_shift", "drop_articles")

_CALQUES: list[tuple[str, str]] = [
    (r"\bspend(s|ing)?\b", r"use\1"),
    (r"\bspent\b", "used"),
    (r"\bthere is\b", "it is"),
    (r"\bthere are\b", "it is"),
    (r"\bthere was\b", "it was"),
    (r"\bthere were\b", "it was"),
    (r"\bwait(s|ed|ing)? for\b", r"wait\1 on"),
    (r"\bthink(s|ing)? about\b", r"think\1 on"),
    (r"\bthought about\b", "thought on"),
    (r"\blook(s|ed|ing)? at\b", r"look\1 on"),
    (r"\bdepends on\b", "comes an on"),
    (r"\bdepend on\b", "come an on"),
    (r"\bin total\b", "to together"),
    (r"\baltogether\b", "to together"),
    (r"\bas (much|many) as\b", r"so \1 as"),
    (r"\bbecause\b", "because that"),
    (r"\bwants to\b", "will"),
    (r"\bwant to\b", "will"),
    (r"\bwanted to\b", "would"),
    (r"\bin the (morning|afternoon|evening)\b", r"on the \1"),
    (r"\bhow much does (\w+(?: \w+)?) cost\b", r"how much costs \1"),
]

_FRONTED = (
    "then", "now", "so", "first", "next", "finally", "today", "tomorrow", "yesterday", "therefore", "later",
    "after that", "in total", "to together", "in all", "altogether",
)  # fmt: skip
_PRONOUNS = ("i", "you", "he", "she", "it", "we", "they")
_IRREGULAR_PAST = {
    "go": "went", "have": "had", "get": "got", "make": "made", "buy": "bought", "eat": "ate", "take": "took",
    "give": "gave", "know": "knew", "see": "saw", "come": "came", "sell": "sold", "spend": "spent", "use": "used",
    "find": "found", "pay": "paid", "think": "thought", "say": "said", "run": "ran", "read": "read",
}  # fmt: skip


def _third_person(verb: str) -> str:
    if verb in ("have",):
        return "has"
    if verb in ("go", "do"):
        return verb + "es"
    if re.search(r"(s|sh|ch|x|z)$", verb):
        return verb + "es"
    if re.search(r"[^aeiou]y$", verb):
        return verb[:-1] + "ies"
    return verb + "s"


def _match_case(word: str, like: str) -> str:
    return word[:1].upper() + word[1:] if like[:1].isupper() else word


def _calques(text: str) -> str:
    for pattern, repl in _CALQUES:
        text = re.sub(pattern, lambda m, r=repl: _match_case(m.expand(r), m.group(0)), text, flags=re.IGNORECASE)
    return text


def _v2(text: str) -> str:
    fronted = "|".join(sorted((re.escape(f) for f in _FRONTED), key=len, reverse=True))
    pronouns = "|".join(_PRONOUNS)
    pattern = re.compile(rf"(^|[.!?]\s+|\n)({fronted})(,?)\s+({pronouns})\s+([a-z']+)\b", re.IGNORECASE)

    def swap(m: re.Match) -> str:
        pronoun = m.group(4) if m.group(4) == "I" else m.group(4).lower()
        return f"{m.group(1)}{m.group(2)}{m.group(3)} {m.group(5)} {pronoun}"

    return pattern.sub(swap, text)


def _negation(text: str) -> str:
    def shift(m: re.Match) -> str:
        aux, verb = m.group(1).lower(), m.group(3)
        low = verb.lower()
        if aux == "does":
            new = _third_person(low)
        elif aux == "did":
            new = _IRREGULAR_PAST.get(low, low)
        else:
            new = low
        return f"{_match_case(new, m.group(1))} not"

    return re.sub(r"\b(do|does|did)( not|n't)\s+([a-z]+)\b", shift, text, flags=re.IGNORECASE)


def _drop_articles(text: str) -> str:
    def drop(m: re.Match) -> str:
        return m.group(1)

    out = re.sub(r"(^|[\s(\"'])(?:a|an|the)\s+(?=\w)", drop, text, flags=re.IGNORECASE)
    # restore sentence-initial capitals lost with a dropped "The" / "A"
    return re.sub(r"(^|[.!?]\s+|\n)([a-z])", lambda m: m.group(1) + m.group(2).upper(), out)


_APPLY = {"calques": _calques, "v2_inversion": _v2, "negation_shift": _negation, "drop_articles": _drop_articles}


def literal_translation(text: str, rules: Iterable[str] = RULES) -> str:
    """Turn native English into deterministic "translationese" (see the module docstring for each rule).

    Args:
        text (`str`): native English text.
        rules (`Iterable[str]`, *optional*, defaults to all of :data:`RULES`): the rules to apply, always in the
            order of :data:`RULES`.

    Returns:
        `str`: the transformed text (``text`` itself when no rule matches).

    Raises:
        TypeError: when ``text`` is not a string.
        ValueError: for an unknown rule.

    Example:
        >>> literal_translation("Then she does not spend the money because the shop is closed.")
        'Then does she not use money because that shop is closed.'
    """
    text = check_str("text", text, allow_empty=True)
    chosen = check_sequence("rules", list(rules), item_check=check_str)
    unknown = [r for r in chosen if r not in RULES]
    if unknown:
        raise ValueError(f"`rules` has to hold names from {list(RULES)}, but holds {unknown}")
    for rule in RULES:
        if rule in chosen:
            text = _APPLY[rule](text)
    return text


__all__ = ["RULES", "literal_translation"]
