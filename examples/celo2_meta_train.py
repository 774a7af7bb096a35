"""Meta-train Celo2's MLP with PES on CPU-sized tasks, then publish the result as a Hub folder.

Paper: "Celo2: Towards Learned Optimization Free Lunch" (arXiv:2602.19142). The recipe, its CPU-scale changes and the
task families are documented in ``hfx.optim.celo2.meta_train`` and ``hfx.optim.celo2.tasks``.

    OMP_NUM_THREADS=1 nice -n 5 python examples/celo2_meta_train.py --max-minutes 40 --out outputs/celo2_meta
    hfx publish celo2 --source outputs/celo2_meta/final --out outputs/celo2_hub
"""

from __future__ import annotations

import argparse
import json


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--max-minutes", type=float, default=40.0)
    parser.add_argument("--out", default="outputs/celo2_meta")
    parser.add_argument("--particles", type=int, default=8, help="antithetic PES pairs per task family")
    parser.add_argument("--resume", action="store_true")
    parser.add_argument("--publish", default=None, help="also write a Hub-ready folder here")
    args = parser.parse_args()

    from hfx.optim.celo2.meta_train import MetaTrainConfig, MetaTrainer

    cfg = MetaTrainConfig(max_minutes=args.max_minutes, output_dir=args.out, num_particles=args.particles)
    final = MetaTrainer(cfg).train(resume=args.resume)
    summary = json.loads((final.parent / "summary.json").read_text())
    print(
        json.dumps(
            {k: summary[k] for k in ("outer_iterations_done", "wall_minutes", "final_eval", "best_eval")}, indent=2
        )
    )
    if args.publish:
        from hfx.hub import publish

        print("published:", publish("celo2", args.publish, source=str(final.parent / "best")))


if __name__ == "__main__":
    main()
