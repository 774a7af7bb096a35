"""CRD quick tour: generate RAVEN-style matrices, decompose one with a noisy attribute proposer, draw it.

    OMP_NUM_THREADS=1 python examples/crd_quickstart.py [--out docs/figures/crd_decomposition.png]

Prints the selected concepts, their rules and Bayes factors, the MH acceptance rate and the answer, then the accuracy
of CRD and of "all concepts" on 64 matrices (a demo, not the evidence: see ``benchmarks/crd.py``).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from hfx.vision.crd import AttributeProposer, CRDPipeline, load_dataset


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=Path("outputs/crd_decomposition.png"))
    parser.add_argument("--index", type=int, default=2, help="which test matrix to draw")
    args = parser.parse_args(argv)

    matrices = load_dataset("test", size=64, seed=0, configuration="distribute_four")
    pipe = CRDPipeline(proposer=AttributeProposer(noise=0.1, seed=0))
    row = matrices[args.index]
    out = pipe(row)
    print(f"{out.item_id}: answer {out.answer + 1}, target {out.target + 1}, acceptance {out.acceptance_rate:.2f}")
    for name, rule in out.rules.items():
        mark = "*" if rule.selected else " "
        print(f" {mark} {name:10s} {rule.rule:17s} log BF {rule.log_bayes_factor:6.2f}  p(in S) "
              f"{rule.inclusion_probability:.2f}  confidence {rule.confidence:.2f}")
    fig = pipe.plot(out, row)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(args.out, dpi=110)
    print(f"wrote {args.out}")
    crd = pipe(matrices, progress=False)
    everything = CRDPipeline(proposer=pipe.proposer, config=pipe.config.replace(selection="all"))(matrices,
                                                                                                  progress=False)
    print(f"accuracy on {len(matrices)} matrices: CRD {sum(o.correct for o in crd) / len(crd):.3f}, "
          f"all concepts {sum(o.correct for o in everything) / len(everything):.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
