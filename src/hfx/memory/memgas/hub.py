"""`hfx publish memgas`: write a Hub-ready MemGAS memory folder (config, sessions, embeddings, model card)."""

from __future__ import annotations

from pathlib import Path


DEMO_SESSIONS = [
    (
        [
            {"role": "user", "content": "We adopted a beagle puppy and named him Biscuit."},
            {"role": "assistant", "content": "Congratulations! Beagles are lovely, curious dogs."},
        ],
        "The user adopted a beagle puppy called Biscuit.",
        "beagle; puppy; Biscuit; adoption",
    ),
    (
        [
            {"role": "user", "content": "Any tips for a first marathon? I'm running the Lisbon one in spring."},
            {"role": "assistant", "content": "Build mileage slowly and practise your race-day nutrition."},
        ],
        "The user is training for the Lisbon marathon and asks for first-marathon tips.",
        "marathon; Lisbon; training; nutrition",
    ),
    (
        [
            {"role": "user", "content": "Biscuit chewed my running shoes again."},
            {"role": "assistant", "content": "Puppies chew when teething; give him a chew toy instead."},
        ],
        "The user's puppy Biscuit chewed the user's running shoes.",
        "Biscuit; puppy; chewing; running shoes",
    ),
]


def demo_memory(embedder=None):
    """A 3-session demo memory with hand-written summaries and keywords (no LLM call; offline MiniLM embedder)."""
    from .config import MemGASConfig
    from .memory import MemGAS

    memory = MemGAS(MemGASConfig(association_start_session=1), embedder=embedder)
    sessions, summaries, keywords = zip(*DEMO_SESSIONS)
    memory.add_sessions(list(sessions), summaries=list(summaries), keywords=list(keywords))
    return memory


def publish(out_dir: Path, source=None, repo_id: str | None = None, embedder=None, **kw) -> Path:
    """Save a :class:`~hfx.memory.MemGAS` memory folder with its rendered model card.

    Args:
        out_dir (`Path`): destination folder (created).
        source (`str`, *optional*): a saved memory folder or Hub repo id (``MemGAS.from_pretrained``). Without it, a
            3-session demo memory (hand-written summaries, offline MiniLM embeddings) is written and the card says so.
        repo_id (`str`, *optional*): the repo id shown in the card's usage snippet.
        embedder (*optional*): the embedder of the demo memory, or of ``source`` when it is not rebuilt from its saved
            name (default: the offline all-MiniLM-L6-v2).

    Returns:
        `Path`: ``out_dir``.
    """
    from .memory import MemGAS

    out_dir = Path(out_dir)
    memory = MemGAS.from_pretrained(source, embedder=embedder) if source else demo_memory(embedder)
    note = None if source else "**Demo memory**: 3 short sessions, for testing the publish / pull path only."
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "README.md").unlink(missing_ok=True)
    memory.save_pretrained(out_dir, model_card_kwargs={"repo_id": repo_id or "hfx/memgas-memory", "note": note})
    return out_dir
