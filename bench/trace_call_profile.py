"""cProfile of `jaxlint trace`'s per-call hooks on this backend: a tiny jitted step called
20,000 times inside the in-process audit; prints the jaxlint functions by their own time
(issue 38: where the dispatching thread's per-call cost goes on a given machine).

    python bench/trace_call_profile.py [--calls N] [--no-watcher]
"""
import argparse
import cProfile
import pstats
import sys

import jax
import jax.numpy as jnp

from jaxlint.trace import steps
from jaxlint.trace.auditing import Audit


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=20000)
    ap.add_argument("--no-watcher", action="store_true")
    args = ap.parse_args()
    if args.no_watcher:
        steps.Watcher.before = lambda self, *a, **k: None
    with Audit(user_roots=[sys.path[0] or "."]):
        @jax.jit
        def step(p, x):
            return [q * 0.999 + x for q in p], x.sum()

        p = [jnp.ones((256,)) for _ in range(6)]
        x = jnp.ones((256,))
        p, _ = step(p, x)
        prof = cProfile.Profile()
        prof.enable()
        for _ in range(args.calls):
            p, _ = step(p, x)
        jax.block_until_ready(p)
        prof.disable()
    print(f"backend {jax.default_backend()}, {args.calls} calls, watcher {'off' if args.no_watcher else 'on'}")
    st = pstats.Stats(prof)
    st.sort_stats("tottime").print_stats(18)


if __name__ == "__main__":
    main()
