"""BayesianRouter's offline stage: a multi-task (Bradley-Terry + classification) router over a pool of RMs.

Source: Wu & Lu, "Reward Model Routing in Alignment", arXiv 2510.02850 (ICLR 2026), "Offline stage", and the authors'
``gp_router/offline_model_2encoder_100M2.py``. The normalised BT vectors (:meth:`OfflineRouter.prior_means`) become
the prior means of :class:`~hfx.routing.ThompsonRouter`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from huggingface_hub import PyTorchModelHubMixin
from torch import nn
from transformers.utils import ModelOutput

from hfx.utils.artifacts import ArtifactMixin
from hfx.utils.validation import check_float, check_int


PAPER_URL = "https://huggingface.co/papers/2510.02850"


def _message_text(message) -> str:
    if isinstance(message, dict):
        return str(message.get("content", ""))
    return str(message)


def format_pair_text(
    prompt, response, user_prefix: str = "<|user|>: ", assistant_prefix: str = "<|assistant|>: "
) -> str:
    """The text the encoder reads for one (prompt, response) [code]: ``"<|user|>: {prompt}\\n<|assistant|>: {response}"``.

    A conversational prompt (a list of ``{"role", "content"}`` messages) is rendered as one ``"<|{role}|>: {content}"``
    line per message and only the assistant part is appended. A conversational response (a list of messages, as in
    TRL) contributes the content of its messages.
    """
    if isinstance(response, list):
        response = "".join(_message_text(m) for m in response)
    if isinstance(prompt, list):
        lines = [f"<|{m.get('role', 'user')}|>: {m.get('content', '')}" for m in prompt]
        return "\n".join(lines) + f"\n{assistant_prefix}{response}"
    return f"{user_prefix}{prompt}\n{assistant_prefix}{response}"


def bt_loss(bt_scores: torch.Tensor, agreement: torch.Tensor, triple_mask: torch.Tensor | None = None) -> torch.Tensor:
    r"""Bradley-Terry loss over "disagreement" triples [code].

    For sample i, the triples are :math:`(n, n')` with :math:`\delta_i^{(n)} = 1` and :math:`\delta_i^{(n')} = 0`;
    each contributes :math:`\mathrm{softplus}(-(s_i^n - s_i^{n'})) = -\log\sigma(s_i^n - s_i^{n'})`. The loss is averaged
    over a sample's triples, then over the samples that have at least one triple (samples on which all RMs agree, or all
    disagree, have none). Returns 0 (with a graph) if no sample has a triple.

    Args:
        bt_scores (`torch.Tensor` of shape `(B, K)`): :math:`s_i^n`.
        agreement (`torch.Tensor` of shape `(B, K)`): :math:`\delta_i^{(n)} \in \{0, 1\}`.
        triple_mask (`torch.Tensor` of shape `(B, K, K)`, *optional*): keep-mask over (winner, loser) triples, e.g.
            from a rebalancing pass; multiplied into the default mask.

    Returns:
        `torch.Tensor`: the scalar loss.
    """
    delta = agreement.to(bt_scores.dtype)
    mask = delta[:, :, None] * (1 - delta[:, None, :])  # (B, K_win, K_lose)
    if triple_mask is not None:
        mask = mask * triple_mask.to(mask.dtype)
    diff = bt_scores[:, :, None] - bt_scores[:, None, :]
    per_triple = F.softplus(-diff) * mask
    n_triples = mask.sum((1, 2))
    valid = n_triples > 0
    per_sample = per_triple.sum((1, 2)) / n_triples.clamp_min(1)
    return (per_sample * valid).sum() / valid.sum().clamp_min(1)


def balance_bt_triples(agreement: torch.Tensor, seed: int = 0) -> torch.Tensor:
    """Keep-mask over BT triples that evens out each RM's win and loss counts [reconstruction].

    The authors' code has an optional pass deleting triples so that every RM wins about as often as it loses; its
    exact rule is not documented. Here: visit the triples (i, w, l) in a seeded random order and delete one when the
    winner ``w`` currently has more wins than losses **and** the loser ``l`` more losses than wins (deleting it moves
    both towards balance). Pass the result as ``triple_mask`` to :func:`bt_loss` (or as a ``triple_mask`` column to
    :class:`~hfx.routing.OfflineRouterTrainer`).

    Args:
        agreement (`torch.Tensor` of shape `(N, K)`): the 0/1 agreement matrix of the whole offline set.
        seed (`int`, *optional*, defaults to `0`).

    Returns:
        `torch.Tensor` of shape `(N, K, K)`: 1 for kept triples (0 elsewhere, including non-triples).
    """
    delta = torch.as_tensor(agreement).float()
    mask = delta[:, :, None] * (1 - delta[:, None, :])
    wins, losses = mask.sum((0, 2)), mask.sum((0, 1))
    triples = torch.nonzero(mask)
    order = torch.randperm(len(triples), generator=torch.Generator().manual_seed(seed))
    for i, win, lose in triples[order].tolist():
        if wins[win] > losses[win] and losses[lose] > wins[lose]:
            mask[i, win, lose] = 0
            wins[win] -= 1
            losses[lose] -= 1
    return mask


@dataclass
class OfflineRouterOutput(ModelOutput):
    """Output of :meth:`OfflineRouter.forward`.

    Args:
        loss (`torch.Tensor`, *optional*): ``lambda_bt * L_bt + lambda_cls * L_cls`` when ``agreement`` is given.
        pair_embeddings (`torch.Tensor` of shape `(B, d)`): unit-norm fused pair context h.
        bt_scores (`torch.Tensor` of shape `(B, K)`): :math:`\\langle h, E_{bt}[n] / \\lVert E_{bt}[n] \\rVert \\rangle`.
        cls_logits (`torch.Tensor` of shape `(B, K)`): classification-head logits (does RM n agree with gold?).
    """

    loss: torch.Tensor | None = None
    pair_embeddings: torch.Tensor | None = None
    bt_scores: torch.Tensor | None = None
    cls_logits: torch.Tensor | None = None


class OfflineRouter(
    ArtifactMixin,
    nn.Module,
    PyTorchModelHubMixin,
    library_name="hfx",
    tags=["hfx", "bayesian-router", "reward-model-routing", "arxiv:2510.02850"],
    license="apache-2.0",
    paper_url=PAPER_URL,
    repo_url="https://github.com/hfx-org/hfx",
):
    r"""Offline multi-task router: shared LM encoder + pair fusion + Bradley-Terry (and classification) heads.

    Each (prompt, response) is encoded on its own (:func:`format_pair_text`, right padding, truncation to
    ``max_length``); the embedding is the hidden state of the last non-pad token. Pair fusion
    :math:`h = \mathrm{normalize}(\mathrm{LayerNorm}(\mathrm{ReLU}(W[(e+e')/2;\ |e-e'|])))` is symmetric in the two
    responses and unit-norm. Heads: BT vectors :math:`E_{bt} \in \mathbb{R}^{K \times d}` used with L2-normalised rows
    and no bias; CLS head :math:`\langle h, E_{cls}[n]/\lVert E_{cls}[n] \rVert\rangle + b_n` trained with BCE against
    the agreement :math:`\delta`. The code's regression head has weight 0 there and is not implemented.

    It is a :class:`huggingface_hub.PyTorchModelHubMixin` model: ``save_pretrained`` writes ``config.json`` (these
    ``__init__`` arguments), ``model.safetensors`` and the tokenizer files; ``from_pretrained("org/name")`` resolves a
    Hub repo (or the offline HF cache); ``push_to_hub`` uploads.

    Args:
        encoder_config (`dict`): ``PretrainedConfig.to_dict()`` of the encoder backbone (must hold ``model_type``); the
            encoder is ``AutoModel.from_config``. Use :meth:`from_encoder` to wrap pretrained weights.
        rm_names (`list[str]`): the K reward models of the pool, in arm order.
        max_length (`int`, *optional*, defaults to `1024`): truncation length per (prompt, response) text [code].
        lambda_bt (`float`, *optional*, defaults to `1.0`) / lambda_cls (`float`, *optional*, defaults to `0.0`):
            loss weights; the released code trains BT only (``lambda_cls=0``); the paper's lambda is unknown.
        freeze_encoder (`bool`, *optional*, defaults to `False`): the paper fine-tunes the encoder fully; ``True``
            trains only fusion + heads (cheap CPU runs).
        cache_embeddings (`bool`, *optional*, defaults to `False`): with a frozen encoder, memoise each text's
            embedding (keyed by its token ids, kept on CPU) so later epochs and the online stage skip the encoder.
        user_prefix / assistant_prefix (`str`): text prefixes [code].
        base_model (`str`, *optional*): the encoder's Hub id, recorded in the config and the model card.

    Raises:
        ValueError: empty or duplicate ``rm_names``, ``encoder_config`` without ``model_type``, ``max_length < 1``,
            negative loss weights. ``from_pretrained`` / ``save_pretrained`` refuse another artifact's folder, a
            corrupt file or a ``config.json`` missing one of these arguments
            (:class:`~hfx.utils.artifacts.ArtifactMixin`).
    """

    _hfx_artifact = "hfx_bayesian_router"

    def __init__(
        self,
        encoder_config: dict,
        rm_names: list[str],
        max_length: int = 1024,
        lambda_bt: float = 1.0,
        lambda_cls: float = 0.0,
        freeze_encoder: bool = False,
        cache_embeddings: bool = False,
        user_prefix: str = "<|user|>: ",
        assistant_prefix: str = "<|assistant|>: ",
        base_model: str | None = None,
    ):
        super().__init__()
        from transformers import AutoConfig, AutoModel

        if not isinstance(encoder_config, dict) or "model_type" not in encoder_config:
            raise ValueError("`encoder_config` must be a dict from `PretrainedConfig.to_dict()` holding `model_type`")
        rm_names = [str(n) for n in rm_names]
        if len(rm_names) == 0:
            raise ValueError("`rm_names` must not be empty: the reward-model pool needs at least one RM")
        if len(set(rm_names)) != len(rm_names):
            raise ValueError(f"`rm_names` must be unique, but is {rm_names}")
        max_length = check_int("max_length", max_length, minimum=1)
        lambda_bt = check_float("lambda_bt", lambda_bt, minimum=0.0)
        lambda_cls = check_float("lambda_cls", lambda_cls, minimum=0.0)
        cfg = dict(encoder_config)
        config = AutoConfig.for_model(cfg.pop("model_type"), **cfg)
        self.encoder = AutoModel.from_config(config)
        self.rm_names = rm_names
        self.max_length = int(max_length)
        self.lambda_bt, self.lambda_cls = float(lambda_bt), float(lambda_cls)
        self.user_prefix, self.assistant_prefix = user_prefix, assistant_prefix
        self.base_model = base_model
        self.tokenizer = None
        d = config.hidden_size
        k = len(rm_names)
        self.fusion = nn.Linear(2 * d, d)
        self.fusion_norm = nn.LayerNorm(d)
        self.bt_embeddings = nn.Parameter(torch.randn(k, d) / d**0.5)
        self.cls_embeddings = nn.Parameter(torch.randn(k, d) / d**0.5)
        self.cls_bias = nn.Parameter(torch.zeros(k))
        self.freeze_encoder = bool(freeze_encoder)
        self.cache_embeddings = bool(cache_embeddings)
        self._embedding_cache: dict[tuple, torch.Tensor] = {}
        if self.cache_embeddings and not self.freeze_encoder:
            raise ValueError("`cache_embeddings=True` requires `freeze_encoder=True` (a trained encoder changes them)")
        if self.freeze_encoder:
            self.encoder.requires_grad_(False)

    # ------------------------------------------------------------------------------------------------ construction
    @classmethod
    def from_encoder(cls, encoder, tokenizer, rm_names: list[str], **kwargs) -> OfflineRouter:
        """Wrap a pretrained encoder (an ``AutoModel`` backbone, or a ``*ForCausalLM`` whose backbone is used).

        Args:
            encoder (`transformers.PreTrainedModel`): e.g. ``AutoModel.from_pretrained("HuggingFaceTB/SmolLM2-135M-Instruct")``
                or :func:`hfx.models.load_default_model`'s model.
            tokenizer (`transformers.PreTrainedTokenizerBase`): its tokenizer (a pad token is set to EOS if missing).
            rm_names (`list[str]`): the pool.
            **kwargs: other ``__init__`` arguments.
        """
        backbone = getattr(encoder, getattr(encoder, "base_model_prefix", ""), None) or encoder
        if not hasattr(backbone, "config"):
            raise TypeError(f"`encoder` must be a transformers PreTrainedModel, but is {type(encoder).__name__}")
        kwargs.setdefault("base_model", getattr(backbone.config, "_name_or_path", None) or None)
        config = backbone.config.to_dict()
        config["model_type"] = backbone.config.model_type
        router = cls(encoder_config=config, rm_names=rm_names, **kwargs)
        router.encoder = backbone
        if router.freeze_encoder:
            router.encoder.requires_grad_(False)
        router.fusion.to(backbone.dtype)
        router.set_tokenizer(tokenizer)
        return router

    def set_tokenizer(self, tokenizer) -> None:
        """Attach the tokenizer used by :meth:`tokenize` (saved with the model)."""
        if tokenizer is not None and tokenizer.pad_token_id is None:
            tokenizer.pad_token = tokenizer.eos_token
        self.tokenizer = tokenizer

    @property
    def num_rms(self) -> int:
        """K, the number of reward models."""
        return len(self.rm_names)

    @property
    def hidden_size(self) -> int:
        """d, the pair-embedding size."""
        return self.fusion.out_features

    # ------------------------------------------------------------------------------------------------ encoding
    def tokenize(self, prompts, responses) -> dict[str, torch.Tensor]:
        """Tokenise (prompt, response) texts, right-padded and truncated to ``max_length``: ``input_ids``,
        ``attention_mask`` of shape `(N, L)`."""
        if self.tokenizer is None:
            raise ValueError("This OfflineRouter has no tokenizer: call `set_tokenizer(tokenizer)` first")
        texts = [format_pair_text(p, r, self.user_prefix, self.assistant_prefix) for p, r in zip(prompts, responses)]
        enc = self.tokenizer(
            texts,
            padding=True,
            truncation=True,
            max_length=self.max_length,
            padding_side="right",
            return_tensors="pt",
        )
        return {"input_ids": enc["input_ids"], "attention_mask": enc["attention_mask"]}

    def encode(self, input_ids: torch.LongTensor, attention_mask: torch.LongTensor) -> torch.Tensor:
        """Hidden state of the last non-pad token, shape `(N, d)` (inputs right-padded, shape `(N, L)`)."""
        if self.freeze_encoder and self.cache_embeddings:
            return self._cached_encode(input_ids, attention_mask)
        hidden = self.encoder(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        last = attention_mask.long().sum(-1).clamp_min(1) - 1
        return hidden[torch.arange(hidden.shape[0], device=hidden.device), last]

    @torch.no_grad()
    def _cached_encode(self, input_ids, attention_mask) -> torch.Tensor:
        lengths = attention_mask.long().sum(-1).tolist()
        keys = [tuple(ids[:n].tolist()) for ids, n in zip(input_ids, lengths)]
        missing = sorted({i for i, k in enumerate(keys) if k not in self._embedding_cache})
        if missing:
            ids, mask = input_ids[missing], attention_mask[missing]
            hidden = self.encoder(input_ids=ids, attention_mask=mask).last_hidden_state
            last = mask.long().sum(-1).clamp_min(1) - 1
            emb = hidden[torch.arange(hidden.shape[0], device=hidden.device), last]
            for i, e in zip(missing, emb):
                self._embedding_cache[keys[i]] = e.detach().cpu()
        return torch.stack([self._embedding_cache[k] for k in keys]).to(input_ids.device)

    def fuse(self, emb_a: torch.Tensor, emb_b: torch.Tensor) -> torch.Tensor:
        """Symmetric unit-norm pair context ``h`` of shape `(B, d)` from response embeddings of shape `(B, d)`."""
        x = torch.cat([(emb_a + emb_b) / 2, (emb_a - emb_b).abs()], dim=-1).to(self.fusion.weight.dtype)
        return F.normalize(self.fusion_norm(F.relu(self.fusion(x))), dim=-1)

    def prior_means(self) -> torch.Tensor:
        """Normalised BT vectors :math:`E_{bt}[n] / \\lVert E_{bt}[n] \\rVert`, shape `(K, d)` (the online prior)."""
        return F.normalize(self.bt_embeddings.detach(), dim=-1)

    def forward(
        self,
        input_ids_a: torch.LongTensor,
        attention_mask_a: torch.LongTensor,
        input_ids_b: torch.LongTensor,
        attention_mask_b: torch.LongTensor,
        agreement: torch.Tensor | None = None,
        triple_mask: torch.Tensor | None = None,
        return_dict: bool = True,
    ) -> OfflineRouterOutput:
        """Pair embeddings, head scores and (given ``agreement`` of shape `(B, K)`) the multi-task loss.

        Args:
            input_ids_a, attention_mask_a, input_ids_b, attention_mask_b (`torch.LongTensor` of shape `(B, L)`):
                right-padded (prompt, response) tokens, from :meth:`tokenize`.
            agreement (`torch.Tensor` of shape `(B, K)`, *optional*): 1 where RM n agrees with the gold label.
            triple_mask (`torch.Tensor` of shape `(B, K, K)`, *optional*): see :func:`bt_loss`.
        """
        emb_a = self.encode(input_ids_a, attention_mask_a)
        emb_b = self.encode(input_ids_b, attention_mask_b)
        h = self.fuse(emb_a, emb_b)
        bt_scores = h @ F.normalize(self.bt_embeddings, dim=-1).T
        cls_logits = h @ F.normalize(self.cls_embeddings, dim=-1).T + self.cls_bias
        loss = None
        if agreement is not None:
            if agreement.shape != bt_scores.shape:
                raise ValueError(
                    f"`agreement` must have shape (B, K) = {tuple(bt_scores.shape)}, but has {tuple(agreement.shape)}"
                )
            loss = self.lambda_bt * bt_loss(bt_scores, agreement, triple_mask)
            if self.lambda_cls > 0:
                loss = loss + self.lambda_cls * F.binary_cross_entropy_with_logits(
                    cls_logits, agreement.to(cls_logits.dtype)
                )
        out = OfflineRouterOutput(loss=loss, pair_embeddings=h, bt_scores=bt_scores, cls_logits=cls_logits)
        return out if return_dict else out.to_tuple()

    @torch.no_grad()
    def embed_pairs(
        self, prompts, responses_a, responses_b, batch_size: int = 16, show_progress: bool = False
    ) -> torch.Tensor:
        """Unit-norm pair contexts for lists of (prompt, response_a, response_b): tensor `(P, d)` (no grad, eval mode).

        Raises:
            ValueError: if the three lists differ in length.
        """
        if not (len(prompts) == len(responses_a) == len(responses_b)):
            raise ValueError(
                f"`prompts`, `responses_a`, `responses_b` must have the same length, but have "
                f"{len(prompts)}, {len(responses_a)}, {len(responses_b)}"
            )
        from tqdm.auto import tqdm

        was_training = self.training
        self.eval()
        device = next(self.parameters()).device
        out = []
        starts = range(0, len(prompts), batch_size)
        for s in tqdm(starts, desc="embedding pairs", disable=not show_progress):
            p = list(prompts[s : s + batch_size])
            enc_a = self.tokenize(p, responses_a[s : s + batch_size])
            enc_b = self.tokenize(p, responses_b[s : s + batch_size])
            emb_a = self.encode(enc_a["input_ids"].to(device), enc_a["attention_mask"].to(device))
            emb_b = self.encode(enc_b["input_ids"].to(device), enc_b["attention_mask"].to(device))
            out.append(self.fuse(emb_a, emb_b).float().cpu())
        self.train(was_training)
        if not out:
            return torch.zeros(0, self.hidden_size)
        return torch.cat(out)

    def route(self, h: torch.Tensor) -> torch.LongTensor:
        """Greedy offline routing: ``argmax_n <h, E_bt[n]/||E_bt[n]||>``, shape `(P,)`."""
        return (h.to(self.bt_embeddings.dtype) @ self.prior_means().T.to(h.device)).argmax(-1)

    # ------------------------------------------------------------------------------------------------ save / load
    def _save_pretrained(self, save_directory: Path) -> None:
        super()._save_pretrained(save_directory)
        if self.tokenizer is not None:
            self.tokenizer.save_pretrained(save_directory)

    @classmethod
    def _from_pretrained(
        cls,
        *,
        model_id: str,
        revision: str | None,
        cache_dir: str | Path | None,
        force_download: bool,
        local_files_only: bool,
        token: str | bool | None,
        map_location: str = "cpu",
        strict: bool = True,
        **model_kwargs: Any,
    ) -> OfflineRouter:
        from safetensors.torch import load_model
        from transformers import AutoTokenizer

        if os.path.isdir(model_id):
            folder = model_id
        else:
            from huggingface_hub import snapshot_download

            folder = snapshot_download(
                repo_id=model_id,
                revision=revision,
                cache_dir=cache_dir,
                force_download=force_download,
                local_files_only=local_files_only,
                token=token,
            )
        model = cls(**model_kwargs)
        load_model(model, os.path.join(folder, "model.safetensors"), strict=strict, device=map_location)
        if any(os.path.isfile(os.path.join(folder, f)) for f in ("tokenizer.json", "tokenizer_config.json")):
            model.set_tokenizer(AutoTokenizer.from_pretrained(folder))
        return model.eval()
