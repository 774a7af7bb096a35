"""Tiny random models built offline from configs, for tests, examples and benchmarks.

Nothing here downloads anything: tokenizers are trained locally with the ``tokenizers`` library on a small
built-in corpus, and models are randomly initialised from small configs under a fixed seed, so every factory is
deterministic. Every test in hfx builds its models with these factories.

Factories:

* :func:`tiny_tokenizer` -- byte-level BPE (~400 tokens) with ``<s>``, ``</s>``, ``<pad>``, ``<image>``,
  ``<think>``, ``</think>`` special tokens, left padding and a minimal chat template.
* :func:`tiny_llama` -- ``LlamaForCausalLM`` (2 layers, hidden 32) + tokenizer.
* :func:`tiny_reward_model` -- ``LlamaForSequenceClassification`` (1 label) + tokenizer.
* :func:`tiny_llava` -- ``LlavaForConditionalGeneration`` (tiny CLIP tower, 7x7 patches + CLS) + ``LlavaProcessor``.
* :func:`tiny_llava_next` -- ``LlavaNextForConditionalGeneration`` (AnyRes, 64 px tiles of 4x4 patches) + processor.
* :func:`tiny_clip` -- ``CLIPModel`` (text + vision, projection 16) + ``CLIPProcessor``.
"""

from __future__ import annotations

import copy
from functools import lru_cache

import torch


_CORPUS = [
    "a photo of a cat on a mat",
    "describe the image in detail",
    "what is two plus two ? the answer is four",
    "Question: Tom has 3 apples and buys 5 more. How many apples does he have? Answer: 8",
    "Let me think step by step. First add the numbers, then check the result.",
    "The final answer is 42. Final answer: 7",
    "hello world, how are you today? I am fine, thank you.",
    "0 1 2 3 4 5 6 7 8 9 10 11 12 + - * / = #### ",
    "user assistant system: You are a helpful assistant.",
    "The quick brown fox jumps over the lazy dog.",
    "Wait, hmm, alternatively we could try another approach.",
]

SPECIAL_TOKENS = ["<unk>", "<s>", "</s>", "<pad>", "<image>", "<video>", "<think>", "</think>"]

_CHAT_TEMPLATE = (
    "{% for message in messages %}{{ '<s>' + message['role'] + ': ' + message['content'] + '</s>' }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<s>assistant: ' }}{% endif %}"
)


@lru_cache(maxsize=4)
def _trained_bpe(vocab_size: int):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    bpe = Tokenizer(models.BPE(unk_token="<unk>"))
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        special_tokens=SPECIAL_TOKENS,
        show_progress=False,
    )
    bpe.train_from_iterator(_CORPUS * 20, trainer)
    bpe.post_processor = processors.TemplateProcessing(
        single="<s> $A", pair="<s> $A <s> $B", special_tokens=[("<s>", bpe.token_to_id("<s>"))]
    )
    return bpe


def tiny_tokenizer(vocab_size: int = 400, padding_side: str = "left"):
    """A byte-level BPE tokenizer trained locally (deterministic; no download).

    Args:
        vocab_size (`int`, *optional*, defaults to 400): target vocabulary size (special tokens included).
        padding_side (`str`, *optional*, defaults to `"left"`): `"left"` for generation, `"right"` for training.

    Returns:
        `transformers.PreTrainedTokenizerFast` with ``bos="<s>"``, ``eos="</s>"``, ``pad="<pad>"`` and a chat template.
    """
    from transformers import PreTrainedTokenizerFast

    tok = PreTrainedTokenizerFast(
        tokenizer_object=copy.deepcopy(_trained_bpe(vocab_size)),
        bos_token="<s>",
        eos_token="</s>",
        unk_token="<unk>",
        pad_token="<pad>",
        padding_side=padding_side,
        additional_special_tokens=["<image>", "<video>", "<think>", "</think>"],
    )
    tok.chat_template = _CHAT_TEMPLATE
    return tok


# width/depth shared by every tiny tower (text and vision)
_TINY_DIMS = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4)


def _clip_vision_config(image_size: int, patch_size: int, projection_dim: int = 32):
    from transformers import CLIPVisionConfig

    return CLIPVisionConfig(**_TINY_DIMS, image_size=image_size, patch_size=patch_size, projection_dim=projection_dim)


def _set_generation_tokens(model, tokenizer) -> None:
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.bos_token_id = tokenizer.bos_token_id


def _llama_config(tokenizer, **overrides):
    from transformers import LlamaConfig

    kwargs = dict(
        vocab_size=len(tokenizer),
        **_TINY_DIMS,
        num_key_value_heads=2,
        max_position_embeddings=512,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        tie_word_embeddings=False,
    )
    kwargs.update(overrides)
    return LlamaConfig(**kwargs)


def tiny_llama(seed: int = 0, tokenizer=None, dtype: torch.dtype = torch.float32, **config_overrides):
    """A tiny random ``LlamaForCausalLM`` (2 layers, hidden 32, 4 heads / 2 KV heads) and its tokenizer.

    Args:
        seed (`int`, *optional*, defaults to 0): ``torch.manual_seed`` used for the weights.
        tokenizer (*optional*): reuse a tokenizer; defaults to :func:`tiny_tokenizer`.
        dtype (`torch.dtype`, *optional*, defaults to `torch.float32`).
        **config_overrides: fields of ``LlamaConfig`` (e.g. ``num_hidden_layers=4``).

    Returns:
        `(model, tokenizer)`; the model is in eval mode, ``generation_config.pad_token_id`` is set.
    """
    from transformers import LlamaForCausalLM

    tokenizer = tokenizer if tokenizer is not None else tiny_tokenizer()
    config = _llama_config(tokenizer, **config_overrides)
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config).to(dtype).eval()
    _set_generation_tokens(model, tokenizer)
    return model, tokenizer


def tiny_reward_model(seed: int = 0, tokenizer=None, num_labels: int = 1, **config_overrides):
    """A tiny random ``LlamaForSequenceClassification`` reward model (``num_labels`` scores) and its tokenizer."""
    from transformers import LlamaForSequenceClassification

    tokenizer = tokenizer if tokenizer is not None else tiny_tokenizer()
    config = _llama_config(tokenizer, num_labels=num_labels, **config_overrides)
    torch.manual_seed(seed)
    model = LlamaForSequenceClassification(config).eval()
    return model, tokenizer


def _clip_image_processor(size: int):
    from transformers import CLIPImageProcessorPil as CLIPImageProcessor

    # Without torchvision, transformers falls back to the PIL implementation (same outputs).
    return CLIPImageProcessor(size={"shortest_edge": size}, crop_size={"height": size, "width": size})


def tiny_llava(seed: int = 0, tokenizer=None, image_size: int = 224, patch_size: int = 32, **text_overrides):
    """A tiny random LLaVA-1.5-shaped model and a matching ``LlavaProcessor``.

    The vision tower is a 2-layer CLIP (hidden 32) on ``image_size`` px with ``patch_size`` px patches: 224/32 gives
    7x7 = 49 patch tokens + CLS, ``vision_feature_select_strategy="default"`` (CLS dropped), ``vision_feature_layer=-2``.

    Returns:
        `(model, processor)`; ``processor.num_additional_image_tokens == 1`` so placeholders match features.
    """
    from transformers import LlavaConfig, LlavaForConditionalGeneration, LlavaProcessor

    tokenizer = tokenizer if tokenizer is not None else tiny_tokenizer()
    n_patches = (image_size // patch_size) ** 2
    vision = _clip_vision_config(image_size, patch_size)
    text = _llama_config(tokenizer, **text_overrides)
    config = LlavaConfig(
        vision_config=vision,
        text_config=text,
        image_token_index=tokenizer.convert_tokens_to_ids("<image>"),
        vision_feature_select_strategy="default",
        vision_feature_layer=-2,
        image_seq_length=n_patches,
    )
    torch.manual_seed(seed)
    model = LlavaForConditionalGeneration(config).eval()
    _set_generation_tokens(model, tokenizer)
    processor = LlavaProcessor(
        image_processor=_clip_image_processor(image_size),
        tokenizer=tokenizer,
        patch_size=patch_size,
        vision_feature_select_strategy="default",
        num_additional_image_tokens=1,
    )
    return model, processor


def tiny_llava_next(seed: int = 0, tokenizer=None, **text_overrides):
    """A tiny random LLaVA-NeXT (AnyRes) model and a matching ``LlavaNextProcessor``.

    Tiles are 64x64 px with 16 px patches (4x4 = 16 patch tokens + CLS per tile), grid pinpoints
    ``[[64, 128], [128, 64], [128, 128]]``; a 60x120 image gives ``pixel_values`` (1, 3, 3, 64, 64) and 52 tokens.

    Returns:
        `(model, processor)`.
    """
    from transformers import (
        LlavaNextConfig,
        LlavaNextForConditionalGeneration,
        LlavaNextProcessor,
    )
    from transformers import (
        LlavaNextImageProcessorPil as LlavaNextImageProcessor,  # the PIL backend needs no torchvision
    )

    tokenizer = tokenizer if tokenizer is not None else tiny_tokenizer()
    pinpoints = [[64, 128], [128, 64], [128, 128]]
    vision = _clip_vision_config(image_size=64, patch_size=16)
    text = _llama_config(tokenizer, **text_overrides)
    config = LlavaNextConfig(
        vision_config=vision,
        text_config=text,
        image_token_index=tokenizer.convert_tokens_to_ids("<image>"),
        vision_feature_select_strategy="default",
        vision_feature_layer=-2,
        image_grid_pinpoints=pinpoints,
        image_seq_length=16,
    )
    torch.manual_seed(seed)
    model = LlavaNextForConditionalGeneration(config).eval()
    _set_generation_tokens(model, tokenizer)
    image_processor = LlavaNextImageProcessor(
        size={"shortest_edge": 64}, crop_size={"height": 64, "width": 64}, image_grid_pinpoints=pinpoints
    )
    processor = LlavaNextProcessor(
        image_processor=image_processor,
        tokenizer=tokenizer,
        patch_size=16,
        vision_feature_select_strategy="default",
        num_additional_image_tokens=1,
    )
    return model, processor


def tiny_clip(seed: int = 0, tokenizer=None, image_size: int = 32, patch_size: int = 8, projection_dim: int = 16):
    """A tiny random ``CLIPModel`` (2-layer text and vision towers, hidden 32) and a ``CLIPProcessor``.

    Args:
        image_size (`int`, *optional*, defaults to 32): vision input resolution in pixels.
        patch_size (`int`, *optional*, defaults to 8).
        projection_dim (`int`, *optional*, defaults to 16): the shared embedding dimension.

    Returns:
        `(model, processor)`.
    """
    from transformers import CLIPConfig, CLIPModel, CLIPProcessor, CLIPTextConfig

    tokenizer = tokenizer if tokenizer is not None else tiny_tokenizer(padding_side="right")
    text = CLIPTextConfig(
        vocab_size=len(tokenizer),
        **_TINY_DIMS,
        max_position_embeddings=64,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        projection_dim=projection_dim,
    )
    vision = _clip_vision_config(image_size, patch_size, projection_dim)
    config = CLIPConfig(text_config=text.to_dict(), vision_config=vision.to_dict(), projection_dim=projection_dim)
    torch.manual_seed(seed)
    model = CLIPModel(config).eval()
    processor = CLIPProcessor(image_processor=_clip_image_processor(image_size), tokenizer=tokenizer)
    return model, processor


__all__ = [
    "SPECIAL_TOKENS",
    "tiny_clip",
    "tiny_llama",
    "tiny_llava",
    "tiny_llava_next",
    "tiny_reward_model",
    "tiny_tokenizer",
]
