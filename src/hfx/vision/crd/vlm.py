"""`VLMConceptProposer`: concepts and per-panel values from any Hugging Face image-text-to-text model.

Each panel (8 context, then the candidates) is shown to the model alone with a chat-template prompt asking for its
visual attributes as one JSON object; answers are parsed robustly (:func:`parse_panel_answer`), concepts are the keys
reported for at least ``min_share`` of the panels, and a concept's confidence is that share (how consistently the
model perceives it) [reconstruction: the paper's prompt and confidence are not public].
"""

from __future__ import annotations

import ast
import json
import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

from hfx.utils.validation import check_choice, check_float, check_int, check_optional, check_sequence, check_str

from .data import NUM_CONTEXT, split_puzzle_image
from .proposers import Concept, ConceptProposal


OPEN_PROMPT = (
    "This image is one panel of a visual reasoning puzzle. Describe the object(s) in it. Reply with one JSON object "
    "that maps each visual attribute you see (for example number, type, size, color) to its value. Use integers for "
    "counts and sizes (1 = smallest) and lowercase words for the rest, e.g. "
    '{"number": 2, "type": "triangle", "size": 3, "color": "red"}.'
)
FIXED_PROMPT = (
    "This image is one panel of a visual reasoning puzzle. Describe the object(s) in it. Reply with one JSON object "
    "with exactly these keys: {keys}. Use integers for counts and sizes (1 = smallest) and lowercase words for the "
    "rest."
)
SYNONYMS = {"shape": "type", "colour": "color", "count": "number", "num": "number", "quantity": "number",
            "rotation": "angle", "orientation": "angle"}


def panel_name(index: int) -> str:
    """A human name for panel ``index`` of a matrix (0-7 context, 8+ candidates).

    Returns:
        `str`, e.g. ``"context panel 5 (row 2, column 2)"`` or ``"candidate 3"``.
    """
    if index < NUM_CONTEXT:
        r, c = divmod(index, 3)
        return f"context panel {index + 1} (row {r + 1}, column {c + 1})"
    return f"candidate {index - NUM_CONTEXT + 1}"


def _first_object(text: str) -> str | None:
    start = text.find("{")
    while start != -1:
        depth, in_str, quote, escaped = 0, False, "", False
        for i in range(start, len(text)):
            ch = text[i]
            if in_str:
                if escaped:
                    escaped = False
                elif ch == "\\":
                    escaped = True
                elif ch == quote:
                    in_str = False
            elif ch in "\"'":
                in_str, quote = True, ch
            elif ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
                if depth == 0:
                    return text[start : i + 1]
        start = text.find("{", start + 1)
    return None


def _loads(blob: str) -> dict | None:
    attempts = [blob]
    fixed = re.sub(r",\s*([}\]])", r"\1", blob)  # trailing commas, then
    keys = re.sub(r"([{,]\s*)([A-Za-z_][\w ]*?)\s*:", r'\1"\2":', fixed)  # unquoted keys
    attempts.append(keys)
    attempts.append(re.sub(r':\s*([A-Za-z][\w \-]*?)\s*(?=[,}])', r': "\1"', keys))  # and bare-word values
    for attempt in attempts:
        try:
            value = json.loads(attempt)
        except (json.JSONDecodeError, ValueError):
            try:
                value = ast.literal_eval(attempt)
            except (ValueError, SyntaxError, MemoryError, RecursionError):
                continue
        if isinstance(value, dict):
            return value
    return None


def _normalise_key(key: Any, synonyms: Mapping[str, str]) -> str | None:
    text = re.sub(r"[^a-z0-9_]+", "_", str(key).strip().lower()).strip("_")
    return synonyms.get(text, text) or None


def _normalise_value(value: Any):
    if value is None:
        return None
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, (int, float)):
        return float(value) if math.isfinite(value) else None
    if isinstance(value, (list, tuple)):
        return ",".join(str(v).strip().lower() for v in value) or None
    text = str(value).strip().strip("\"'").strip().lower()
    if not text or text in ("none", "null", "n/a", "unknown"):
        return None
    try:
        number = float(text)
        return number if math.isfinite(number) else None
    except ValueError:
        return text


def parse_panel_answer(text: str, synonyms: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The attribute dict in a model's answer about one panel.

    Tries, in order: the first balanced ``{...}`` object as JSON, then with trailing commas removed and bare keys
    quoted, then as a Python literal; without braces, ``key: value`` / ``key = value`` pairs separated by newlines,
    commas or semicolons. Keys are lower-cased (``"Shape"`` -> ``"type"`` etc. via ``synonyms``); numeric values
    (also numeric strings) become floats, other values lower-case strings; ``null`` / ``"none"`` become ``None``.

    Args:
        text (`str`): the decoded answer.
        synonyms (`Mapping[str, str]`, *optional*): key renames (defaults to :data:`SYNONYMS`).

    Returns:
        `dict[str, Any]`: empty when nothing could be parsed.
    """
    synonyms = SYNONYMS if synonyms is None else synonyms
    if not isinstance(text, str):
        return {}
    blob = _first_object(text)
    data = _loads(blob) if blob is not None else None
    if data is None:
        data = {}
        for part in re.split(r"[\n;,]+", text.replace("{", " ").replace("}", " ")):
            m = re.match(r"\s*[\"']?([A-Za-z_][\w \-]*?)[\"']?\s*[:=]\s*(.+?)\s*$", part)
            if m:
                data[m.group(1)] = m.group(2)
    out = {}
    for key, value in data.items():
        name = _normalise_key(key, synonyms)
        if name is not None and not isinstance(value, dict):
            out[name] = _normalise_value(value)
    return out


class VLMConceptProposer:
    """Concepts from an image-text-to-text model (``AutoModelForImageTextToText`` + ``AutoProcessor``: LLaVA,
    Qwen2-VL, Idefics, SmolVLM, ...), by prompting it about each panel.

    The prompt goes through the processor's chat template when it has one (content ``[{"type": "image"},
    {"type": "text", ...}]``), else through the tokenizer's chat template with the processor's image token, else a
    plain ``USER: <image>\\n... ASSISTANT:`` string. Generation is greedy (``generation_kwargs`` override), batched
    with left padding, under ``torch.no_grad``; inputs follow the model's device and dtype.

    Args:
        model (`transformers.PreTrainedModel`): the VLM.
        processor (`transformers.ProcessorMixin`): its processor.
        concepts (`list[str]`, *optional*): ask for exactly these attributes (default: let the model name them).
        prompt (`str`, *optional*): overrides the prompt (``{keys}`` is filled with ``concepts``).
        max_new_tokens (`int`, *optional*, defaults to `64`).
        batch_size (`int`, *optional*, defaults to `8`): panels per ``generate`` call.
        min_share (`float`, *optional*, defaults to `0.5`): a key becomes a concept when reported for at least this
            share of a matrix's panels.
        on_parse_error (`str`, *optional*, defaults to `"raise"`): ``"raise"`` a `ValueError` naming the matrix and
            panel whose answer has no attribute, or ``"skip"`` the panel (its values are then missing).
        generation_kwargs (`dict`, *optional*): extra ``generate`` arguments.
        model_name_or_path (`str`, *optional*): recorded by ``CRDPipeline.save_pretrained``.

    Raises:
        TypeError / ValueError: for bad arguments; at ``propose``, a `ValueError` for an unparseable panel (with
        ``on_parse_error="raise"``) or for a matrix without panels.
    """

    def __init__(self, model, processor, *, concepts: Sequence[str] | None = None, prompt: str | None = None,
                 max_new_tokens: int = 64, batch_size: int = 8, min_share: float = 0.5,
                 on_parse_error: str = "raise", generation_kwargs: dict | None = None,
                 model_name_or_path: str | None = None):
        if not callable(getattr(model, "generate", None)):
            raise TypeError(f"`model` has to be a generative model with `generate`, but is {type(model).__name__}")
        if not callable(processor):
            raise TypeError(f"`processor` has to be a callable processor, but is {type(processor).__name__}")
        self.model, self.processor = model, processor
        self.concepts = check_optional(check_sequence, "concepts", concepts, item_check=check_str, min_length=1)
        self.prompt = check_optional(check_str, "prompt", prompt)
        self.max_new_tokens = check_int("max_new_tokens", max_new_tokens, minimum=1, maximum=4096)
        self.batch_size = check_int("batch_size", batch_size, minimum=1)
        self.min_share = check_float("min_share", min_share, minimum=0.0, maximum=1.0, strict_minimum=True)
        self.on_parse_error = check_choice("on_parse_error", on_parse_error, ("raise", "skip"))
        if generation_kwargs is not None and not isinstance(generation_kwargs, dict):
            raise TypeError(f"`generation_kwargs` has to be a dict, but is {type(generation_kwargs).__name__}")
        self.generation_kwargs = dict(generation_kwargs or {})
        self.model_name_or_path = model_name_or_path
        tokenizer = getattr(processor, "tokenizer", None)
        if tokenizer is not None and getattr(tokenizer, "padding_side", "left") != "left":
            tokenizer.padding_side = "left"  # decoder-only generation needs left padding

    @classmethod
    def from_pretrained(cls, model_name_or_path: str, *, dtype=None, device: str | None = None,
                        **kwargs) -> VLMConceptProposer:
        """Load ``AutoModelForImageTextToText`` and ``AutoProcessor`` from a local folder or a cached Hub id.

        Returns:
            `VLMConceptProposer`.

        Raises:
            FileNotFoundError / ValueError: for a missing folder, a folder of another kind, or a Hub id not cached
            while offline (before anything is loaded).
        """
        from transformers import AutoModelForImageTextToText, AutoProcessor

        from hfx._artifacts import resolve_model

        path = resolve_model(model_name_or_path, arg="model_name_or_path", allowed=("transformers:", "prunesid_llava"),
                             what="an image-text-to-text model folder")
        model = AutoModelForImageTextToText.from_pretrained(path, dtype=dtype)
        if device is not None:
            model = model.to(device)
        processor = AutoProcessor.from_pretrained(path)
        return cls(model.eval(), processor, model_name_or_path=str(model_name_or_path), **kwargs)

    def to_dict(self) -> dict[str, Any]:
        """Settings recorded by ``CRDPipeline.save_pretrained`` (the model by path).

        Returns:
            `dict`.
        """
        return {"type": "vlm", "model_name_or_path": self.model_name_or_path,
                "settings": {"concepts": self.concepts, "prompt": self.prompt, "max_new_tokens": self.max_new_tokens,
                             "batch_size": self.batch_size, "min_share": self.min_share,
                             "on_parse_error": self.on_parse_error}}

    def __repr__(self) -> str:
        return f"VLMConceptProposer(model={type(self.model).__name__}, concepts={self.concepts})"

    # ------------------------------------------------------------------------------------------------ prompts
    def _prompt_text(self) -> str:
        if self.prompt is not None:
            return self.prompt.replace("{keys}", ", ".join(self.concepts or []))
        if self.concepts:
            return FIXED_PROMPT.format(keys=", ".join(self.concepts))
        return OPEN_PROMPT

    def _chat(self) -> str:
        question = self._prompt_text()
        if getattr(self.processor, "chat_template", None):
            messages = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": question}]}]
            return self.processor.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
        image_token = getattr(self.processor, "image_token", None) or "<image>"
        tokenizer = getattr(self.processor, "tokenizer", None)
        if tokenizer is not None and getattr(tokenizer, "chat_template", None):
            messages = [{"role": "user", "content": f"{image_token}\n{question}"}]
            return tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
        return f"USER: {image_token}\n{question} ASSISTANT:"

    @staticmethod
    def _panels(item: Mapping[str, Any], index: int) -> list:
        panels = item.get("panels")
        if panels:
            panels = list(panels)
        elif item.get("context") is not None and item.get("candidates") is not None:
            panels = [*item["context"], *item["candidates"]]
        elif item.get("image") is not None:
            context, candidates = split_puzzle_image(item["image"])
            panels = [*context, *candidates]
        else:
            raise ValueError(f"matrix {item.get('id', index)!r} has no images: give `panels` (8 context + candidate "
                             "images), `context` + `candidates`, or a puzzle `image`")
        if len(panels) <= NUM_CONTEXT:
            raise ValueError(f"matrix {item.get('id', index)!r} has {len(panels)} panels; 8 context panels and at "
                             "least one candidate are needed")
        out = []
        for k, p in enumerate(panels):
            if isinstance(p, Mapping) and p.get("bytes") is not None:
                import io

                from PIL import Image

                p = Image.open(io.BytesIO(p["bytes"]))
            if not (hasattr(p, "convert") and hasattr(p, "size")):
                raise TypeError(f"matrix {item.get('id', index)!r}: {panel_name(k)} is not an image but "
                                f"{type(p).__name__}")
            out.append(p.convert("RGB"))
        return out

    # ------------------------------------------------------------------------------------------------ propose
    def generate_answers(self, images: Sequence) -> list[str]:
        """The model's decoded answer for each panel image (batched, greedy).

        Returns:
            `list[str]`.
        """
        import torch

        text = self._chat()
        answers: list[str] = []
        device = getattr(self.model, "device", None)
        dtype = getattr(self.model, "dtype", None)
        kwargs = {"max_new_tokens": self.max_new_tokens, "do_sample": False, **self.generation_kwargs}
        with torch.no_grad():
            for start in range(0, len(images), self.batch_size):
                chunk = list(images[start : start + self.batch_size])
                inputs = self.processor(images=chunk, text=[text] * len(chunk), return_tensors="pt", padding=True)
                inputs = {k: (v.to(device) if hasattr(v, "to") and device is not None else v) for k, v in inputs.items()}
                if "pixel_values" in inputs and dtype is not None and inputs["pixel_values"].is_floating_point():
                    inputs["pixel_values"] = inputs["pixel_values"].to(dtype)
                out = self.model.generate(**inputs, **kwargs)
                new = out[:, inputs["input_ids"].shape[1] :]
                answers += self.processor.batch_decode(new, skip_special_tokens=True)
        return answers

    def propose(self, items: Sequence[Mapping[str, Any]]) -> list[ConceptProposal]:
        """One proposal per matrix.

        Args:
            items (`Sequence[Mapping]`): matrices with ``panels`` (8 context then candidate images), or ``context`` +
                ``candidates``, or a puzzle ``image`` (:func:`~hfx.vision.crd.data.split_puzzle_image`).

        Returns:
            `list[ConceptProposal]`.

        Raises:
            ValueError: for a matrix without images, or (``on_parse_error="raise"``) an answer with no attribute,
            naming the matrix and the panel.
        """
        if isinstance(items, Mapping):
            items = [items]
        all_panels = [self._panels(item, i) for i, item in enumerate(items)]  # validate every item first
        flat = [p for panels in all_panels for p in panels]
        answers = self.generate_answers(flat)
        proposals, pos = [], 0
        for i, (item, panels) in enumerate(zip(items, all_panels)):
            texts = answers[pos : pos + len(panels)]
            pos += len(panels)
            parsed = []
            for k, t in enumerate(texts):
                values = parse_panel_answer(t)
                if self.concepts:
                    values = {c: values.get(c) for c in self.concepts if c in values}
                if self.concepts:
                    values = {c: v for c, v in values.items() if v is not None}
                if not any(v is not None for v in values.values()) and self.on_parse_error == "raise":
                    raise ValueError(
                        f"VLMConceptProposer could not parse the model's answer for {panel_name(k)} of matrix "
                        f"{item.get('id', i)!r}: {t[:200]!r} (expected a JSON object of attributes; pass "
                        "on_parse_error='skip' to treat the panel as unseen)"
                    )
                parsed.append(values)
            proposals.append(self._assemble(parsed, item, i, texts))
        return proposals

    def _assemble(self, parsed: list[dict], item, index, texts) -> ConceptProposal:
        n = len(parsed)
        keys: list[str] = list(self.concepts or [])
        for values in parsed:
            for key in values:
                if key not in keys:
                    keys.append(key)
        concepts = []
        for key in keys:
            present = [values.get(key) for values in parsed]
            share = sum(v is not None for v in present) / n
            if share < self.min_share or share == 0:
                continue
            numeric = all(isinstance(v, float) for v in present if v is not None)
            kind = "ordinal" if numeric else "categorical"
            if kind == "categorical":
                present = [None if v is None else (f"{v:g}" if isinstance(v, float) else v) for v in present]
            concepts.append(Concept(key, kind, present[:NUM_CONTEXT], present[NUM_CONTEXT:], confidence=share))
        if not concepts:
            raise ValueError(
                f"VLMConceptProposer found no concept reported in at least {self.min_share:.0%} of the panels of "
                f"matrix {item.get('id', index)!r} (first answer: {texts[0][:120]!r})"
            )
        return ConceptProposal(concepts, item_id=str(item.get("id", index)), raw={"answers": texts, "parsed": parsed})


__all__ = ["FIXED_PROMPT", "OPEN_PROMPT", "SYNONYMS", "VLMConceptProposer", "panel_name", "parse_panel_answer"]
