"""`jaxlint trace` on four real programs nobody on the team wrote (reduced from the libraries'
documented examples, synthetic data, seconds each: bench/programs/), checked against a
``jax.monitoring`` listener that runs without jaxlint.

    python bench/trace_programs.py [PROGRAM ...]

For each program: its stdout and exit code plain and under `jaxlint trace` (must be identical),
the compilations the listener counts in the plain run against the report's (every function's
compiles plus JAX's internal ones), their seconds, and the report's rows and host transfers.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
PROGRAMS = os.path.join(HERE, "programs")
COUNT = """
import json, os, runpy, sys
import jax
from jax._src import dispatch
seen = {"compiles": 0, "seconds": 0.0}
def listen(event, duration, **kw):
    if event == dispatch.BACKEND_COMPILE_EVENT:
        seen["compiles"] += 1
        seen["seconds"] += duration
jax.monitoring.register_event_duration_secs_listener(listen)
sys.argv = sys.argv[1:]
try:
    runpy.run_path(sys.argv[0], run_name="__main__")
finally:
    with open(os.environ["COMPILES_OUT"], "w") as fh:
        json.dump(seen, fh)
"""
# what the programs print that changes from run to run (none of them prints timings today)
_VOLATILE = re.compile(r"\d+\.\d+ s\b")


def run(name: str) -> dict:
    path = os.path.join(PROGRAMS, name)
    with tempfile.TemporaryDirectory() as tmp:
        counts, report_path = os.path.join(tmp, "c.json"), os.path.join(tmp, "r.json")
        plain = subprocess.run([sys.executable, "-c", COUNT, path], capture_output=True, text=True, timeout=900,
                               env=dict(os.environ, COMPILES_OUT=counts))
        seen = json.load(open(counts))
        traced = subprocess.run([sys.executable, "-m", "jaxlint", "trace", "--format", "json", "-o", report_path,
                                 path], capture_output=True, text=True, timeout=900)
        report = json.load(open(report_path))
    compiles = sum(f["compiles"] for f in report["functions"]) + report["internal_compiles"]
    return {
        "program": name,
        "same output": _VOLATILE.sub("", plain.stdout) == _VOLATILE.sub("", traced.stdout)
        and plain.returncode == traced.returncode,
        "compiles (listener, jaxlint)": (seen["compiles"], compiles),
        # backend compiles only (the listener's event), each from its own run: a few % apart is noise
        "compile s (listener, jaxlint)": (round(seen["seconds"], 2), round(
            sum(f["compile_seconds"] for f in report["functions"]) + report["internal_compile_seconds"], 2)),
        "rows": [(f["qualname"], f["compiles"], f["calls"], f["lost_seconds"] and round(f["lost_seconds"], 2))
                 for f in report["functions"]],
        "transfers": [(t["line"], t["kind"], t["count"]) for t in report["transfers"]],
        "partial": report["partial"],
    }


def main(argv=None) -> int:
    names = (argv or sys.argv[1:]) or sorted(n for n in os.listdir(PROGRAMS) if n.endswith(".py"))
    bad = 0
    for name in names:
        r = run(name)
        exact = r["same output"] and r["compiles (listener, jaxlint)"][0] == r["compiles (listener, jaxlint)"][1]
        bad += not exact
        print(json.dumps(r))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
