"""Import cost of `import hfx` vs `import transformers` (goal: hfx <= transformers + 20 %).

Each statement runs in a fresh interpreter (`python -X importtime`), best of N runs; the cumulative time of the
top-level package is read from the importtime report. Writes benchmarks/results/import_time.json.

    python benchmarks/import_time.py [--repeats 5]
"""

import argparse
import datetime
import json
import re
import subprocess
import sys
from pathlib import Path


def cumulative_us(module: str, repeats: int) -> int:
    best = None
    for _ in range(repeats):
        out = subprocess.run(
            [sys.executable, "-X", "importtime", "-c", f"import {module}"], capture_output=True, text=True, check=True
        ).stderr
        # lines: "import time: self [us] | cumulative | imported package"
        for line in out.splitlines():
            m = re.match(r"import time:\s+(\d+) \|\s+(\d+) \|\s?(\S.*)$", line)
            if m and m.group(3) == module:
                value = int(m.group(2))
                best = value if best is None else min(best, value)
    return best


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    hfx_us = cumulative_us("hfx", args.repeats)
    transformers_us = cumulative_us("transformers", args.repeats)
    ratio = hfx_us / transformers_us
    result = {
        "metric": "import_time_ratio_hfx_over_transformers",
        "value": round(ratio, 4),
        "goal": "<= 1.20",
        "command": f"python benchmarks/import_time.py --repeats {args.repeats}",
        "date": datetime.date.today().isoformat(),
        "hfx_import_ms": hfx_us / 1000,
        "transformers_import_ms": transformers_us / 1000,
        "note": "import hfx loads neither torch nor transformers; its hooks install when those modules are imported",
    }
    out = Path(__file__).parent / "results" / "import_time.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(
        f"import hfx: {hfx_us / 1000:.1f} ms, import transformers: {transformers_us / 1000:.1f} ms, ratio {ratio:.3f}"
    )


if __name__ == "__main__":
    main()
