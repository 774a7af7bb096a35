"""A small two-hop question set answerable from a local corpus: DBpedia entity pages (shared data), seeded.

**Construction.** The corpus is the 1,500 DBpedia-14 entity pages (``Title: ...\\nText: ...``) of
``../shared/data/cl_benchmark/dbpedia.{train,test}.jsonl`` (the O-LoRA CL benchmark copy), one page per title. A
question is made from a page whose first sentence states a year and describes the entity without naming it:

* people (Athlete, Artist, Office Holder): ``NAME (born ... YEAR) is a DESCRIPTION.`` ->
  "In which year was the DESCRIPTION born?" (answer YEAR);
* works (Album, Film, Written Work): ``NAME is a YEAR DESCRIPTION.`` -> "In which year was the DESCRIPTION
  released?" (answer YEAR).

So answering takes two hops -- identify the entity from the description (search), then read the year on its page
(snippet or browse) -- and the answer is never in the question. Descriptions that still contain the page title, that
are shorter than 5 words, or that match more than one page are dropped. The questions are shuffled with ``seed``
and split into ``dev`` (hyper-parameters) and ``test`` (reported). Grading: the first four-digit year in the
prediction must equal the answer (:func:`grade`).

These are short hops with strong retrieval by design: the embedded 135M model cannot do more (see the docs page).
"""

from __future__ import annotations

import json
import random
import re
from dataclasses import asdict, dataclass
from pathlib import Path


_YEAR = r"(1[5-9]\d\d|20[0-2]\d)"
_PERSON = re.compile(
    r"^(?P<name>[^()]+?)\s*\((?:[^()]*?)\b"
    + _YEAR
    + r"\b[^()]*\)\s+(?:is|was)\s+(?:an?|the)\s+(?P<desc>[^.]+?)\.(?:\s|$)"
)
_WORK = re.compile(r"^(?P<name>.+?)\s+(?:is|was)\s+(?:an?|the)\s+" + _YEAR + r"\s+(?P<desc>[^.]+?)\.(?:\s|$)")
PERSON_LABELS = ("Athlete", "Artist", "Office Holder")
WORK_LABELS = ("Album", "Film", "Written Work")


@dataclass
class Question:
    """``id``, ``question``, ``answer`` (a year), the ``title`` of the page that holds it, the DBpedia ``label``."""

    id: str
    question: str
    answer: str
    title: str
    label: str

    def to_dict(self) -> dict:
        return asdict(self)


def default_dbpedia_dir() -> Path:
    """``../shared/data/cl_benchmark`` seen from the working directory or the repository."""
    here = Path(__file__).resolve()
    for base in (Path.cwd(), *here.parents):
        candidate = base.parent / "shared" / "data" / "cl_benchmark"
        if (candidate / "dbpedia.train.jsonl").is_file():
            return candidate
    return Path("../shared/data/cl_benchmark")


def load_dbpedia_pages(data_dir=None) -> list[dict]:
    """The DBpedia pages as ``{"title", "text", "label"}`` dicts (first occurrence of each title kept).

    Raises:
        FileNotFoundError: when the shared data folder is absent (a user's machine: build a corpus from your pages).
    """
    data_dir = Path(data_dir) if data_dir is not None else default_dbpedia_dir()
    pages, seen = [], set()
    for split in ("train", "test"):
        path = data_dir / f"dbpedia.{split}.jsonl"
        if not path.is_file():
            raise FileNotFoundError(f"{path} not found: the DBpedia pages live in ../shared/data/cl_benchmark")
        for line in path.read_text(encoding="utf-8").splitlines():
            row = json.loads(line)
            head, _, text = row["text"].partition("\nText:")
            title = head.replace("Title:", "", 1).strip()
            if title and title not in seen:
                seen.add(title)
                pages.append({"title": title, "text": " ".join(text.split()), "label": row["label"]})
    return pages


def build_questions(pages: list[dict], seed: int = 0, dev_size: int = 20) -> dict[str, list[Question]]:
    """The two-hop questions of ``pages`` (see the module docstring), shuffled with ``seed``: ``{"dev", "test"}``."""
    candidates = []
    for page in pages:
        made = _question_for(page)
        if made is not None:
            candidates.append(made)
    # a description must identify one page: drop descriptions shared by several pages
    counts = {}
    for q in candidates:
        counts[q.question] = counts.get(q.question, 0) + 1
    questions = [q for q in candidates if counts[q.question] == 1]
    random.Random(seed).shuffle(questions)
    for i, q in enumerate(questions):
        q.id = f"dbp-{i:04d}"
    return {"dev": questions[:dev_size], "test": questions[dev_size:]}


def _question_for(page: dict) -> Question | None:
    text, title, label = page["text"], page["title"], page["label"]
    if label in PERSON_LABELS:
        m = _PERSON.match(text)
        template = "In which year was the {desc} born?"
    elif label in WORK_LABELS:
        m = _WORK.match(text)
        template = (
            "In which year was the {desc} released?"
            if label != "Written Work"
            else ("In which year was the {desc} published?")
        )
    else:
        return None
    if m is None:
        return None
    desc = m.group("desc").strip().rstrip(",;")
    year = m.group(2)
    if len(desc.split()) < 5 or title.lower() in desc.lower() or re.search(_YEAR, desc):
        return None
    return Question(id="", question=template.format(desc=desc), answer=year, title=title, label=label)


def grade(prediction, answer: str) -> bool:
    """Whether the first four-digit year in ``prediction`` equals ``answer``."""
    m = re.search(r"\b(\d{4})\b", "" if prediction is None else str(prediction))
    return m is not None and m.group(1) == str(answer)
