"""SFT recipe for TAIL-style data on small models trained from scratch, and exact-match evaluation by length.

The paper fine-tunes Qwen2.5-7B (arXiv 2507.13332, Sec. 4); on a CPU we train a small Llama from scratch, as
length-generalisation studies do, with TRL's ``SFTTrainer`` on prompt-completion pairs (loss on the completion).

* :func:`build_tokenizer` -- a fixed, data-independent word-level tokenizer: the trace keywords and operation names
  are single tokens, every other non-space character (digits one by one) is a token, newlines are tokens, spaces
  are dropped. So ``a[12]`` is ``a [ 1 2 ]`` and numbers never meet unseen tokens at longer lengths.
* :func:`tiny_llama_config` -- a small ``LlamaConfig`` for that tokenizer.
* :func:`train_sft`, :func:`evaluate_exact_match`, :func:`wilson_interval`, :func:`plot_length_generalization`.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from .trace import OPS, SET_OP, render_input


KEYWORDS = ("TASK", "INPUT", "FETCH", "OP", "STATE", "ANSWER", "REVERSED")
SPECIAL_TOKENS = {"pad_token": "<pad>", "bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"}


def build_tokenizer():
    """The experiment tokenizer (a :class:`transformers.PreTrainedTokenizerFast`, ~140 tokens, right padding).

    Words of the trace grammar (``FETCH``, ``OP``, ``add``, ``split``, ...) are single tokens when they stand alone;
    every other printable ASCII character is one token; ``\\n`` is a token; spaces and tabs are dropped, so
    ``decode`` puts spaces between tokens (compare answers with :func:`~hfx.data.tail.formats.normalize_answer`).
    """
    from tokenizers import Regex, Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    words = [*KEYWORDS, *sorted({*OPS, SET_OP})]
    vocab: dict[str, int] = {}
    for token in [*SPECIAL_TOKENS.values(), "\n", *words, *(chr(c) for c in range(33, 127))]:
        vocab.setdefault(token, len(vocab))
    pattern = r"\b(?:" + "|".join(sorted(words, key=len, reverse=True)) + r")\b|\n|[^ \t]"
    backend = Tokenizer(models.WordLevel(vocab, unk_token=SPECIAL_TOKENS["unk_token"]))
    backend.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex("[ \t]+"), behavior="removed"),
            pre_tokenizers.Split(Regex(pattern), behavior="isolated"),
        ]
    )
    tok = PreTrainedTokenizerFast(tokenizer_object=backend, padding_side="right", **SPECIAL_TOKENS)
    return tok


def tiny_llama_config(
    tokenizer,
    hidden_size: int = 128,
    num_hidden_layers: int = 3,
    num_attention_heads: int = 4,
    intermediate_size: int = 384,
    max_position_embeddings: int = 4096,
    **overrides: Any,
):
    """A small ``LlamaConfig`` (about 0.6 M parameters at the defaults) for :func:`build_tokenizer`."""
    from transformers import LlamaConfig

    return LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=hidden_size,
        intermediate_size=intermediate_size,
        num_hidden_layers=num_hidden_layers,
        num_attention_heads=num_attention_heads,
        num_key_value_heads=num_attention_heads,
        max_position_embeddings=max_position_embeddings,
        tie_word_embeddings=True,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        **overrides,
    )


def tape_line(row: dict) -> str:
    """The ``TASK <name> INPUT ...`` line of a row's input (the Turing machine's initial tape), for any format."""
    from .registry import get_task

    task = get_task(row["task"])
    return render_input(task.name, task.memory(json.loads(row["metadata"]["input"])))


def to_prompt_completion(dataset, prompt: str = "question", separator: str = "\n"):
    """Map a TAIL-style dataset to TRL's prompt-completion form (loss on the completion only).

    Args:
        prompt (`str`, defaults to ``"question"``): ``"question"`` -- the bare question (no chat instruction, short)
            and ``completion = trace``; ``"tape"`` -- the input tape line ``TASK ... INPUT ...`` for every format (a
            Turing machine starts with its input on the tape), and the trace without that line as the completion,
            so all formats see the same prompt and differ only in what they generate.
        separator (`str`, defaults to a newline): appended to the prompt.
    """
    if prompt not in ("question", "tape"):
        raise ValueError(f"`prompt` must be 'question' or 'tape', got {prompt!r}")

    def convert(row):
        if prompt == "question":
            return {"prompt": row["question"] + separator, "completion": row["trace"]}
        lines = row["trace"].split("\n")
        body = "\n".join(lines[1:]) if lines[0].startswith("TASK ") else row["trace"]
        return {"prompt": tape_line(row) + separator, "completion": body}

    return dataset.map(
        convert, remove_columns=[c for c in dataset.column_names if c not in ("task", "answer", "metadata")]
    )


def train_sft(
    model,
    tokenizer,
    train_dataset,
    output_dir: str,
    *,
    max_steps: int = 300,
    learning_rate: float = 1e-3,
    batch_size: int = 32,
    max_length: int = 1024,
    seed: int = 0,
    warmup_ratio: float = 0.05,
    weight_decay: float = 0.0,
    **config_kwargs: Any,
):
    """SFT with TRL's ``SFTTrainer`` on a prompt-completion dataset (:func:`to_prompt_completion`); returns the
    trainer after ``train()``. Loss on completion tokens only; CPU-friendly defaults (fp32, no reporting)."""
    from trl import SFTConfig, SFTTrainer

    args = SFTConfig(
        output_dir=output_dir,
        max_steps=max_steps,
        learning_rate=learning_rate,
        per_device_train_batch_size=batch_size,
        lr_scheduler_type="cosine",
        warmup_steps=max(1, int(warmup_ratio * max_steps)),
        weight_decay=weight_decay,
        max_length=max_length,
        completion_only_loss=True,
        logging_steps=max(1, max_steps // 10),
        save_strategy="no",
        report_to="none",
        seed=seed,
        bf16=False,
        use_cpu=True,
        dataloader_num_workers=0,
        disable_tqdm=True,
        **config_kwargs,
    )
    trainer = SFTTrainer(model=model, args=args, train_dataset=train_dataset, processing_class=tokenizer)
    trainer.train()
    return trainer


def generate(model, tokenizer, prompts: Sequence[str], max_new_tokens: int, batch_size: int = 64) -> list[str]:
    """Greedy completions (KV cache, left-padded batches), decoded without special tokens."""
    import torch

    side = tokenizer.padding_side
    tokenizer.padding_side = "left"
    model.eval()
    outputs: list[str] = []
    try:
        for start in range(0, len(prompts), batch_size):
            enc = tokenizer(list(prompts[start : start + batch_size]), return_tensors="pt", padding=True)
            enc = {k: v.to(model.device) for k, v in enc.items() if k in ("input_ids", "attention_mask")}
            with torch.no_grad():
                out = model.generate(
                    **enc,
                    max_new_tokens=max_new_tokens,
                    do_sample=False,
                    pad_token_id=tokenizer.pad_token_id,
                    eos_token_id=tokenizer.eos_token_id,
                )
            outputs += tokenizer.batch_decode(out[:, enc["input_ids"].shape[1] :], skip_special_tokens=True)
    finally:
        tokenizer.padding_side = side
    return outputs


def evaluate_exact_match(model, tokenizer, dataset, *, batch_size: int = 64, max_new_tokens: int | None = None):
    """Exact-match accuracy of greedy completions on a prompt-completion TAIL-style dataset, by input length.

    Args:
        dataset: rows with ``prompt``, ``completion``, ``task``, ``answer``, ``metadata`` (:func:`to_prompt_completion`).
        max_new_tokens (`int`, *optional*): defaults to the longest gold completion (tokens) + 16.

    Returns:
        `dict`: ``{"by_length": {length: {"correct": k, "n": n, "accuracy": k/n, "ci95": [lo, hi]}}, "correct":
        [bool per row], "trace_exact": [bool per row], "completions": [str]}``; ``trace_exact`` compares the whole
        completion with the gold one, whitespace removed.
    """
    from .verify import score_answer

    if max_new_tokens is None:
        longest = max(len(tokenizer(c)["input_ids"]) for c in dataset["completion"])
        max_new_tokens = longest + 16
    completions = generate(model, tokenizer, dataset["prompt"], max_new_tokens, batch_size)
    correct, exact = [], []
    counts: dict[int, list[int]] = defaultdict(lambda: [0, 0])
    for row, text in zip(dataset, completions):
        ok = score_answer(row["task"], text, {"answer": row["answer"]}) == 1.0
        correct.append(ok)
        exact.append("".join(text.split()) == "".join(row["completion"].split()))
        c = counts[row["metadata"]["length"]]
        c[0] += int(ok)
        c[1] += 1
    by_length = {
        length: {"correct": k, "n": n, "accuracy": k / n, "ci95": list(wilson_interval(k, n))}
        for length, (k, n) in sorted(counts.items())
    }
    return {"by_length": by_length, "correct": correct, "trace_exact": exact, "completions": completions}


def wilson_interval(k: int, n: int, z: float = 1.959964) -> tuple[float, float]:
    """Wilson score interval for a binomial proportion ``k / n`` (95 % by default).

    Raises:
        ValueError: if ``n < 1`` or ``k`` is outside ``[0, n]``.
    """
    if n < 1 or not 0 <= k <= n:
        raise ValueError(f"need 0 <= k <= n and n >= 1, got k={k}, n={n}")
    p = k / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def plot_length_generalization(curves: dict, train_lengths: Sequence[int], path: str, title: str | None = None):
    """Accuracy vs input length, one line per arm with its 95 % interval band, train lengths shaded.

    Args:
        curves (`dict`): ``{arm: {length: {"accuracy": a, "ci95": [lo, hi]}}}`` (or ``{task: {arm: ...}}`` for one
            panel per task).
        train_lengths (`Sequence[int]`): the lengths seen in training (shaded).
        path (`str`): output image path.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = curves if all(isinstance(v, dict) and v and _is_arm_map(v) for v in curves.values()) else {"": curves}
    arm_names = list(dict.fromkeys(arm for arms in panels.values() for arm in arms))
    arm_names.sort(key=lambda arm: arm != "tail")  # TAIL first (and blue) in every figure
    colors = {arm: plt.get_cmap("tab10")(i % 10) for i, arm in enumerate(arm_names)}  # one colour per arm everywhere
    fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels), 3.7), squeeze=False, sharey=True)
    for ax, (name, arms) in zip(axes[0], panels.items()):
        ax.axvspan(min(train_lengths) - 0.5, max(train_lengths) + 0.5, color="0.9", label="train lengths")
        for arm, by_len in arms.items():
            xs = sorted(int(x) for x in by_len)
            ys = [by_len[_key(by_len, x)]["accuracy"] for x in xs]
            lo = [by_len[_key(by_len, x)]["ci95"][0] for x in xs]
            hi = [by_len[_key(by_len, x)]["ci95"][1] for x in xs]
            lw = 2.2 if arm == "tail" else 1.2
            ax.plot(xs, ys, marker="o", ms=3, lw=lw, color=colors[arm], label=arm)
            ax.fill_between(xs, lo, hi, color=colors[arm], alpha=0.10, lw=0)
        ax.set_title(name)
        ax.set_xlabel("input length")
        ax.set_ylim(-0.02, 1.02)
    axes[0][0].set_ylabel("exact match")
    handles = {h.get_label(): h for ax in axes[0] for h in ax.get_legend_handles_labels()[0]}
    fig.legend(handles.values(), handles.keys(), fontsize=7, loc="lower center", ncol=min(len(handles), 9))
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout(rect=(0, 0.07, 1, 1))
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _key(by_len: dict, x: int):
    return x if x in by_len else str(x)


def _is_arm_map(value: dict) -> bool:
    inner = next(iter(value.values()))
    return isinstance(inner, dict) and inner and isinstance(next(iter(inner.values())), dict)
