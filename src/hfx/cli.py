"""The ``hfx`` command line.

Each sub-command lives in a light module of :mod:`hfx.commands` exposing ``HELP``, ``add_arguments(parser)`` and
``run(args) -> int``; heavy libraries (trl, diffusers, datasets, matplotlib) are imported inside ``run`` only.

    hfx generate "QUESTION" --strategy thinkmerge --num-traces 4 [--model ...]
    hfx eval gsm8k --strategies greedy,majority,thinkmerge --num-traces 4 --limit N [--data-file FILE]
    hfx publish NAME --out DIR [--push REPO_ID]
    hfx prune IMAGE --num-tokens 64 [--model ...]
    hfx synthesize "a red apple on a table" --steps 400 --out apple.png [--model ...]
    hfx memory add DIR SESSION.json [--no-llm]   |   hfx memory ask DIR "QUESTION" [--top-k 3] [--answer]
    hfx federate --method devft --clients 4 --out run/ [--stages 4,8,16,30] [--model ...]
    hfx heavy "QUESTION" --k 4 [--corpus pages.jsonl] [--model ...]
    hfx hippoformer --model mmtem --steps 250 --out DIR
    hfx sc-gnn --method gsat --dataset ba-2motifs [--epochs 30 --sc-epochs 15] --out DIR [--plot PNG]
    hfx crd solve IMAGE_OR_DIR [--proposer attribute|vlm] [--model DIR] --out DIR   |   hfx crd generate --out DIR
    hfx fluent-align --sft-data SFT.jsonl --prompts PROMPTS.jsonl --out DIR [--arm fluent|sft_translated|...]

Errors are a property of this dispatcher, so every sub-command inherits them: a bad input (``ValueError``,
``TypeError``, ``KeyError``, ``OSError`` incl. ``FileNotFoundError``, ``OverflowError``, ``NotImplementedError``)
prints one line ``hfx CMD: error: ...`` and returns 2; any other exception prints one line naming its type and
returns 1. The traceback is printed only with ``hfx --debug ...`` or ``HFX_DEBUG=1``.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys


COMMANDS = {
    "generate": "hfx.commands.generate",
    "eval": "hfx.commands.eval",
    "publish": "hfx.commands.publish",
    "prune": "hfx.commands.prune",
    "synthesize": "hfx.commands.synthesize",
    "ssm-theory": "hfx.commands.ssm_theory",
    "memory": "hfx.commands.memory",
    "federate": "hfx.commands.federate",
    "heavy": "hfx.commands.heavy",
    "sc-gnn": "hfx.commands.sc_gnn",
    "hippoformer": "hfx.commands.hippoformer",
    "crd": "hfx.commands.crd",
    "fluent-align": "hfx.commands.fluent_align",
}


def build_parser() -> argparse.ArgumentParser:
    from hfx import __version__

    parser = argparse.ArgumentParser(prog="hfx", description="ICLR 2026 methods on the Hugging Face stack.")
    parser.add_argument("--version", action="version", version=f"hfx {__version__}")
    parser.add_argument("--debug", action="store_true", help="print full tracebacks on errors (same as HFX_DEBUG=1)")
    sub = parser.add_subparsers(dest="command", required=True)
    for name, module_name in COMMANDS.items():
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as err:
            if err.name != module_name:
                raise
            continue  # a command whose method has not landed yet
        p = sub.add_parser(name, help=module.HELP, description=module.HELP)
        module.add_arguments(p)
        p.set_defaults(_run=module.run)
    return parser


# bad input: a one-line message and exit status 2 (anything else: one line naming the type, status 1)
USER_ERRORS = (ValueError, TypeError, KeyError, OSError, OverflowError, NotImplementedError)


def _one_line(err: BaseException) -> str:
    text = str(err.args[0]) if isinstance(err, KeyError) and err.args else str(err)
    text = " ".join(text.split()) or type(err).__name__
    return text if len(text) <= 600 else text[:597] + "..."


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    debug = args.debug or os.environ.get("HFX_DEBUG", "").strip().lower() in ("1", "true", "yes", "on")
    try:
        return int(args._run(args) or 0)
    except KeyboardInterrupt:
        print(f"hfx {args.command}: interrupted", file=sys.stderr)
        return 130
    except Exception as err:
        if debug:
            raise
        user_error = isinstance(err, USER_ERRORS)
        kind = "" if isinstance(err, (ValueError, FileNotFoundError)) else f"{type(err).__name__}: "
        hint = "" if user_error else " (an internal error: please report it; rerun with --debug for the traceback)"
        print(f"hfx {args.command}: error: {kind}{_one_line(err)}{hint}", file=sys.stderr)
        return 2 if user_error else 1


if __name__ == "__main__":
    sys.exit(main())
