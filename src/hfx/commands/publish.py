"""`hfx publish NAME --out DIR [--push REPO_ID]`: write an artifact's Hub-ready folder (files + model card)."""

from __future__ import annotations

from pathlib import Path


HELP = "Write the Hub-ready folder of an hfx artifact (files + model card), and optionally push it."


def add_arguments(parser) -> None:
    from hfx.hub import PUBLISHERS

    parser.add_argument("name", choices=sorted(PUBLISHERS), help="the artifact to publish")
    parser.add_argument("--out", required=True, help="output folder (new or empty, unless --overwrite)")
    parser.add_argument(
        "--overwrite", action="store_true", help="allow writing into a non-empty --out folder (replaces its files)"
    )
    parser.add_argument("--push", metavar="REPO_ID", default=None, help="also upload the folder to this Hub repo")
    parser.add_argument(
        "--source", default=None, help="a trained checkpoint folder to publish, for artifacts that have one"
    )


def run(args) -> int:
    from hfx.hub import SOURCE_TYPES, publish
    from hfx.utils.artifacts import prepare_output_dir, resolve_model

    # checked here with the flags' names (hfx.hub.publish checks them again, by their Python names)
    if (
        args.source is not None
        and args.name in SOURCE_TYPES
        and not (args.name == "celo2" and Path(args.source).is_file())
    ):
        allowed, what = SOURCE_TYPES[args.name]
        resolve_model(args.source, arg="--source", allowed=allowed, what=what)
    prepare_output_dir(args.out, overwrite=args.overwrite, arg="--out", create=False)

    kwargs = {"source": args.source} if args.source is not None else {}  # `--source ""` is refused, not ignored
    out = publish(args.name, args.out, push_to=args.push, overwrite=args.overwrite, **kwargs)
    print(f"wrote {out}")
    if args.push:
        print(f"pushed to https://huggingface.co/{args.push}")
    return 0
