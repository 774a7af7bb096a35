"""The ``hfx`` command line.

Each sub-command lives in a light module of :mod:`hfx.commands` exposing ``HELP``, ``add_arguments(parser)`` and
``run(args) -> int``; heavy libraries (trl, diffusers, datasets, matplotlib) are imported inside ``run`` only.

    hfx generate "QUESTION" --strategy thinkmerge --num-traces 4 [--model ...]
    hfx eval gsm8k --strategies greedy,majority,thinkmerge --num-traces 4 --limit N [--data-file FILE]
    hfx publish NAME --out DIR [--push REPO_ID]
    hfx prune IMAGE --num-tokens 64 [--model ...]
    hfx synthesize "a red apple on a table" --steps 400 --out apple.png [--model ...]
"""

from __future__ import annotations

import argparse
import importlib
import sys


COMMANDS = {
    "generate": "hfx.commands.generate",
    "eval": "hfx.commands.eval",
    "publish": "hfx.commands.publish",
    "prune": "hfx.commands.prune",
    "synthesize": "hfx.commands.synthesize",
    "hippoformer": "hfx.commands.hippoformer",
}


def build_parser() -> argparse.ArgumentParser:
    from hfx import __version__

    parser = argparse.ArgumentParser(prog="hfx", description="ICLR 2026 methods on the Hugging Face stack.")
    parser.add_argument("--version", action="version", version=f"hfx {__version__}")
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


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args._run(args) or 0)
    except (ValueError, FileNotFoundError, NotImplementedError) as err:
        print(f"hfx {args.command}: error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
