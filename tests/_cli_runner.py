"""Child process of the CLI tests: run ``hfx.cli.main`` on many argument lists under a memory limit.

Usage: ``python tests/_cli_runner.py CASES.json RESULTS.json``. CASES.json: ``{"memory_bytes": int, "watch": [dir,
...], "cases": [{"argv": [...], "outputs": [path, ...]}, ...]}``. Every case runs in-process (imports are paid
once) with ``RLIMIT_AS`` set, a fresh empty working directory, and its stderr captured; the result records the exit
status, stderr, whether an exception escaped ``main``, and every file created / changed / removed under the watched
folders and the working directory outside the case's declared outputs.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import resource
import sys
import tempfile
import time
import traceback
from pathlib import Path


def _snapshot(roots: list[Path]) -> dict[str, tuple[int, int]]:
    files = {}
    for root in roots:
        for dirpath, dirnames, filenames in os.walk(root):
            for name in dirnames + filenames:
                path = Path(dirpath) / name
                try:
                    st = path.lstat()
                except OSError:
                    continue
                files[str(path)] = (st.st_size, st.st_mtime_ns if path.is_file() else 0)
    return files


def main() -> None:
    spec = json.loads(Path(sys.argv[1]).read_text())
    limit = int(spec["memory_bytes"])
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    from hfx.cli import main as hfx_main

    results = []
    for case in spec["cases"]:
        cwd = Path(tempfile.mkdtemp(prefix="hfx-cli-cwd-"))
        os.chdir(cwd)
        roots = [Path(p) for p in spec["watch"]] + [cwd]
        before = _snapshot(roots)
        start = time.perf_counter()
        err, out = io.StringIO(), io.StringIO()
        escaped = None
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
            try:
                rc = hfx_main(list(case["argv"]))
            except SystemExit as exit_:  # argparse
                rc = exit_.code if isinstance(exit_.code, int) else 1
            except BaseException:  # noqa: BLE001 -- recorded: an exception escaping main is a failure
                rc = -1
                escaped = traceback.format_exc()
        after = _snapshot(roots)
        outputs = [str(Path(p).absolute()) for p in case.get("outputs", [])]
        changed = sorted(
            p for p in set(before) | set(after)
            if before.get(p) != after.get(p) and not any(p == o or p.startswith(o + os.sep) for o in outputs)
        )  # fmt: skip
        results.append(
            {
                "argv": case["argv"],
                "rc": rc,
                "stderr": err.getvalue(),
                "escaped": escaped,
                "strays": changed,
                "seconds": round(time.perf_counter() - start, 3),
            }
        )
        Path(sys.argv[2]).write_text(json.dumps(results))  # partial results survive a crash


if __name__ == "__main__":
    main()
