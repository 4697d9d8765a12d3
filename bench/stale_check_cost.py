"""What JAX603's runtime watch costs per jitted call: `Watch.check` (jaxlint/trace/stale.py), the
work `jaxlint trace` adds after each call of a traced user function, timed alone for a function
that reads N globals (scalars, arrays) and closure variables. No jax needed.

    python bench/stale_check_cost.py [--calls 200000]

Prints microseconds per check for each N (median of 5 repeats).
"""

import argparse
import statistics
import sys
import time

import numpy as np

from jaxlint.trace import stale

RATE, TABLE = 0.1, np.ones(1000)


def make(n: int):
    """A function reading n names: half globals (a float, an array), half closure variables."""
    g = {"np": np}
    names = []
    for i in range(n - n // 2):
        g[f"g{i}"] = RATE if i % 2 == 0 else TABLE
        names.append(f"g{i}")
    cells = [f"c{i}" for i in range(n // 2)]
    body = " + ".join(names + cells) or "0"
    src = (f"def outer():\n" + "".join(f"    {c} = {RATE}\n" for c in cells)
           + f"    def f(x):\n        return x + {body}\n    return f\n")
    exec(src, g)
    return g["outer"]()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=200_000)
    args = ap.parse_args()
    print(f"Watch.check per call, median of 5 x {args.calls} ({sys.version.split()[0]})")
    for n in (0, 1, 4, 16, 64):
        watches: dict = {}
        f = make(n)
        stale.watch(watches, f.__code__, f, lambda path: False)
        w = watches[f.__code__]
        assert len(w.slots) == n, (n, [s.name for s in w.slots])
        hits = []
        runs = []
        for _ in range(5):
            t = time.perf_counter()
            for _ in range(args.calls):
                w.check(hits.append)
            runs.append((time.perf_counter() - t) / args.calls * 1e6)
        assert not hits
        print(f"  {n:>3} names: {statistics.median(runs):.3f} µs")


if __name__ == "__main__":
    main()
