"""MemGAS quick start: a long-term memory of real dialogues, retrieval, an answer, a chat prompt, a smolagents tool.

Builds a memory from a few real HH-RLHF dialogues (``../shared/data``) plus two sessions with personal facts, with the
offline MiniLM embedder and the embedded SmolLM2-135M-Instruct writing summaries / keywords, filtering and answering.
Then: retrieval (with the router weights), ``answer``, a chat prompt with memories for ``model.generate``, the
smolagents tool, and a save / load round trip.

    python examples/memgas_quickstart.py                 # about 2-4 minutes on a 2-core CPU
    python examples/memgas_quickstart.py --no-llm-units  # session + turn granularities only (no LLM while building)
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

import torch

from hfx.memory import MemGAS, MemGASConfig, MemGASRetrieverTool, apply_chat_template_with_memory
from hfx.memory.memgas.data import parse_hh_dialogue


ROOT = Path(__file__).resolve().parents[1]


def real_sessions(data_dir: Path, n: int) -> list[list[dict]]:
    path = data_dir / "hh_rlhf" / "harmless-base-test.jsonl"
    if not path.is_file():
        return []
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        text = json.loads(line)["chosen"]
        if 200 <= len(text) <= 700:
            out.append(parse_hh_dialogue(text))
        if len(out) == n:
            break
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data-dir", default=str(ROOT.parent / "shared" / "data"))
    parser.add_argument("--filler-sessions", type=int, default=4)
    parser.add_argument("--no-llm-units", action="store_true", help="skip the LLM summary / keyword granularities")
    args = parser.parse_args()

    sessions = real_sessions(Path(args.data_dir), args.filler_sessions)
    sessions.insert(
        1,
        [
            {"role": "user", "content": "My cousin's name is Oskar, he lives near the coast."},
            {"role": "assistant", "content": "Nice, the coast is lovely."},
        ],
    )
    sessions.append(
        [
            {"role": "user", "content": "Oskar adopted a ferret last week and called it Noodle."},
            {"role": "assistant", "content": "Ferrets are playful pets!"},
        ]
    )
    config = MemGASConfig(
        association_start_session=1,  # the paper starts linking at the 6th session; this memory is small
        granularities=("session", "turn") if args.no_llm_units else ("session", "turn", "summary", "keyword"),
        max_new_tokens_summary=48,
        max_new_tokens_keyword=24,
    )
    memory = MemGAS(config)  # MiniLM embedder + SmolLM2 (both offline), loaded on first use
    memory.add_sessions(sessions)
    print(memory)
    for i in range(len(memory)):
        if memory.summaries[i]:
            print(f"  {memory.session_ids[i]} summary: {memory.summaries[i][:90]!r}")

    question = "What pet did my cousin adopt?"
    _, details = memory.score_sessions([question], return_details=True)
    weights = dict(zip(config.granularities, details["router_weights"][0].tolist()))
    print(f"\n{question}\nrouter weights: " + ", ".join(f"{g}={w:.2f}" for g, w in weights.items()))
    for m in memory.retrieve(question, top_k=3):
        print(f"  {m.rank + 1}. {m.session_id} (PPR mass {m.score:.3f}): {m.text.splitlines()[0][:80]}")
    result = memory.answer(question, top_k=2)
    print(f"filtered context: {result.context[:200]!r}\nanswer: {result.answer!r}")

    # a chat prompt with retrieved memories, for model.generate
    from hfx.models import load_default_model

    model, tok = load_default_model()
    inputs = apply_chat_template_with_memory(tok, memory, "Remind me: what is my cousin's new pet called?", top_k=2)
    with torch.no_grad():
        out = model.generate(**inputs, max_new_tokens=24, do_sample=False)
    print(
        "generate with memories:", repr(tok.decode(out[0, inputs["input_ids"].shape[1] :], skip_special_tokens=True))
    )

    # the smolagents tool (pass it to any agent: CodeAgent(tools=[tool], model=...))
    tool = MemGASRetrieverTool(memory, top_k=1)
    print("tool output:", tool(query="ferret").splitlines()[0])

    with tempfile.TemporaryDirectory() as folder:
        memory.save_pretrained(folder)
        loaded = MemGAS.from_pretrained(folder)
        same = torch.equal(loaded.score_sessions([question]), memory.score_sessions([question]))
        print(
            f"saved to a folder ({', '.join(sorted(p.name for p in Path(folder).iterdir()))}); equal after load: {same}"
        )


if __name__ == "__main__":
    main()
