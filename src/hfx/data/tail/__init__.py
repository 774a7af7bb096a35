"""TAIL-style data: Turing-machine-imitation chain-of-thought for length generalisation (arXiv 2507.13332).

Hua et al., "The Imitation Game: Turing Machine Imitator is Length Generalizable Reasoner" (ICLR 2026). Programs
execute 18 algorithms (8 classes) and emit traces under the three TAIL principles -- Linear Transition, Atomic State,
Memory Fetcher -- with a switch per principle for the paper's ablations, and the baseline formats (plain answer,
human-style CoT, Index-Hint, Reversed-Format). The paper's own task list and trace format are not public: the
grammar here is ours and called *TAIL-style*.

    >>> from hfx.data.tail import list_tasks, load_dataset, score_answer, reward_function
    >>> ds = load_dataset("add", split="train", size=1000, seed=0)            # datasets.Dataset
    >>> ood = load_dataset("add", split="ood_test", size=200, fetch=False)    # longer inputs, an ablation
    >>> score_answer("add", ds[0]["trace"], ds[0])
    1.0

Names resolve lazily: ``import hfx.data.tail`` loads no ``datasets``; :func:`load_dataset` imports it on first use.
"""

from ..._lazy import attach


_LAZY = {
    "list_tasks": ".registry",
    "get_task": ".registry",
    "register": ".registry",
    "Task": ".registry",
    "ALGORITHM_CLASSES": ".registry",
    "load_dataset": ".dataset",
    "create_dataset": ".dataset",
    "generate_example": ".dataset",
    "ProceduralDataset": ".dataset",
    "features": ".dataset",
    "SPLITS": ".dataset",
    "FORMATS": ".formats",
    "extract_answer": ".formats",
    "score_answer": ".verify",
    "verify_trace": ".verify",
    "reward_function": ".verify",
    "TraceReport": ".verify",
    "Tracer": ".trace",
    "OPS": ".trace",
    "parse_trace": ".trace",
    "render_tail": ".trace",
}
_SUBMODULES = {"registry", "dataset", "formats", "verify", "trace", "tasks", "recipe", "hub"}

__all__ = sorted([*_LAZY, *_SUBMODULES])  # noqa: PLE0605

__getattr__, __dir__ = attach(__name__, _LAZY, __all__, submodules=_SUBMODULES)
