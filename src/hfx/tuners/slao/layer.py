"""SLAO layers and the two pieces of math of Algorithm 1 (arXiv:2512.23017): orthogonal init and time-aware merge.

Notation (paper, Section 3; PEFT shapes): the LoRA update is Delta W = s * B A with A = ``lora_A.weight`` of shape
``(r, in_features)``, B = ``lora_B.weight`` of shape ``(out_features, r)`` and s = ``lora_alpha / r``.
"""

from __future__ import annotations

import warnings

import torch
from peft.tuners._buffer_dict import BufferDict
from peft.tuners.lora.layer import Linear as LoraLinear
from peft.tuners.lora.layer import LoraLayer
from torch import nn


#: Per-adapter SLAO state kept on every adapted layer (saved with the adapter, keyed by adapter name). The names start
#: with LoRA's prefix ``"lora_"`` so that every loader that handles LoRA keys by prefix (transformers' ``load_adapter``
#: renames ``lora_*`` keys to ``lora_*.<adapter>``) also loads the SLAO state.
SLAO_BUFFER_NAMES = (
    "lora_slao_A_merge",
    "lora_slao_B_merge",
    "lora_slao_A_ft",
    "lora_slao_B_ft",
    "lora_slao_task_state",
)
#: The names hfx used before (``slao_A_merge``, ...): adapters saved with them still load (see ``SLAOModel``).
LEGACY_BUFFER_NAMES = {name.removeprefix("lora_"): name for name in SLAO_BUFFER_NAMES}


def sign_fixed_qr(matrix: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Reduced QR decomposition with the sign canonicalisation of SLAO (Algorithm 1, line "Q <- Q D").

    ``Q, R = qr(matrix)``; ``D = diag(sign(diag(R)))`` with sign(0) taken as +1; returns ``(Q D, D R)``, so that
    ``Q D @ D R == matrix`` and ``diag(D R) >= 0``. The decomposition is computed in float32 (float64 stays float64).

    Args:
        matrix (`torch.Tensor` of shape `(n, r)`, n >= r).

    Returns:
        `tuple(torch.Tensor, torch.Tensor)`: Q of shape `(n, r)` with orthonormal columns and R of shape `(r, r)`,
        upper triangular with a non-negative diagonal (float32 or float64).

    Raises:
        ValueError: if ``matrix`` is not 2-D or has more columns than rows (n < r).
    """
    if matrix.ndim != 2:
        raise ValueError(f"`matrix` must be 2-D, but has shape {tuple(matrix.shape)}")
    n, r = matrix.shape
    if n < r:
        raise ValueError(
            f"rank mismatch: `matrix` of shape {(n, r)} has more columns (rank r={r}) than rows (n={n}); a reduced QR "
            "cannot give r orthonormal columns. Use r <= in_features."
        )
    work = matrix if matrix.dtype == torch.float64 else matrix.float()
    q, rr = torch.linalg.qr(work, mode="reduced")
    signs = torch.sign(torch.diagonal(rr))
    signs = torch.where(signs == 0, torch.ones_like(signs), signs)
    return q * signs, signs[:, None] * rr


def orthogonal_init(lora_A: torch.Tensor, rank_deficiency_tol: float = 1e-6) -> torch.Tensor:
    """SLAO's orthogonal initialisation of A for task i >= 2 from the last fine-tuned A (Algorithm 1).

    ``(Q, R) = qr(A_ft^T)`` (reduced, sign-fixed, see :func:`sign_fixed_qr`); ``A_init = Q^T``. Then
    ``A_init A_init^T = I_r`` and every row of a full-rank ``A_ft`` lies in the row space of ``A_init``
    (``A_ft A_init^T A_init = A_ft``). The same input always gives bitwise-identical output.

    Args:
        lora_A (`torch.Tensor` of shape `(r, in_features)`): A_ft,i-1.
        rank_deficiency_tol (`float`, *optional*, defaults to `1e-6`): if ``min |diag R| < tol * max |diag R|`` a
            `UserWarning` says that A is rank-deficient (Q^T still has orthonormal rows, but no longer spans A's row
            space) [reconstruction].

    Returns:
        `torch.Tensor` of shape `(r, in_features)`, dtype and device of ``lora_A``.

    Raises:
        ValueError: if ``r > in_features`` (rank mismatch).
    """
    q, rr = sign_fixed_qr(lora_A.detach().transpose(0, 1))
    diag = torch.diagonal(rr).abs()
    if diag.numel() and float(diag.min()) <= rank_deficiency_tol * max(float(diag.max()), 1e-30):
        warnings.warn(
            "SLAO orthogonal init: the last fine-tuned `lora_A` is rank-deficient "
            f"(min |diag R| = {float(diag.min()):.3g}, max = {float(diag.max()):.3g}); the new A has orthonormal rows "
            "but does not span the old A's row space.",
            UserWarning,
            stacklevel=2,
        )
    return q.transpose(0, 1).to(dtype=lora_A.dtype).contiguous()


def time_aware_merge(merged: torch.Tensor, finetuned: torch.Tensor, coefficient: float) -> torch.Tensor:
    """SLAO's merge of a LoRA factor: ``merged + coefficient * (finetuned - merged)`` (Algorithm 1, lambda(i)).

    With ``coefficient = 1/sqrt(i)`` this is the paper's B_merge,i. A fixed point: if ``finetuned == merged`` the
    result equals both.

    Args:
        merged (`torch.Tensor`): B_merge,i-1 (e.g. shape `(out_features, r)`).
        finetuned (`torch.Tensor`): B_ft,i, same shape.
        coefficient (`float`): lambda(i) in (0, 1].

    Returns:
        `torch.Tensor`: the merged factor, shape and dtype of ``merged``.

    Raises:
        ValueError: if the shapes differ (e.g. a rank mismatch) or ``coefficient`` is outside (0, 1].
    """
    if merged.shape != finetuned.shape:
        raise ValueError(
            f"rank mismatch: `merged` has shape {tuple(merged.shape)} but `finetuned` has shape "
            f"{tuple(finetuned.shape)}; both LoRA factors must have the same rank."
        )
    if not (0.0 < float(coefficient) <= 1.0):
        raise ValueError(f"`coefficient` must be in (0, 1], but is {coefficient!r}")
    return merged + float(coefficient) * (finetuned.to(merged.dtype) - merged)


class SLAOLinear(LoraLinear):
    """A PEFT LoRA ``Linear`` layer (``lora_A`` / ``lora_B``, same forward, merge and unmerge) that also keeps the SLAO
    continual state per adapter: the merged pair (``lora_slao_A_merge`` `(r, in)`, ``lora_slao_B_merge`` `(out, r)`),
    the last fine-tuned pair (``lora_slao_A_ft``, ``lora_slao_B_ft``) and ``lora_slao_task_state`` =
    ``[tasks finished, in task (0/1)]``.

    The state is constant in size (two LoRA pairs whatever the number of tasks) and is saved with the adapter, so
    ``save_pretrained`` / ``from_pretrained`` resume a task sequence exactly. After :meth:`slao_finish_task` the live
    ``lora_A`` / ``lora_B`` hold the merged pair, so the layer computes ``W0 x + s * B_merge A_merge x``.
    """

    other_param_names = LoraLayer.other_param_names + SLAO_BUFFER_NAMES

    def update_layer(self, adapter_name: str, r: int, lora_alpha: int, config, **kwargs) -> None:
        super().update_layer(adapter_name, r, lora_alpha=lora_alpha, config=config, **kwargs)
        for name in SLAO_BUFFER_NAMES:
            if name not in self._modules:
                setattr(self, name, BufferDict(persistent=True))
        # on the base layer's device, never on "meta": with low_cpu_mem_usage the LoRA weights are created empty and
        # filled from the checkpoint, while PEFT's module placement would try to copy meta buffers
        dtype, device = self.lora_A[adapter_name].weight.dtype, self.get_base_layer().weight.device
        if device.type == "meta":
            device = torch.device("cpu")
        factory = {"device": device, "dtype": dtype}
        self.lora_slao_A_merge[adapter_name] = torch.zeros(r, self.in_features, **factory)
        self.lora_slao_A_ft[adapter_name] = torch.zeros(r, self.in_features, **factory)
        self.lora_slao_B_merge[adapter_name] = torch.zeros(self.out_features, r, **factory)
        self.lora_slao_B_ft[adapter_name] = torch.zeros(self.out_features, r, **factory)
        self.lora_slao_task_state[adapter_name] = torch.zeros(2, dtype=torch.long, device=device)

    def slao_check_rank(self, adapter_name: str, config) -> None:
        """Raise if ``config.init_strategy`` needs a QR of A (``"orthogonal"``, ``"last_merge"``) but r > in_features.

        Checked when a task starts (not when the adapter is created, so PEFT's generic operations that build larger
        ranks, e.g. ``add_weighted_adapter(combination_type="cat")``, still work).

        Raises:
            ValueError: rank mismatch, naming ``r`` and ``in_features``.
        """
        r = self.r[adapter_name]
        if config.init_strategy in ("orthogonal", "last_merge") and r > self.in_features:
            raise ValueError(
                f"rank mismatch: `r`={r} exceeds in_features={self.in_features} of the targeted layer; SLAO's "
                f"orthogonal init (init_strategy={config.init_strategy!r}) needs r orthonormal rows of length "
                "in_features, so use r <= in_features."
            )

    # ----------------------------------------------------------------------------------------------- state queries
    def slao_tasks_finished(self, adapter_name: str) -> int:
        """Number of tasks finished (merged) so far for ``adapter_name``."""
        return int(self.lora_slao_task_state[adapter_name][0])

    def slao_in_task(self, adapter_name: str) -> bool:
        """Whether a task was started (``start_task``) and not yet finished for ``adapter_name``."""
        return bool(self.lora_slao_task_state[adapter_name][1])

    def _check_unmerged(self, what: str) -> None:
        if self.merged:
            raise RuntimeError(f"`{what}` needs unmerged adapters; call `unmerge_adapter()` first.")

    # ------------------------------------------------------------------------------------------------ Algorithm 1
    @torch.no_grad()
    def slao_start_task(self, adapter_name: str, config) -> int:
        """Initialise ``lora_A`` / ``lora_B`` for the next task (Algorithm 1) and return its index i (1-based).

        Task 1 keeps the standard LoRA initialisation made when the adapter was created (A Kaiming-uniform, B = 0).
        Task i >= 2 follows ``config.init_strategy`` (default ``"orthogonal"``: A <- Q^T of A_ft,i-1, B <- B_ft,i-1).

        Raises:
            RuntimeError: if a task is already in progress, or the adapter is merged into the base weights.
        """
        self._check_unmerged("start_task")
        if self.slao_in_task(adapter_name):
            raise RuntimeError(
                f"start_task() called twice for adapter {adapter_name!r}: task "
                f"{self.slao_tasks_finished(adapter_name) + 1} is still in progress; call finish_task() first."
            )
        task_index = self.slao_tasks_finished(adapter_name) + 1
        if task_index >= 2:
            lora_A, lora_B = self.lora_A[adapter_name].weight, self.lora_B[adapter_name].weight
            strategy = config.init_strategy
            if strategy == "random":
                # the standard LoRA init (A Kaiming-uniform, B = 0), whatever task 1 used ("gaussian" is kept)
                self.reset_lora_parameters(
                    adapter_name, "gaussian" if config.init_lora_weights == "gaussian" else True
                )
            else:
                source = "ft" if strategy in ("orthogonal", "last_ft") else "merge"
                A_prev = getattr(self, f"lora_slao_A_{source}")[adapter_name]
                B_prev = getattr(self, f"lora_slao_B_{source}")[adapter_name]
                if strategy == "last_ft":
                    A_init = A_prev
                else:
                    A_init = orthogonal_init(A_prev, config.rank_deficiency_tol)
                lora_A.copy_(A_init)
                lora_B.copy_(B_prev)
        self.lora_slao_task_state[adapter_name][1] = 1
        return task_index

    @torch.no_grad()
    def slao_finish_task(self, adapter_name: str, config) -> float:
        """Store the fine-tuned pair, merge it (Algorithm 1) and load the merged pair into ``lora_A`` / ``lora_B``.

        ``A_ft <- lora_A``, ``B_ft <- lora_B``; task 1: ``(A_merge, B_merge) <- (A_ft, B_ft)``; task i >= 2:
        ``A_merge <- A_ft`` (or merged like B if ``config.merge_lora_A``) and
        ``B_merge <- B_merge + lambda(i) (B_ft - B_merge)``.

        Returns:
            `float`: lambda(i) used for the merge.

        Raises:
            RuntimeError: if no task is in progress (``finish_task`` before ``start_task``) or the adapter is merged.
        """
        self._check_unmerged("finish_task")
        if not self.slao_in_task(adapter_name):
            raise RuntimeError(
                f"finish_task() called before start_task() for adapter {adapter_name!r} "
                f"({self.slao_tasks_finished(adapter_name)} task(s) finished, none in progress)."
            )
        task_index = self.slao_tasks_finished(adapter_name) + 1
        lora_A, lora_B = self.lora_A[adapter_name].weight, self.lora_B[adapter_name].weight
        A_ft, B_ft = self.lora_slao_A_ft[adapter_name], self.lora_slao_B_ft[adapter_name]
        A_merge, B_merge = self.lora_slao_A_merge[adapter_name], self.lora_slao_B_merge[adapter_name]
        A_ft.copy_(lora_A)
        B_ft.copy_(lora_B)
        coefficient = config.merge_coefficient(task_index)
        if task_index == 1:
            A_merge.copy_(A_ft)
            B_merge.copy_(B_ft)
        else:
            B_merge.copy_(time_aware_merge(B_merge, B_ft, coefficient))
            A_merge.copy_(time_aware_merge(A_merge, A_ft, coefficient) if config.merge_lora_A else A_ft)
        lora_A.copy_(A_merge)
        lora_B.copy_(B_merge)
        self.lora_slao_task_state[adapter_name][0] = task_index
        self.lora_slao_task_state[adapter_name][1] = 0
        return coefficient

    def slao_merged_pair(self, adapter_name: str) -> tuple[torch.Tensor, torch.Tensor]:
        """``(A_merge, B_merge)`` of ``adapter_name``: shapes `(r, in_features)` and `(out_features, r)`."""
        return self.lora_slao_A_merge[adapter_name], self.lora_slao_B_merge[adapter_name]

    def __repr__(self) -> str:
        return "slao." + super().__repr__()


def is_slao_linear(module: nn.Module) -> bool:
    """Whether ``module`` is an SLAO-adapted layer."""
    return isinstance(module, SLAOLinear)
