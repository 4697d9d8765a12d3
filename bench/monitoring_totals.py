"""Trace, lowering and compile seconds of a program as JAX's own ``jax.monitoring`` reports them,
without jaxlint: the reference that ``jaxlint trace``'s per-function seconds are checked against.

    python bench/monitoring_totals.py [--json] script.py [args ...]

Runs ``script.py`` as ``__main__`` with only a ``jax.monitoring`` duration listener registered,
then prints, per event (trace, lower, compile) and per ``fun_name`` the event carries, the count
and the seconds, and the wall time from just before the program started to its end. Names are
JAX's: ``predict`` for the trace, ``jit_predict`` for the lowering and the compile of
``jax.jit(predict)``; JAX's eager operations appear under their primitive's name.
"""

from __future__ import annotations

import argparse
import json
import runpy
import sys
import time
from collections import defaultdict

EVENTS = {
    "/jax/core/compile/jaxpr_trace_duration": "trace",
    "/jax/core/compile/jaxpr_to_mlir_module_duration": "lower",
    "/jax/core/compile/backend_compile_duration": "compile",
}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.add_argument("script")
    p.add_argument("args", nargs=argparse.REMAINDER)
    a = p.parse_args(argv)
    import jax

    totals: dict = defaultdict(lambda: [0, 0.0])

    def listener(event, duration, **kwargs):
        kind = EVENTS.get(event)
        if kind is not None:
            entry = totals[(kind, str(kwargs.get("fun_name", "")))]
            entry[0] += 1
            entry[1] += duration

    jax.monitoring.register_event_duration_secs_listener(listener)
    sys.argv = [a.script, *a.args]
    t0 = time.perf_counter()
    code = 0
    try:
        runpy.run_path(a.script, run_name="__main__")
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    wall = time.perf_counter() - t0
    rows = [{"event": k, "fun_name": n, "count": c, "seconds": round(s, 6)}
            for (k, n), (c, s) in sorted(totals.items(), key=lambda kv: (kv[0][1], kv[0][0]))]
    out = sys.__stderr__
    if a.json:
        print(json.dumps({"wall_seconds": round(wall, 6), "events": rows}, indent=1), file=out)
    else:
        print(f"{'event':<8} {'count':>5} {'seconds':>9}  fun_name", file=out)
        for r in rows:
            print(f"{r['event']:<8} {r['count']:>5} {r['seconds']:>9.4f}  {r['fun_name']}", file=out)
        for kind in ("trace", "lower", "compile"):
            n = sum(r["count"] for r in rows if r["event"] == kind)
            s = sum(r["seconds"] for r in rows if r["event"] == kind)
            print(f"total {kind:<8} {n:>5} {s:>9.4f}", file=out)
        print(f"wall {wall:.4f} s", file=out)
    return code


if __name__ == "__main__":
    sys.exit(main())
