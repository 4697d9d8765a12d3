"""`jaxlint trace`'s step-loop idle share against a hand measurement (issue 38).

    python bench/trace_hostbound.py [--steps 30] [--runs 1] [--json FILE]

For fixtures/trace/host_bound.py (host-bound on purpose) and device_bound.py: the hand
measurement is the program's own `--hand` mode (the loop timed without its host work and with it,
three times each, alternately, in one process): the device's idle share is then
1 - (time without) / (time with), since with asynchronous dispatch a step takes the longer of the
device's work and the host's. `jaxlint trace --format json` of the same program (its host-work
loop only) gives the report's idle share, verdict and top host line. Prints one row per program:
both shares, the difference in points, and whether the verdict is the expected one. Run it on
each backend (JAX_PLATFORMS=cpu for the CPU); targets: within 10 points on the TPU.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
FIX = os.path.join(os.path.dirname(HERE), "fixtures", "trace")
PROGRAMS = {"host_bound.py": True, "device_bound.py": False}  # program -> expected host-bound verdict


def hand(path: str, steps: int) -> dict:
    proc = subprocess.run([sys.executable, path, str(steps), "--hand"], capture_output=True, text=True, check=True,
                          timeout=600)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def traced(path: str, steps: int, variant: str = "full") -> dict:
    """``variant``: one of bench/trace_overhead_parts.py's (``gap30``: the watcher handed a call per 30 ms)."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "r.json")
        head = [sys.executable, "-m", "jaxlint", "trace", "--no-static"] if variant == "full" else \
            [sys.executable, os.path.join(HERE, "trace_overhead_parts.py"), "--child", variant]
        proc = subprocess.run([*head, "--format", "json", "-o", out, path, str(steps)], capture_output=True,
                              text=True, timeout=600)
        if not os.path.exists(out):
            raise RuntimeError(proc.stderr[-2000:])
        report = json.load(open(out))
    loops = [lp for lp in report["step_loops"]["loops"] if lp["function"] == "train_step"]
    lp = loops[0] if loops else None
    program = json.loads(proc.stdout.strip().splitlines()[-1])
    return {"loop": lp, "backend": report["environment"].get("backend"), "program_loop_seconds": program["loop_seconds"],
            "backend_note": report["step_loops"].get("backend_note")}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--runs", type=int, default=1, help="traced runs per program (the median share is shown)")
    ap.add_argument("--json", help="also write the rows here")
    ap.add_argument("--variant", default="full", help="a variant of bench/trace_overhead_parts.py to trace with")
    args = ap.parse_args()
    rows, bad = [], 0
    for name, expect in PROGRAMS.items():
        path = os.path.join(FIX, name)
        h = hand(path, args.steps)
        runs = [traced(path, args.steps, args.variant) for _ in range(args.runs)]
        shares = [r["loop"]["idle_share"] for r in runs if r["loop"]]
        share = statistics.median(shares) if shares else None
        lp = runs[-1]["loop"]
        verdict = lp["host_bound"] if lp else None
        top = lp["lines"][0] if lp and lp["lines"] else None
        row = {"program": name, "backend": runs[-1]["backend"], "hand_share": round(h["idle_share"], 4),
               "hand": h, "trace_share": share, "trace_shares": shares,
               "points": None if share is None else round(100 * (share - h["idle_share"]), 1),
               "host_bound": verdict, "expected": expect,
               "top_line": None if top is None else f"{os.path.basename(top['file'])}:{top['line']} ({top['what']}, "
                                                    f"{top['share']:.0%})",
               "loop": lp, "backend_note": runs[-1]["backend_note"]}
        rows.append(row)
        bad += verdict is not expect
        print(f"{name:<17} {row['backend']:<4} hand {h['idle_share']:6.1%} (without host work "
              f"{h['without_host_work']:.3f} s, with {h['with_host_work']:.3f} s)  trace "
              f"{'-' if share is None else f'{share:6.1%}'}  diff {row['points']} points  "
              f"{'host-bound' if verdict else 'not host-bound'} ({'right' if verdict is expect else 'WRONG'})  "
              f"top line {row['top_line']}", flush=True)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(rows, fh, indent=1)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
