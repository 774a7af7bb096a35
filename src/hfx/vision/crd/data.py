"""RAVEN-style 3 x 3 matrices: a symbolic generator, PIL rendering, I-RAVEN balanced answer sets, and loaders.

* :func:`generate_matrix` -- one matrix from a ``numpy`` generator: panel attributes (number / position, type, size,
  colour, angle), the rule of each concept, 8 candidate answers and the target index.
* :func:`load_dataset` -- ``split`` / ``size`` / ``seed`` -> a ``datasets.Dataset`` with an ``image`` feature (the
  whole puzzle), ``panels`` (the 16 panel images: 8 context, 8 candidates) and the symbolic metadata.
* :func:`load_raven` -- RAVEN / I-RAVEN files (``RAVEN_<i>_<split>.npz`` + ``.xml``) from a local folder, in the same
  schema.
* :func:`render_panel`, :func:`render_puzzle`, :func:`split_puzzle_image` -- the images.

The generator follows RAVEN (Zhang et al., CVPR 2019) and I-RAVEN (Hu et al., AAAI 2021) in structure; the details
are ours ([reconstruction]):

* configurations ``center_single`` (one object), ``distribute_four`` (2 x 2 slots), ``distribute_nine`` (3 x 3);
* concepts: ``number`` (ordinal, 1..slots) and ``position`` (categorical: the occupied slots as a bit string) in the
  distribute configurations; ``type`` (categorical: triangle, square, pentagon, hexagon, circle); ``size`` (ordinal
  1..6, 0.4..0.9 of the slot); ``color`` (categorical: six hues); ``angle`` (ordinal 1..8, -135..180 degrees:
  RAVEN's noise attribute, random in every panel). All objects of a panel share type, size, colour and angle;
* rules per row, as in RAVEN: ``constant`` (a value per row), ``progression`` (a step of +-1 or +-2 shared by the
  rows), ``arithmetic`` (column 3 = column 1 +- column 2), ``distribute_three`` (three values, rows cyclically
  shifted); ordinal concepts take all four, categorical ones ``constant`` / ``distribute_three`` (RAVEN's type
  progression is over edge counts, i.e. ordinal: the RAVEN loader keeps it ordinal). The number / position group
  takes one of ``constant`` (both constant per row), a rule on ``number`` (positions then random: ``position`` is
  free) or ``distribute_three`` on ``position`` (``number`` then constant); RAVEN's progression / arithmetic on
  position are not generated;
* ``free_prob`` makes type, size and colour *free* (random in every panel) with that probability, so that matrices
  where only some concepts follow a rule can be generated (RAVEN itself: 0);
* answer sets: ``"iraven"`` (default) modifies up to three governed attributes of the answer on a binary tree
  (2 x 2 x 2 candidates; 2 x 4 or 1 x 8 when fewer attributes can change -- 1 x (alternatives + 1) candidates
  when a single attribute has fewer than 7 alternatives), so every attribute value of the answer
  appears in exactly half (resp. a quarter / an eighth) of the candidates and a scorer that sees only the
  candidates is at chance; ``"raven"`` modifies one attribute per distractor (RAVEN's answer sets, where the answer
  is the candidates' mode). Candidates copy the answer's free attributes (as in RAVEN).
"""

from __future__ import annotations

import functools
import io
import itertools
import json
import math
import zlib
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from hfx.utils.validation import check_bool, check_choice, check_float, check_int, check_optional, check_str


CONFIGURATIONS = {"center_single": 1, "distribute_four": 2, "distribute_nine": 3}
SHAPES = ("triangle", "square", "pentagon", "hexagon", "circle")
SHAPE_SIDES = {"triangle": 3, "square": 4, "pentagon": 5, "hexagon": 6, "circle": 0}
COLORS = {
    "red": (220, 50, 47),
    "orange": (240, 140, 30),
    "yellow": (235, 215, 40),
    "green": (60, 170, 70),
    "blue": (40, 100, 220),
    "purple": (150, 70, 190),
}
SIZES = (1, 2, 3, 4, 5, 6)
SIZE_SCALE = {1: 0.4, 2: 0.5, 3: 0.6, 4: 0.7, 5: 0.8, 6: 0.9}
ANGLES = (1, 2, 3, 4, 5, 6, 7, 8)
ANGLE_DEGREES = {1: -135, 2: -90, 3: -45, 4: 0, 5: 45, 6: 90, 7: 135, 8: 180}
RULES = ("constant", "progression", "arithmetic", "distribute_three", "free")
NUMBER_POSITION_RULES = ("constant", "number:progression", "number:arithmetic", "number:distribute_three",
                         "position:distribute_three")
ANSWER_SETS = ("iraven", "raven")
SPLITS = {"train": 0, "validation": 1, "test": 2}
NUM_CONTEXT = 8
NUM_CANDIDATES = 8
ROW_OF = (0, 0, 0, 1, 1, 1, 2, 2, 2)
COL_OF = (0, 1, 2, 0, 1, 2, 0, 1, 2)


class GenerationError(RuntimeError):
    """A sampled rule combination admits no valid matrix / answer set (the generator then resamples)."""


# ------------------------------------------------------------------------------------------------------- concepts
def concept_specs(configuration: str) -> dict[str, dict[str, Any]]:
    """The concepts of a configuration with their kind and domain.

    Returns:
        `dict`: ``name -> {"kind": "ordinal" | "categorical", "domain": [...]}`` (ordinal domains are the sorted
        integer levels, categorical ones the labels).
    """
    configuration = check_choice("configuration", configuration, list(CONFIGURATIONS))
    grid = CONFIGURATIONS[configuration]
    specs: dict[str, dict[str, Any]] = {}
    if grid > 1:
        slots = grid * grid
        specs["number"] = {"kind": "ordinal", "domain": list(range(1, slots + 1))}
        specs["position"] = {"kind": "categorical", "domain": list(_position_domain(slots))}
    specs["type"] = {"kind": "categorical", "domain": list(SHAPES)}
    specs["size"] = {"kind": "ordinal", "domain": list(SIZES)}
    specs["color"] = {"kind": "categorical", "domain": list(COLORS)}
    specs["angle"] = {"kind": "ordinal", "domain": list(ANGLES)}
    return specs


@functools.lru_cache(maxsize=16)
def _position_domain(slots: int) -> tuple[str, ...]:
    return tuple(_bits(p, slots) for p in _all_patterns(slots))


@functools.lru_cache(maxsize=64)
def _patterns_with_count(slots: int, k: int) -> tuple[str, ...]:
    return tuple(_bits(p, slots) for p in itertools.combinations(range(slots), k))


def _all_patterns(slots: int) -> list[tuple[int, ...]]:
    return [p for k in range(1, slots + 1) for p in itertools.combinations(range(slots), k)]


def _bits(pattern: Iterable[int], slots: int) -> str:
    occupied = set(pattern)
    return "".join("1" if i in occupied else "0" for i in range(slots))


def _pattern(bits: str) -> tuple[int, ...]:
    return tuple(i for i, b in enumerate(bits) if b == "1")


# ------------------------------------------------------------------------------------------------ row rule values
def _rule_rows(rng: np.random.Generator, rule: str, domain: Sequence, ordinal: bool) -> tuple[list, str]:
    """The 9 values (row-major) of one concept under ``rule``, and the rule's parameter as text."""
    domain = list(domain)
    pick = lambda seq: seq[int(rng.integers(len(seq)))]  # noqa: E731
    if rule == "constant":
        rows = [pick(domain) for _ in range(3)]
        return [rows[r] for r in ROW_OF], ""
    if rule == "free":
        return [pick(domain) for _ in range(9)], ""
    if rule == "distribute_three":
        if len(domain) < 3:
            raise GenerationError("distribute_three needs 3 distinct values")
        three = [domain[i] for i in rng.choice(len(domain), 3, replace=False)]
        direction = 1 if rng.random() < 0.5 else -1
        return [three[(c + direction * r) % 3] for r, c in zip(ROW_OF, COL_OF)], f"{direction:+d}"
    if not ordinal:
        raise GenerationError(f"rule {rule!r} needs an ordinal concept")
    values = set(domain)
    if rule == "progression":
        steps = [s for s in (-2, -1, 1, 2) if any(v + s in values and v + 2 * s in values for v in domain)]
        if not steps:
            raise GenerationError("no feasible progression step")
        step = pick(steps)
        out = []
        for _ in range(3):
            start = pick([v for v in domain if v + step in values and v + 2 * step in values])
            out += [start, start + step, start + 2 * step]
        return out, f"{step:+d}"
    if rule == "arithmetic":
        sign = 1 if rng.random() < 0.5 else -1
        pairs = [(a, b) for a in domain for b in domain if a + sign * b in values]
        if not pairs:
            raise GenerationError("no feasible arithmetic pair")
        out = []
        for _ in range(3):
            a, b = pick(pairs)
            out += [a, b, a + sign * b]
        return out, "+" if sign > 0 else "-"
    raise ValueError(f"unknown rule {rule!r}")


# -------------------------------------------------------------------------------------------------- the generator
def generate_matrix(
    rng: np.random.Generator,
    configuration: str = "center_single",
    *,
    rules: dict[str, str] | None = None,
    free_prob: float = 0.0,
    answer_set: str = "iraven",
    max_tries: int = 100,
) -> dict[str, Any]:
    """One RAVEN-style matrix with its candidate answers.

    Args:
        rng (`numpy.random.Generator`): the source of randomness (the matrix is a function of its state).
        configuration (`str`, *optional*, defaults to `"center_single"`): one of :data:`CONFIGURATIONS`.
        rules (`dict[str, str]`, *optional*): fixed rules, e.g. ``{"size": "progression", "type": "free"}``; keys
            ``type`` / ``size`` / ``color`` take :data:`RULES`, key ``number_position`` takes
            :data:`NUMBER_POSITION_RULES`; the others are sampled.
        free_prob (`float`, *optional*, defaults to `0.0`): probability that a sampled type / size / colour rule is
            ``"free"``.
        answer_set (`str`, *optional*, defaults to `"iraven"`): ``"iraven"`` (balanced tree) or ``"raven"``.
        max_tries (`int`, *optional*, defaults to `100`): rule resamplings before giving up.

    Returns:
        `dict`: ``configuration``, ``concepts`` (:func:`concept_specs`), ``panels`` (9 attribute dicts, the last one
        the answer), ``candidates`` (8 attribute dicts; fewer when the only attribute that may change has fewer
        than 7 alternative values), ``target`` (index of the answer among the candidates),
        ``rules`` (``concept -> {"rule", "param"}``; ``"free"`` for concepts without a rule), ``modified`` (per
        candidate, the attributes changed from the answer).

    Raises:
        ValueError: for an unknown configuration / rule / answer set, or fixed rules admitting no matrix.
    """
    configuration = check_choice("configuration", configuration, list(CONFIGURATIONS))
    free_prob = check_float("free_prob", free_prob, minimum=0.0, maximum=1.0)
    answer_set = check_choice("answer_set", answer_set, ANSWER_SETS)
    max_tries = check_int("max_tries", max_tries, minimum=1)
    rules = dict(rules or {})
    grid = CONFIGURATIONS[configuration]
    allowed = {"type", "size", "color"} | ({"number_position"} if grid > 1 else set())
    unknown = sorted(set(rules) - allowed)
    if unknown:
        raise ValueError(f"`rules` may fix {sorted(allowed)} for {configuration!r}, but got {unknown}")
    for key, value in rules.items():
        if key == "number_position":
            check_choice("rules['number_position']", value, NUMBER_POSITION_RULES)
        else:
            ok = RULES if key == "size" else ("constant", "distribute_three", "free")
            check_choice(f"rules[{key!r}]", value, ok)
    last_error = None
    for _ in range(max_tries):
        try:
            return _generate_once(rng, configuration, rules, free_prob, answer_set)
        except GenerationError as err:
            last_error = err
    raise ValueError(f"no valid {configuration!r} matrix with rules {rules} in {max_tries} tries ({last_error})")


def _generate_once(rng, configuration, fixed, free_prob, answer_set) -> dict[str, Any]:
    grid = CONFIGURATIONS[configuration]
    slots = grid * grid
    specs = concept_specs(configuration)
    panels: list[dict[str, Any]] = [{} for _ in range(9)]
    truth: dict[str, dict[str, str]] = {}

    def choose(name, options):
        if name in fixed:
            return fixed[name]
        if free_prob > 0 and rng.random() < free_prob:
            return "free"
        return options[int(rng.integers(len(options)))]

    # number / position
    if grid == 1:
        for p in panels:
            p["number"], p["position"] = 1, "1"
    else:
        group = fixed.get("number_position") or NUMBER_POSITION_RULES[int(rng.integers(len(NUMBER_POSITION_RULES)))]
        numbers_domain = specs["number"]["domain"]
        if group == "constant":
            numbers, _ = _rule_rows(rng, "constant", numbers_domain, True)
            row_patterns = {}
            for i, p in enumerate(panels):
                r = ROW_OF[i]
                if r not in row_patterns:
                    row_patterns[r] = tuple(sorted(rng.choice(slots, numbers[i], replace=False).tolist()))
                p["number"], p["position"] = numbers[i], _bits(row_patterns[r], slots)
            truth["number"] = {"rule": "constant", "param": ""}
            truth["position"] = {"rule": "constant", "param": ""}
        elif group.startswith("number:"):
            numbers, param = _rule_rows(rng, group.split(":")[1], numbers_domain, True)
            for p, n in zip(panels, numbers):
                p["number"] = n
                p["position"] = _random_pattern(rng, slots, n)
            truth["number"] = {"rule": group.split(":")[1], "param": param}
            truth["position"] = {"rule": "free", "param": ""}
        else:  # position:distribute_three
            counts = [k for k in range(1, slots + 1) if math.comb(slots, k) >= 3]
            k = counts[int(rng.integers(len(counts)))]
            patterns = list(_patterns_with_count(slots, k))
            values, param = _rule_rows(rng, "distribute_three", patterns, False)
            for p, v in zip(panels, values):
                p["number"], p["position"] = k, v
            truth["number"] = {"rule": "constant", "param": ""}
            truth["position"] = {"rule": "distribute_three", "param": param}
    # type, size, colour, angle
    for name, options in (
        ("type", ("constant", "distribute_three")),
        ("size", ("constant", "progression", "arithmetic", "distribute_three")),
        ("color", ("constant", "distribute_three")),
    ):
        rule = choose(name, options)
        values, param = _rule_rows(rng, rule, specs[name]["domain"], specs[name]["kind"] == "ordinal")
        for p, v in zip(panels, values):
            p[name] = v
        truth[name] = {"rule": rule, "param": param}
    angles, _ = _rule_rows(rng, "free", ANGLES, True)
    for p, v in zip(panels, angles):
        p["angle"] = v
    truth["angle"] = {"rule": "free", "param": ""}

    answer = panels[8]
    candidates, modified = _answer_set(rng, answer, truth, specs, slots, answer_set)
    order = rng.permutation(len(candidates))
    candidates = [candidates[i] for i in order]
    modified = [modified[i] for i in order]
    target = int(np.flatnonzero(order == 0)[0])
    return {
        "configuration": configuration,
        "concepts": {k: v for k, v in specs.items() if grid > 1 or k not in ("number", "position")},
        "panels": panels,
        "candidates": candidates,
        "target": target,
        "rules": truth,
        "modified": modified,
    }


def _alternatives(answer, name, specs, slots) -> list:
    if name == "position":
        return [p for p in _patterns_with_count(slots, answer["number"]) if p != answer[name]]
    return [v for v in specs[name]["domain"] if v != answer[name]]


def _random_pattern(rng, slots: int, count: int) -> str:
    return _bits(sorted(rng.choice(slots, count, replace=False).tolist()), slots)


def _apply(rng, panel, name, value, slots, position: str | None = None) -> dict:
    out = dict(panel)
    out[name] = value
    if name == "number":  # a new count needs new positions: given (shared by a tree branch) or random (RAVEN)
        out["position"] = position if position is not None else _random_pattern(rng, slots, value)
    return out


def _answer_set(rng, answer, truth, specs, slots, mode):
    modifiable = []
    for name in ("number", "position", "type", "size", "color"):
        if name not in truth or truth[name]["rule"] == "free":
            continue
        if name == "number" and truth["position"]["rule"] != "free":
            continue  # under a position rule or a constant group, the positions change instead (same count)
        alternatives = _alternatives(answer, name, specs, slots)
        if alternatives:
            modifiable.append((name, alternatives))
    if not modifiable:
        raise GenerationError("no attribute of the answer can change")
    if mode == "raven":
        candidates, modified, seen = [answer], [[]], {json.dumps(answer, sort_keys=True)}
        for _ in range(200):
            if len(candidates) == NUM_CANDIDATES:
                break
            name, alternatives = modifiable[int(rng.integers(len(modifiable)))]
            new = _apply(rng, answer, name, alternatives[int(rng.integers(len(alternatives)))], slots)
            key = json.dumps(new, sort_keys=True)
            if key not in seen:
                seen.add(key)
                candidates.append(new)
                modified.append([name])
        if len(candidates) < NUM_CANDIDATES:
            raise GenerationError("too few distinct RAVEN distractors")
        return candidates, modified
    # I-RAVEN: a tree over up to three attributes
    order = rng.permutation(len(modifiable))
    chosen = [modifiable[i] for i in order[:3]]
    if len(chosen) == 3:
        plan = [(name, 1, alts) for name, alts in chosen]
    elif len(chosen) == 2:
        chosen.sort(key=lambda x: len(x[1]))  # the attribute with more alternatives takes 3 new values
        plan = [(chosen[0][0], 1, chosen[0][1]), (chosen[1][0], 3, chosen[1][1])]
    else:  # one attribute: up to 7 new values (fewer candidates when it has fewer alternatives)
        plan = [(chosen[0][0], min(7, len(chosen[0][1])), chosen[0][1])]
    candidates, modified = [answer], [[]]
    for name, count, alternatives in plan:
        if len(alternatives) < count:
            raise GenerationError(f"{name} has only {len(alternatives)} alternative values")
        values = [alternatives[i] for i in rng.choice(len(alternatives), count, replace=False)]
        new_candidates, new_modified = [], []
        for value in values:
            # one position pattern per new count, shared by the branch: otherwise the answer's pattern would be the
            # most frequent one among the candidates (a context-blind shortcut)
            position = _random_pattern(rng, slots, value) if name == "number" else None
            for cand, mod in zip(candidates, modified):
                new_candidates.append(_apply(rng, cand, name, value, slots, position))
                new_modified.append([*mod, name])
        candidates, modified = candidates + new_candidates, modified + new_modified
    if len(candidates) != NUM_CANDIDATES and len(plan) > 1:
        raise GenerationError("answer tree did not give 8 candidates")
    return candidates, modified


# ------------------------------------------------------------------------------------------------------ rendering
def render_panel(attributes: dict[str, Any] | None, image_size: int = 160, *, configuration: str | None = None):
    """A panel as a ``PIL.Image`` (RGB, white background): every occupied slot holds a shape of the panel's type,
    size, colour and angle. ``None`` gives an empty panel.

    Args:
        attributes (`dict`): ``position`` (bit string over the slots), ``type``, ``size``, ``color``, ``angle``.
        image_size (`int`, *optional*, defaults to `160`): side in pixels.
        configuration (`str`, *optional*): inferred from the length of ``position`` when omitted.

    Returns:
        `PIL.Image.Image` of size `(image_size, image_size)`.
    """
    from PIL import Image, ImageDraw

    image_size = check_int("image_size", image_size, minimum=16, maximum=4096)
    image = Image.new("RGB", (image_size, image_size), "white")
    draw = ImageDraw.Draw(image)
    draw.rectangle([0, 0, image_size - 1, image_size - 1], outline=(0, 0, 0), width=max(1, image_size // 80))
    if attributes is None:
        return image
    bits = str(attributes.get("position", "1"))
    grid = round(math.sqrt(len(bits)))
    if grid * grid != len(bits) or grid < 1:
        raise ValueError(f"`position` has to be a bit string over a square grid of slots, but is {bits!r}")
    cell = image_size / grid
    scale = SIZE_SCALE.get(int(attributes["size"]), 0.6)
    radius = 0.45 * cell * scale
    fill = COLORS.get(attributes["color"], (128, 128, 128)) if isinstance(attributes["color"], str) else (
        (int(attributes["color"]),) * 3
    )
    rotation = ANGLE_DEGREES.get(int(attributes.get("angle", 4)), 0)
    sides = SHAPE_SIDES.get(str(attributes["type"]), 4)
    width = max(1, image_size // 80)
    for slot in _pattern(bits):
        cx, cy = (slot % grid + 0.5) * cell, (slot // grid + 0.5) * cell
        if sides == 0:
            draw.ellipse([cx - radius, cy - radius, cx + radius, cy + radius], fill=fill, outline=(0, 0, 0),
                         width=width)
        else:
            draw.regular_polygon((cx, cy, radius), sides, rotation=rotation, fill=fill, outline=(0, 0, 0),
                                 width=width)
    return image


def render_puzzle(context: Sequence, candidates: Sequence, image_size: int = 160):
    """The whole puzzle as one image: the 3 x 3 context grid (the missing panel marked ``?``) above the 2 x 4
    candidates, each a ``PIL.Image`` or an attribute dict (rendered with :func:`render_panel`).

    Returns:
        `PIL.Image.Image` of size `(4 * image_size + 5 * gap, 3 * image_size + 2 * image_size + 7 * gap)`.
    """
    from PIL import Image, ImageDraw

    if len(context) != NUM_CONTEXT or not 1 <= len(candidates) <= NUM_CANDIDATES:
        raise ValueError(f"a puzzle has 8 context and 1 to 8 candidate panels, got {len(context)} and "
                         f"{len(candidates)}")
    to_image = lambda p: p if hasattr(p, "size") and hasattr(p, "convert") else render_panel(p, image_size)  # noqa: E731
    ctx = [to_image(p).convert("RGB").resize((image_size, image_size)) for p in context]
    cands = [to_image(p).convert("RGB").resize((image_size, image_size)) for p in candidates]
    gap = max(2, image_size // 16)
    width = 4 * image_size + 5 * gap
    height = 5 * image_size + 7 * gap
    canvas = Image.new("RGB", (width, height), (235, 235, 235))
    left = (width - (3 * image_size + 2 * gap)) // 2
    for i in range(9):
        r, c = divmod(i, 3)
        x, y = left + c * (image_size + gap), gap + r * (image_size + gap)
        if i < 8:
            canvas.paste(ctx[i], (x, y))
        else:
            blank = render_panel(None, image_size)
            ImageDraw.Draw(blank).text((image_size // 2 - 4, image_size // 2 - 6), "?", fill=(0, 0, 0))
            canvas.paste(blank, (x, y))
    top = 3 * image_size + 4 * gap
    for j, cand in enumerate(cands):  # missing candidate slots stay background-grey
        r, c = divmod(j, 4)
        canvas.paste(cand, (gap + c * (image_size + gap), top + r * (image_size + gap)))
    return canvas


def split_puzzle_image(image, image_size: int | None = None) -> tuple[list, list]:
    """Cut a puzzle image laid out by :func:`render_puzzle` back into its 8 context and 8 candidate panels.

    Args:
        image (`PIL.Image.Image`): the puzzle.
        image_size (`int`, *optional*): the panel side; inferred from the width (``4 s + 5 * max(2, s // 16)``).

    Returns:
        `(context, candidates)`: two lists of 8 ``PIL.Image`` each (unused candidate slots are grey).

    Raises:
        ValueError: if the image size does not match that layout.
    """
    width, height = image.size
    if image_size is None:
        candidates_s = [s for s in range(16, width // 4 + 1) if 4 * s + 5 * max(2, s // 16) == width]
        if not candidates_s:
            raise ValueError(
                f"`image` of size {image.size} is not a puzzle laid out by `render_puzzle` (pass its panels instead)"
            )
        image_size = candidates_s[0]
    s = check_int("image_size", image_size, minimum=16)
    gap = max(2, s // 16)
    if (width, height) != (4 * s + 5 * gap, 5 * s + 7 * gap):
        raise ValueError(f"`image` of size {image.size} does not match the puzzle layout for panels of {s} px")
    left = (width - (3 * s + 2 * gap)) // 2
    context = []
    for i in range(8):
        r, c = divmod(i, 3)
        x, y = left + c * (s + gap), gap + r * (s + gap)
        context.append(image.crop((x, y, x + s, y + s)))
    top = 3 * s + 4 * gap
    candidates = []
    for j in range(8):
        r, c = divmod(j, 4)
        x, y = gap + c * (s + gap), top + r * (s + gap)
        candidates.append(image.crop((x, y, x + s, y + s)))
    return context, candidates


# -------------------------------------------------------------------------------------------------- the dataset
def _features():
    from datasets import Features, Image, List, Value

    return Features(
        {
            "id": Value("string"),
            "configuration": Value("string"),
            "image": Image(),
            "panels": List(Image()),
            "target": Value("int64"),
            "attributes": Value("string"),
            "concepts": Value("string"),
            "rules": List({"concept": Value("string"), "rule": Value("string"), "param": Value("string")}),
            "modified": List(List(Value("string"))),
            "answer_set": Value("string"),
            "source": Value("string"),
        }
    )


def matrix_to_row(matrix: dict[str, Any], *, item_id: str, render: bool = True, image_size: int = 160,
                  answer_set: str = "iraven", source: str = "hfx") -> dict[str, Any]:
    """A generated matrix (:func:`generate_matrix`) as a dataset row (images rendered when ``render``).

    Returns:
        `dict`: the row, in the schema of :func:`load_dataset`.
    """
    context = matrix["panels"][:NUM_CONTEXT]
    candidates = matrix["candidates"]
    panels = None
    image = None
    if render:
        panels = [render_panel(p, image_size) for p in [*context, *candidates]]
        image = _png(render_puzzle(panels[:NUM_CONTEXT], panels[NUM_CONTEXT:], image_size))
    return {
        "id": item_id,
        "configuration": matrix["configuration"],
        "image": image,
        "panels": None if panels is None else [_png(p) for p in panels],
        "target": int(matrix["target"]),
        "attributes": json.dumps([*context, *candidates]),
        "concepts": json.dumps(matrix["concepts"]),
        "rules": [{"concept": k, "rule": v["rule"], "param": v["param"]} for k, v in matrix["rules"].items()],
        "modified": [list(m) for m in matrix["modified"]],
        "answer_set": answer_set,
        "source": source,
    }


def _png(image) -> dict:
    """A PIL image as the ``{"bytes", "path"}`` dict of a ``datasets.Image`` feature (fast zlib level: the puzzle
    images are large and flat)."""
    buffer = io.BytesIO()
    image.save(buffer, format="PNG", compress_level=1)
    return {"bytes": buffer.getvalue(), "path": None}


def item_rng(seed: int, split: str, index: int, configuration: str) -> np.random.Generator:
    """The generator of one item: a function of (seed, split, configuration, index) only, so items do not depend on
    ``size`` and the splits are independent streams.

    Returns:
        `numpy.random.Generator`.
    """
    return np.random.default_rng([seed, SPLITS[split], zlib.crc32(configuration.encode()), index])


def generate_matrices(split: str = "test", size: int = 500, seed: int = 0, *,
                      configuration: str | Sequence[str] = "center_single", answer_set: str = "iraven",
                      free_prob: float = 0.0, rules: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """The symbolic matrices of :func:`load_dataset` without rendering (fast; for evaluation with symbolic
    proposers). Several configurations are interleaved (item ``i`` takes ``configuration[i % len]``).

    Returns:
        `list[dict]`: matrices as returned by :func:`generate_matrix`, each with an ``id``.
    """
    split = check_choice("split", split, list(SPLITS))
    size = check_int("size", size, minimum=1, maximum=10_000_000)
    seed = check_int("seed", seed, minimum=0)
    configs = [configuration] if isinstance(configuration, str) else list(configuration)
    if not configs:
        raise ValueError("`configuration` has to name at least one configuration")
    for i, c in enumerate(configs):
        check_choice(f"configuration[{i}]", c, list(CONFIGURATIONS))
    out = []
    for i in range(size):
        config = configs[i % len(configs)]
        matrix = generate_matrix(item_rng(seed, split, i, config), config, rules=rules, free_prob=free_prob,
                                 answer_set=answer_set)
        matrix["id"] = f"{split}-{config}-{seed}-{i}"
        out.append(matrix)
    return out


def load_dataset(
    split: str = "test",
    size: int = 500,
    seed: int = 0,
    *,
    configuration: str | Sequence[str] = "center_single",
    answer_set: str = "iraven",
    free_prob: float = 0.0,
    rules: dict[str, str] | None = None,
    render: bool = True,
    image_size: int = 160,
):
    """Generated RAVEN-style matrices as a ``datasets.Dataset``.

    Args:
        split (`str`, *optional*, defaults to `"test"`): ``"train"``, ``"validation"`` or ``"test"`` (independent
            streams: item ``i`` of a split is a function of ``(seed, split, configuration, i)``).
        size (`int`, *optional*, defaults to `500`): number of matrices.
        seed (`int`, *optional*, defaults to `0`).
        configuration (`str` or `list[str]`, *optional*, defaults to `"center_single"`): one or several of
            :data:`CONFIGURATIONS` (interleaved).
        answer_set (`str`, *optional*, defaults to `"iraven"`): ``"iraven"`` (balanced) or ``"raven"``.
        free_prob (`float`, *optional*, defaults to `0.0`): see :func:`generate_matrix`.
        rules (`dict`, *optional*): fixed rules, see :func:`generate_matrix`.
        render (`bool`, *optional*, defaults to `True`): render ``image`` and ``panels`` (``None`` otherwise).
        image_size (`int`, *optional*, defaults to `160`): panel side in pixels.

    Returns:
        `datasets.Dataset` with columns ``id``, ``configuration``, ``image`` (the puzzle, :func:`render_puzzle`),
        ``panels`` (16 images: 8 context then 8 candidates), ``target`` (the answer's candidate index),
        ``attributes`` (JSON: the 16 panels' attribute dicts), ``concepts`` (JSON: name -> kind and domain),
        ``rules`` (per concept: rule and parameter, ``"free"`` without a rule), ``modified`` (per candidate, the
        attributes changed from the answer), ``answer_set``, ``source``.

    Raises:
        ValueError: for an unknown split / configuration / answer set or a bad size.
    """
    from datasets import Dataset

    render = check_bool("render", render)
    image_size = check_int("image_size", image_size, minimum=16, maximum=1024)
    answer_set = check_choice("answer_set", answer_set, ANSWER_SETS)
    matrices = generate_matrices(split, size, seed, configuration=configuration, answer_set=answer_set,
                                 free_prob=free_prob, rules=rules)
    rows = [matrix_to_row(m, item_id=m["id"], render=render, image_size=image_size, answer_set=answer_set)
            for m in matrices]
    return Dataset.from_list(rows, features=_features())


def parse_item(item: dict[str, Any]) -> dict[str, Any]:
    """The symbolic part of a dataset row (or a generated matrix) as Python objects.

    Returns:
        `dict`: ``attributes`` (16 dicts: 8 context, then the candidates), ``concepts`` (name -> spec), ``rules``
        (name -> rule name), ``target`` (or ``None``).

    Raises:
        ValueError: if the row has no symbolic attributes.
    """
    if "panels" in item and "candidates" in item and isinstance(item.get("rules"), dict):  # a generated matrix
        rules = {k: v["rule"] for k, v in item["rules"].items()}
        return {"attributes": [*item["panels"][:NUM_CONTEXT], *item["candidates"]], "concepts": item["concepts"],
                "rules": rules, "target": item.get("target")}
    if item.get("attributes") in (None, ""):
        raise ValueError("this item has no symbolic `attributes` (an AttributeProposer needs them; use a VLM proposer "
                         "for plain images)")
    def _json(key):
        value = item.get(key)
        if not isinstance(value, str):
            return value
        try:
            return json.loads(value)
        except json.JSONDecodeError as err:
            raise ValueError(f"item {item.get('id')!r}: its `{key}` column is not valid JSON ({err.msg})") from None

    attributes, concepts = _json("attributes"), _json("concepts")
    if not isinstance(attributes, list) or not all(isinstance(a, dict) for a in attributes):
        raise ValueError(f"item {item.get('id')!r}: `attributes` has to be a list of per-panel dicts")
    if concepts is not None and not isinstance(concepts, dict):
        raise ValueError(f"item {item.get('id')!r}: `concepts` has to map concept names to specs")
    if not concepts:
        raise ValueError("this item has no `concepts` specification")
    rules = item.get("rules") or []
    rules = {r["concept"]: r["rule"] for r in rules} if isinstance(rules, list) else dict(rules)
    return {"attributes": attributes, "concepts": concepts, "rules": rules, "target": item.get("target")}


def governed_concepts(item: dict[str, Any]) -> list[str]:
    """The concepts that follow a rule in an item's ground truth (every concept whose rule is not ``"free"``).

    Returns:
        `list[str]`: sorted names.
    """
    return sorted(k for k, v in parse_item(item)["rules"].items() if v != "free")


# ---------------------------------------------------------------------------------------------- RAVEN / I-RAVEN
RAVEN_TYPES = ("none", "triangle", "square", "pentagon", "hexagon", "circle")


def _raven_concept_values(panel_el, component: int) -> dict[str, Any] | None:
    struct = panel_el.find("Struct")
    comps = struct.findall("Component") if struct is not None else []
    if component >= len(comps):
        return None
    layout = comps[component].find("Layout")
    entities = layout.findall("Entity")
    values: dict[str, Any] = {}
    if layout.get("name") != "Center_Single":
        values["number"] = int(layout.get("Number")) + 1
        slots = json.loads(layout.get("Position"))
        occupied = {json.dumps(json.loads(e.get("bbox"))) for e in entities}
        values["position"] = "".join("1" if json.dumps(s) in occupied else "0" for s in slots)
    if entities:
        first = entities[0]
        values["type"] = int(first.get("Type"))
        values["size"] = int(first.get("Size")) + 1
        values["color"] = int(first.get("Color"))
        values["angle"] = int(first.get("Angle")) + 1
    return values


def _read_raven_xml(path: Path) -> dict[str, Any]:
    import xml.etree.ElementTree as ET

    root = ET.parse(path).getroot()
    panels = root.find("Panels").findall("Panel")
    if len(panels) != 16:
        raise ValueError(f"{path}: a RAVEN problem has 16 panels, found {len(panels)}")
    struct = panels[0].find("Struct")
    n_components = len(struct.findall("Component"))
    layout_names = [c.find("Layout").get("name") for c in struct.findall("Component")]
    attributes: list[dict[str, Any]] = [{} for _ in range(16)]
    concepts: dict[str, dict[str, Any]] = {}
    for comp in range(n_components):
        prefix = "" if n_components == 1 else f"c{comp}."
        for i, panel in enumerate(panels):
            values = _raven_concept_values(panel, comp) or {}
            for k, v in values.items():
                attributes[i][prefix + k] = v
        keys = set().union(*(set(a) for a in attributes))
        for key in sorted(k for k in keys if k.startswith(prefix) or not prefix):
            base = key[len(prefix):]
            if base == "position":
                n_slots = max(len(a[key]) for a in attributes if key in a)
                concepts[key] = {"kind": "categorical", "domain": list(_position_domain(n_slots))}
            elif base in ("number", "type", "size", "color", "angle"):
                domain = {"number": range(1, 10), "type": range(1, 6), "size": range(1, 7), "color": range(10),
                          "angle": range(1, 9)}[base]
                concepts[key] = {"kind": "ordinal", "domain": list(domain)}
    rules: dict[str, str] = {}
    for group in root.find("Rules").findall("Rule_Group"):
        comp = int(group.get("id"))
        prefix = "" if n_components == 1 else f"c{comp}."
        grid_layout = layout_names[comp] != "Center_Single" if comp < len(layout_names) else True
        for rule in group.findall("Rule"):
            name = rule.get("name").lower()
            attr = rule.get("attr")
            if attr == "Number/Position":
                if grid_layout:
                    rules[prefix + "number"] = name
                    rules[prefix + "position"] = name
            elif attr == "Number":
                rules[prefix + "number"] = name
                rules[prefix + "position"] = "free"
            elif attr == "Position":
                rules[prefix + "position"] = name
            else:
                rules[prefix + attr.lower()] = name
        rules[prefix + "angle"] = "free"
    modified = [[] for _ in range(8)]
    mod_el = root.find("Modified_attributes")
    if mod_el is not None:
        for cand in mod_el.findall("Candidate"):
            idx = int(cand.get("id"))
            modified[idx] = [a.get("name").lower() for a in cand.findall("Attribute")]
    return {"attributes": attributes, "concepts": concepts, "rules": rules, "modified": modified,
            "layouts": layout_names, "is_iraven": mod_el is not None}


def load_raven(
    path: str | Path,
    split: str = "test",
    *,
    configurations: Sequence[str] | None = None,
    limit: int | None = None,
    with_images: bool = True,
):
    """RAVEN / I-RAVEN problems from a local folder, in the schema of :func:`load_dataset`.

    The folder holds ``RAVEN_<i>_<split>.npz`` (``image`` of shape `(16, 160, 160)`, ``target``, ...) and, beside
    each, the ``.xml`` annotation (panels, rules; I-RAVEN adds ``Modified_attributes``), directly or in one
    sub-folder per configuration (``center_single/``, ...) as the authors' generators write them. RAVEN's levels are
    mapped to values: ``number`` = count, ``size`` 1..6, ``type`` 1..5 (ordinal: RAVEN progresses types by edge
    count), ``color`` 0..9 (grey levels, ordinal), ``angle`` 1..8; ``position`` is the occupied slots of the layout
    as a bit string. Configurations with two components (left-right, up-down, out-in) get ``c0.`` / ``c1.`` name
    prefixes.

    Args:
        path (`str` or `Path`): the folder.
        split (`str`, *optional*, defaults to `"test"`): ``"train"``, ``"val"`` or ``"test"`` (the file suffix).
        configurations (`list[str]`, *optional*): sub-folders to read (default: all, or the folder itself).
        limit (`int`, *optional*): read at most this many problems.
        with_images (`bool`, *optional*, defaults to `True`): decode the panel images from the ``.npz`` files.

    Returns:
        `datasets.Dataset` (``answer_set`` is ``"iraven"`` when the xml has ``Modified_attributes``, else
        ``"raven"``; ``source`` is the file name).

    Raises:
        FileNotFoundError: if the folder does not exist or holds no problem of that split.
        ValueError: for an unreadable file (naming it).
    """
    from datasets import Dataset

    root = Path(check_str("path", str(path)))
    split = check_choice("split", split, ["train", "val", "test"])
    limit = check_optional(check_int, "limit", limit, minimum=1)
    with_images = check_bool("with_images", with_images)
    if not root.is_dir():
        raise FileNotFoundError(f"`path` {str(path)!r} is not a folder")
    folders = [root / c for c in configurations] if configurations else [root, *sorted(p for p in root.iterdir()
                                                                                      if p.is_dir())]
    files = []
    for folder in folders:
        if not folder.is_dir():
            raise FileNotFoundError(f"configuration folder {str(folder)!r} does not exist")
        files += sorted(folder.glob(f"RAVEN_*_{split}.npz"), key=lambda p: (str(p.parent), _raven_index(p)))
    if not files:
        raise FileNotFoundError(f"no RAVEN_*_{split}.npz files under {str(root)!r}")
    if limit is not None:
        files = files[:limit]
    rows = []
    for npz_path in files:
        xml_path = npz_path.with_suffix(".xml")
        try:
            data = np.load(npz_path)
            target = int(data["target"])
            images = data["image"] if with_images else None
        except Exception as err:
            raise ValueError(f"cannot read RAVEN file {str(npz_path)!r}: {err}") from err
        if not xml_path.is_file():
            raise FileNotFoundError(f"{str(npz_path)!r} has no annotation {xml_path.name!r} beside it")
        try:
            meta = _read_raven_xml(xml_path)
        except Exception as err:
            raise ValueError(f"cannot read RAVEN annotation {str(xml_path)!r}: {err}") from err
        panels, image = None, None
        if images is not None:
            from PIL import Image as PILImage

            if images.shape[0] != 16:
                raise ValueError(f"{str(npz_path)!r}: `image` has to hold 16 panels, but has shape {images.shape}")
            panels = [PILImage.fromarray(np.asarray(p, dtype=np.uint8)).convert("RGB") for p in images]
            image = _png(render_puzzle(panels[:8], panels[8:], image_size=int(images.shape[-1])))
        rows.append(
            {
                "id": f"{npz_path.parent.name}/{npz_path.stem}",
                "configuration": npz_path.parent.name if npz_path.parent != root else "+".join(meta["layouts"]),
                "image": image,
                "panels": panels,
                "target": target,
                "attributes": json.dumps(meta["attributes"]),
                "concepts": json.dumps(meta["concepts"]),
                "rules": [{"concept": k, "rule": v, "param": ""} for k, v in sorted(meta["rules"].items())],
                "modified": meta["modified"],
                "answer_set": "iraven" if meta["is_iraven"] else "raven",
                "source": npz_path.name,
            }
        )
    return Dataset.from_list(rows, features=_features())


load_iraven = load_raven


def _raven_index(path: Path) -> int:
    try:
        return int(path.stem.split("_")[1])
    except (IndexError, ValueError):
        return 0
