"""Fluency measures for the fluent-alignment case study: a reference LM's per-token log-likelihood and a native n-gram LM.

The paper (arXiv 2512.08777) measures fluency with native speakers; a simulation needs automatic proxies:

* :func:`completion_log_likelihood` -- the mean per-token log-likelihood of each completion, given its prompt (chat
  template), under a *reference* causal LM (in the case study: the base model, the reference of "native" fluency).
* :class:`NgramFluencyModel` -- an interpolated word n-gram LM (``nltk.lm``, Witten-Bell smoothing by default) trained
  on native text only:
  a second measure independent of any neural model (count-based, never sees model output), sensitive to the
  disfluencies a literal translation makes (dropped function words, word order, calques give unseen n-grams).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence

import torch

from hfx.utils.validation import check_choice, check_float, check_int, check_sequence, check_str


_WORD = re.compile(r"[a-z]+(?:'[a-z]+)?|\d+|[^\sa-z\d]")


def tokenize_words(text: str) -> list[str]:
    """Lower-cased word / number / punctuation tokens (a regex; no downloaded tokenizer data).

    Returns:
        `list[str]`.
    """
    return _WORD.findall(text.lower())


def _prompt_text(tokenizer, prompt) -> str:
    messages = prompt if isinstance(prompt, list) else [{"role": "user", "content": str(prompt)}]
    if getattr(tokenizer, "chat_template", None):
        return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    return "\n".join(m["content"] for m in messages) + "\n"


@torch.no_grad()
def completion_log_likelihood(
    model,
    tokenizer,
    prompts: Sequence,
    completions: Sequence[str],
    *,
    batch_size: int = 8,
) -> list[dict]:
    """Per-token log-likelihood of each completion under ``model``, conditioned on its prompt.

    Each prompt is rendered with the tokenizer's chat template (generation prompt added), the completion appended;
    the mean of ``log p(y_t | prompt, y_<t)`` over the completion's tokens (natural log) is returned, with the sum
    and the token count. Runs in eval mode under ``torch.no_grad`` on the model's device, batches right-padded.

    Args:
        model (`transformers.PreTrainedModel`): the reference causal LM.
        tokenizer (`transformers.PreTrainedTokenizerBase`): its tokenizer.
        prompts (`Sequence[str]` or `Sequence[list[dict]]`): ``N`` prompts.
        completions (`Sequence[str]`): ``N`` completions.
        batch_size (`int`, *optional*, defaults to `8`).

    Returns:
        `list[dict]`: per item ``{"mean_logprob", "sum_logprob", "num_tokens"}``; ``mean_logprob`` is ``None`` for an
        empty completion (0 tokens), never a number from nothing.

    Raises:
        ValueError: when ``prompts`` and ``completions`` differ in length.
    """
    prompts = check_sequence("prompts", prompts)
    completions = check_sequence("completions", completions, item_check=lambda n, v: check_str(n, v, allow_empty=True))
    if len(prompts) != len(completions):
        raise ValueError(
            f"`prompts` and `completions` have to have the same length, but have {len(prompts)} and {len(completions)}"
        )
    batch_size = check_int("batch_size", batch_size, minimum=1)
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    results: list[dict] = []
    try:
        for start in range(0, len(prompts), batch_size):
            rows, spans = [], []
            for prompt, completion in zip(prompts[start : start + batch_size], completions[start : start + batch_size]):
                p = tokenizer(_prompt_text(tokenizer, prompt), add_special_tokens=False)["input_ids"]
                c = tokenizer(completion, add_special_tokens=False)["input_ids"] if completion else []
                rows.append(p + c)
                spans.append((len(p), len(c)))
            width = max(len(r) for r in rows)
            input_ids = torch.full((len(rows), width), pad, dtype=torch.long)
            attention_mask = torch.zeros((len(rows), width), dtype=torch.long)
            for i, r in enumerate(rows):
                input_ids[i, : len(r)] = torch.tensor(r)
                attention_mask[i, : len(r)] = 1
            logits = model(input_ids=input_ids.to(device), attention_mask=attention_mask.to(device)).logits.float()
            logps = torch.log_softmax(logits[:, :-1], dim=-1).gather(-1, input_ids[:, 1:].to(device)[..., None])[..., 0]
            for i, (p_len, c_len) in enumerate(spans):
                if c_len == 0:
                    results.append({"mean_logprob": None, "sum_logprob": 0.0, "num_tokens": 0})
                    continue
                token_logps = logps[i, p_len - 1 : p_len - 1 + c_len]
                total = float(token_logps.sum())
                results.append({"mean_logprob": total / c_len, "sum_logprob": total, "num_tokens": c_len})
    finally:
        if was_training:
            model.train()
    return results


SMOOTHINGS = ("witten_bell", "kneser_ney")


class NgramFluencyModel:
    """An interpolated word n-gram LM trained on native text (``nltk.lm``).

    ``smoothing="witten_bell"`` (default, ``nltk.lm.WittenBellInterpolated``; Witten & Bell 1991) or
    ``"kneser_ney"`` (``nltk.lm.KneserNeyInterpolated``; its scoring recomputes continuation counts per call, about
    40 ms per token with a 15k-token corpus here, so only for small corpora).

    Words seen fewer than ``unk_cutoff`` times map to ``<UNK>``; sentences are padded with ``<s>`` / ``</s>``.

    Args:
        texts (`Iterable[str]`): native training text (one document per item; split into lines).
        order (`int`, *optional*, defaults to `3`): the n-gram order.
        unk_cutoff (`int`, *optional*, defaults to `2`): minimum count for a word to stay in the vocabulary.
        smoothing (`str`, *optional*, defaults to `"witten_bell"`): see above.
        discount (`float`, *optional*, defaults to `0.75`): Kneser-Ney's absolute discount (``"kneser_ney"`` only).

    Raises:
        ImportError: when ``nltk`` is not installed (``pip install nltk``; in the ``hfx[fluent]`` extra).
        ValueError: for an empty corpus, an ``order < 1`` or an unknown ``smoothing``.
    """

    def __init__(
        self,
        texts: Iterable[str],
        *,
        order: int = 3,
        unk_cutoff: int = 2,
        smoothing: str = "witten_bell",
        discount: float = 0.75,
    ):
        try:
            from nltk.lm import KneserNeyInterpolated, Vocabulary, WittenBellInterpolated
            from nltk.lm.preprocessing import padded_everygram_pipeline
        except ImportError as err:  # pragma: no cover - depends on the environment
            raise ImportError("NgramFluencyModel needs `nltk` (`pip install nltk`, or `pip install hfx[fluent]`)") from err
        self.order = check_int("order", order, minimum=1)
        self.unk_cutoff = check_int("unk_cutoff", unk_cutoff, minimum=1)
        self.smoothing = check_choice("smoothing", smoothing, SMOOTHINGS)
        discount = check_float("discount", discount, minimum=0, maximum=1, strict_minimum=True, strict_maximum=True)
        sentences = [tokenize_words(line) for text in texts for line in str(text).splitlines()]
        sentences = [s for s in sentences if s]
        if not sentences:
            raise ValueError("`texts` has to hold some native text, but holds no words")
        self.num_training_sentences = len(sentences)
        self.num_training_tokens = sum(len(s) for s in sentences)
        train, vocab = padded_everygram_pipeline(self.order, sentences)
        vocabulary = Vocabulary(unk_cutoff=self.unk_cutoff)
        if self.smoothing == "kneser_ney":
            self.lm = KneserNeyInterpolated(self.order, discount=discount, vocabulary=vocabulary)
        else:
            self.lm = WittenBellInterpolated(self.order, vocabulary=vocabulary)
        self.lm.fit(train, vocab)

    def per_token_logprob(self, text: str) -> dict:
        """Mean natural-log probability per word token of ``text`` (``</s>`` included, ``<s>`` context).

        Returns:
            `dict`: ``{"mean_logprob", "num_tokens", "oov_rate"}``; ``mean_logprob`` is ``None`` for a text with no
            words.
        """
        text = check_str("text", text, allow_empty=True)
        words = [w for line in text.splitlines() for w in tokenize_words(line)]
        if not words:
            return {"mean_logprob": None, "num_tokens": 0, "oov_rate": None}
        seq = ["<s>"] * (self.order - 1) + list(self.lm.vocab.lookup(words)) + ["</s>"]
        total = 0.0
        for i in range(self.order - 1, len(seq)):
            p = self.lm.score(seq[i], seq[i - self.order + 1 : i])
            total += math.log(max(p, 1e-12))
        n = len(seq) - (self.order - 1)
        oov = sum(w == "<UNK>" for w in seq[self.order - 1 : -1]) / len(words)
        return {"mean_logprob": total / n, "num_tokens": n, "oov_rate": oov}


__all__ = ["SMOOTHINGS", "NgramFluencyModel", "completion_log_likelihood", "tokenize_words"]
