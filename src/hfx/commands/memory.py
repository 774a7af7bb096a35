"""`hfx memory add DIR SESSION_FILE` / `hfx memory ask DIR "QUESTION"`: a MemGAS memory kept in a folder."""

from __future__ import annotations

from hfx.commands import _types


HELP = "Keep a MemGAS long-term conversation memory in a folder: add sessions, ask questions (retrieve / answer)."


def add_arguments(parser) -> None:
    sub = parser.add_subparsers(dest="memory_command", required=True)
    add = sub.add_parser("add", help="add session(s) from a JSON / text file to the memory folder (created if new)")
    add.add_argument("memory_dir", help="the memory folder (MemGAS.save_pretrained layout)")
    add.add_argument(
        "session_file",
        help="JSON: one session as chat messages [{'role', 'content'}, ...] or a list of such sessions; "
        ".txt: one session, one turn per line",
    )
    add.add_argument("--session-id", default=None, help="id of the (single) session added")
    add.add_argument("--date", default=None, help="date shown next to the session in prompts")
    add.add_argument(
        "--no-llm",
        action="store_true",
        help="new memories only: keep the session and turn granularities (no LLM summaries / keywords)",
    )
    add.add_argument(
        "--embedder", default=None, help="sentence-transformers folder / Hub id (default: offline MiniLM)"
    )
    add.add_argument("--llm", default=None, help="causal LM folder / Hub id for summaries (default: embedded SmolLM2)")
    ask = sub.add_parser("ask", help="retrieve the sessions most relevant to a question (and optionally answer it)")
    ask.add_argument("memory_dir")
    ask.add_argument("question")
    ask.add_argument(
        "--top-k",
        type=_types.int_range(1, 100_000),
        default=None,
        help="sessions to retrieve (default: the memory's top_k)",
    )
    ask.add_argument("--answer", action="store_true", help="also let the LLM filter the sessions and answer")
    ask.add_argument("--embedder", default=None, help="the embedder the memory was built with, if not its saved one")
    ask.add_argument("--llm", default=None, help="causal LM folder / Hub id for filtering / answering")


def _read_sessions(path):
    import json
    from pathlib import Path

    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"`SESSION_FILE` {str(path)!r} does not exist")
    text = path.read_text(encoding="utf-8")
    if path.suffix != ".json":
        turns = [line for line in text.splitlines() if line.strip()]
        if not turns:
            raise ValueError(f"`SESSION_FILE` {str(path)!r} is empty")
        return [turns]
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        raise ValueError(f"`SESSION_FILE` {str(path)!r} is not valid JSON ({err.msg}, line {err.lineno})") from None
    if isinstance(data, list) and data and all(isinstance(m, dict) for m in data):
        return [data]
    if isinstance(data, list) and data and all(isinstance(s, (list, str)) for s in data):
        return data
    raise ValueError(
        f"`SESSION_FILE` {str(path)!r} must hold chat messages [{{'role', 'content'}}, ...] or a list of sessions"
    )


def _llm(name):
    if name is None:
        return None
    from hfx.models import load_causal_lm

    return load_causal_lm(name)


def run(args) -> int:
    from pathlib import Path

    folder = Path(args.memory_dir)
    exists = (folder / "memory.json").is_file()
    # validate the input before importing the memory stack (torch, sentence-transformers, ...)
    if args.memory_command == "add":
        sessions = _read_sessions(args.session_file)
        if args.session_id is not None and len(sessions) != 1:
            raise ValueError("`--session-id` needs a file with exactly one session")
        if not exists:  # a new memory: never write memory.json into a file or another artifact's folder
            from hfx.utils.artifacts import prepare_output_dir

            prepare_output_dir(folder, arg="MEMORY_DIR", create=False)
    elif not exists:
        raise FileNotFoundError(f"`MEMORY_DIR` {str(folder)!r} holds no MemGAS memory (run `hfx memory add` first)")
    elif not args.question.strip():
        raise ValueError("`QUESTION` is empty")
    for flag in ("embedder", "llm"):
        if getattr(args, flag) is not None:
            from hfx.utils.artifacts import resolve_model

            setattr(args, flag, resolve_model(getattr(args, flag), arg=f"--{flag}", allowed=("transformers:",),
                                              what="a transformers model folder or Hub id"))  # fmt: skip

    from hfx.memory import MemGAS, MemGASConfig

    if args.memory_command == "add":
        if exists:
            memory = MemGAS.from_pretrained(str(folder), embedder=args.embedder, llm=_llm(args.llm))
        else:
            config = MemGASConfig(granularities=("session", "turn")) if args.no_llm else MemGASConfig()
            memory = MemGAS(config, embedder=args.embedder, llm=_llm(args.llm))
        ids = [args.session_id] if args.session_id is not None else None
        dates = [args.date] * len(sessions) if args.date is not None else None
        try:
            added = memory.add_sessions(sessions, session_ids=ids, dates=dates)
        except TypeError as err:
            raise ValueError(str(err)) from None
        memory.save_pretrained(folder)
        print(f"added {len(added)} session(s) ({', '.join(added)}); {len(memory)} in {folder}")
        return 0
    memory = MemGAS.from_pretrained(str(folder), embedder=args.embedder, llm=_llm(args.llm))
    if args.answer:
        result = memory.answer(args.question, top_k=args.top_k)
        memories = result.memories
    else:
        memories = memory.retrieve(args.question, top_k=args.top_k)
    for m in memories:
        first = m.text.splitlines()[0] if m.text else ""
        print(f"{m.rank + 1}. {m.session_id}  score={m.score:.4f}  {first[:100]}")
    if args.answer:
        print(f"answer: {result.answer}")
    return 0
