"""Federated data for DevFT: prompt/completion examples and non-IID client splits with ``flwr-datasets`` partitioners.

Any :class:`datasets.Dataset` with ``prompt`` and ``completion`` string columns works (plus the column the partitioner
splits by). :func:`load_cl_benchmark` reads the local copy of the continual-learning text-classification benchmark
(AG News, Amazon, DBpedia, Yelp; ``../shared/data/cl_benchmark``): each row becomes ``"<text>\\n<Question>:"`` ->
``" <label word>"``, with a ``task`` column, so a Dirichlet split over ``task`` gives each client a different task mix.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path


TASK_QUESTIONS = {"agnews": "Topic", "amazon": "Sentiment", "dbpedia": "Category", "yelp": "Rating"}
"""The question word that ends each task's prompt (the label word follows it)."""


def load_cl_benchmark(
    root: str | Path,
    split: str = "train",
    tasks: list[str] | None = None,
    limit_per_task: int | None = None,
    skip_per_task: int = 0,
    max_chars: int = 300,
):
    """Read ``<task>.<split>.jsonl`` files of the CL benchmark into one ``datasets.Dataset``.

    Args:
        root (`str` or `Path`): the ``cl_benchmark`` folder.
        split (`str`, *optional*, defaults to `"train"`): `"train"` or `"test"`.
        tasks (`list[str]`, *optional*): defaults to every task of :data:`TASK_QUESTIONS` present in ``root``.
        limit_per_task (`int`, *optional*): rows kept per task (after ``skip_per_task``), in file order.
        skip_per_task (`int`, *optional*, defaults to 0): rows skipped first (a dev split = rows after the train rows).
        max_chars (`int`, *optional*, defaults to 300): the text is cut to this many characters (whole words).

    Returns:
        `datasets.Dataset` with columns ``prompt``, ``completion``, ``task``, ``label``.

    Raises:
        ValueError: for an unknown split or task, or a task without enough rows.
        FileNotFoundError: if a file is missing.
    """
    from datasets import Dataset

    if split not in ("train", "test"):
        raise ValueError(f"`split` must be 'train' or 'test', but is {split!r}")
    root = Path(root)
    if tasks is None:
        tasks = [t for t in TASK_QUESTIONS if (root / f"{t}.{split}.jsonl").is_file()]
        if not tasks:
            raise FileNotFoundError(f"no `<task>.{split}.jsonl` files of {sorted(TASK_QUESTIONS)} in {root}")
    rows = {"prompt": [], "completion": [], "task": [], "label": []}
    for task in tasks:
        if task not in TASK_QUESTIONS:
            raise ValueError(f"unknown task {task!r}; known: {sorted(TASK_QUESTIONS)}")
        path = root / f"{task}.{split}.jsonl"
        if not path.is_file():
            raise FileNotFoundError(f"{path} not found")
        lines = path.read_text(encoding="utf-8").splitlines()[skip_per_task:]
        if limit_per_task is not None:
            if len(lines) < limit_per_task:
                raise ValueError(f"{path} has {len(lines)} rows after skipping {skip_per_task}, need {limit_per_task}")
            lines = lines[:limit_per_task]
        for line in lines:
            row = json.loads(line)
            rows["prompt"].append(f"{_cut(row['text'].strip(), max_chars)}\n{TASK_QUESTIONS[task]}:")
            rows["completion"].append(f" {row['label']}")
            rows["task"].append(task)
            rows["label"].append(row["label"])
    return Dataset.from_dict(rows)


def _cut(text: str, max_chars: int) -> str:
    if len(text) <= max_chars:
        return text
    cut = text[:max_chars]
    return cut[: cut.rfind(" ")] if " " in cut else cut


def make_partitioner(num_partitions: int, partition_by: str = "task", alpha: float = 0.5, seed: int = 0, **kwargs):
    """A ``flwr_datasets`` :class:`~flwr_datasets.partitioner.DirichletPartitioner` (non-IID over ``partition_by``).

    ``min_partition_size`` defaults to 1 and ``self_balancing`` to True; other keyword arguments go to the partitioner.
    """
    from flwr_datasets.partitioner import DirichletPartitioner

    kwargs.setdefault("min_partition_size", 1)
    kwargs.setdefault("self_balancing", True)
    return DirichletPartitioner(
        num_partitions=num_partitions, partition_by=partition_by, alpha=alpha, seed=seed, **kwargs
    )


def client_partition(dataset, partitioner, partition_id: int):
    """Partition ``partition_id`` of ``dataset`` under (a fresh copy of) ``partitioner``.

    Every call with the same arguments returns the same rows, so each simulated client can split the data itself.

    Raises:
        ValueError: if ``partition_id`` is out of range or the partition is empty.
    """
    part = copy.deepcopy(partitioner)
    part.dataset = dataset
    if not 0 <= partition_id < part.num_partitions:
        raise ValueError(f"`partition_id` must be in [0, {part.num_partitions - 1}], but is {partition_id}")
    rows = part.load_partition(partition_id)
    if len(rows) == 0:
        raise ValueError(f"partition {partition_id} is empty; use fewer clients or a larger `min_partition_size`")
    return rows


def encode_examples(tokenizer, dataset, max_length: int) -> list[dict]:
    """Tokenise ``prompt`` / ``completion`` pairs: ``{"input_ids": list[int], "num_completion": int}``.

    The completion is tokenised on its own (``add_special_tokens=False``) and kept whole; the prompt (with the
    tokenizer's special tokens) is cut from its end so that the total is at most ``max_length``.

    Raises:
        ValueError: if a completion alone is longer than ``max_length - 1`` tokens, or a column is missing.
    """
    for column in ("prompt", "completion"):
        if column not in dataset.column_names:
            raise ValueError(f"the dataset needs a {column!r} column, has {dataset.column_names}")
    prompts = tokenizer(list(dataset["prompt"]))["input_ids"]
    completions = tokenizer(list(dataset["completion"]), add_special_tokens=False)["input_ids"]
    out = []
    for p, c in zip(prompts, completions):
        if not c or len(c) > max_length - 1:
            raise ValueError(f"a completion has {len(c)} tokens; it must have 1 to `max_length`-1 = {max_length - 1}")
        p = p[: max_length - len(c)]
        out.append({"input_ids": p + c, "num_completion": len(c)})
    return out
