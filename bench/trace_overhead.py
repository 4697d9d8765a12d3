"""Overhead of `jaxlint trace` on a training loop: plain `python` vs `jaxlint trace`.

    python bench/trace_overhead.py [--runs 5] [--steps 2000]

Runs bench/mlp_train.py alternately both ways and compares the training loop's
own time (measured inside the script), median of the runs. Target: ratio <= 1.05.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "mlp_train.py")


def loop_seconds(cmd: list) -> float:
    proc = subprocess.run(cmd, capture_output=True, text=True, check=True)
    return json.loads(proc.stdout.strip().splitlines()[-1])["loop_seconds"]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--steps", type=int, default=2000)
    args = ap.parse_args()
    plain_cmd = [sys.executable, SCRIPT, str(args.steps)]
    traced_cmd = [sys.executable, "-m", "jaxlint", "trace", "--no-static", SCRIPT, str(args.steps)]
    plain, traced = [], []
    for _ in range(args.runs):  # interleaved, so drift in machine load hits both alike
        plain.append(loop_seconds(plain_cmd))
        traced.append(loop_seconds(traced_cmd))
    p, t = statistics.median(plain), statistics.median(traced)
    print(f"training loop, {args.steps} jitted steps, median of {args.runs} runs")
    print(f"  python        {p:.3f} s   runs: {', '.join(f'{x:.3f}' for x in plain)}")
    print(f"  jaxlint trace {t:.3f} s   runs: {', '.join(f'{x:.3f}' for x in traced)}")
    print(f"  ratio         {t / p:.3f}  (target <= 1.05)")


if __name__ == "__main__":
    main()
