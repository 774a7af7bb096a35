"""Configuration of the SLAO tuner (single-LoRA continual learning via continual merging).

SLAO: "Merge before Forget: A Single LoRA Continual Learning via Continual Merging", Qiao & Mahdavi,
arXiv:2512.23017 (ICLR 2026), Algorithm 1. https://huggingface.co/papers/2512.23017
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from peft import LoraConfig


class ExternalPeftType(str):
    """A ``peft_type`` for a tuner outside PEFT's closed ``PeftType`` enum that behaves like one of its members.

    PEFT 0.21.2 and transformers 5 read ``config.peft_type.value`` (``PeftModel`` gradient-checkpointing checks,
    ``PeftMixedModel``'s compatibility error, ``hotswap``, transformers' ``load_adapter`` / ``delete_adapter``), so
    a plain string fails there with ``'str' object has no attribute 'value'``. This ``str`` subclass adds
    ``.value`` and ``.name`` (both the string itself, like ``PeftType.LORA.value == "LORA"``), prints like a member
    (``str(...)`` and f-strings give ``"PeftType.SLAO"``, as ``str(PeftType.LORA)`` gives ``"PeftType.LORA"`` on
    Python 3.11) and is otherwise the string: it compares and hashes equal to ``"SLAO"`` (so PEFT's mapping dicts resolve it, and a config read back from
    JSON with the plain string finds the same entries), serialises to ``"SLAO"`` in ``adapter_config.json``, pickles
    and deep-copies. Nothing in PEFT is modified, so there is nothing to undo.
    """

    __slots__ = ()

    @property
    def value(self) -> str:
        """The string itself, as ``PeftType.<MEMBER>.value``."""
        return str.__str__(self)

    @property
    def name(self) -> str:
        """The string itself, as ``PeftType.<MEMBER>.name``."""
        return str.__str__(self)

    def __str__(self) -> str:
        """``"PeftType.SLAO"``, as ``str(PeftType.LORA) == "PeftType.LORA"`` (PEFT's ``get_model_status`` parses it)."""
        return f"PeftType.{str.__str__(self)}"

    def __format__(self, format_spec: str) -> str:
        return format(str(self), format_spec)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({str.__str__(self)!r})"

    def __reduce__(self):
        return (type(self), (str.__str__(self),))


#: The ``peft_type`` SLAO adapters carry (``"peft_type": "SLAO"`` in ``adapter_config.json``); not a member of PEFT's
#: closed enum, but it behaves like one (``.value``, ``.name``), see :class:`ExternalPeftType`.
SLAO_PEFT_TYPE = ExternalPeftType("SLAO")

INIT_STRATEGIES = ("orthogonal", "last_ft", "last_merge", "random")
#: ``init_lora_weights`` values SLAO accepts for task 1: every LoRA init that leaves W0 unchanged.
TASK1_INITS = (True, False, "gaussian", "orthogonal", "eva", "mica")
#: LoRA inits that rewrite W0 (PiSSA and ``pissa_niter_<n>``, OLoRA, CorDA, LoftQ, LoRA-GA): rejected.
W0_REWRITING_INITS = ("pissa", "olora", "corda", "loftq", "lora_ga")
MERGE_SCHEDULES = ("inv_sqrt", "inverse", "constant", "none")

#: The spec's baselines/ablations as switches on the same config: name -> field overrides.
BASELINES: dict[str, dict] = {
    # SLAO itself: orthogonal init from the last fine-tuned A, B inherited, lambda(i) = 1/sqrt(i) on B only.
    "slao": {},
    # Sequential LoRA: keep training the same LoRA pair, no merge (the model is the last fine-tuned pair).
    "seq_lora": {"init_strategy": "last_ft", "merge_schedule": "none"},
    # Merge without orthogonal initialisation: task i starts from (A_ft, B_ft) of task i-1 unchanged.
    "no_orth_init": {"init_strategy": "last_ft"},
    # Merge without time-aware scaling: a constant lambda (``merge_lambda``, 0.5 by default) for every task.
    "no_time_scaling": {"merge_schedule": "constant"},
    # Paper's initialisation ablations (Table "init"): random (A Kaiming, B = 0) and init from the last merge.
    "random_init": {"init_strategy": "random"},
    "last_merge_init": {"init_strategy": "last_merge"},
}


@dataclass
class SLAOConfig(LoraConfig):
    """Configuration for [`SLAOModel`]: a LoRA adapter trained on a sequence of tasks and merged after each one.

    All [`~peft.LoraConfig`] fields are accepted (``r``, ``lora_alpha``, ``target_modules``, ``lora_dropout``,
    ``use_rslora``, ...); the adapted layers are PEFT LoRA layers with ``lora_A`` / ``lora_B``. SLAO adds:

    Args:
        init_strategy (`str`, *optional*, defaults to `"orthogonal"`):
            How task i >= 2 is initialised (paper, Algorithm 1 and the initialisation ablation):
            ``"orthogonal"`` (SLAO: A <- Q^T from the sign-fixed reduced QR of A_ft,i-1^T, B <- B_ft,i-1),
            ``"last_ft"`` (A <- A_ft,i-1, B <- B_ft,i-1, no orthogonalisation), ``"last_merge"`` (A <- Q^T of
            A_merge, B <- B_merge) or ``"random"`` (standard LoRA init: A Kaiming-uniform, B = 0, i.e.
            ``init_lora_weights=True``; `"gaussian"` if that is task 1's init).
        merge_schedule (`str`, *optional*, defaults to `"inv_sqrt"`):
            lambda(i) in B_merge <- B_merge + lambda(i) (B_ft,i - B_merge), i counted from 1: ``"inv_sqrt"``
            (1/sqrt(i), the paper's choice, borrowed from OPCM), ``"inverse"`` (1/i, a running mean of the B_ft),
            ``"constant"`` (``merge_lambda`` for every i >= 2) or ``"none"`` (lambda = 1: no merge, the model is
            the last fine-tuned pair; with ``init_strategy="last_ft"`` this is sequential LoRA).
        merge_lambda (`float`, *optional*, defaults to `0.5`):
            The constant used by ``merge_schedule="constant"`` [reconstruction: the paper's "without scaling"
            ablation does not state its constant]. Must be in (0, 1].
        merge_lora_A (`bool`, *optional*, defaults to `False`):
            If `True`, A is merged with the same rule as B (the paper's FTBA-MBA ablation) instead of being replaced
            by A_ft,i (SLAO's asymmetric rule).
        rank_deficiency_tol (`float`, *optional*, defaults to `1e-6`):
            Relative tolerance on |diag(R)| below which A_ft,i-1 counts as rank-deficient at the orthogonal init; a
            warning is then issued, because Q^T no longer spans A's row space [reconstruction].

    ``init_lora_weights`` sets task 1's initialisation exactly as in LoRA: `True` (A Kaiming-uniform, B = 0: the model
    starts as the base model), `False` (A and B random, as PEFT's own generic tests use), `"gaussian"`,
    `"orthogonal"`, `"eva"` (then ``peft.initialize_lora_eva_weights``) or `"mica"`. The inits that rewrite W0
    (`"pissa"`, `"pissa_niter_<n>"`, `"olora"`, `"corda"`, `"loftq"`, `"lora_ga"`) are rejected: SLAO keeps W0
    untouched (``disable_adapter`` gives the base model; :func:`export_lora` writes a LoRA for the original base).

    Raises:
        ValueError: for an unknown ``init_strategy`` / ``merge_schedule``, ``merge_lambda`` outside (0, 1], an
            ``init_lora_weights`` that rewrites W0 or is unknown, or a LoRA option that changes the layer math
            (``use_dora``, ``lora_bias``, ``layer_replication``).

    Example:

    ```py
    >>> import hfx  # registers "SLAO" with PEFT
    >>> from peft import get_peft_model
    >>> from hfx.tuners.slao import SLAOConfig
    >>> model = get_peft_model(base_model, SLAOConfig(r=8, lora_alpha=32, target_modules=["q_proj", "v_proj"]))
    >>> model.start_task(); ...train on task 1...; model.finish_task()
    >>> model.start_task(); ...train on task 2...; model.finish_task()  # now W0 + s * B_merge A_merge
    ```
    """

    init_strategy: str = field(
        default="orthogonal",
        metadata={"help": "Initialisation of task i >= 2: 'orthogonal' (SLAO), 'last_ft', 'last_merge' or 'random'."},
    )
    merge_schedule: str = field(
        default="inv_sqrt",
        metadata={"help": "lambda(i) of the B merge: 'inv_sqrt' (1/sqrt(i), SLAO), 'inverse', 'constant' or 'none'."},
    )
    merge_lambda: float = field(
        default=0.5, metadata={"help": "Constant lambda for merge_schedule='constant' (in (0, 1])."}
    )
    merge_lora_A: bool = field(
        default=False, metadata={"help": "Merge A like B (FTBA-MBA ablation) instead of replacing it by A_ft."}
    )
    rank_deficiency_tol: float = field(
        default=1e-6, metadata={"help": "Relative |diag(R)| tolerance that flags a rank-deficient A_ft (warning)."}
    )

    def __post_init__(self):
        # before LoraConfig's own checks, which would otherwise ask for e.g. a `loftq_config` first
        init = self.init_lora_weights
        if isinstance(init, str) and init.lower().startswith(W0_REWRITING_INITS):
            raise ValueError(
                f"`init_lora_weights`={init!r} rewrites the base weights W0 (W0 <- W0 - s B0 A0), but SLAO keeps W0 "
                "untouched: `disable_adapter()` must give the base model and `export_lora()` writes a LoRA adapter "
                f"for the original base. Use one of {TASK1_INITS} (task 1's init; tasks >= 2 follow `init_strategy`)."
            )
        if not (init is True or init is False or (isinstance(init, str) and init in TASK1_INITS)):
            raise ValueError(f"`init_lora_weights` must be one of {TASK1_INITS}, but is {init!r}")
        super().__post_init__()
        self.peft_type = SLAO_PEFT_TYPE
        if not isinstance(self.r, int) or isinstance(self.r, bool) or self.r < 1:
            raise ValueError(f"`r` must be a positive integer, but is {self.r!r}")
        if self.init_strategy not in INIT_STRATEGIES:
            raise ValueError(f"`init_strategy` must be one of {INIT_STRATEGIES}, but is {self.init_strategy!r}")
        if self.merge_schedule not in MERGE_SCHEDULES:
            raise ValueError(f"`merge_schedule` must be one of {MERGE_SCHEDULES}, but is {self.merge_schedule!r}")
        if not (0.0 < float(self.merge_lambda) <= 1.0):
            raise ValueError(f"`merge_lambda` must be in (0, 1], but is {self.merge_lambda!r}")
        for name in ("use_dora", "lora_bias", "layer_replication"):
            if getattr(self, name, None):
                raise ValueError(f"`{name}` is not supported by SLAO (the merge rule assumes plain LoRA); unset it.")

    def merge_coefficient(self, task_index: int) -> float:
        """lambda(i) of the B merge for task ``task_index`` (1-based).

        Args:
            task_index (`int`): i >= 1. lambda(1) = 1 for every schedule (B_merge,1 = B_ft,1).

        Returns:
            `float`: 1/sqrt(i), 1/i, ``merge_lambda`` or 1.0 depending on ``merge_schedule``.

        Raises:
            ValueError: if ``task_index`` < 1.
        """
        if int(task_index) < 1:
            raise ValueError(f"`task_index` must be >= 1 (tasks are counted from 1), but is {task_index!r}")
        if task_index == 1 or self.merge_schedule == "none":
            return 1.0
        if self.merge_schedule == "inv_sqrt":
            return 1.0 / math.sqrt(task_index)
        if self.merge_schedule == "inverse":
            return 1.0 / task_index
        return float(self.merge_lambda)

    @classmethod
    def for_baseline(cls, name: str, **kwargs) -> SLAOConfig:
        """A config for one of the spec's baselines/ablations (:data:`BASELINES`), with LoRA fields from ``kwargs``.

        Raises:
            ValueError: for an unknown ``name``.
        """
        if name not in BASELINES:
            raise ValueError(f"`name` must be one of {sorted(BASELINES)}, but is {name!r}")
        return cls(**{**kwargs, **BASELINES[name]})
