"""CRD evidence and cost on generated RAVEN-style matrices with I-RAVEN answer sets.

Stages (each result is written to ``benchmarks/results/crd.json`` as soon as it is done; ``--resume`` skips stages
already there):

* ``dev`` -- hyper-parameters chosen on the **validation** split only (never reported as a result): the subset
  prior's ``parsimony``, the ordinal noise grid, the outlier probability and the Dirichlet concentration, by mean
  answer accuracy of CRD over the three noise levels. The parsimony sweep uses the exact best subset (the target MH
  samples from) for speed; the chosen setting is then run with MH as well.
* ``test`` -- the **test** split: ``--test-per-config`` matrices of each configuration (center_single,
  distribute_four, distribute_nine), attribute proposer at noise 0 / 0.1 / 0.3 (wrong values, missing concepts and
  distractor concepts at that rate). Arms, all on the same proposals: CRD (MH), all concepts (no selection), a random
  subset, the exhaustive best subset, the oracle subset (the generator's governed concepts that were proposed), a
  context-blind frequency scorer on the proposed candidate values, and a context-blind logistic regression trained on
  the train split's true candidate attributes. Answer accuracy with Wilson 95 % intervals; paired differences with a
  bootstrap interval and an exact McNemar test; concept recovery (precision / recall, :func:`concept_recovery`).
* ``throughput`` -- matrices solved per second by ``CRDPipeline`` (attribute proposer, noise 0.1, MH), and the share
  of the time spent in the MH search.

**Primary test (fixed before the run):** CRD (MH) vs all concepts without selection, answer accuracy on the test
matrices of all configurations pooled, attribute proposer at noise 0.1, exact two-sided McNemar test at alpha 0.05.
Every other comparison is secondary.

    OMP_NUM_THREADS=1 nice -n 10 python benchmarks/crd.py --stage all --max-minutes 90

Per-item outcomes go to ``benchmarks/results/crd_items.jsonl`` (one line per test matrix and noise level).
"""

from __future__ import annotations

import argparse
import datetime
import itertools
import json
import os
import sys
import time
from pathlib import Path

import numpy as np


ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "crd.json"
ITEMS = ROOT / "benchmarks" / "results" / "crd_items.jsonl"
CONFIGURATIONS = ("center_single", "distribute_four", "distribute_nine")
NOISES = (0.0, 0.1, 0.3)
PRIMARY = {
    "comparison": "crd_mh - all_concepts",
    "noise": 0.1,
    "outcome": "answer accuracy (0/1 per test matrix), all configurations pooled",
    "test": "exact two-sided McNemar, alpha 0.05",
    "fixed_before_run": True,
}
DEV_GRID = {
    "parsimony": (0.0, 0.5, 1.0, 2.0),
    "noise_std": ((0.05, 0.3), (0.1, 0.5)),
    "outlier_prob": (0.05, 0.15),
    "dirichlet_alpha": (1.0, 5.0),
}


def log(*args):
    print(f"[{time.strftime('%H:%M:%S')}]", *args, flush=True)


def load_results() -> dict:
    return json.loads(RESULTS.read_text()) if RESULTS.is_file() else {}


def save_results(data: dict) -> None:
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    tmp = RESULTS.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=1, sort_keys=False))
    tmp.replace(RESULTS)


def matrices(split: str, per_config: int, seed: int):
    from hfx.vision.crd import data

    out = []
    for config in CONFIGURATIONS:
        out += data.generate_matrices(split, per_config, seed, configuration=config)
    return out


def governed(ms):
    from hfx.vision.crd.data import governed_concepts

    return [governed_concepts(m) for m in ms]


def run_arm(pipe, proposals, evidence, ms, subsets=None):
    outs = []
    bs = pipe.config.batch_size
    for k, start in enumerate(range(0, len(proposals), bs)):
        outs += pipe.solve_proposals(proposals[start : start + bs], ms[start : start + bs], batch_index=k,
                                     return_trace=False, return_fitted=False, evidence=evidence[start : start + bs],
                                     subsets=None if subsets is None else subsets[start : start + bs])
    return outs


def accuracy(outs) -> float:
    return float(np.mean([o.correct for o in outs]))


# ---------------------------------------------------------------------------------------------------- dev stage
def stage_dev(args) -> dict:
    from hfx.vision.crd import AttributeProposer, CRDConfig, CRDPipeline
    from hfx.vision.crd.evidence import EvidenceModel

    ms = matrices("validation", args.dev_per_config, args.seed)
    proposals = {noise: AttributeProposer(noise, seed=args.seed + 1).propose(ms) for noise in NOISES}
    rows = []
    evidence_keys = ("noise_std", "outlier_prob", "dirichlet_alpha")
    for values in itertools.product(*(DEV_GRID[k] for k in evidence_keys)):
        settings = dict(zip(evidence_keys, values))
        base = CRDConfig(**settings)
        model = EvidenceModel(base)
        evidence = {noise: model(proposals[noise]) for noise in NOISES}
        for parsimony in DEV_GRID["parsimony"]:
            cfg = base.replace(parsimony=parsimony, selection="exhaustive")
            pipe = CRDPipeline(config=cfg)
            accs = {str(noise): accuracy(run_arm(pipe, proposals[noise], evidence[noise], ms)) for noise in NOISES}
            row = {**{k: list(v) if isinstance(v, tuple) else v for k, v in settings.items()},
                   "parsimony": parsimony, "accuracy": accs, "mean_accuracy": float(np.mean(list(accs.values())))}
            rows.append(row)
            log("dev", row)
    best = max(rows, key=lambda r: r["mean_accuracy"])
    chosen = {k: best[k] for k in (*evidence_keys, "parsimony")}
    cfg = CRDConfig(**{k: tuple(v) if isinstance(v, list) else v for k, v in chosen.items()})
    model = EvidenceModel(cfg)
    mh = {}
    for noise in NOISES:
        ev = model(proposals[noise])
        mh[str(noise)] = accuracy(run_arm(CRDPipeline(config=cfg), proposals[noise], ev, ms))
    log("dev chosen", chosen, "MH accuracy", mh)
    return {"split": "validation", "matrices": len(ms), "per_configuration": args.dev_per_config,
            "grid": {k: [list(v) if isinstance(v, tuple) else v for v in vals] for k, vals in DEV_GRID.items()},
            "criterion": "mean answer accuracy over noise 0 / 0.1 / 0.3 (exhaustive best subset = the MH target)",
            "rows": rows, "chosen": chosen, "chosen_mh_accuracy": mh}


# --------------------------------------------------------------------------------------------------- test stage
def learned_context_blind(train_ms, test_ms, seed: int):
    """Logistic regression on each candidate's true attributes (one-hot) and their frequency among the candidates;
    the highest-probability candidate is the answer. Sees no context panel."""
    from sklearn.linear_model import LogisticRegression

    from hfx.vision.crd import data
    from hfx.vision.crd.metrics import candidate_tuples, frequency_scores

    names = ("number", "position", "type", "size", "color", "angle")

    def features(ms):
        x, y = [], []
        for m in ms:
            cands = candidate_tuples(m, names)
            freq = frequency_scores(cands)
            for j, c in enumerate(cands):
                f = [m["configuration"] == k for k in CONFIGURATIONS]
                f += [c[0] == v for v in range(1, 10)] + [c[2] == v for v in data.SHAPES]
                f += [c[3] == v for v in data.SIZES] + [c[4] == v for v in data.COLORS] + [freq[j]]
                x.append(f)
                y.append(j == m["target"])
        return np.asarray(x, dtype=float), np.asarray(y)

    xtr, ytr = features(train_ms)
    xte, _ = features(test_ms)
    clf = LogisticRegression(max_iter=3000, random_state=seed).fit(xtr, ytr)
    probs = clf.predict_proba(xte)[:, 1].reshape(len(test_ms), -1)
    return [int(np.argmax(p)) == m["target"] for p, m in zip(probs, test_ms)]


def summarise(correct: dict[str, list[bool]], configs: list[str]) -> dict:
    from hfx.utils.stats import wilson_interval

    out = {}
    for arm, c in correct.items():
        c = np.asarray(c, dtype=bool)
        entry = {"accuracy": float(c.mean()), "ci95": list(wilson_interval(int(c.sum()), len(c))), "n": len(c)}
        per = {}
        for config in CONFIGURATIONS:
            mask = np.asarray([x == config for x in configs])
            k = c[mask]
            per[config] = {"accuracy": float(k.mean()), "ci95": list(wilson_interval(int(k.sum()), len(k))),
                           "n": int(mask.sum())}
        entry["per_configuration"] = per
        out[arm] = entry
    return out


def recovery(outs_by_arm: dict, truth) -> dict:
    from hfx.utils.stats import bootstrap_ci
    from hfx.vision.crd.metrics import concept_recovery

    out = {}
    for arm, outs in outs_by_arm.items():
        rec = concept_recovery([o.selected_concepts for o in outs], truth)
        precision = [p["precision"] for p in rec["per_item"] if p["precision"] is not None]
        recall = [p["recall"] for p in rec["per_item"] if p["recall"] is not None]
        out[arm] = {
            "precision_micro": rec["precision"], "recall_micro": rec["recall"], "f1_micro": rec["f1"],
            "exact_match": rec["exact_match"],
            "precision_macro": float(np.mean(precision)) if precision else None,
            "precision_macro_ci95": list(bootstrap_ci(precision, seed=0)) if precision else None,
            "recall_macro": float(np.mean(recall)) if recall else None,
            "recall_macro_ci95": list(bootstrap_ci(recall, seed=0)) if recall else None,
            "items_with_empty_selection": sum(p["precision"] is None for p in rec["per_item"]),
        }
    return out


def stage_test(args, chosen: dict) -> dict:
    from hfx.utils.stats import paired_difference
    from hfx.vision.crd import AttributeProposer, CRDConfig, CRDPipeline
    from hfx.vision.crd.evidence import EvidenceModel
    from hfx.vision.crd.metrics import argmax_random_ties, frequency_scores

    cfg = CRDConfig(**{k: tuple(v) if isinstance(v, list) else v for k, v in chosen.items()})
    ms = matrices("test", args.test_per_config, args.seed)
    truth = governed(ms)
    configs = [m["configuration"] for m in ms]
    log(f"test: {len(ms)} matrices")
    tic = time.time()
    blind_learned = learned_context_blind(matrices("train", args.train_per_config, args.seed), ms, args.seed)
    log(f"learned context-blind scorer: {np.mean(blind_learned):.3f} ({time.time() - tic:.0f}s)")
    model = EvidenceModel(cfg)
    results, per_item = {}, []
    for noise in NOISES:
        tic = time.time()
        proposals = AttributeProposer(noise, seed=args.seed + 1).propose(ms)
        evidence = model(proposals)
        arms = {
            "crd_mh": run_arm(CRDPipeline(config=cfg.replace(selection="mh")), proposals, evidence, ms),
            "all_concepts": run_arm(CRDPipeline(config=cfg.replace(selection="all")), proposals, evidence, ms),
            "random_subset": run_arm(CRDPipeline(config=cfg.replace(selection="random")), proposals, evidence, ms),
            "exhaustive_best": run_arm(CRDPipeline(config=cfg.replace(selection="exhaustive")), proposals, evidence,
                                       ms),
            "oracle_subset": run_arm(CRDPipeline(config=cfg), proposals, evidence, ms,
                                     subsets=[[c for c in p.names if c in set(t)] for p, t in zip(proposals, truth)]),
        }
        rng = np.random.default_rng(args.seed)
        blind = [argmax_random_ties(frequency_scores(list(zip(*[c.candidate_values for c in p.concepts]))), rng)
                 == m["target"] for p, m in zip(proposals, ms)]
        correct = {arm: [bool(o.correct) for o in outs] for arm, outs in arms.items()}
        correct["context_blind_frequency"] = [bool(b) for b in blind]
        correct["context_blind_learned"] = [bool(b) for b in blind_learned]
        comparisons = {}
        for other in ("all_concepts", "random_subset", "exhaustive_best", "oracle_subset", "context_blind_frequency",
                      "context_blind_learned"):
            comparisons[f"crd_mh - {other}"] = paired_difference(
                np.asarray(correct["crd_mh"], float), np.asarray(correct[other], float), test="mcnemar", seed=0)
        agree = float(np.mean([a.selected_concepts == b.selected_concepts
                               for a, b in zip(arms["crd_mh"], arms["exhaustive_best"])]))
        results[str(noise)] = {
            "accuracy": summarise(correct, configs),
            "comparisons": comparisons,
            "concept_recovery": recovery({k: v for k, v in arms.items() if k != "oracle_subset"}, truth),
            "mh_equals_exhaustive_subset": agree,
            "mh_acceptance_rate_mean": float(np.mean([o.acceptance_rate for o in arms["crd_mh"]])),
            "proposed_concepts_mean": float(np.mean([len(p.concepts) for p in proposals])),
            "seconds": time.time() - tic,
        }
        for k, m in enumerate(ms):
            row = {"id": m["id"], "configuration": m["configuration"], "noise": noise, "target": m["target"],
                   "governed": truth[k], "proposed": proposals[k].names}
            for arm, outs in arms.items():
                row[arm] = {"answer": outs[k].answer, "correct": bool(outs[k].correct),
                            "selected": outs[k].selected_concepts}
            row["crd_mh"]["acceptance_rate"] = arms["crd_mh"][k].acceptance_rate
            row["context_blind_frequency"] = {"correct": correct["context_blind_frequency"][k]}
            row["context_blind_learned"] = {"correct": correct["context_blind_learned"][k]}
            per_item.append(row)
        log(f"noise {noise}: " + ", ".join(f"{a} {np.mean(c):.3f}" for a, c in correct.items())
            + f" ({time.time() - tic:.0f}s)")
    ITEMS.write_text("".join(json.dumps(r) + "\n" for r in per_item))
    primary = results[str(PRIMARY["noise"])]["comparisons"][PRIMARY["comparison"]]
    return {"split": "test", "matrices": len(ms), "per_configuration": args.test_per_config,
            "train_matrices_for_learned_blind": args.train_per_config * len(CONFIGURATIONS),
            "config": cfg.to_dict(), "noise_levels": list(NOISES), "results": results,
            "primary_result": {**PRIMARY, **primary,
                               "significant": bool(primary["p_value"] < 0.05)},
            "items_file": ITEMS.name}


# --------------------------------------------------------------------------------------------- throughput stage
def stage_throughput(args, chosen: dict) -> dict:
    from hfx.vision.crd import AttributeProposer, CRDConfig, CRDPipeline

    cfg = CRDConfig(**{k: tuple(v) if isinstance(v, list) else v for k, v in chosen.items()})
    ms = matrices("test", args.throughput_per_config, args.seed + 7)
    pipe = CRDPipeline(AttributeProposer(0.1, seed=1), config=cfg)
    pipe(ms[: cfg.batch_size], return_trace=False, return_fitted=False, progress=False)  # warm-up (kernel tables)
    runs = []
    for _ in range(args.repeats):
        tic = time.perf_counter()
        cpu = time.process_time()
        pipe(ms, return_trace=False, return_fitted=False, progress=False)
        runs.append({"wall_s": time.perf_counter() - tic, "cpu_s": time.process_time() - cpu, **pipe.timings})
    best = min(runs, key=lambda r: r["wall_s"])
    total = sum(best[k] for k in ("propose", "evidence", "selection", "answers"))
    return {"matrices": len(ms), "batch_size": cfg.batch_size, "num_chains": cfg.num_chains,
            "num_steps": cfg.num_steps, "runs": runs,
            "matrices_per_second": len(ms) / best["wall_s"],
            "mh_share": best["selection"] / total, "stage_share": {k: best[k] / total for k in
                                                                  ("propose", "evidence", "selection", "answers")},
            "loadavg": list(os.getloadavg())}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--stage", choices=("dev", "test", "throughput", "all"), default="all")
    parser.add_argument("--dev-per-config", type=int, default=200)
    parser.add_argument("--test-per-config", type=int, default=600)
    parser.add_argument("--train-per-config", type=int, default=2000)
    parser.add_argument("--throughput-per-config", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--resume", action="store_true", help="skip stages already in the results file")
    parser.add_argument("--max-minutes", type=float, default=120.0, help="stop before starting a stage past this")
    parser.add_argument("--results", type=Path, default=None, help="results JSON (per-item JSONL beside it)")
    args = parser.parse_args(argv)
    if args.results is not None:
        global RESULTS, ITEMS
        RESULTS, ITEMS = args.results, args.results.with_name(args.results.stem + "_items.jsonl")
    start = time.time()
    data = load_results() if args.resume else {}
    command = "OMP_NUM_THREADS=1 nice -n 10 python benchmarks/crd.py " + " ".join(sys.argv[1:] if argv is None else argv)
    stages = ("dev", "test", "throughput") if args.stage == "all" else (args.stage,)
    for stage in stages:
        if args.resume and stage in data:
            log(f"{stage}: already done, skipped")
            continue
        if (time.time() - start) / 60 > args.max_minutes:
            log(f"--max-minutes {args.max_minutes} reached before {stage}; rerun with --resume")
            break
        if stage in ("test", "throughput") and "dev" not in data:
            data = {**load_results(), **data}
            if "dev" not in data:
                raise SystemExit("run the dev stage first (its choice fixes the test configuration)")
        chosen = data.get("dev", {}).get("chosen")
        tic = time.time()
        data[stage] = {"dev": stage_dev, "test": stage_test, "throughput": stage_throughput}[stage](
            args, *(() if stage == "dev" else (chosen,)))
        data[stage]["wall_s"] = time.time() - tic
        data[stage]["command"] = command
        log(f"{stage} done in {time.time() - tic:.0f}s")
        if "throughput" in data:
            data["metric"] = "matrices solved per second by CRDPipeline (attribute proposer, noise 0.1, MH) and MH share"
            data["value"] = {"matrices_per_second": data["throughput"]["matrices_per_second"],
                             "mh_share": data["throughput"]["mh_share"]}
        else:
            data.setdefault("metric", "matrices solved per second by CRDPipeline and MH share (throughput stage)")
            data.setdefault("value", None)
        data["goal"] = ("no speed goal (reported); evidence: " + PRIMARY["comparison"] + " at noise 0.1, McNemar "
                        "(primary test fixed before the run)")
        data["command"] = command
        data["date"] = datetime.date.today().isoformat()
        data["primary_test"] = PRIMARY
        save_results(data)
    return 0


if __name__ == "__main__":
    sys.exit(main())
