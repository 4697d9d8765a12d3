"""Overhead of `jaxlint trace` on a training loop: plain `python` vs `jaxlint trace`.

    python bench/trace_overhead.py [--runs 5] [--steps 2000]

Runs bench/mlp_train.py alternately three ways (plain, `jaxlint trace --no-static`, `jaxlint
trace` with its static cross-check) and compares the training loop's own time (measured inside
the script) and the whole process's wall time (start-up, the run, the report and the static
check), median of the runs. Target: ratio <= 1.05, the static cross-check included.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "mlp_train.py")


def loop_seconds(cmd: list) -> tuple:
    """(the loop's own seconds, the process's wall seconds)."""
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, check=True)
    wall = time.perf_counter() - start
    return json.loads(proc.stdout.strip().splitlines()[-1])["loop_seconds"], wall


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--steps", type=int, default=2000)
    args = ap.parse_args()
    cmds = {"python": [sys.executable, SCRIPT, str(args.steps)],
            "jaxlint trace --no-static": [sys.executable, "-m", "jaxlint", "trace", "--no-static", SCRIPT,
                                          str(args.steps)],
            "jaxlint trace": [sys.executable, "-m", "jaxlint", "trace", SCRIPT, str(args.steps)]}
    got: dict = {k: [] for k in cmds}
    for _ in range(args.runs):  # interleaved, so drift in machine load hits every way alike
        for k, cmd in cmds.items():
            got[k].append(loop_seconds(cmd))
    print(f"training loop, {args.steps} jitted steps, median of {args.runs} runs")
    base_loop = statistics.median(x[0] for x in got["python"])
    base_wall = statistics.median(x[1] for x in got["python"])
    for k, runs in got.items():
        loop, wall = statistics.median(x[0] for x in runs), statistics.median(x[1] for x in runs)
        print(f"  {k:<26} loop {loop:.3f} s ({loop / base_loop:.3f}x)   process {wall:.3f} s "
              f"({wall / base_wall:.3f}x)")
    print("  target: jaxlint trace <= 1.05x, the static cross-check included")


if __name__ == "__main__":
    main()
