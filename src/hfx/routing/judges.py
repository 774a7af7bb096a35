"""Cheap offline judges for a reward-model pool: TRL-style reward functions that :class:`RoutedRewardModel` can route.

Each judge is a callable ``judge(prompts=..., completions=..., **columns) -> list[float | None]`` (the calling
convention of TRL reward functions, which :func:`~hfx.routing.as_pair_scorer` wraps): a higher score means a better
completion, ``None`` means "this judge does not apply to this row" (for instance no reference answer), which
:class:`~hfx.routing.RoutedRewardModel` treats as an unscored pair. They are the real, complementary judges of
``examples/router_real_judges.py``:

* :class:`NumericAnswerJudge` -- a GSM8K-style verifier: 1 when the completion's final number equals the reference's;
* :class:`DocstringExampleJudge` -- runs only the ``>>>`` examples of a Python function's docstring against the
  completed function (in a subprocess with a timeout) and returns the fraction that pass;
* :class:`ReferenceSimilarityJudge` -- cosine similarity of a sentence embedding of the completion to a reference;
* :class:`MeanLogProbJudge` -- mean token log-probability of the completion under a causal LM (a generalist);
* :class:`LengthJudge` -- the completion's length in words (a deliberately biased judge).

:func:`run_python` is the one place that executes code: a fresh ``python -I`` subprocess in a temporary directory,
killed after ``timeout`` seconds. Untrusted code (model samples) should still only be run on a machine you can
afford to lose; the subprocess is not a sandbox.
"""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence


_NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?|-?\.\d+")


def _text(x) -> str:
    if isinstance(x, list):  # conversational: list of messages
        return "".join(m.get("content", "") if isinstance(m, dict) else str(m) for m in x)
    return "" if x is None else str(x)


def _to_number(s: str) -> float | None:
    s = s.replace(",", "").rstrip(".")
    try:
        return float(s)
    except ValueError:
        return None


def extract_final_number(text: str) -> float | None:
    """The final numeric answer of a worked solution, or ``None`` when it holds no number.

    Looks, in order, for GSM8K's ``#### N``, a ``\\boxed{N}``, "answer is N" / "answer: N", and otherwise takes the
    last number in the text. Thousands separators and a leading ``$`` are ignored.

    Example:
        >>> extract_final_number("She pays 2 * 3 = 6 dollars.\\n#### 6")
        6.0
        >>> extract_final_number("The answer is $1,250.")
        1250.0
    """
    text = _text(text)
    for pattern in (
        r"####\s*\$?\s*(-?[\d,]*\.?\d+)",
        r"\\boxed\{\s*\$?(-?[\d,]*\.?\d+)",
        r"answer\s*(?:is|:)\s*\$?\s*(-?[\d,]*\.?\d+)",
    ):
        hits = re.findall(pattern, text, flags=re.IGNORECASE)
        if hits:
            value = _to_number(hits[-1])
            if value is not None:
                return value
    for tok in reversed(_NUMBER.findall(text)):
        value = _to_number(tok)
        if value is not None:
            return value
    return None


class NumericAnswerJudge:
    """Verifier for math word problems: 1.0 when the completion's final number equals the reference's, else 0.0.

    Args:
        answer_column (`str`, *optional*, defaults to `"answer"`): the keyword argument (dataset column) holding the
            reference solution or number of each row; a row whose reference is ``None`` or holds no number gets
            ``None`` (the judge declines it).
        tolerance (`float`, *optional*, defaults to `1e-6`): absolute tolerance of the comparison.

    Example:
        >>> judge = NumericAnswerJudge()
        >>> judge(prompts=["q", "q"], completions=["... #### 18", "... so 20."], answer=["#### 18", "#### 18"])
        [1.0, 0.0]
    """

    __name__ = "numeric_answer"

    def __init__(self, answer_column: str = "answer", tolerance: float = 1e-6):
        if not tolerance >= 0:
            raise ValueError(f"`tolerance` has to be >= 0, but is {tolerance}")
        self.answer_column = answer_column
        self.tolerance = float(tolerance)

    def __call__(self, prompts: Sequence, completions: Sequence, **kwargs) -> list[float | None]:
        references = kwargs.get(self.answer_column) or [None] * len(completions)
        if len(references) != len(completions):
            raise ValueError(
                f"`{self.answer_column}` holds {len(references)} values for {len(completions)} completions"
            )
        out = []
        for completion, reference in zip(completions, references):
            gold = None if reference is None else extract_final_number(_text(reference))
            if gold is None:
                out.append(None)
                continue
            got = extract_final_number(_text(completion))
            out.append(float(got is not None and abs(got - gold) <= self.tolerance))
        return out


class LengthJudge:
    """A deliberately biased judge: the completion's length in whitespace-separated words (longer = better).

    Example:
        >>> LengthJudge()(prompts=["q", "q"], completions=["one two three", "one"])
        [3.0, 1.0]
    """

    __name__ = "length"

    def __call__(self, prompts: Sequence, completions: Sequence, **kwargs) -> list[float]:
        return [float(len(_text(c).split())) for c in completions]


class ReferenceSimilarityJudge:
    """Cosine similarity of the completion to a reference answer under a sentence encoder.

    Args:
        encoder (`Callable` or sentence-transformers model): ``encoder(texts) -> (N, D)`` embeddings, or an object with
            an ``encode(texts)`` method (e.g. ``SentenceTransformer``).
        reference_column (`str`, *optional*, defaults to `"reference"`): the keyword argument holding each row's
            reference; rows without one (``None``) get ``None``.
    """

    __name__ = "reference_similarity"

    def __init__(self, encoder, reference_column: str = "reference"):
        self.encode: Callable = encoder.encode if hasattr(encoder, "encode") else encoder
        self.reference_column = reference_column

    def __call__(self, prompts: Sequence, completions: Sequence, **kwargs) -> list[float | None]:
        import numpy as np

        references = kwargs.get(self.reference_column) or [None] * len(completions)
        if len(references) != len(completions):
            raise ValueError(
                f"`{self.reference_column}` holds {len(references)} values for {len(completions)} completions"
            )
        idx = [i for i, r in enumerate(references) if r is not None]
        out: list[float | None] = [None] * len(completions)
        if not idx:
            return out
        emb = np.asarray(self.encode([_text(completions[i]) for i in idx] + [_text(references[i]) for i in idx]))
        emb = emb / np.maximum(np.linalg.norm(emb, axis=-1, keepdims=True), 1e-12)
        sims = (emb[: len(idx)] * emb[len(idx) :]).sum(-1)
        for i, s in zip(idx, sims.tolist()):
            out[i] = float(s)
        return out


class MeanLogProbJudge:
    """Mean token log-probability of the completion given the prompt under a causal LM (a generalist judge).

    The prompt goes through the tokenizer's chat template when it has one (a string prompt becomes one user turn, a
    list of messages is used as is); the completion is the assistant turn and only its tokens are scored.

    Args:
        model (`PreTrainedModel`): a causal LM.
        tokenizer (`PreTrainedTokenizerBase`).
        batch_size (`int`, *optional*, defaults to `8`): sequences per forward pass.
        max_length (`int`, *optional*, defaults to `1024`): prompt + completion tokens kept (the prompt is cut from
            the left when longer).
    """

    __name__ = "mean_logprob"

    def __init__(self, model, tokenizer, batch_size: int = 8, max_length: int = 1024):
        if batch_size < 1:
            raise ValueError(f"`batch_size` has to be >= 1, but is {batch_size}")
        self.model, self.tokenizer = model, tokenizer
        self.batch_size, self.max_length = int(batch_size), int(max_length)

    def _ids(self, prompt, completion) -> tuple[list[int], int]:
        tok = self.tokenizer
        completion = _text(completion)
        if getattr(tok, "chat_template", None):
            messages = list(prompt) if isinstance(prompt, list) else [{"role": "user", "content": _text(prompt)}]
            head = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        else:
            head = _text(prompt)
        p = tok(head, add_special_tokens=False)["input_ids"]
        c = tok(completion, add_special_tokens=False)["input_ids"] or [tok.eos_token_id]
        c = c[: self.max_length - 1]
        p = p[-(self.max_length - len(c)) :]
        return p + c, len(c)

    def __call__(self, prompts: Sequence, completions: Sequence, **kwargs) -> list[float]:
        import torch

        device = next(self.model.parameters()).device
        pad = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0
        items = [self._ids(p, c) for p, c in zip(prompts, completions)]
        out = []
        with torch.no_grad():
            for s in range(0, len(items), self.batch_size):
                chunk = items[s : s + self.batch_size]
                width = max(len(ids) for ids, _ in chunk)
                input_ids = torch.full((len(chunk), width), pad, dtype=torch.long)
                attention_mask = torch.zeros((len(chunk), width), dtype=torch.long)
                completion_mask = torch.zeros((len(chunk), width), dtype=torch.bool)
                for k, (ids, n) in enumerate(chunk):  # right padding
                    input_ids[k, : len(ids)] = torch.tensor(ids)
                    attention_mask[k, : len(ids)] = 1
                    completion_mask[k, len(ids) - n : len(ids)] = True
                logits = self.model(
                    input_ids=input_ids.to(device), attention_mask=attention_mask.to(device)
                ).logits.float()
                logps = torch.log_softmax(logits[:, :-1], dim=-1)
                per_token_logps = logps.gather(-1, input_ids[:, 1:, None].to(device)).squeeze(-1).cpu()
                mask = completion_mask[:, 1:]
                out.extend(((per_token_logps * mask).sum(1) / mask.sum(1).clamp(min=1)).tolist())
        return out


# ------------------------------------------------------------------------------------------------ code execution
def run_python(source: str, timeout: float = 5.0) -> tuple[bool, str]:
    """Run ``source`` in a fresh isolated Python subprocess (``python -I``) in a temporary directory.

    Returns:
        `(ok, stdout)`: ``ok`` is whether it exited with status 0 within ``timeout`` seconds.
    """
    with tempfile.TemporaryDirectory() as tmp:
        try:
            proc = subprocess.run(
                [sys.executable, "-I", "-c", source],
                check=False,
                cwd=tmp,
                capture_output=True,
                text=True,
                timeout=timeout,
                stdin=subprocess.DEVNULL,
            )
        except subprocess.TimeoutExpired:
            return False, ""
    return proc.returncode == 0, proc.stdout


_INLINE_EXAMPLE = re.compile(r"^\s*(\w+\(.*\))\s*(?:==>|==|\u279e|=>|->|should return|returns?|=)\s*(.+?)\s*$")


def docstring_examples(prompt: str) -> list[tuple[str, str]]:
    """The (call, expected output) examples of a function prompt's docstring.

    Two layouts are read: doctest (a ``>>> call`` line followed by the expected output) and, when a prompt has no
    doctest lines, inline examples such as ``f(2) == 4``, ``f(2) ==> 4`` or ``f(2) \u279e 4`` whose call is to a
    function defined in the prompt. A trailing full stop of the expected output is dropped.

    Example:
        >>> docstring_examples('def f(x):\\n    \\"\\"\\" Double.\\n    >>> f(2)\\n    4\\n    \\"\\"\\"\\n')
        [('f(2)', '4')]
    """
    lines = _text(prompt).splitlines()
    out = []
    for i, line in enumerate(lines):
        stripped = line.strip()
        if not stripped.startswith(">>>"):
            continue
        call = stripped[3:].strip()
        expected = lines[i + 1].strip() if i + 1 < len(lines) else ""
        if not call or not expected or expected.startswith((">>>", '"""', "'''")):
            continue
        out.append((call, expected))
    if out:
        return out
    names = set(re.findall(r"^\s*def\s+(\w+)\s*\(", _text(prompt), flags=re.MULTILINE))
    for line in lines:
        m = _INLINE_EXAMPLE.match(line)
        if m and m.group(1).split("(", 1)[0] in names:
            out.append((m.group(1), m.group(2).rstrip(".").strip()))
    return out


_DOCTEST_RUNNER = """
import json as _json
_results = []
for _call, _expected in {examples!r}:
    try:
        _got = eval(_call)
        try:
            _want = eval(_expected)
            _ok = _got == _want or (isinstance(_got, float) and abs(_got - _want) < 1e-6)
        except Exception:
            _ok = repr(_got) == _expected or str(_got) == _expected
    except Exception:
        _ok = False
    _results.append(bool(_ok))
print("__DOCTEST__" + _json.dumps(_results))
"""


class DocstringExampleJudge:
    """Cheap code judge: run only the docstring's ``>>>`` examples against the completed function.

    The program is ``prompt + completion`` (a HumanEval-style prompt: signature + docstring, the completion its
    body) followed by the examples, executed by :func:`run_python` (a subprocess with a timeout). The score is the
    fraction of examples that return the expected value (0 when the program does not run); a prompt without
    ``>>>`` examples gets ``None``.

    Args:
        timeout (`float`, *optional*, defaults to `5.0`): seconds per program.
        prompt_is_code (`Callable`, *optional*): ``f(prompt) -> bool``; rows where it is false get ``None``
            (defaults to "the prompt holds a ``def``").
    """

    __name__ = "docstring_examples"

    def __init__(self, timeout: float = 5.0, prompt_is_code: Callable | None = None):
        if not timeout > 0:
            raise ValueError(f"`timeout` has to be > 0, but is {timeout}")
        self.timeout = float(timeout)
        self.prompt_is_code = prompt_is_code or (lambda p: "def " in _text(p))

    def score(self, prompt: str, completion: str) -> float | None:
        prompt = _text(prompt)
        if not self.prompt_is_code(prompt):
            return None
        examples = docstring_examples(prompt)
        if not examples:
            return None
        source = prompt + _text(completion) + "\n" + _DOCTEST_RUNNER.format(examples=examples)
        ok, stdout = run_python(source, self.timeout)
        marker = stdout.rfind("__DOCTEST__")
        if not ok or marker < 0:
            return 0.0
        import json

        results = json.loads(stdout[marker + len("__DOCTEST__") :].strip().splitlines()[0])
        return sum(results) / len(results) if results else 0.0

    def __call__(self, prompts: Sequence, completions: Sequence, **kwargs) -> list[float | None]:
        return [self.score(p, c) for p, c in zip(prompts, completions)]


def passes_tests(program: str, timeout: float = 10.0) -> bool:
    """Whether ``program`` (e.g. HumanEval's prompt + completion + test + ``check(entry_point)``) exits cleanly."""
    return run_python(program, timeout)[0]


__all__ = [
    "DocstringExampleJudge",
    "LengthJudge",
    "MeanLogProbJudge",
    "NumericAnswerJudge",
    "ReferenceSimilarityJudge",
    "docstring_examples",
    "extract_final_number",
    "passes_tests",
    "run_python",
]
