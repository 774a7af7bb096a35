"""`hfx crd solve IMAGE_OR_DIR --out DIR` / `hfx crd generate --out DIR`: CRD on visual matrices.

``solve`` reads one puzzle image, a folder of puzzle images, or a folder of RAVEN / I-RAVEN files
(``RAVEN_<i>_<split>.npz`` + ``.xml``). With ``--proposer attribute`` (default) each image needs its symbolic
sidecar ``<stem>.json`` (written by ``hfx crd generate``) or the RAVEN annotation; with ``--proposer vlm --model DIR``
an image-text-to-text model reads the panels. Writes ``results.jsonl`` (one decomposition per puzzle),
``summary.json``, the pipeline folder ``pipeline/`` (``CRDPipeline.save_pretrained``) and, with ``--plot``, one
figure per puzzle.
"""

from __future__ import annotations

from hfx.commands import _types


HELP = "CRD: decompose visual matrices into concept-level rules and pick the answer (solve), or generate puzzles."
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".webp")


def add_arguments(parser) -> None:
    sub = parser.add_subparsers(dest="crd_command", required=True)
    solve = sub.add_parser("solve", help="solve puzzle image(s) or RAVEN files; write the decompositions to --out")
    solve.add_argument("image_or_dir", help="a puzzle image, a folder of puzzle images, or a folder of RAVEN files")
    solve.add_argument("--out", required=True, help="output folder (new or empty unless --overwrite)")
    solve.add_argument("--proposer", choices=("attribute", "vlm"), default="attribute",
                       help="attribute: read the symbolic sidecar / RAVEN annotation; vlm: ask --model about each panel")
    solve.add_argument("--model", default=None, help="image-text-to-text model folder / cached Hub id (--proposer vlm)")
    solve.add_argument("--noise", type=_types.float_range(0.0, 0.99), default=0.0,
                       help="attribute proposer: rate of wrong values / missing / distractor concepts")
    solve.add_argument("--pipeline", default=None, help="a folder saved by CRDPipeline.save_pretrained (its config)")
    solve.add_argument("--selection", choices=("mh", "exhaustive", "all", "random"), default=None,
                       help="subset selection (default: the pipeline's, MH)")
    solve.add_argument("--split", choices=("train", "val", "test"), default="test", help="RAVEN file split")
    solve.add_argument("--limit", type=_types.positive_int, default=None, help="solve at most this many puzzles")
    solve.add_argument("--seed", type=_types.seed, default=None, help="MH / proposer seed")
    solve.add_argument("--plot", action="store_true", help="also write <id>.png decomposition figures")
    solve.add_argument("--overwrite", action="store_true", help="allow a non-empty --out")
    gen = sub.add_parser("generate", help="write generated RAVEN-style puzzles (PNG + symbolic JSON sidecar)")
    gen.add_argument("--out", required=True, help="output folder (new or empty unless --overwrite)")
    gen.add_argument("--size", type=_types.int_range(1, 100_000), default=8)
    gen.add_argument("--split", choices=("train", "validation", "test"), default="test")
    gen.add_argument("--seed", type=_types.seed, default=0)
    gen.add_argument("--configuration", choices=("center_single", "distribute_four", "distribute_nine"),
                     default="center_single")
    gen.add_argument("--answer-set", choices=("iraven", "raven"), default="iraven")
    gen.add_argument("--image-size", type=_types.int_range(32, 512), default=160, help="panel side in pixels")
    gen.add_argument("--overwrite", action="store_true", help="allow a non-empty --out")


def _sidecar_item(path, image):
    import json

    meta_path = path.with_suffix(".json")
    item = {"id": path.stem, "image": image}
    if meta_path.is_file():
        try:
            meta = json.loads(meta_path.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError) as err:
            raise ValueError(f"sidecar {str(meta_path)!r} is not valid JSON ({err})") from None
        if not isinstance(meta, dict):
            raise ValueError(f"sidecar {str(meta_path)!r} has to hold a JSON object")
        item.update({k: meta[k] for k in ("attributes", "concepts", "rules", "target", "id") if k in meta})
    return item


def _read_inputs(args):
    """Validate and read the inputs (before any model is loaded)."""
    from pathlib import Path

    source = Path(args.image_or_dir)
    if not str(args.image_or_dir).strip():
        raise ValueError("`IMAGE_OR_DIR` has to name a puzzle image or a folder")
    if not source.exists():
        raise FileNotFoundError(f"`IMAGE_OR_DIR` {str(source)!r} does not exist")
    if source.is_dir() and (any(source.glob("RAVEN_*.npz")) or any(source.glob("*/RAVEN_*.npz"))):
        from hfx.vision.crd import load_raven

        dataset = load_raven(source, split=args.split, limit=args.limit)
        return [dataset[i] for i in range(len(dataset))]
    if source.is_dir():
        files = sorted(p for p in source.iterdir() if p.suffix.lower() in IMAGE_SUFFIXES)
        if not files:
            raise ValueError(f"`IMAGE_OR_DIR` {str(source)!r} holds no puzzle image ({', '.join(IMAGE_SUFFIXES)}) "
                             "and no RAVEN_*.npz files")
    else:
        if source.suffix.lower() not in IMAGE_SUFFIXES:
            raise ValueError(f"`IMAGE_OR_DIR` {str(source)!r} has to be an image ({', '.join(IMAGE_SUFFIXES)}) or a "
                             "folder")
        files = [source]
    if args.limit is not None:
        files = files[: args.limit]
    from PIL import Image, UnidentifiedImageError

    items = []
    for path in files:
        try:
            with Image.open(path) as im:
                image = im.convert("RGB")
        except (UnidentifiedImageError, OSError) as err:
            raise ValueError(f"cannot read image {str(path)!r}: {err}") from None
        items.append(_sidecar_item(path, image))
    return items


def _solve(args) -> int:
    import json
    from pathlib import Path

    from hfx._artifacts import prepare_output_dir, require_artifact

    if args.proposer == "vlm" and not args.model:
        raise ValueError("`--proposer vlm` needs `--model` (an image-text-to-text model folder)")
    if args.proposer == "attribute" and args.model:
        raise ValueError("`--model` is only used with `--proposer vlm`")
    if args.pipeline is not None:
        require_artifact(args.pipeline, ("hfx_crd",), arg="--pipeline", what="a folder saved by CRDPipeline")
    out = prepare_output_dir(args.out, overwrite=args.overwrite, create=False)
    items = _read_inputs(args)
    if args.proposer == "attribute":
        missing = [str(it.get("id")) for it in items if not it.get("attributes")]
        if missing:
            raise ValueError(f"--proposer attribute needs symbolic attributes, but {missing[:3]} have no sidecar JSON "
                             "(written by `hfx crd generate`) or RAVEN annotation; use --proposer vlm --model DIR")
    from hfx.vision.crd import AttributeProposer, CRDConfig, CRDPipeline

    config = CRDPipeline.from_pretrained(args.pipeline).config if args.pipeline else CRDConfig()
    changes = {k: v for k, v in (("selection", args.selection), ("seed", args.seed)) if v is not None}
    config = config.replace(**changes) if changes else config
    if args.proposer == "vlm":
        from hfx.vision.crd import VLMConceptProposer

        proposer = VLMConceptProposer.from_pretrained(args.model)
    else:
        proposer = AttributeProposer(args.noise, seed=args.seed or 0)
    pipe = CRDPipeline(proposer=proposer, config=config)
    outputs = pipe(items, return_trace=False)
    out = prepare_output_dir(out, overwrite=args.overwrite)
    with open(out / "results.jsonl", "w", encoding="utf-8") as f:
        f.writelines(json.dumps(o.to_dict()) + "\n" for o in outputs)
    known = [o.correct for o in outputs if o.correct is not None]
    summary = {"puzzles": len(outputs), "with_target": len(known),
               "accuracy": sum(known) / len(known) if known else None, "proposer": args.proposer,
               "selection": config.selection, "timings_s": pipe.timings}
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
    pipe.save_pretrained(out / "pipeline")
    if args.plot:
        import matplotlib.pyplot as plt

        for o, item in zip(outputs, items):
            fig = pipe.plot(o, item)
            fig.savefig(out / f"{Path(str(o.item_id)).name or 'puzzle'}.png", dpi=100)
            plt.close(fig)
    for o in outputs:
        mark = "" if o.correct is None else ("  (correct)" if o.correct else f"  (target {o.target + 1})")
        rules = ", ".join(f"{name}: {o.rules[name].rule}" for name in o.selected_concepts) or "none"
        print(f"{o.item_id}: answer {o.answer + 1}{mark}; concepts {rules}")
    if known:
        print(f"accuracy {summary['accuracy']:.3f} on {len(known)} puzzles with a known target")
    print(f"wrote {out / 'results.jsonl'}")
    return 0


def _generate(args) -> int:
    import json

    from hfx._artifacts import prepare_output_dir
    from hfx.vision.crd import data

    out = prepare_output_dir(args.out, overwrite=args.overwrite)
    matrices = data.generate_matrices(args.split, args.size, args.seed, configuration=args.configuration,
                                      answer_set=args.answer_set)
    for k, m in enumerate(matrices):
        row = data.matrix_to_row(m, item_id=m["id"], render=False, answer_set=args.answer_set)
        panels = [data.render_panel(p, args.image_size) for p in [*m["panels"][:8], *m["candidates"]]]
        data.render_puzzle(panels[:8], panels[8:], args.image_size).save(out / f"puzzle_{k:04d}.png")
        meta = {"id": m["id"], "target": row["target"], "configuration": row["configuration"],
                "attributes": json.loads(row["attributes"]), "concepts": json.loads(row["concepts"]),
                "rules": row["rules"], "modified": row["modified"]}
        (out / f"puzzle_{k:04d}.json").write_text(json.dumps(meta))
    print(f"wrote {len(matrices)} puzzles to {out}")
    return 0


def run(args) -> int:
    return _solve(args) if args.crd_command == "solve" else _generate(args)
