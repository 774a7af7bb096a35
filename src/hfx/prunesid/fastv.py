"""FastV (Chen et al., ECCV 2024, arXiv 2403.06764) on Hugging Face LLaVA models, with forward pre-hooks (no fork).

FastV drops image tokens *inside* the language model: at decoder layer K it keeps the image tokens that received the
most attention from the **last token** in layer K-1 (attention averaged over heads) and runs layers K, K+1, ... on
the remaining sequence. As in the FastV repo (``llava-hf/transformers/.../modeling_llama.py``, ``fastv_forward``):

* score = ``mean_heads(softmax(q_last · kᵀ · scale + mask))[image columns]`` of layer K-1; kept =
  ``round(n_image · (1 - R))`` image tokens (``FASTV_r``; Python's ``round``), the text tokens all stay;
* the kept tokens keep their original position ids (RoPE positions are not renumbered);
* with a KV cache the pruning is static: layers ≥ K cache only the kept tokens, and every later token attends to that
  same set (the repo's "Support KV Cache" mode); without a cache every forward re-prunes from its own last token (the
  repo's in-place mode).

How it is hooked (:func:`install_fastv_hooks`, run by the PruneSID model classes and :func:`hfx.prunesid.apply`):

* a forward pre-hook on the inner ``*Model`` reads ``config.prunesid`` and the ``input_ids`` of the call: a forward
  whose ``input_ids`` contain image (or video) placeholders is a *pruning* forward; a later forward that continues the
  cache of a pruning forward is a *decode* forward; anything else (FastV off, text-only) passes through untouched;
* a pre-hook (``with_kwargs=True``) on decoder layer K-1 recomputes the last query's attention from the layer's input
  (its ``input_layernorm``, ``q_proj`` / ``k_proj``, RoPE and the layer's 4-D mask row), so the model may run SDPA;
* pre-hooks on layers ≥ K: in a pruning forward, layer K gathers the kept positions of the hidden states; every layer
  ≥ K gets the matching ``position_embeddings`` (cos, sin), ``position_ids`` and 4-D attention mask (rows and
  columns of the kept positions). In a decode forward they get the columns of the kept prefix plus the decoded tokens.

Batches: rows keep different numbers of tokens (different image counts, ``round`` per row), so the kept positions are
right-aligned and the shorter rows are filled on the left with dropped positions that are masked out as keys; with
left padding every row gives the same tokens as the row alone. The logits of a pruning forward cover the kept
positions only (the last position is still the last input token), so FastV is for inference: `labels` are rejected.

Unsupported, with a clear error: static / sliding-window / quantized / offloaded caches and compiled forwards
(``cache_implementation="static"``, ``torch.compile``), flash / flex attention (no 4-D mask to slice), right padding
(the last position must be a real token), image tokens after a non-empty cache (multi-turn cache reuse), and caches
cropped behind the hooks' back (assisted decoding). Beam search works: the beams of one prompt share its kept set,
so reordering the cache among them needs no change to the kept-position map.
"""

from __future__ import annotations

import sys
import weakref

import torch

from .config import PruneSIDConfig


SUPPORTED_ATTENTION = ("eager", "sdpa")


class FastVState:
    """Per-model bookkeeping shared by the hooks (one object, referenced from the hooked modules as ``_hfx_fastv``)."""

    def __init__(self):
        self.mode = None  # None | "prune" | "decode" for the current forward
        self.k = None
        self.clear_forward()
        self.clear_cache_map()

    def clear_forward(self):
        self.image_mask = self.keep_counts = self.scores = None
        self.index = self.valid = None
        self._slices: dict = {}

    def clear_cache_map(self):
        self.cache_ref = None
        self.kv_index = self.kv_valid = None
        self.prefill_len = self.pruned_len = self.past_len = None


def _layers(inner):
    lm = getattr(inner, "language_model", None)
    layers = getattr(lm, "layers", None)
    if layers is None:
        raise TypeError(f"FastV needs `language_model.layers` on {type(inner).__name__} (a decoder-only LLM)")
    return layers


def install_fastv_hooks(model) -> None:
    """Register the FastV hooks on a PruneSID LLaVA model (idempotent; inactive unless ``method="fastv"``).

    `model` is a ``*ForConditionalGeneration`` or an inner ``*Model``. Hooks: a forward pre-hook and a forward hook on
    the inner ``*Model``, a pre-hook on the ``*ForConditionalGeneration`` if any (rejects `labels` while FastV is on)
    and a pre-hook (``with_kwargs=True``) on every decoder layer of
    ``model.model.language_model``. While ``config.prunesid`` does not select FastV they return at once, so the model
    computes exactly what it computes without them. :func:`remove_fastv_hooks` removes them.
    """
    inner, top = _split(model)
    state = getattr(inner, "_hfx_fastv", None)
    if not isinstance(state, FastVState):
        state = FastVState()
    for i, layer in enumerate(_layers(inner)):
        layer._hfx_fastv_layer = i
    for m in [*top, inner, *_layers(inner)]:
        m._hfx_fastv = state
    for m in top:
        _add_hook(m._forward_pre_hooks, m.register_forward_pre_hook, _top_pre_hook, with_kwargs=True)
    _add_hook(inner._forward_pre_hooks, inner.register_forward_pre_hook, _model_pre_hook, with_kwargs=True)
    _add_hook(inner._forward_hooks, inner.register_forward_hook, _model_post_hook)
    for layer in _layers(inner):
        _add_hook(layer._forward_pre_hooks, layer.register_forward_pre_hook, _layer_pre_hook, with_kwargs=True)


def _split(model):
    """`(inner *Model, [top-level model] or [])` for a ``*ForConditionalGeneration`` or an inner ``*Model``."""
    if hasattr(model, "lm_head"):
        return model.model, [model]
    return model, []


def _add_hook(table, register, fn, **kwargs):
    if not any(h is fn for h in table.values()):
        register(fn, **kwargs)


def remove_fastv_hooks(model) -> None:
    """Remove every hook :func:`install_fastv_hooks` registered on `model` (the model is then the plain class)."""
    inner, top = _split(model)
    fns = (_top_pre_hook, _model_pre_hook, _model_post_hook, _layer_pre_hook)
    extras = ("_forward_pre_hooks_with_kwargs", "_forward_hooks_with_kwargs", "_forward_hooks_always_called")
    for m in [*top, inner, *_layers(inner)]:
        for table in (m._forward_pre_hooks, m._forward_hooks):
            for key in [k for k, h in table.items() if h in fns]:
                table.pop(key)
                for extra in extras:
                    getattr(m, extra, {}).pop(key, None)
        for attr in ("_hfx_fastv", "_hfx_fastv_layer"):
            if attr in m.__dict__:
                delattr(m, attr)


def _fastv_config(config) -> PruneSIDConfig | None:
    cfg = PruneSIDConfig.from_model_config(config)
    return cfg if cfg.enabled and cfg.method == "fastv" else None


def _top_pre_hook(module, args, kwargs):
    if kwargs.get("labels") is not None and _fastv_config(module.config) is not None:
        raise ValueError(
            "`method='fastv'` is inference-only: its logits cover the kept positions only, so `labels` cannot be "
            "aligned; train without pruning (config.prunesid = None) or with a pre-LLM method"
        )


def _cache_arg(kwargs):
    return kwargs["cache"] if kwargs.get("cache") is not None else kwargs.get("past_key_values")


def check_cache(cache) -> None:
    """Raise if `cache` is not a plain ``DynamicCache`` (FastV keeps shorter caches in layers ≥ K)."""
    from transformers.cache_utils import DynamicCache, DynamicLayer

    layers = getattr(cache, "layers", [])
    plain = (
        isinstance(cache, DynamicCache)
        and not getattr(cache, "offloading", False)
        and all(type(layer) is DynamicLayer for layer in layers)
        and getattr(cache, "layer_class_to_replicate", None) in (None, DynamicLayer)
    )
    if not plain:
        kinds = sorted({type(layer).__name__ for layer in layers})
        raise ValueError(
            f"`method='fastv'` needs a plain DynamicCache (got {type(cache).__name__} with layers {kinds}): static, "
            "sliding-window, quantized and offloaded caches (e.g. `cache_implementation='static'` or a compiled "
            "forward) preallocate or reshape the per-layer cache, which FastV shortens from layer K on. Use the "
            "default cache or `use_cache=False`."
        )


def _model_pre_hook(module, args, kwargs):
    state: FastVState = module._hfx_fastv
    state.mode = None
    state.clear_forward()
    cfg = _fastv_config(module.config)
    if cfg is None:
        state.clear_cache_map()
        return
    if torch.compiler.is_compiling():
        raise RuntimeError("`method='fastv'` cannot run inside torch.compile (data-dependent token dropping)")
    input_ids = kwargs.get("input_ids", args[0] if args else None)
    cache = _cache_arg(kwargs)
    if input_ids is None:
        if state.cache_ref is not None and cache is not None and state.cache_ref() is cache:
            raise ValueError("`method='fastv'` needs `input_ids` (not `inputs_embeds`) to continue a pruned cache")
        raise ValueError("`method='fastv'` needs `input_ids` to find the image tokens (`inputs_embeds` was given)")
    ids = [getattr(module.config, name, None) for name in ("image_token_id", "video_token_id")]
    ids = torch.tensor([i for i in ids if i is not None], device=input_ids.device)
    image_mask = torch.isin(input_ids, ids)
    layers = _layers(module)
    if not 1 <= cfg.fastv_k < len(layers):
        raise ValueError(
            f"`fastv_k` must be in [1, {len(layers) - 1}] for a {len(layers)}-layer LLM, but is {cfg.fastv_k}"
        )
    state.k = cfg.fastv_k
    if bool(image_mask.any()):
        impl = getattr(module.language_model.config, "_attn_implementation", None) or "eager"
        if impl not in SUPPORTED_ATTENTION:
            raise ValueError(
                f"`method='fastv'` supports attn_implementation {SUPPORTED_ATTENTION}, not {impl!r} (it slices the "
                "4-D attention mask); load or set the model with attn_implementation='sdpa' or 'eager'"
            )
        if cache is not None:
            check_cache(cache)
            if cache.get_seq_length() > 0:
                raise ValueError(
                    "`method='fastv'` prunes image tokens in the forward that first sees them; image tokens after a "
                    "non-empty cache (cache reuse across turns) are not supported: start from an empty cache"
                )
        mask2d = kwargs.get("attention_mask")
        if isinstance(mask2d, torch.Tensor) and mask2d.dim() == 2 and not bool(mask2d[:, -1].bool().all()):
            raise ValueError(
                "`method='fastv'` ranks image tokens by the attention of the last position, so the batch must be "
                "left-padded (tokenizer.padding_side='left'); the last position of a row is padding"
            )
        state.mode = "prune"
        state.image_mask = image_mask
        state.keep_counts = _keep_counts(image_mask.sum(-1), cfg, module.config)
        state.clear_cache_map()
    elif cache is not None and state.cache_ref is not None and state.cache_ref() is cache:
        state.mode = "decode"
        state.past_len = cache.get_seq_length()
        expected = state.pruned_len + state.past_len - state.prefill_len
        got = cache.layers[state.k].get_seq_length()
        if got != expected:
            raise RuntimeError(
                f"the FastV cache of layer {state.k} holds {got} positions, expected {expected}: it was cropped or "
                "edited outside the model (e.g. assisted decoding), which `method='fastv'` does not support"
            )
    return


def _model_post_hook(module, args, output):
    state: FastVState = module._hfx_fastv
    state.mode = None
    state.clear_forward()


def _keep_counts(num_image: torch.Tensor, cfg: PruneSIDConfig, config) -> list[int]:
    """Image tokens kept per row: ``round(n · (1 - R))`` (FastV's rule), or N per ``(image_size/patch_size)²``."""
    counts = [int(n) for n in num_image.tolist()]
    if cfg.fastv_ratio is not None:
        return [round(n * (1 - cfg.fastv_ratio)) for n in counts]
    vision = config.vision_config
    per_image = (vision.image_size // vision.patch_size) ** 2
    if getattr(config, "vision_feature_select_strategy", "default") == "full":
        per_image += 1
    return [min(n, round(n * cfg.num_visual_tokens / per_image)) for n in counts]


def last_token_attention(layer, hidden_states: torch.Tensor, kwargs: dict) -> torch.Tensor:
    """Head-averaged attention of the last position to every position, as layer `layer` computes it (fp32).

    Recomputes ``softmax(q_last · kᵀ · scaling + mask_row)`` from the layer input (``input_layernorm``, ``q_proj`` /
    ``k_proj`` (+ ``q_norm`` / ``k_norm`` when present), RoPE from ``position_embeddings``, key heads repeated for
    GQA) -- the eager attention weights ``attentions[K-1][:, :, -1]`` that FastV reads, without materialising the
    full attention matrix.

    Args:
        layer: a decoder layer with ``input_layernorm`` and ``self_attn.{q_proj, k_proj, head_dim, scaling}``.
        hidden_states (`torch.Tensor` of shape `(batch_size, L, hidden_size)`): the layer's input.
        kwargs (`dict`): the layer call's keyword arguments (``position_embeddings``, ``attention_mask``).

    Returns:
        `torch.Tensor` of shape `(batch_size, L)`, rows summing to 1.
    """
    attn = layer.self_attn
    x = layer.input_layernorm(hidden_states)
    b, length, _ = x.shape
    d = attn.head_dim
    q = attn.q_proj(x[:, -1:]).view(b, 1, -1, d)
    k = attn.k_proj(x).view(b, length, -1, d)
    if getattr(attn, "q_norm", None) is not None:
        q, k = attn.q_norm(q), attn.k_norm(k)
    q, k = q.transpose(1, 2), k.transpose(1, 2)
    rope = getattr(sys.modules[type(attn).__module__], "apply_rotary_pos_emb", None)
    if rope is None:
        raise TypeError(f"FastV needs `apply_rotary_pos_emb` in {type(attn).__module__}")
    cos, sin = kwargs["position_embeddings"]
    q, _ = rope(q, q, cos[:, -1:], sin[:, -1:])
    _, k = rope(k, k, cos, sin)
    k = k.repeat_interleave(q.shape[1] // k.shape[1], dim=1)
    logits = (q.float() @ k.float().transpose(-1, -2)) * attn.scaling  # (B, H, 1, L)
    mask = kwargs.get("attention_mask")
    if mask is not None:
        row = mask[:, :, -1:, :length]
        logits = logits.masked_fill(~row, float("-inf")) if row.dtype == torch.bool else logits + row.float()
    return torch.softmax(logits, dim=-1).mean(dim=1)[:, 0]


def _select(state: FastVState, scores: torch.Tensor) -> None:
    """Kept positions per row, right-aligned: `state.index` `(B, L')` and `state.valid` `(B, L')`."""
    img = state.image_mask
    b, length = img.shape
    counts = torch.tensor(state.keep_counts, device=img.device)
    ranked = torch.argsort(scores.masked_fill(~img, float("-inf")), dim=-1, descending=True, stable=True)
    rank = torch.empty_like(ranked).scatter_(1, ranked, torch.arange(length, device=img.device).expand(b, -1))
    keep = ~img | (rank < counts[:, None])
    new_len = int(keep.sum(-1).max())
    # dropped positions first, then kept ones, each ascending; the last `new_len` columns hold every kept position
    order = torch.argsort(keep.to(torch.int8), dim=-1, stable=True)
    state.index = order[:, length - new_len :]
    state.valid = keep.gather(1, state.index)


def _gather_seq(t: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """Gather positions `index` `(B, L')` along dim 1 of `t` `(1 or B, L, ...)`."""
    t = t.expand(index.shape[0], *t.shape[1:])
    shape = index.shape + t.shape[2:]
    return t.gather(1, index.reshape(*index.shape, *([1] * (t.dim() - 2))).expand(shape))


def _format_mask(allowed: torch.Tensor, like, layer) -> torch.Tensor:
    """bool mask (True = attend) in the format of `like` (bool or additive float), or of the layer's attention."""
    if like is not None and like.dtype != torch.bool:
        zero = torch.zeros((), dtype=like.dtype, device=allowed.device)
        return torch.where(allowed, zero, torch.finfo(like.dtype).min)
    if like is None and getattr(layer.self_attn.config, "_attn_implementation", "eager") == "eager":
        dtype = layer.input_layernorm.weight.dtype
        return torch.where(allowed, 0.0, torch.finfo(dtype).min).to(dtype)
    return allowed


def _as_allowed(mask: torch.Tensor) -> torch.Tensor:
    return mask if mask.dtype == torch.bool else mask > torch.finfo(mask.dtype).min / 2


def _prune_mask(state: FastVState, mask, layer):
    index, valid = state.index, state.valid
    b, new_len = index.shape
    if mask is None:
        if bool(valid.all()):
            return None  # every row keeps the same causal structure on its kept positions
        allowed = (index[:, None, :] <= index[:, :, None]) & valid[:, None, :]
        allowed = allowed[:, None]
    else:
        full = _as_allowed(mask).expand(b, -1, -1, -1)
        heads = full.shape[1]
        rows = full.gather(2, index[:, None, :, None].expand(b, heads, new_len, full.shape[-1]))
        allowed = rows.gather(3, index[:, None, None, :].expand(b, heads, new_len, new_len))
        allowed = allowed & valid[:, None, None, :]
    eye = torch.eye(new_len, dtype=torch.bool, device=index.device)
    allowed = allowed | (~allowed.any(-1, keepdim=True) & eye)  # rows with nothing to attend: themselves (no NaN)
    return _format_mask(allowed, mask, layer)


def _decode_mask(state: FastVState, mask, q_len: int, layer):
    b = state.kv_index.shape[0]
    device = state.kv_index.device
    total = state.past_len + q_len
    new = torch.arange(state.prefill_len, total, device=device).expand(b, -1)
    kv_index = torch.cat([state.kv_index, new], dim=1)
    kv_valid = torch.cat([state.kv_valid, torch.ones_like(new, dtype=torch.bool)], dim=1)
    if mask is None:
        if bool(kv_valid.all()):
            return None
        q_pos = state.past_len + torch.arange(q_len, device=device)
        allowed = ((kv_index[:, None, :] <= q_pos[None, :, None]) & kv_valid[:, None, :])[:, None]
    else:
        if mask.shape[-1] != total:
            raise RuntimeError(f"FastV expected a {total}-column attention mask in decoding, got {tuple(mask.shape)}")
        full = _as_allowed(mask).expand(b, -1, -1, -1)
        allowed = full.gather(3, kv_index[:, None, None, :].expand(b, full.shape[1], q_len, kv_index.shape[1]))
        allowed = allowed & kv_valid[:, None, None, :]
    return _format_mask(allowed, mask, layer)


def _cached(state: FastVState, key: str, source, build):
    hit = state._slices.get(key)
    if hit is not None and hit[0] is source:
        return hit[1]
    value = build()
    state._slices[key] = (source, value)
    return value


def _layer_pre_hook(module, args, kwargs):
    state: FastVState = module._hfx_fastv
    if state.mode is None:
        return None
    i, k = module._hfx_fastv_layer, state.k
    hidden = args[0] if args else kwargs["hidden_states"]
    if state.mode == "prune" and i == k - 1:
        state.scores = last_token_attention(module, hidden, kwargs)
        return None
    if i < k:
        return None
    kwargs = dict(kwargs)
    mask = kwargs.get("attention_mask")
    if state.mode == "prune":
        if i == k:
            _select(state, state.scores)
            hidden = _gather_seq(hidden, state.index)
            cache = _cache_arg(kwargs)
            if cache is not None:
                state.cache_ref = weakref.ref(cache)
                state.kv_index, state.kv_valid = state.index, state.valid
                state.prefill_len, state.pruned_len = state.image_mask.shape[1], state.index.shape[1]
        pos = kwargs.get("position_embeddings")
        if pos is not None:
            kwargs["position_embeddings"] = _cached(
                state, "pos_emb", pos[0], lambda: tuple(_gather_seq(t, state.index) for t in pos)
            )
        ids = kwargs.get("position_ids")
        if ids is not None:
            kwargs["position_ids"] = _cached(state, "pos_ids", ids, lambda: _gather_seq(ids, state.index))
        kwargs["attention_mask"] = _cached(state, "mask", mask, lambda: _prune_mask(state, mask, module))
    else:  # decode: the cache of layers >= K holds the kept prefix, then every decoded token
        q_len = hidden.shape[1]
        kwargs["attention_mask"] = _cached(state, "mask", mask, lambda: _decode_mask(state, mask, q_len, module))
    if args:
        args = (hidden, *args[1:])
    else:
        kwargs["hidden_states"] = hidden
    return args, kwargs


__all__ = ["FastVState", "check_cache", "install_fastv_hooks", "last_token_attention", "remove_fastv_hooks"]
