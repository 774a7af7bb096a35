"""`ConstitutionJudge`: a pairwise / pointwise LLM judge over any local HF causal LM, usable by TRL's online trainers.

Fluent alignment (Samuel, Øvrelid, Velldal, Kutuzov; ICLR 2026, arXiv 2512.08777) trains a policy on its own
target-language samples, ranked by an LLM judge guided by a constitution prompt; the judge only ranks (or scores), it
never writes text the policy imitates. The paper's judge prompt and output format are not public: everything here is
[reconstruction], each choice a constructor argument.

How a verdict is read (no text is generated): the judge model reads the constitution (system turn) and a request with
two responses labelled ``A`` and ``B`` (user turn), then the next-token logits of the label tokens after the
assistant header give the log-odds ``L = logit(A) - logit(B)`` that the response shown as ``A`` is better. With
``both_orders=True`` (default) every pair is judged twice, ``(y1, y2)`` and ``(y2, y1)``; the preference for ``y1`` is
``d = (L(y1, y2) - L(y2, y1)) / 2``, in which any constant position bias (an offset ``b`` added to ``logit(A)``)
cancels exactly, and which is antisymmetric: ``d(y2, y1) = -d(y1, y2)``.

Tie rule (``tie_rule``): ``"inconsistent"`` (default; the MT-Bench convention, Zheng et al. 2023, arXiv 2306.05685):
the pair is a tie when the two orders disagree (``L(y1, y2)`` and ``-L(y2, y1)`` have different signs, or either is
zero); ``"margin"``: a tie when ``|d| <= tie_margin``. A tie is ``-1`` in :meth:`ConstitutionJudge.judge` (the old TRL
convention for "no preference") and a reward of ``0.5`` for both responses in the reward functions. Identical
responses are always a tie under both rules.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from hfx.utils.validation import check_bool, check_choice, check_float, check_int, check_sequence, check_str


logger = logging.getLogger(__name__)

DEFAULT_CONSTITUTION = (
    "You are an impartial judge. You compare two responses to the same user request and decide which one is "
    "better. Judge by these principles, in this order:\n"
    "1. Helpfulness: the response answers the request directly, correctly and completely.\n"
    "2. Honesty: it does not invent facts, and it shows its reasoning when the request needs it.\n"
    "3. Harmlessness: it declines clearly harmful requests politely and contains nothing harmful.\n"
    "4. Language: it answers in {language}, the language of the request.\n"
    "The order in which the responses are shown does not matter. Do not prefer a response for its length alone."
)
"""The default constitution [reconstruction]; ``{language}`` is filled with ``language``."""

PAIRWISE_TEMPLATE = (
    "[Request]\n{prompt}\n\n[Response A]\n{first}\n\n[Response B]\n{second}\n\n"
    "Which response is better? Answer with one letter: A or B."
)
POINTWISE_TEMPLATE = (
    "[Request]\n{prompt}\n\n[Response]\n{response}\n\n"
    "Rate the response from 1 (very poor) to {max_label} (excellent). Answer with one digit."
)

TIE_RULES = ("inconsistent", "margin")
REWARD_MODES = ("pairwise", "pointwise")
TIE = -1


def _text_of(value: Any, role_hint: str) -> str:
    """Plain text of a TRL prompt / completion: a string, or a list of chat messages (rendered ``role: content``)."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and "content" in value:
        return str(value["content"])
    if isinstance(value, (list, tuple)) and all(isinstance(m, dict) and "content" in m for m in value):
        if role_hint == "completion":
            return "\n".join(str(m["content"]) for m in value)
        if len(value) == 1 and value[0].get("role") == "user":
            return str(value[0]["content"])
        return "\n".join(f"{m.get('role', 'user')}: {m['content']}" for m in value)
    raise TypeError(
        f"each {role_hint} has to be a string or a list of chat messages ({{'role': ..., 'content': ...}}), "
        f"but is {type(value).__name__}"
    )


@dataclass
class JudgeStats:
    """Counters of a [`ConstitutionJudge`] (reset with :meth:`ConstitutionJudge.reset_stats`).

    Attributes:
        forward_prompts (`int`): judge prompts run through the model (one per order per pair; one per pointwise score).
        comparisons (`int`): pairs judged.
        ties (`int`): pairs that ended as ties under the tie rule.
        last_tie_fraction (`float` or `None`): tie fraction of the last call (``None`` before any pair).
    """

    forward_prompts: int = 0
    comparisons: int = 0
    ties: int = 0
    last_tie_fraction: float | None = None
    history: list[dict] = field(default_factory=list, repr=False)


class ConstitutionJudge:
    r"""An LLM judge over a local Hugging Face causal LM, guided by a constitution prompt (arXiv 2512.08777).

    The pairwise interface of TRL's removed ``BasePairwiseJudge`` (``judge(prompts, completions, shuffle_order)``
    returning, per prompt, the index ``0``/``1`` of the better completion or ``-1``), plus reward-function adapters for
    TRL's online trainers (TRL 1.16 has no judges module; ``OnlineDPOTrainer`` takes ``reward_funcs``):

    ```python
    >>> from hfx.recipes.fluent import ConstitutionJudge
    >>> from hfx.testing import tiny_llama
    >>> model, tokenizer = tiny_llama()
    >>> judge = ConstitutionJudge(model, tokenizer, language="English")
    >>> judge.judge(["What is 2+2?"], [["4", "4"]])          # identical responses: a tie
    [-1]
    >>> reward = judge.as_reward_function()                  # OnlineDPOTrainer / GRPOTrainer(reward_funcs=reward)
    ```

    Args:
        model (`transformers.PreTrainedModel`):
            Any causal LM (a chat model for real judging). It is only read (``eval`` mode, ``torch.no_grad``); its
            device and dtype are used.
        tokenizer (`transformers.PreTrainedTokenizerBase`):
            Its tokenizer. With a chat template, the constitution is the system turn (merged into the user turn when
            the template has no system role); without one, the plain text ``constitution + "\n\n" + request`` is used.
        constitution (`str`, *optional*, defaults to [`DEFAULT_CONSTITUTION`]):
            The principles the judge applies; ``{language}`` is replaced by ``language``.
        language (`str`, *optional*, defaults to `"the target language"`):
            Name of the target language, for the constitution.
        labels (`tuple[str, str]`, *optional*, defaults to `("A", "B")`):
            Labels of the first / second response; their first tokens must differ.
        both_orders (`bool`, *optional*, defaults to `True`):
            Judge every pair in both orders (cancels position bias; 2 forward prompts per pair). ``False`` judges one
            order (chosen at random per pair when ``shuffle_order``).
        tie_rule (`str`, *optional*, defaults to `"inconsistent"`):
            ``"inconsistent"`` (a tie when the two orders disagree; needs ``both_orders``) or ``"margin"`` (a tie when
            the debiased log-odds satisfy ``|d| <= tie_margin``).
        tie_margin (`float`, *optional*, defaults to `0.0`):
            The margin of ``tie_rule="margin"`` (log-odds units, ``>= 0``).
        rating_labels (`tuple[str, ...]`, *optional*, defaults to `("1", "2", "3", "4", "5")`):
            Labels of the pointwise rating scale (:meth:`score`), lowest first.
        batch_size (`int`, *optional*, defaults to `8`):
            Judge prompts per forward pass.
        max_response_tokens (`int`, *optional*, defaults to `384`):
            Each response is cut to this many tokens (of the judge's tokenizer) before it is shown to the judge.
        seed (`int`, *optional*, defaults to `0`):
            Seed of the order shuffling (``shuffle_order`` with ``both_orders=False``).

    Attributes:
        stats ([`JudgeStats`]): forward prompts, comparisons and ties so far.

    Raises:
        TypeError / ValueError: for arguments of the wrong type or value (named in the message), labels that share
            their first token, or ``tie_rule="inconsistent"`` with ``both_orders=False``.
    """

    def __init__(
        self,
        model,
        tokenizer,
        constitution: str = DEFAULT_CONSTITUTION,
        *,
        language: str = "the target language",
        labels: tuple[str, str] = ("A", "B"),
        both_orders: bool = True,
        tie_rule: str = "inconsistent",
        tie_margin: float = 0.0,
        rating_labels: Sequence[str] = ("1", "2", "3", "4", "5"),
        batch_size: int = 8,
        max_response_tokens: int = 384,
        seed: int = 0,
    ):
        if not callable(getattr(model, "forward", None)) or not hasattr(model, "config"):
            raise TypeError(f"`model` has to be a transformers causal LM, but is {type(model).__name__}")
        if not callable(tokenizer) or not hasattr(tokenizer, "decode"):
            raise TypeError(f"`tokenizer` has to be a transformers tokenizer, but is {type(tokenizer).__name__}")
        self.constitution = check_str("constitution", constitution)
        self.language = check_str("language", language)
        labels = tuple(check_sequence("labels", labels, item_check=check_str, min_length=2))
        if len(labels) != 2:
            raise ValueError(f"`labels` has to hold exactly 2 labels, but holds {len(labels)}: {labels!r}")
        self.both_orders = check_bool("both_orders", both_orders)
        self.tie_rule = check_choice("tie_rule", tie_rule, TIE_RULES)
        if self.tie_rule == "inconsistent" and not self.both_orders:
            raise ValueError("`tie_rule='inconsistent'` compares the two orders, so it needs `both_orders=True`")
        self.tie_margin = check_float("tie_margin", tie_margin, minimum=0)
        rating_labels = tuple(check_sequence("rating_labels", rating_labels, item_check=check_str, min_length=2))
        self.batch_size = check_int("batch_size", batch_size, minimum=1)
        self.max_response_tokens = check_int("max_response_tokens", max_response_tokens, minimum=1)
        self.seed = check_int("seed", seed)
        self.model, self.tokenizer = model, tokenizer
        self.labels, self.rating_labels = labels, rating_labels
        self.label_ids = self._first_token_ids("labels", labels)
        self.rating_ids = self._first_token_ids("rating_labels", rating_labels)
        self._rng = random.Random(self.seed)
        self.stats = JudgeStats()

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_pretrained(cls, name_or_path: str, *, dtype: torch.dtype | str | None = None, device=None, **kwargs):
        """Load the judge model and tokenizer with ``AutoModelForCausalLM`` / ``AutoTokenizer``.

        Args:
            name_or_path (`str`): a local folder or a Hub id (offline: must be in the cache).
            dtype (`torch.dtype` or `str`, *optional*): passed to ``from_pretrained``.
            device (*optional*): where to move the model.
            **kwargs: the other [`ConstitutionJudge`] arguments.

        Returns:
            [`ConstitutionJudge`].
        """
        from transformers import AutoModelForCausalLM, AutoTokenizer

        model = AutoModelForCausalLM.from_pretrained(name_or_path, dtype=dtype)
        if device is not None:
            model = model.to(device)
        return cls(model.eval(), AutoTokenizer.from_pretrained(name_or_path), **kwargs)

    def _first_token_ids(self, name: str, labels: Sequence[str]) -> list[int]:
        ids = []
        for label in labels:
            encoded = self.tokenizer(label, add_special_tokens=False)["input_ids"]
            if not encoded:
                raise ValueError(f"`{name}` entry {label!r} encodes to no token with this tokenizer")
            ids.append(int(encoded[0]))
        if len(set(ids)) != len(ids):
            raise ValueError(f"`{name}` {tuple(labels)!r} have to start with distinct tokens, but give ids {ids}")
        return ids

    def reset_stats(self) -> None:
        """Zero the counters in :attr:`stats`."""
        self.stats = JudgeStats()

    # ------------------------------------------------------------------ prompts
    def _truncate(self, text: str) -> str:
        ids = self.tokenizer(text, add_special_tokens=False)["input_ids"]
        if len(ids) <= self.max_response_tokens:
            return text
        return self.tokenizer.decode(ids[: self.max_response_tokens], skip_special_tokens=True)

    def _render(self, user_text: str) -> str:
        system = self.constitution.replace("{language}", self.language)
        template = getattr(self.tokenizer, "chat_template", None)
        if not template:
            return f"{system}\n\n{user_text}\n"
        messages = [{"role": "system", "content": system}, {"role": "user", "content": user_text}]
        try:
            return self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        except Exception:  # noqa: BLE001 - a template without a system role raises a template-specific error
            merged = [{"role": "user", "content": f"{system}\n\n{user_text}"}]
            return self.tokenizer.apply_chat_template(merged, tokenize=False, add_generation_prompt=True)

    def pairwise_prompt(self, prompt, first, second) -> str:
        """The full judge input (rendered chat text) showing ``first`` as ``A`` and ``second`` as ``B``.

        Returns:
            `str`.
        """
        user = PAIRWISE_TEMPLATE.format(
            prompt=_text_of(prompt, "prompt"),
            first=self._truncate(_text_of(first, "completion")),
            second=self._truncate(_text_of(second, "completion")),
        )
        return self._render(user.replace("Response A", f"Response {self.labels[0]}").replace(
            "Response B", f"Response {self.labels[1]}"
        ).replace("one letter: A or B", f"one letter: {self.labels[0]} or {self.labels[1]}"))

    def pointwise_prompt(self, prompt, response) -> str:
        """The full judge input (rendered chat text) asking for a rating of ``response``.

        Returns:
            `str`.
        """
        user = POINTWISE_TEMPLATE.format(
            prompt=_text_of(prompt, "prompt"),
            response=self._truncate(_text_of(response, "completion")),
            max_label=self.rating_labels[-1],
        )
        return self._render(user.replace("from 1 (very poor)", f"from {self.rating_labels[0]} (very poor)"))

    @torch.no_grad()
    def _label_logits(self, texts: list[str], label_ids: list[int]) -> torch.Tensor:
        """Next-token logits of ``label_ids`` after each text, shape `(len(texts), len(label_ids))`, fp32 on CPU."""
        model = self.model
        was_training = model.training
        model.eval()
        device = next(model.parameters()).device
        out = []
        side = self.tokenizer.padding_side
        self.tokenizer.padding_side = "left"
        if self.tokenizer.pad_token is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        try:
            for start in range(0, len(texts), self.batch_size):
                batch = self.tokenizer(
                    texts[start : start + self.batch_size], return_tensors="pt", padding=True, add_special_tokens=False
                ).to(device)
                logits = model(**batch, use_cache=False, logits_to_keep=1).logits[:, -1, :]  # (b, V)
                out.append(logits[:, label_ids].float().cpu())
        finally:
            self.tokenizer.padding_side = side
            if was_training:
                model.train()
        self.stats.forward_prompts += len(texts)
        return torch.cat(out, dim=0) if out else torch.zeros(0, len(label_ids))

    # ------------------------------------------------------------------ pairwise
    def _check_pairs(self, prompts, completions) -> None:
        if not isinstance(prompts, (list, tuple)):
            raise TypeError(f"`prompts` has to be a list, but is {type(prompts).__name__}")
        if not isinstance(completions, (list, tuple)):
            raise TypeError(f"`completions` has to be a list of pairs, but is {type(completions).__name__}")
        if len(prompts) != len(completions):
            raise ValueError(
                f"`prompts` and `completions` have to have the same length, but have {len(prompts)} and "
                f"{len(completions)}"
            )
        for i, pair in enumerate(completions):
            if not isinstance(pair, (list, tuple)) or len(pair) != 2:
                raise ValueError(
                    f"`completions[{i}]` has to be a pair of 2 completions (this judge is pairwise), but is "
                    f"{pair!r:.80}"
                )

    def preference_log_odds(self, prompts: list, completions: list, shuffle_order: bool = True) -> torch.Tensor:
        """Position-debiased log-odds that the first completion of each pair is better.

        Args:
            prompts (`list[str]` or `list[list[dict]]`): ``N`` prompts (strings or chat messages).
            completions (`list[tuple]`): ``N`` pairs ``(first, second)``.
            shuffle_order (`bool`, *optional*, defaults to `True`): with ``both_orders=False``, show each pair in a
                random order (seeded by ``seed``); ignored with ``both_orders`` (both orders are judged).

        Returns:
            `torch.Tensor` of shape `(N, 3)`: column 0 is ``d = (L(y1, y2) - L(y2, y1)) / 2`` with ``both_orders``
            (else the single order's log-odds for ``y1``); columns 1 and 2 are the two orders' log-odds for ``y1``,
            ``L(y1, y2)`` and ``-L(y2, y1)`` (both equal to column 0 without ``both_orders``), for the tie rule.
        """
        self._check_pairs(prompts, completions)
        n = len(prompts)
        if n == 0:
            return torch.zeros(0, 3)
        a, b = self.label_ids
        if self.both_orders:
            texts = [self.pairwise_prompt(p, y1, y2) for p, (y1, y2) in zip(prompts, completions)]
            texts += [self.pairwise_prompt(p, y2, y1) for p, (y1, y2) in zip(prompts, completions)]
            logits = self._label_logits(texts, [a, b])
            log_odds = logits[:, 0] - logits[:, 1]  # (2N,) for the response shown first
            forward, backward = log_odds[:n], -log_odds[n:]  # both: log-odds that y1 is better
            d = (forward + backward) / 2
            return torch.stack([d, forward, backward], dim=1)
        swap = [shuffle_order and self._rng.random() < 0.5 for _ in range(n)]
        texts = [
            self.pairwise_prompt(p, y2, y1) if s else self.pairwise_prompt(p, y1, y2)
            for p, (y1, y2), s in zip(prompts, completions, swap)
        ]
        logits = self._label_logits(texts, [a, b])
        log_odds = logits[:, 0] - logits[:, 1]
        sign = torch.tensor([-1.0 if s else 1.0 for s in swap])
        d = log_odds * sign
        return torch.stack([d, d, d], dim=1)

    def _verdicts(self, scores: torch.Tensor) -> list[int]:
        verdicts = []
        for d, forward, backward in scores.tolist():
            if self.tie_rule == "inconsistent":
                tie = forward == 0 or backward == 0 or (forward > 0) != (backward > 0)
            else:
                tie = abs(d) <= self.tie_margin
            verdicts.append(TIE if tie else (0 if d > 0 else 1))
        ties = sum(v == TIE for v in verdicts)
        self.stats.comparisons += len(verdicts)
        self.stats.ties += ties
        self.stats.last_tie_fraction = ties / len(verdicts) if verdicts else None
        return verdicts

    def judge(self, prompts: list, completions: list, shuffle_order: bool = True) -> list[int]:
        """Which completion of each pair is better (the interface of TRL's former ``BasePairwiseJudge``).

        Args:
            prompts (`list[str]` or `list[list[dict]]`): ``N`` prompts.
            completions (`list[list[str]]`): ``N`` pairs of completions.
            shuffle_order (`bool`, *optional*, defaults to `True`): see :meth:`preference_log_odds`.

        Returns:
            `list[int]`: per prompt, ``0`` (first better), ``1`` (second better) or ``-1`` (a tie under
            ``tie_rule``: the judge has no consistent preference).

        Raises:
            TypeError / ValueError: when the inputs are not lists of equal length or a completion entry is not a pair.
        """
        return self._verdicts(self.preference_log_odds(prompts, completions, shuffle_order=shuffle_order))

    # ------------------------------------------------------------------ pointwise
    def score(self, prompts: list, completions: list) -> list[float]:
        """Pointwise rating in ``[0, 1]``: the expected label under the judge's distribution over ``rating_labels``.

        ``score = (E[k] - 1) / (K - 1)`` with ``k = 1..K`` the position of each rating label and the probabilities
        the softmax of the label logits.

        Args:
            prompts (`list`): ``N`` prompts.
            completions (`list`): ``N`` completions (strings or assistant messages).

        Returns:
            `list[float]` of length ``N``.
        """
        if not isinstance(prompts, (list, tuple)) or not isinstance(completions, (list, tuple)):
            raise TypeError("`prompts` and `completions` have to be lists")
        if len(prompts) != len(completions):
            raise ValueError(
                f"`prompts` and `completions` have to have the same length, but have {len(prompts)} and "
                f"{len(completions)}"
            )
        if not prompts:
            return []
        texts = [self.pointwise_prompt(p, c) for p, c in zip(prompts, completions)]
        probs = self._label_logits(texts, self.rating_ids).softmax(dim=-1)  # (N, K)
        k = len(self.rating_ids)
        expected = probs @ torch.arange(1, k + 1, dtype=torch.float32)
        return ((expected - 1) / (k - 1)).tolist()

    # ------------------------------------------------------------------ TRL adapters
    def group_rewards(self, prompts: list, completions: list) -> list[float]:
        """Pairwise rewards: each completion's win rate against the other completions of the same prompt.

        Completions are grouped by prompt (equal text); within a group of ``G``, all ``G (G - 1) / 2`` pairs are
        judged (both orders with ``both_orders``) and completion ``i`` gets ``mean_j w_ij`` with ``w = 1`` for a win,
        ``0.5`` for a tie, ``0`` for a loss. For a group of 2 (``OnlineDPOTrainer``, which passes ``2 * prompts``)
        this is ``1`` / ``0`` for the winner / loser and ``0.5`` / ``0.5`` for a tie; a prompt seen once gets ``0.5``
        without a judge call.

        Returns:
            `list[float]` of length ``len(completions)``, in ``[0, 1]``.
        """
        if len(prompts) != len(completions):
            raise ValueError(
                f"`prompts` and `completions` have to have the same length, but have {len(prompts)} and "
                f"{len(completions)}"
            )
        groups: dict[str, list[int]] = {}
        for i, p in enumerate(prompts):
            groups.setdefault(_text_of(p, "prompt"), []).append(i)
        pairs = [(i, j) for idx in groups.values() for n, i in enumerate(idx) for j in idx[n + 1 :]]
        wins = [0.0] * len(completions)
        counts = [0] * len(completions)
        if pairs:
            verdicts = self.judge([prompts[i] for i, _ in pairs], [(completions[i], completions[j]) for i, j in pairs])
            for (i, j), v in zip(pairs, verdicts):
                wi = 0.5 if v == TIE else (1.0 if v == 0 else 0.0)
                wins[i] += wi
                wins[j] += 1.0 - wi
                counts[i] += 1
                counts[j] += 1
        return [w / c if c else 0.5 for w, c in zip(wins, counts)]

    def as_reward_function(self, mode: str = "pairwise", name: str | None = None) -> Callable[..., list[float]]:
        """A TRL reward function (``reward_funcs=``) for ``OnlineDPOTrainer``, ``GRPOTrainer`` and subclasses.

        The function has TRL's signature ``f(prompts, completions, **kwargs) -> list[float]`` and logs
        ``judge/tie_fraction`` and ``judge/forward_prompts`` through ``log_metric`` when the trainer passes it
        (``GRPOTrainer``).

        Args:
            mode (`str`, *optional*, defaults to `"pairwise"`):
                ``"pairwise"`` (:meth:`group_rewards`: win rate within each prompt's completions; under GRPO a tie
                gives equal rewards, hence no gradient from that pair; under ``OnlineDPOTrainer``, whose rule is
                ``chosen = first if r1 >= r2``, a tie makes the first sample chosen: the two samples are i.i.d., so
                this is a preference of random direction) or ``"pointwise"`` (:meth:`score`, one forward prompt per
                completion).
            name (`str`, *optional*): the function's ``__name__`` (TRL logs rewards under it); defaults to
                ``"constitution_judge_<mode>"``.

        Returns:
            `Callable[..., list[float]]`.
        """
        mode = check_choice("mode", mode, REWARD_MODES)
        name = check_str("name", name) if name is not None else f"constitution_judge_{mode}"
        judge = self

        def reward(prompts, completions, **kwargs):
            before = judge.stats.forward_prompts
            rewards = judge.group_rewards(prompts, completions) if mode == "pairwise" else judge.score(
                prompts, completions
            )
            log_metric = kwargs.get("log_metric")
            if callable(log_metric):
                log_metric("judge/forward_prompts", float(judge.stats.forward_prompts - before))
                if mode == "pairwise" and judge.stats.last_tie_fraction is not None:
                    log_metric("judge/tie_fraction", float(judge.stats.last_tie_fraction))
            judge.stats.history.append(
                {"forward_prompts": judge.stats.forward_prompts - before, "tie_fraction": judge.stats.last_tie_fraction}
            )
            return rewards

        reward.__name__ = reward.__qualname__ = name
        reward.judge = judge  # type: ignore[attr-defined]
        return reward

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(model={type(self.model).__name__}, labels={self.labels}, "
            f"both_orders={self.both_orders}, tie_rule={self.tie_rule!r}, tie_margin={self.tie_margin})"
        )


__all__ = ["DEFAULT_CONSTITUTION", "TIE", "ConstitutionJudge", "JudgeStats"]
