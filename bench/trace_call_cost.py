"""What each part of `jaxlint trace`'s per-call instrumentation costs on this backend (issue 38).

    python bench/trace_call_cost.py [--json FILE]

In one process: a small jitted step (six 256-float arrays in and out) and an eager index, called
plain and inside jaxlint's in-process audit with one part of the hooks switched off at a time,
and the single operations the hooks make per call (an output's ``is_ready()``, ``.size``,
``tree_leaves``, the device's ``memory_stats()``). Every figure is the minimum over 40 blocks of
500 calls, in microseconds per call: the minimum is what the code costs, not what a loaded machine
added to it.
"""
import argparse
import json
import sys
import time

import jax
import jax.numpy as jnp

from jaxlint.trace import hooks, stale, steps
from jaxlint.trace.auditing import Audit

import host_ops  # bench/, beside this script (imports nothing of jax)

N, REPS = 500, 40


def per_call(f, n: int = N, reps: int = REPS) -> float:
    return host_ops.per_call(f, n, reps)


def workload():
    @jax.jit
    def step(p, x):
        return [q * 0.999 + x for q in p], x.sum()

    p = [jnp.ones((256,)) for _ in range(6)]
    x = jnp.ones((256,))
    xs = jnp.ones((8, 256))
    state = {"p": step(p, x)[0]}
    jax.block_until_ready(state["p"])

    def jit_call():
        state["p"], _ = step(state["p"], x)

    def eager_index():
        return xs[3]

    for _ in range(200):
        jit_call()
        eager_index()
    jit_us = per_call(jit_call)
    eager_us = per_call(eager_index)
    jax.block_until_ready(state["p"])
    return jit_us, eager_us


VARIANTS = {
    "traced": [],
    "no watcher": [(steps.Watcher, "before", lambda self, *a, **k: None)],
    "watcher, no thread": [(steps.Watcher, "_start", lambda self: None)],  # its calls queue up unread
    "switch kept": [(steps, "SWITCH_INTERVAL", None)],
    "no quick path": [(steps, "QUICK", False)],
    "no upload scan": [(hooks, "host_bytes", lambda value, python_data=True: None)],
    "no stale watch": [(stale, "watch", lambda watches, key, fun, user_file: None)],
}


def traced(patches):
    saved = [(owner, name, getattr(owner, name)) for owner, name, _ in patches]
    for owner, name, new in patches:
        setattr(owner, name, new)
    try:
        with Audit(user_roots=[sys.path[0] or "."]):
            return workload()
    finally:
        for owner, name, old in saved:
            setattr(owner, name, old)


def single_operations() -> dict:
    out = jax.jit(lambda x: [x + i for i in range(7)])(jnp.ones((256,)))
    jax.block_until_ready(out)
    a = out[-1]
    got = {
        "is_ready()": per_call(lambda: a.is_ready()),
        ".size": per_call(lambda: a.size),
        "tree_leaves(7 outputs)": per_call(lambda: jax.tree_util.tree_leaves(out)),
        "sys._getframe(1)": per_call(lambda: sys._getframe(1)),
    }
    # is_ready() of an output still being computed (the watcher's reads at each dispatch)
    heavy = jax.jit(lambda m: [m := jnp.tanh(m @ m) for _ in range(4)][-1])
    m = jnp.ones((2048, 2048))
    jax.block_until_ready(heavy(m))
    times, pending = [], 0
    for _ in range(20):
        y = heavy(m)
        for _ in range(50):
            t = time.perf_counter()
            ready = y.is_ready()
            times.append(time.perf_counter() - t)
            pending += not ready
        y.block_until_ready()
    times.sort()
    got["is_ready() in flight (median)"] = times[len(times) // 2] * 1e6
    got["  reads that found it computing"] = f"{pending} of {len(times)}"
    d = jax.local_devices()[0]
    try:
        d.memory_stats()
        got["memory_stats()"] = per_call(lambda: d.memory_stats(), n=50, reps=10)
    except Exception as e:  # a backend without memory statistics
        got["memory_stats()"] = f"unavailable: {type(e).__name__}"
    return got


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json")
    ap.add_argument("--reps", type=int, default=40, help="blocks of 500 calls (the minimum is taken)")
    args = ap.parse_args()
    global REPS
    REPS = args.reps
    plain_jit, plain_eager = workload()
    result = {"backend": jax.default_backend(), "jax": jax.__version__,
              "plain": {"jit call": plain_jit, "eager index": plain_eager}}
    print(f"backend {result['backend']} (jax {result['jax']}); us per call, min of {REPS} blocks of {N}")
    print(f"  {'plain':<20} jit call {plain_jit:7.1f}   eager index {plain_eager:7.1f}")
    for name, patches in VARIANTS.items():
        j, e = traced(patches)
        result[name] = {"jit call": j, "eager index": e}
        print(f"  {name:<20} jit call {j:7.1f} (+{j - plain_jit:5.1f})   eager index {e:7.1f} (+{e - plain_eager:5.1f})")
    ops = single_operations()
    result["single operations"] = ops
    for k, v in ops.items():
        print(f"  {k:<24} {v:7.2f} us" if isinstance(v, float) else f"  {k:<24} {v}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
