"""Per-RM agreement columns for offline router training: every candidate RM scores every pair once.

Label convention: ``label == 0`` means ``response_a`` is preferred, ``label == 1`` means ``response_b``. RM n agrees
(``agree_<n> = 1``) when it scores the preferred response strictly higher; a tie counts as disagreement.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch


class PairScorer:
    """A reward model that scores one (prompt, response_a, response_b) pair per call unit.

    ``score_pairs(prompts, responses_a, responses_b)`` returns ``(scores_a, scores_b)``, two float tensors of shape
    `(P,)`; :attr:`num_pair_calls` counts the pairs it has scored (the cost unit of the paper: one RM call per pair).

    Score values: a finite number, or ``None`` where the RM declines to score a response (TRL lets a reward function
    return ``None`` for samples it does not apply to); ``None`` becomes ``nan`` in the returned tensors and the
    caller skips that pair. NaN or inf **numbers** are an RM failure and raise ``ValueError`` naming the RM.

    Args:
        fn (`Callable`): ``fn(prompts, responses_a, responses_b) -> (scores_a, scores_b)`` (lists or tensors).
        name (`str`, *optional*): display name.
        accepts_kwargs (`bool`, *optional*, defaults to `False`): ``fn`` also takes the keyword arguments
            ``row_kwargs_a`` / ``row_kwargs_b`` (`dict[str, list]`, one value per pair, for response a / b) plus any
            shared keyword arguments (see :meth:`score_pairs`). Without it, keyword arguments given to
            :meth:`score_pairs` are not passed on (as TRL does for model RMs, which get no dataset columns).

    Build one with :func:`as_pair_scorer` from a TRL-style reward function or an HF sequence-classification RM.
    """

    def __init__(
        self,
        fn: Callable[[list, list, list], tuple[torch.Tensor, torch.Tensor]],
        name: str | None = None,
        accepts_kwargs: bool = False,
    ):
        self._fn = fn
        self.name = name or getattr(fn, "__name__", type(fn).__name__)
        self.accepts_kwargs = bool(accepts_kwargs)
        self.num_pair_calls = 0

    def score_pairs(
        self,
        prompts: Sequence,
        responses_a: Sequence,
        responses_b: Sequence,
        row_kwargs_a: dict | None = None,
        row_kwargs_b: dict | None = None,
        **shared_kwargs,
    ):
        """Scores of both responses of each pair: `(scores_a, scores_b)`, float tensors of shape `(P,)`.

        Args:
            prompts, responses_a, responses_b (`Sequence` of length P).
            row_kwargs_a, row_kwargs_b (`dict[str, list]`, *optional*): per-row keyword arguments (dataset
                columns, ``completion_ids``, ...) for response a / b of each pair, each list of length P.
            **shared_kwargs: keyword arguments passed unchanged (e.g. TRL's ``trainer_state``).

        Returns:
            `(scores_a, scores_b)`: float32 tensors of shape `(P,)`; ``nan`` where the RM returned ``None``.

        Raises:
            ValueError: lengths differ, the RM returned the wrong number of scores, or a NaN / inf score.
        """
        if not (len(prompts) == len(responses_a) == len(responses_b)):
            raise ValueError(
                f"`prompts`, `responses_a`, `responses_b` must have the same length, but have "
                f"{len(prompts)}, {len(responses_a)}, {len(responses_b)}"
            )
        if len(prompts) == 0:
            return torch.zeros(0), torch.zeros(0)
        self.num_pair_calls += len(prompts)
        kwargs = {}
        if self.accepts_kwargs:
            kwargs = {"row_kwargs_a": row_kwargs_a or {}, "row_kwargs_b": row_kwargs_b or {}, **shared_kwargs}
        sa, sb = self._fn(list(prompts), list(responses_a), list(responses_b), **kwargs)
        return self._scores(sa, len(prompts), "response_a"), self._scores(sb, len(prompts), "response_b")

    def _scores(self, values, num: int, which: str) -> torch.Tensor:
        if torch.is_tensor(values):
            scores = values.detach().float().cpu().reshape(-1)
        else:
            values = list(values)
            scores = torch.tensor([float("nan") if v is None else float(v) for v in values], dtype=torch.float32)
            declined = torch.tensor([v is None for v in values], dtype=torch.bool)
        if scores.numel() != num:
            raise ValueError(f"reward model {self.name!r} returned {scores.numel()} scores for {num} {which}s")
        bad = ~torch.isfinite(scores)
        if not torch.is_tensor(values):
            bad &= ~declined
        if bad.any():
            idx = torch.nonzero(bad).flatten().tolist()
            raise ValueError(
                f"reward model {self.name!r} returned non-finite score(s) {scores[idx[:5]].tolist()} for the "
                f"{which} of pair(s) {idx[:10]}; only finite numbers (or None to decline a sample) are allowed"
            )
        return scores

    def __repr__(self) -> str:
        return f"PairScorer(name={self.name!r}, num_pair_calls={self.num_pair_calls})"


def _completion_text(c):
    if isinstance(c, list):
        return "".join(m.get("content", "") if isinstance(m, dict) else str(m) for m in c)
    return c


def _sequence_classifier_fn(model, tokenizer, batch_size: int):
    @torch.no_grad()
    def fn(prompts, responses_a, responses_b):
        texts = []
        for p, r in zip(prompts + prompts, responses_a + responses_b):
            r = _completion_text(r)
            if getattr(tokenizer, "chat_template", None):
                messages = list(p) if isinstance(p, list) else [{"role": "user", "content": p}]
                texts.append(
                    tokenizer.apply_chat_template(messages + [{"role": "assistant", "content": r}], tokenize=False)
                )
            else:
                p = "".join(m.get("content", "") for m in p) if isinstance(p, list) else p
                texts.append(p + r)
        device = next(model.parameters()).device
        scores = []
        for s in range(0, len(texts), batch_size):
            enc = tokenizer(texts[s : s + batch_size], padding=True, return_tensors="pt", add_special_tokens=False)
            enc = {k: v.to(device) for k, v in enc.items()}
            scores.append(model(**enc).logits[:, 0].float().cpu())
        scores = torch.cat(scores)
        return scores[: len(prompts)], scores[len(prompts) :]

    return fn


def _log_extra_unavailable(*args, **kwargs):
    raise NotImplementedError(
        "`log_extra` is not available to a reward model routed by RoutedRewardModel: it scores pairs (2 rows per "
        "pair, a completion may appear in several pairs), not the trainer's completion rows, so its columns would "
        "not line up with the completions table; use `log_metric` for scalars"
    )


def _reward_function_fn(reward_fn):
    def fn(prompts, responses_a, responses_b, row_kwargs_a=None, row_kwargs_b=None, **shared):
        # the layout a TRL reward function expects: 2P rows (every response a, then every response b), each per-row
        # keyword argument sliced the same way; shared values (trainer_state, log_metric, ...) as TRL passes them
        row_kwargs_a, row_kwargs_b = row_kwargs_a or {}, row_kwargs_b or {}
        rows = {k: list(row_kwargs_a[k]) + list(row_kwargs_b[k]) for k in row_kwargs_a}
        if "log_extra" in shared:
            shared = {**shared, "log_extra": _log_extra_unavailable}
        out = list(reward_fn(prompts=prompts + prompts, completions=responses_a + responses_b, **rows, **shared))
        if len(out) != 2 * len(prompts):
            raise ValueError(
                f"reward function {getattr(reward_fn, '__name__', reward_fn)!r} returned {len(out)} rewards for "
                f"{2 * len(prompts)} completions (one per completion expected)"
            )
        return out[: len(prompts)], out[len(prompts) :]

    return fn


def as_pair_scorer(reward_model, name: str | None = None, batch_size: int = 16) -> PairScorer:
    """Wrap a reward model as a :class:`PairScorer`.

    Args:
        reward_model: one of
            - a :class:`PairScorer` (returned as is);
            - a ``(model, tokenizer)`` tuple with an HF sequence-classification RM (score = ``logits[:, 0]``; the
              tokenizer's chat template is applied when it has one, otherwise prompt + response);
            - a TRL-style reward function ``f(prompts=..., completions=..., **kwargs) -> list[float | None]``
              (called once per batch of pairs with both responses: 2P rows, every response a then every response
              b; keyword arguments given to :meth:`PairScorer.score_pairs` are passed on in the same row layout,
              as TRL passes dataset columns; ``None`` declines a sample).
        name (`str`, *optional*): display name.
        batch_size (`int`, *optional*, defaults to `16`): texts per forward pass for model RMs.

    Raises:
        TypeError: for a bare ``nn.Module`` (the tokenizer is needed) or any other type.
    """
    if isinstance(reward_model, PairScorer):
        return reward_model
    if isinstance(reward_model, tuple) and len(reward_model) == 2 and isinstance(reward_model[0], torch.nn.Module):
        model, tokenizer = reward_model
        default = getattr(getattr(model, "config", None), "_name_or_path", None) or type(model).__name__
        return PairScorer(_sequence_classifier_fn(model, tokenizer, batch_size), name=name or default)
    if isinstance(reward_model, torch.nn.Module):
        raise TypeError("A model reward model must be passed as a `(model, tokenizer)` tuple")
    if callable(reward_model):
        return PairScorer(
            _reward_function_fn(reward_model),
            name=name or getattr(reward_model, "__name__", None),
            accepts_kwargs=True,
        )
    raise TypeError(
        "`reward_model` must be a PairScorer, a (model, tokenizer) tuple or a reward function, "
        f"but is {type(reward_model).__name__}"
    )


def label_with_reward_models(
    dataset,
    reward_models: dict,
    label_column: str = "label",
    batch_size: int = 16,
    show_progress: bool = True,
):
    """Score every pair with every candidate RM (once per pair, batched) and add the agreement columns.

    Adds, per RM ``name``: ``score_a_<name>``, ``score_b_<name>`` (floats) and ``agree_<name>`` (int 0/1:
    1 when the RM scores the gold-preferred response strictly higher), the columns
    :class:`~hfx.routing.OfflineRouterTrainer` trains on.

    Args:
        dataset (`datasets.Dataset` or `dict[str, list]`): columns ``prompt``, ``response_a``, ``response_b`` and
            ``label_column`` (0 = ``response_a`` preferred, 1 = ``response_b``).
        reward_models (`dict[str, Any]`): name -> anything :func:`as_pair_scorer` accepts.
        label_column (`str`, *optional*, defaults to `"label"`).
        batch_size (`int`, *optional*, defaults to `16`): pairs per RM call.
        show_progress (`bool`, *optional*, defaults to `True`): tqdm bar per RM.

    Returns:
        The same type as ``dataset``, with the new columns.

    Raises:
        ValueError: empty ``reward_models``, missing columns, labels other than 0/1, an RM returning a non-finite
            score or ``None`` for some row.
    """
    from tqdm.auto import tqdm

    if not reward_models:
        raise ValueError("`reward_models` must not be empty: the reward-model pool needs at least one RM")
    if not isinstance(reward_models, dict):
        raise TypeError(f"`reward_models` must be a dict name -> reward model, but is {type(reward_models).__name__}")
    columns = dataset.column_names if hasattr(dataset, "column_names") else list(dataset)
    missing = [c for c in ("prompt", "response_a", "response_b", label_column) if c not in columns]
    if missing:
        raise ValueError(f"`dataset` is missing column(s) {missing}; it has {columns}")
    prompts, resp_a, resp_b = list(dataset["prompt"]), list(dataset["response_a"]), list(dataset["response_b"])
    labels = torch.as_tensor(list(dataset[label_column]))
    if labels.numel() and not ((labels == 0) | (labels == 1)).all():
        raise ValueError(
            f"`{label_column}` must hold 0 (response_a preferred) or 1 (response_b), got {labels.unique()}"
        )
    new = {}
    for name, rm in reward_models.items():
        scorer = as_pair_scorer(rm, name=name, batch_size=batch_size)
        sa, sb = [], []
        for s in tqdm(range(0, len(prompts), batch_size), desc=f"labelling with {name}", disable=not show_progress):
            a, b = scorer.score_pairs(
                prompts[s : s + batch_size], resp_a[s : s + batch_size], resp_b[s : s + batch_size]
            )
            sa.append(a)
            sb.append(b)
        sa = torch.cat(sa) if sa else torch.zeros(0)
        sb = torch.cat(sb) if sb else torch.zeros(0)
        declined = torch.isnan(sa) | torch.isnan(sb)
        if declined.any():
            rows = torch.nonzero(declined).flatten().tolist()
            raise ValueError(
                f"reward model {name!r} returned None for row(s) {rows[:10]}: offline labelling needs both scores of "
                "every pair (a missing score would count as a silent disagreement); drop those rows first"
            )
        agree = torch.where(labels == 0, sa > sb, sb > sa).long()
        new[f"score_a_{name}"] = sa.tolist()
        new[f"score_b_{name}"] = sb.tolist()
        new[f"agree_{name}"] = agree.tolist()
    if isinstance(dataset, dict):
        return {**dataset, **new}
    for key, values in new.items():
        if key in columns:
            dataset = dataset.remove_columns(key)
        dataset = dataset.add_column(key, values)
    return dataset
