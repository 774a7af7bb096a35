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

    Build one with :func:`as_pair_scorer` from a TRL-style reward function or an HF sequence-classification RM.
    """

    def __init__(self, fn: Callable[[list, list, list], tuple[torch.Tensor, torch.Tensor]], name: str | None = None):
        self._fn = fn
        self.name = name or getattr(fn, "__name__", type(fn).__name__)
        self.num_pair_calls = 0

    def score_pairs(self, prompts: Sequence, responses_a: Sequence, responses_b: Sequence):
        """Scores of both responses of each pair: `(scores_a, scores_b)`, float tensors of shape `(P,)`."""
        if not (len(prompts) == len(responses_a) == len(responses_b)):
            raise ValueError(
                f"`prompts`, `responses_a`, `responses_b` must have the same length, but have "
                f"{len(prompts)}, {len(responses_a)}, {len(responses_b)}"
            )
        if len(prompts) == 0:
            return torch.zeros(0), torch.zeros(0)
        self.num_pair_calls += len(prompts)
        sa, sb = self._fn(list(prompts), list(responses_a), list(responses_b))
        return torch.as_tensor(sa, dtype=torch.float32).reshape(-1), torch.as_tensor(sb, dtype=torch.float32).reshape(
            -1
        )

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


def _reward_function_fn(reward_fn):
    def fn(prompts, responses_a, responses_b):
        out = reward_fn(prompts=prompts + prompts, completions=responses_a + responses_b)
        out = torch.tensor([float("nan") if x is None else float(x) for x in out])
        return out[: len(prompts)], out[len(prompts) :]

    return fn


def as_pair_scorer(reward_model, name: str | None = None, batch_size: int = 16) -> PairScorer:
    """Wrap a reward model as a :class:`PairScorer`.

    Args:
        reward_model: one of
            - a :class:`PairScorer` (returned as is);
            - a ``(model, tokenizer)`` tuple with an HF sequence-classification RM (score = ``logits[:, 0]``; the
              tokenizer's chat template is applied when it has one, otherwise prompt + response);
            - a TRL-style reward function ``f(prompts=..., completions=...) -> list[float]`` (called once per batch
              of pairs with both responses).
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
        return PairScorer(_reward_function_fn(reward_model), name=name or getattr(reward_model, "__name__", None))
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
        ValueError: empty ``reward_models``, missing columns, labels other than 0/1.
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
