"""CPU-sized meta-training task families for Celo2, built offline (spec: "Meta-training", shrunk to CPU scale).

The paper meta-trains on 4 small image-MLP tasks (8x8 CIFAR / MNIST / Fashion-MNIST / SVHN, one hidden layer of 32
units) [code: ``fast_velo``]. Here, with no image data sets offline and 2 CPU cores, the families are:

* ``digits_mlp``: ``sklearn.datasets.load_digits`` average-pooled to 4x4 (16 inputs), 10 classes, MLP 16-32-10, on
  the **meta-training half** of the images (:func:`digits_split`; the other half is kept for held-out evaluation).
* ``teacher_mlp``: Gaussian inputs (24-d) labelled by a random teacher network (4 classes), student MLP 24-32-32-4
  (it has a hidden matrix). A new teacher per task instance.
* ``char_mlp``: a character-level MLP language model (6 characters of context, 8-d embeddings, 48 hidden units,
  32 symbols) on the docstrings of Python standard-library modules (local text that every Python install has).

Each family builds a **population** of ``M`` independent inner models at once (parameters stacked on a leading axis)
so one batched forward/backward trains all of them. Parameter names ending in ``.bias`` go to AdamW during
meta-training, all matrices (embeddings included) to the learned rule -- the reference's meta-training routing
``--regex_1d=/b$`` [code].
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F


CHARS = "abcdefghijklmnopqrstuvwxyz .,0'("  # 32 symbols: lower-cased letters, digits -> 0, other punctuation -> .
VOCAB = len(CHARS)
STDLIB_TEXT_MODULES = (
    "argparse", "collections", "functools", "itertools", "json", "logging", "pathlib", "random", "statistics",
    "string", "textwrap", "typing", "dataclasses", "heapq", "bisect", "contextlib", "fractions", "decimal",
    "calendar", "csv", "difflib", "email", "enum", "gettext", "glob", "gzip", "hashlib", "inspect", "locale",
    "numbers", "operator", "pickle", "pprint", "queue", "sched", "shelve", "shutil", "socket", "subprocess",
    "tarfile", "tempfile", "threading", "timeit", "unittest", "urllib", "uuid", "warnings", "weakref", "zipfile",
)  # fmt: skip


def digits_split(seed: int = 0):
    """``load_digits`` split in two fixed halves: ``(meta_train_idx, held_out_idx)`` (899 / 898 images)."""
    from sklearn.datasets import load_digits

    n = len(load_digits().target)
    perm = torch.randperm(n, generator=torch.Generator().manual_seed(seed))
    return perm[: (n + 1) // 2], perm[(n + 1) // 2 :]


def stdlib_text() -> str:
    """Docstrings of :data:`STDLIB_TEXT_MODULES` and their public members, concatenated (deterministic)."""
    import importlib
    import inspect

    parts = []
    for name in STDLIB_TEXT_MODULES:
        try:
            module = importlib.import_module(name)
        except ImportError:  # pragma: no cover - stdlib
            continue
        parts.append(inspect.getdoc(module) or "")
        for attr in sorted(dir(module)):
            if attr.startswith("_"):
                continue
            doc = inspect.getdoc(getattr(module, attr, None))
            if doc and len(doc) > 80:
                parts.append(doc)
    return "\n\n".join(parts)


def encode_chars(text: str) -> torch.Tensor:
    """Text -> ids in ``[0, 32)`` over :data:`CHARS`: lower-cased letters, space (also for whitespace), ``.``, ``,``,
    ``0`` for every digit, ``'`` for quotes, ``(`` for brackets, ``.`` for any other symbol."""
    table = {c: i for i, c in enumerate(CHARS)}
    out = []
    for ch in text.lower():
        if ch in table:
            out.append(table[ch])
        elif ch.isspace():
            out.append(table[" "])
        elif ch.isdigit():
            out.append(table["0"])
        elif ch in '"`':
            out.append(table["'"])
        elif ch in ")[]{}<>":
            out.append(table["("])
        else:
            out.append(table["."])
    return torch.tensor(out, dtype=torch.long)


@dataclass
class Population:
    """``M`` inner problems of one family: stacked parameters, the global reparameterisation scale per member."""

    params: dict[str, torch.Tensor]  # name -> (M, *shape), leaf tensors (p' = theta / scale)
    scale: torch.Tensor  # (M,)
    extra: dict[str, torch.Tensor]  # per-member task data (e.g. the teacher network)


class TaskFamily:
    """A family of inner problems; subclasses define shapes, data and the loss."""

    name = "task"
    num_classes = 2
    batch_size = 64

    def shapes(self) -> dict[str, tuple[int, ...]]:
        raise NotImplementedError

    def sample_batch(self, gen: torch.Generator):
        raise NotImplementedError

    def logits(self, theta: dict[str, torch.Tensor], x: torch.Tensor, extra) -> torch.Tensor:
        raise NotImplementedError

    def targets(self, batch, extra) -> torch.Tensor:
        return batch[1]

    def init_params(self, M: int, gen: torch.Generator) -> dict[str, torch.Tensor]:
        """PyTorch's default ``nn.Linear`` init (U(-1/sqrt(fan_in), 1/sqrt(fan_in))), N(0, 1) embeddings."""
        out = {}
        for name, shape in self.shapes().items():
            if name.startswith("embed"):
                out[name] = torch.randn(M, *shape, generator=gen)
            else:
                fan_in = shape[0]
                bound = 1.0 / math.sqrt(fan_in)
                out[name] = (torch.rand(M, *shape, generator=gen) * 2 - 1) * bound
        return out

    def init_extra(self, M: int, gen: torch.Generator) -> dict[str, torch.Tensor]:
        return {}

    def loss(self, pop: Population, batch) -> torch.Tensor:
        """Cross-entropy per member ``(M,)`` of the model with parameters ``p' * scale``."""
        M = pop.scale.shape[0]
        theta = {k: v * pop.scale.view(M, *([1] * (v.ndim - 1))) for k, v in pop.params.items()}
        logits = self.logits(theta, batch[0], pop.extra)  # (M, B, K)
        y = self.targets(batch, pop.extra)  # (B,) or (M, B)
        y = y.expand(M, -1) if y.ndim == 1 else y
        return F.cross_entropy(logits.flatten(0, 1), y.flatten(), reduction="none").view(M, -1).mean(1)


def _mlp(theta, x, layers: int, act=torch.relu):
    h = x
    for i in range(layers):
        h = torch.matmul(h, theta[f"layer{i}.weight"]) + theta[f"layer{i}.bias"].unsqueeze(-2)
        if i < layers - 1:
            h = act(h)
    return h


class DigitsMLP(TaskFamily):
    """MLP 16-32-10 on 4x4-pooled digits, meta-training half (:func:`digits_split`)."""

    name, num_classes = "digits_mlp", 10

    def __init__(self, seed: int = 0):
        from sklearn.datasets import load_digits

        idx, _ = digits_split(seed)
        data = load_digits()
        X = torch.tensor(data.images, dtype=torch.float32)[idx] / 16.0
        self.X = X.view(-1, 4, 2, 4, 2).mean((2, 4)).reshape(-1, 16)
        self.X = (self.X - self.X.mean(0)) / (self.X.std(0) + 1e-6)
        self.y = torch.tensor(data.target, dtype=torch.long)[idx]

    def shapes(self):
        return {"layer0.weight": (16, 32), "layer0.bias": (32,), "layer1.weight": (32, 10), "layer1.bias": (10,)}

    def sample_batch(self, gen):
        i = torch.randint(0, len(self.y), (self.batch_size,), generator=gen)
        return self.X[i], self.y[i]

    def logits(self, theta, x, extra):
        return _mlp(theta, x, 2)


class TeacherMLP(TaskFamily):
    """Student MLP 24-32-32-4 on Gaussian inputs labelled by a per-instance random teacher (24-16-4, tanh)."""

    name, num_classes, dim = "teacher_mlp", 4, 24

    def shapes(self):
        return {
            "layer0.weight": (24, 32), "layer0.bias": (32,), "layer1.weight": (32, 32), "layer1.bias": (32,),
            "layer2.weight": (32, 4), "layer2.bias": (4,),
        }  # fmt: skip

    def init_extra(self, M, gen):
        return {
            "t0": torch.randn(M, self.dim, 16, generator=gen) / math.sqrt(self.dim),
            "t1": torch.randn(M, 16, self.num_classes, generator=gen) * 2.0,
        }

    def sample_batch(self, gen):
        return (torch.randn(self.batch_size, self.dim, generator=gen),)

    def targets(self, batch, extra):
        return (torch.tanh(torch.matmul(batch[0], extra["t0"])) @ extra["t1"]).argmax(-1)  # (M, B)

    def logits(self, theta, x, extra):
        return _mlp(theta, x, 3)


class CharMLP(TaskFamily):
    """Character MLP LM: 6 characters of context, 8-d embeddings, 48-48-32, on standard-library docstrings."""

    name, num_classes, context, dim = "char_mlp", VOCAB, 6, 8

    def __init__(self, text: str | None = None):
        self.ids = encode_chars(text if text is not None else stdlib_text())

    def shapes(self):
        return {
            "embed.weight": (VOCAB, self.dim), "layer0.weight": (self.context * self.dim, 48),
            "layer0.bias": (48,), "layer1.weight": (48, VOCAB), "layer1.bias": (VOCAB,),
        }  # fmt: skip

    def sample_batch(self, gen):
        start = torch.randint(0, len(self.ids) - self.context - 1, (self.batch_size,), generator=gen)
        window = self.ids[start.unsqueeze(1) + torch.arange(self.context + 1)]
        return window[:, :-1], window[:, -1]

    def logits(self, theta, x, extra):
        E = theta["embed.weight"]  # (M, V, D)
        h = E[:, x].flatten(2)  # (M, B, context * D)
        return _mlp(theta, h, 2, act=torch.tanh)


FAMILIES = {"digits_mlp": DigitsMLP, "teacher_mlp": TeacherMLP, "char_mlp": CharMLP}


__all__ = ["FAMILIES", "CharMLP", "DigitsMLP", "Population", "TaskFamily", "TeacherMLP", "digits_split", "stdlib_text"]
