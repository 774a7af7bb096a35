"""Long-term memory data: LoCoMo / LongMemEval JSON loaders (local files only) and a long-memory benchmark built from
the real dialogues in ``../shared/data`` (HH-RLHF, MT-Bench) with planted facts.

Every loader returns a ``datasets.Dataset`` with one row per (conversation, question set) in one schema:

* ``conversation_id`` (`str`), ``history_length`` (`int`, number of sessions);
* ``session_ids`` (`list[str]`), ``session_dates`` (`list[str]`, ``""`` when unknown);
* ``sessions`` (`list[list[{"role", "content"}]]`): chat messages per session;
* ``qa`` (`list[{"question", "answers", "evidence_session_ids", "question_type"}]`): ``answers`` is a list of gold
  strings that must all appear in a correct reply.
"""

from __future__ import annotations

import json
import random
import re
from pathlib import Path
from typing import Any


# ----------------------------------------------------------------------------------------------------- loaders
def _dataset(rows: list[dict[str, Any]]):
    from datasets import Dataset

    return Dataset.from_list(rows)


def _read_json(path) -> Any:
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no such file: {path}")
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".jsonl":
        return [json.loads(line) for line in text.splitlines() if line.strip()]
    return json.loads(text)


def load_longmemeval(path: str | Path):
    """LongMemEval (``longmemeval_s.json`` / ``_m`` / ``_oracle``) from a local file.

    Each entry's haystack becomes the sessions (``role`` / ``content`` messages, ``has_answer`` dropped);
    ``answer_session_ids`` become the evidence (with the ``answer_`` prefix the MemGAS code also strips).
    Abstention questions (``_abs`` ids) keep an empty evidence list.

    Raises:
        FileNotFoundError: missing file; ValueError: an entry without the LongMemEval keys.
    """
    rows = []
    for entry in _read_json(path):
        missing = {"question_id", "question", "answer", "haystack_sessions", "haystack_session_ids"} - set(entry)
        if missing:
            raise ValueError(f"not a LongMemEval entry: missing {sorted(missing)}")
        ids = [str(s).replace("answer_", "") for s in entry["haystack_session_ids"]]
        sessions = [[{"role": m["role"], "content": m["content"]} for m in s] for s in entry["haystack_sessions"]]
        evidence = [str(s).replace("answer_", "") for s in entry.get("answer_session_ids", [])]
        rows.append(
            {
                "conversation_id": str(entry["question_id"]),
                "history_length": len(sessions),
                "session_ids": ids,
                "session_dates": [str(d) for d in entry.get("haystack_dates", [""] * len(ids))],
                "sessions": sessions,
                "qa": [
                    {
                        "question": entry["question"],
                        "answers": [str(entry["answer"])],
                        "evidence_session_ids": evidence,
                        "question_type": entry.get("question_type", ""),
                    }
                ],
            }
        )
    return _dataset(rows)


def load_locomo(path: str | Path):
    """LoCoMo (``locomo10.json``) from a local file.

    Speaker A's utterances become ``user`` messages and speaker B's ``assistant`` ones, with the speaker's name
    kept in the text (``"Caroline: ..."``; an image caption is appended as the code does). Evidence ``"D3:7"``
    maps to session ``session_3``; adversarial questions use ``adversarial_answer``.

    Raises:
        FileNotFoundError: missing file; ValueError: an entry without ``conversation`` / ``qa``.
    """
    rows = []
    for entry in _read_json(path):
        if "conversation" not in entry or "qa" not in entry:
            raise ValueError("not a LoCoMo entry: needs 'conversation' and 'qa'")
        conv = entry["conversation"]
        speaker_a = conv.get("speaker_a")
        keys = sorted((k for k in conv if re.fullmatch(r"session_\d+", k)), key=lambda k: int(k.split("_")[1]))
        sessions, dates = [], []
        for key in keys:
            messages = []
            for d in conv[key]:
                text = f"{d['speaker']}: {d['text']}"
                if d.get("blip_caption"):
                    text += f"\nThe image caption: {d['blip_caption']}"
                role = "user" if d["speaker"] == speaker_a or (speaker_a is None and not messages) else "assistant"
                messages.append({"role": role, "content": text})
            sessions.append(messages)
            dates.append(str(conv.get(f"{key}_date_time", "")))
        qa = []
        for item in entry["qa"]:
            answer = item.get("answer", item.get("adversarial_answer", ""))
            evidence = []
            for ev in item.get("evidence", []):
                m = re.match(r"D(\d+):", str(ev))
                if m and f"session_{m.group(1)}" not in evidence:
                    evidence.append(f"session_{m.group(1)}")
            qa.append(
                {
                    "question": item["question"],
                    "answers": [str(answer)],
                    "evidence_session_ids": evidence,
                    "question_type": str(item.get("category", "")),
                }
            )
        rows.append(
            {
                "conversation_id": str(entry.get("sample_id", len(rows))),
                "history_length": len(sessions),
                "session_ids": keys,
                "session_dates": dates,
                "sessions": sessions,
                "qa": qa,
            }
        )
    return _dataset(rows)


def load_long_memory_json(path: str | Path, format: str = "auto"):
    """Load LoCoMo or LongMemEval JSON (``format="locomo" | "longmemeval" | "auto"``) from a local path.

    ``"auto"`` looks at the first entry (``conversation`` -> LoCoMo, ``haystack_sessions`` -> LongMemEval).
    Nothing is downloaded.

    Raises:
        ValueError: for an unknown ``format`` or an unrecognised file.
    """
    if format not in ("auto", "locomo", "longmemeval"):
        raise ValueError(f"`format` must be 'auto', 'locomo' or 'longmemeval', got {format!r}")
    if format == "auto":
        data = _read_json(path)
        first = data[0] if isinstance(data, list) and data else {}
        if "conversation" in first:
            format = "locomo"
        elif "haystack_sessions" in first:
            format = "longmemeval"
        else:
            raise ValueError(f"{path} is neither LoCoMo (`conversation`) nor LongMemEval (`haystack_sessions`) JSON")
    return load_locomo(path) if format == "locomo" else load_longmemeval(path)


# ------------------------------------------------------------------------------------------ the built benchmark
NAMES = [
    "Tomas",
    "Ingrid",
    "Rafael",
    "Priya",
    "Mateo",
    "Yuki",
    "Olga",
    "Kwame",
    "Lena",
    "Dmitri",
    "Amara",
    "Felix",
    "Sanna",
    "Joaquin",
    "Mei",
    "Oskar",
    "Farah",
    "Bruno",
    "Noor",
    "Elias",
    "Zofia",
    "Kenji",
    "Ines",
    "Tariq",
    "Greta",
    "Anselm",
    "Leila",
    "Hugo",
    "Marisol",
    "Viktor",
]
POOLS = {
    "pet_name": ["Biscuit", "Pepper", "Waffles", "Mochi", "Ziggy", "Nugget", "Juniper", "Pickles", "Clover", "Toffee"],
    "city": [
        "Lisbon",
        "Krakow",
        "Valparaiso",
        "Osaka",
        "Edinburgh",
        "Montreal",
        "Tbilisi",
        "Bergen",
        "Leipzig",
        "Seville",
        "Tallinn",
        "Adelaide",
        "Ljubljana",
        "Porto",
    ],
    "occupation": [
        "carpenter",
        "pharmacist",
        "librarian",
        "paramedic",
        "translator",
        "beekeeper",
        "cartographer",
        "locksmith",
        "sommelier",
        "welder",
        "florist",
        "actuary",
    ],
    "allergen": ["peanuts", "shellfish", "sesame", "kiwi", "mustard", "celery", "buckwheat", "lupin"],
    "instrument": ["cello", "oboe", "bassoon", "trombone", "harp", "viola", "clarinet", "xylophone"],
    "car": [
        "Subaru Outback",
        "Honda Civic",
        "Volvo XC40",
        "Mazda MX-5",
        "Kia Niro",
        "Skoda Octavia",
        "Ford Ranger",
        "Fiat Panda",
    ],
    "country": [
        "Iceland",
        "Portugal",
        "Vietnam",
        "Chile",
        "Morocco",
        "Norway",
        "Peru",
        "Japan",
        "Greece",
        "Kenya",
        "Croatia",
        "Mongolia",
    ],
    "novel": ["Middlemarch", "Dune", "Beloved", "Rebecca", "Frankenstein", "Dracula", "Persuasion", "Solaris"],
    "sport": ["badminton", "squash", "volleyball", "cricket", "handball", "lacrosse", "curling", "rugby"],
    "month": [
        "January",
        "February",
        "March",
        "April",
        "May",
        "June",
        "July",
        "August",
        "September",
        "October",
        "November",
        "December",
    ],
    "plant": ["tomatoes", "basil", "strawberries", "chillies", "lavender", "zucchini", "mint", "rhubarb"],
    "coffee": ["cortado", "flat white", "macchiato", "chai latte", "americano", "mocha", "matcha latte", "affogato"],
    "street": [
        "Maple Street",
        "Harbour Road",
        "Elm Avenue",
        "Mill Lane",
        "Station Road",
        "Cedar Close",
        "Quarry Hill",
        "Bridge Street",
    ],
    "team": ["Celtic", "Ajax", "Benfica", "Juventus", "Arsenal", "Napoli", "Boca Juniors", "Galatasaray"],
    "hobby": [
        "knitting",
        "birdwatching",
        "quilting",
        "orienteering",
        "calligraphy",
        "origami",
        "fly fishing",
        "embroidery",
    ],
    "animal": ["parrot", "tortoise", "ferret", "rabbit", "hedgehog", "iguana", "goldfish", "alpaca"],
    "subject": [
        "geology",
        "linguistics",
        "astronomy",
        "architecture",
        "nursing",
        "economics",
        "philosophy",
        "zoology",
    ],
    "language": ["Portuguese", "Korean", "Swahili", "Dutch", "Polish", "Turkish", "Hindi", "Finnish", "Tagalog"],
    "class": ["pottery", "salsa", "watercolour", "yoga", "fencing", "judo", "photography", "woodworking"],
    "artist": ["Adele", "Coldplay", "Radiohead", "Metallica", "Bjork", "Shakira", "Muse", "Sade"],
    "appliance": ["dishwasher", "oven", "fridge", "sink", "faucet", "toaster", "kettle", "blender"],
}
# (statement template, question, value pool): one session holds the fact
SINGLE_FACTS = [
    ("By the way, we adopted a puppy last month and named him {v}.", "What is my dog called?", "pet_name"),
    ("I was born and raised in {v}, and I still miss it.", "Which city did I grow up in?", "city"),
    ("I earn my living as a {v}.", "What do I do for work?", "occupation"),
    ("I have to avoid {v} when I eat out because of an allergy.", "Which food am I allergic to?", "allergen"),
    (
        "My daughter just started playing the {v} in her school orchestra.",
        "What instrument does my daughter play?",
        "instrument",
    ),
    ("I finally replaced my old car with a {v}.", "What car did I buy to replace my old one?", "car"),
    ("My partner and I are planning a trip to {v} next summer.", "Where are we travelling next summer?", "country"),
    ("The novel I keep rereading is {v}.", "Which book do I read again and again?", "novel"),
    ("On weekends I play {v} with some friends from work.", "What sport do I play on weekends?", "sport"),
    ("My birthday falls in {v}.", "In which month is my birthday?", "month"),
    ("I'm growing {v} on my balcony this year.", "What am I growing on the balcony?", "plant"),
    ("My usual order at the cafe is a {v}.", "What do I normally get at the coffee shop?", "coffee"),
    ("We just moved into a flat on {v}.", "What street is our new apartment on?", "street"),
    ("I've supported {v} since I was a kid.", "Which football club am I a fan of?", "team"),
    ("My mum spends most of her free time on {v}.", "What is my mother's favourite pastime?", "hobby"),
]
CHAIN_INTROS = [
    "My {rel}'s name is {name}.",
    "I should mention my {rel}, {name}.",
    "You might hear me talk about {name}, who is my {rel}.",
]
RELATIONS = ["brother", "sister", "cousin", "neighbour", "best friend", "manager", "roommate", "aunt", "uncle"]
# (second-hop statement, question about the relation, value pool): the second session names the person only
CHAIN_FACTS = [
    ("{name} just started a new job as a {v}.", "What new job did my {rel} start?", "occupation"),
    ("{name} has moved to {v} for good.", "Which city did my {rel} move to?", "city"),
    ("{name} adopted a {v} last week.", "What animal did my {rel} adopt?", "animal"),
    ("{name} is studying {v} at university now.", "What is my {rel} studying?", "subject"),
    ("{name} bought a {v} over the weekend.", "What car did my {rel} buy?", "car"),
]
# (first statement, second statement, question, value pool): two sessions each hold one item
AGGREGATION_FACTS = [
    (
        "I've started learning {v} with an app.",
        "I also signed up for an evening course in {v}.",
        "Which languages am I learning?",
        "language",
    ),
    (
        "I joined a {v} class at the community centre.",
        "I also enrolled in {v} lessons at the same community centre.",
        "Which classes did I join at the community centre?",
        "class",
    ),
    (
        "Last year I visited {v} for the first time.",
        "I also went to {v} last year, my first time there.",
        "Which countries did I visit for the first time last year?",
        "country",
    ),
    (
        "I saw {v} live in concert recently.",
        "A few weeks ago I also caught {v} live.",
        "Which artists have I seen in concert recently?",
        "artist",
    ),
    (
        "I had to fix the {v} in our kitchen.",
        "Then the {v} in the kitchen broke too and I repaired it.",
        "What have I had to repair in the kitchen?",
        "appliance",
    ),
]
ACKS = [
    "Thanks for telling me, I'll keep that in mind.",
    "That's good to know!",
    "Noted. I'll remember that.",
    "That sounds lovely.",
    "Oh, interesting, thanks for sharing.",
]


def parse_hh_dialogue(text: str) -> list[dict[str, str]]:
    """An HH-RLHF dialogue (``"\\n\\nHuman: ...\\n\\nAssistant: ..."``) as chat messages (user / assistant)."""
    parts = re.split(r"\n\n(Human|Assistant): ", "\n\n" + text.strip())
    messages = []
    for role, content in zip(parts[1::2], parts[2::2]):
        content = content.strip()
        if content:
            messages.append({"role": "user" if role == "Human" else "assistant", "content": content})
    return messages


def _load_real_sessions(data_dir: Path, min_chars=250, max_chars=1200, mt_bench_max_chars=1200):
    hh_path = data_dir / "hh_rlhf" / "harmless-base-test.jsonl"
    mt_q, mt_a = data_dir / "mt_bench" / "question.jsonl", data_dir / "mt_bench" / "reference_answer_gpt-4.jsonl"
    for p in (hh_path, mt_q, mt_a):
        if not p.is_file():
            raise FileNotFoundError(f"benchmark source missing: {p} (expected the shared data folder layout)")
    hh = []
    for line in hh_path.read_text(encoding="utf-8").splitlines():
        text = json.loads(line)["chosen"]
        if min_chars <= len(text) <= max_chars:
            messages = parse_hh_dialogue(text)
            if len(messages) >= 2 and messages[0]["role"] == "user":
                hh.append(messages)
    questions = {q["question_id"]: q for q in map(json.loads, mt_q.read_text(encoding="utf-8").splitlines())}
    mt = []
    for ref in map(json.loads, mt_a.read_text(encoding="utf-8").splitlines()):
        q = questions.get(ref["question_id"])
        if q is None:
            continue
        messages = []
        for user, answer in zip(q["turns"], ref["choices"][0]["turns"]):
            messages += [{"role": "user", "content": user}, {"role": "assistant", "content": answer}]
        while len(messages) > 2 and sum(len(m["content"]) for m in messages) > mt_bench_max_chars:
            messages = messages[:-2]
        mt.append(messages)
    return hh, mt


def _plant(rng: random.Random, dialogue: list[dict], facts: list[str]) -> list[dict]:
    """Insert each fact as a user message + a short assistant acknowledgement between exchanges of ``dialogue``."""
    messages = [dict(m) for m in dialogue]
    for fact in facts:
        slots = [i for i in range(len(messages) + 1) if i == len(messages) or messages[i]["role"] == "user"]
        at = rng.choice(slots)
        messages[at:at] = [{"role": "user", "content": fact}, {"role": "assistant", "content": rng.choice(ACKS)}]
    return messages


def _make_conversation(rng: random.Random, base_dialogues, n_evidence, n_single, n_chain, n_aggregation):
    used: dict[str, set] = {k: set() for k in POOLS}

    def draw(pool):
        value = rng.choice([v for v in POOLS[pool] if v not in used[pool]])
        used[pool].add(value)
        return value

    facts: list[list[str]] = [[] for _ in range(n_evidence)]
    load = [0] * n_evidence

    def place(k):  # k distinct sessions, least loaded first (random tie-break)
        order = sorted(range(n_evidence), key=lambda i: (load[i], rng.random()))[:k]
        for i in order:
            load[i] += 1
        return order

    qa = []
    for template, question, pool in rng.sample(SINGLE_FACTS, n_single):
        value = draw(pool)
        (s,) = place(1)
        facts[s].append(template.format(v=value))
        qa.append({"question": question, "answers": [value], "evidence": [s], "question_type": "single-session"})
    names = rng.sample(NAMES, n_chain)
    for rel, name, (template, question, pool) in zip(
        rng.sample(RELATIONS, n_chain), names, rng.sample(CHAIN_FACTS, n_chain)
    ):
        value = draw(pool)
        s1, s2 = place(2)
        facts[s1].append(rng.choice(CHAIN_INTROS).format(rel=rel, name=name))
        facts[s2].append(template.format(name=name, v=value))
        qa.append(
            {
                "question": question.format(rel=rel),
                "answers": [value],
                "evidence": [s1, s2],
                "question_type": "multi-hop",
            }
        )
    for first, second, question, pool in rng.sample(AGGREGATION_FACTS, n_aggregation):
        v1, v2 = draw(pool), draw(pool)
        s1, s2 = place(2)
        facts[s1].append(first.format(v=v1))
        facts[s2].append(second.format(v=v2))
        qa.append({"question": question, "answers": [v1, v2], "evidence": [s1, s2], "question_type": "aggregation"})
    sessions = [_plant(rng, base_dialogues[i], facts[i]) for i in range(n_evidence)]
    return sessions, qa


def build_long_memory_benchmark(
    data_dir: str | Path = "../shared/data",
    history_lengths: tuple[int, ...] = (10, 20, 40),
    num_conversations: int = 8,
    num_dev_conversations: int = 2,
    evidence_sessions: int = 6,
    single_facts: int = 6,
    chain_facts: int = 3,
    aggregation_facts: int = 3,
    mt_bench_filler_fraction: float = 0.3,
    seed: int = 0,
):
    """A long-memory QA benchmark from real dialogues with planted facts, at several history lengths.

    Construction (all draws from ``random.Random(seed)``):

    1. Real sessions: HH-RLHF harmless-base test dialogues (the ``chosen`` side, 250-1,200 characters, parsed into
       user / assistant messages) and the 30 MT-Bench questions that have GPT-4 reference answers (question + answer
       per turn, cut to 1,200 characters). Arena-Hard is not used: it has no assistant replies.
    2. One shared filler pool of ``max(history_lengths) - evidence_sessions`` sessions (a ``mt_bench_filler_fraction``
       share from MT-Bench, the rest HH-RLHF), disjoint from the dialogues that carry facts.
    3. Per conversation (a "user"), ``evidence_sessions`` further HH-RLHF dialogues receive planted facts, each
       inserted as a user message followed by a short assistant acknowledgement between two exchanges:
       ``single_facts`` one-session facts (e.g. "I earn my living as a locksmith." -> "What do I do for work?"),
       ``chain_facts`` two-hop facts over two sessions ("My cousin's name is Oskar." ... "Oskar adopted a ferret
       last week." -> "What animal did my cousin adopt?"), and ``aggregation_facts`` two-item facts over two sessions
       ("Which languages am I learning?" -> both). Values are unique within a conversation; facts go to the least
       loaded sessions, the two halves of a pair to different sessions.
    4. History of length L: the evidence sessions plus the conversation's first ``L - evidence_sessions`` fillers (in
       a per-conversation permutation), in one random order fixed per conversation, so that shorter histories are
       ordered subsets of longer ones and every question is answerable at every length.

    The first ``num_dev_conversations`` conversations form the ``dev`` split (for choosing hyper-parameters), the
    next ``num_conversations`` the ``test`` split.

    Returns:
        `datasets.DatasetDict` with ``dev`` and ``test`` splits in this module's schema (one row per conversation and
        history length; ``qa[i]["question_type"]`` is ``single-session``, ``multi-hop`` or ``aggregation``).

    Raises:
        FileNotFoundError: when the HH-RLHF / MT-Bench files are missing; ValueError: for inconsistent sizes.
    """
    from datasets import DatasetDict

    data_dir = Path(data_dir)
    lengths = sorted({int(x) for x in history_lengths})
    if not lengths or lengths[0] < evidence_sessions:
        raise ValueError(f"every history length must be >= `evidence_sessions`={evidence_sessions}, got {lengths}")
    if (
        single_facts > len(SINGLE_FACTS)
        or chain_facts > len(CHAIN_FACTS)
        or aggregation_facts > len(AGGREGATION_FACTS)
    ):
        raise ValueError("too many facts of one kind for the templates")
    if 2 * (chain_facts + aggregation_facts) and evidence_sessions < 2:
        raise ValueError("two-session facts need `evidence_sessions` >= 2")
    if not 0.0 <= mt_bench_filler_fraction <= 1.0:
        raise ValueError(f"`mt_bench_filler_fraction` must be in [0, 1], got {mt_bench_filler_fraction}")
    rng = random.Random(seed)
    hh, mt = _load_real_sessions(data_dir)
    rng.shuffle(hh)
    rng.shuffle(mt)
    n_fill = lengths[-1] - evidence_sessions
    n_mt = min(len(mt), round(mt_bench_filler_fraction * n_fill))
    fillers = mt[:n_mt] + hh[: n_fill - n_mt]
    hh = hh[n_fill - n_mt :]
    total = num_dev_conversations + num_conversations
    if len(hh) < total * evidence_sessions:
        raise ValueError("not enough HH-RLHF dialogues for that many conversations")
    splits: dict[str, list] = {"dev": [], "test": []}
    for c in range(total):
        split = "dev" if c < num_dev_conversations else "test"
        base = hh[c * evidence_sessions : (c + 1) * evidence_sessions]
        sessions, qa = _make_conversation(rng, base, evidence_sessions, single_facts, chain_facts, aggregation_facts)
        conv_id = f"{split}-{c:02d}"
        filler_order = rng.sample(range(n_fill), n_fill)
        # one global order of all sessions of the longest history; shorter histories are ordered subsets
        items = [("e", i) for i in range(evidence_sessions)] + [("f", j) for j in filler_order]
        position = {item: rng.random() for item in items}
        for length in lengths:
            chosen = items[: evidence_sessions + (length - evidence_sessions)]
            ordered = sorted(chosen, key=lambda it: position[it])
            ids, texts = [], []
            for kind, i in ordered:
                ids.append(f"{conv_id}-ev{i}" if kind == "e" else f"filler{i:02d}")
                texts.append(sessions[i] if kind == "e" else fillers[i])
            splits[split].append(
                {
                    "conversation_id": conv_id,
                    "history_length": length,
                    "session_ids": ids,
                    "session_dates": [""] * len(ids),
                    "sessions": texts,
                    "qa": [
                        {
                            "question": q["question"],
                            "answers": q["answers"],
                            "evidence_session_ids": [f"{conv_id}-ev{s}" for s in q["evidence"]],
                            "question_type": q["question_type"],
                        }
                        for q in qa
                    ],
                }
            )
    return DatasetDict({name: _dataset(rows) for name, rows in splits.items()})
