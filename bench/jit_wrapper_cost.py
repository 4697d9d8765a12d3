"""What a `jax.jit`/`jax.pmap` wrapper rebuilt at every call costs, next to one made once (JAX104).

    python bench/jit_wrapper_cost.py [--calls 400] [--repeats 7] [--json]

Runs on whatever backend jax picks (CPU, GPU, TPU). For each case it times `--calls` calls made
one after another two ways, `--repeats` times alternately, and prints the median microseconds per
call of each way and their difference:

- hoisted: `w = jax.jit(f, ...)` once, then `x = w(x)` per call;
- rebuilt: `x = jax.jit(f, ...)(x)` per call (a new wrapper around the same function object).

Every call waits for its result (`jax.block_until_ready`), so both ways run the same program and
the difference is the wrapper: building it and the first call of a new wrapper, which cannot take
jit's C++ dispatch fast path (the compiled program is found in the trace/compile caches: nothing
recompiles, which the trace counts below show).

Cases: (a) a module-level function over a pytree of 10, 100 and 300 small arrays, plain and with
`static_argnums`, `donate_argnums` and `in_shardings`/`out_shardings` (one-device replicated
shardings); (b) `jax.random.split`; (c) a bound method `jax.jit(obj.step)` rebuilt each call, with
its traces counted by a Python side effect in the method (a retrace per call means the cache
misses: JAX101's case, not JAX104's); (d) `jax.pmap` of a module-level function (and of a bound
method) rebuilt each call.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
import warnings

import jax
import jax.numpy as jnp
import numpy as np

TRACES = {"f": 0, "fs": 0, "method": 0, "pf": 0, "pmethod": 0}
COMPILES = [0]


def _count_compiles(event: str, _secs: float, **_kw) -> None:
    if "backend_compile" in event:
        COMPILES[0] += 1


jax.monitoring.register_event_duration_secs_listener(_count_compiles)


def f(tree):
    TRACES["f"] += 1
    return jax.tree_util.tree_map(lambda a: a * 0.5 + 1.0, tree)


def fs(n, tree):  # a static first argument
    TRACES["fs"] += 1
    return jax.tree_util.tree_map(lambda a: a * 0.5 + n, tree)


def pf(tree):
    TRACES["pf"] += 1
    return jax.tree_util.tree_map(lambda a: a * 0.5 + 1.0, tree)


class Model:
    def step(self, tree):
        TRACES["method"] += 1
        return jax.tree_util.tree_map(lambda a: a * 0.5 + 1.0, tree)

    def pstep(self, tree):
        TRACES["pmethod"] += 1
        return jax.tree_util.tree_map(lambda a: a * 0.5 + 1.0, tree)


def tree_of(leaves: int, lead: tuple = ()):
    return {f"w{i}": jnp.ones(lead + (8,), jnp.float32) for i in range(leaves)}


def per_call_us(run, x, calls: int) -> float:
    x = run(x)  # warm: compile outside the clock
    jax.block_until_ready(x)
    start = time.perf_counter()
    for _ in range(calls):
        x = run(x)
        jax.block_until_ready(x)
    return (time.perf_counter() - start) / calls * 1e6


def compare(hoisted, rebuilt, make_x, calls: int, repeats: int) -> dict:
    """Median us per call of each way, timed alternately (a drifting machine load hits both)."""
    got: dict = {"hoisted": [], "rebuilt": []}
    compiles = 0
    for _ in range(repeats):
        got["hoisted"].append(per_call_us(hoisted, make_x(), calls))
        before = COMPILES[0]
        got["rebuilt"].append(per_call_us(rebuilt, make_x(), calls))
        compiles += COMPILES[0] - before
    h, r = statistics.median(got["hoisted"]), statistics.median(got["rebuilt"])
    return {"hoisted_us": round(h, 1), "rebuilt_us": round(r, 1), "extra_us": round(r - h, 1),
            "ratio": round(r / h, 2), "compiles": compiles, "calls_rebuilt": repeats * (calls + 1)}


def cases(calls: int, repeats: int):
    dev = jax.devices()[0]
    repl = jax.sharding.SingleDeviceSharding(dev)
    for leaves in (10, 100, 300):
        mk = (lambda n=leaves: tree_of(n))
        plain = jax.jit(f)
        yield f"(a) module function, {leaves} leaves", compare(plain, lambda x: jax.jit(f)(x), mk, calls, repeats)
        st = jax.jit(fs, static_argnums=0)
        yield (f"(a) + static_argnums, {leaves} leaves",
               compare(lambda x: st(1.0, x), lambda x: jax.jit(fs, static_argnums=0)(1.0, x), mk, calls, repeats))
        don = jax.jit(f, donate_argnums=0)
        yield (f"(a) + donate_argnums, {leaves} leaves",
               compare(don, lambda x: jax.jit(f, donate_argnums=0)(x), mk, calls, repeats))
        shard = {f"w{i}": repl for i in range(leaves)}
        kw = dict(static_argnums=0, donate_argnums=1, in_shardings=(shard,), out_shardings=shard)
        full = jax.jit(fs, **kw)
        yield (f"(a) + static, donate, in/out_shardings, {leaves} leaves",
               compare(lambda x: full(1.0, x), lambda x: jax.jit(fs, **kw)(1.0, x), mk, calls, repeats))
    split = jax.jit(jax.random.split)

    def key_run(run):
        return lambda k: run(k)[0]
    yield "(b) jax.random.split", compare(key_run(split), key_run(lambda k: jax.jit(jax.random.split)(k)),
                                          lambda: jax.random.key(0), calls, repeats)
    yield "(b) jax.random.split, not jitted (reference)", compare(
        key_run(jax.random.split), key_run(jax.random.split), lambda: jax.random.key(0), calls, repeats)
    # (c) first with no other wrapper of an equal bound method alive (as in a loop that rebuilds it):
    # jit's trace cache holds the bound method weakly, so each new one is a miss; then next to a
    # wrapper made once and kept (an equal bound method alive keeps the cache entry)
    obj = Model()
    before, compiles = TRACES["method"], COMPILES[0]
    x = tree_of(10)
    for _ in range(calls):
        x = jax.jit(obj.step)(x)
    jax.block_until_ready(x)
    yield "(c) jax.jit(obj.step) rebuilt, none kept alive, 10 leaves", {
        "traces": TRACES["method"] - before, "compiles": COMPILES[0] - compiles, "calls_rebuilt": calls}
    obj = Model()
    bound = jax.jit(obj.step)
    before, compiles = TRACES["method"], COMPILES[0]
    row = compare(bound, lambda x: jax.jit(obj.step)(x), lambda: tree_of(10), calls, repeats)
    row.update(traces=TRACES["method"] - before, compiles=COMPILES[0] - compiles, calls_rebuilt=repeats * (calls + 1))
    yield "(c) same, a wrapper of an equal bound method kept alive", row
    del bound
    n = jax.local_device_count()
    for leaves in (10, 100):
        mk = (lambda k=leaves: tree_of(k, (n,)))
        pm = jax.pmap(pf)
        yield f"(d) jax.pmap of a module function, {leaves} leaves", compare(pm, lambda x: jax.pmap(pf)(x), mk,
                                                                             calls, repeats)
    obj = Model()
    before, compiles = TRACES["pmethod"], COMPILES[0]
    x = tree_of(10, (n,))
    for _ in range(calls):
        x = jax.pmap(obj.pstep)(x)
    jax.block_until_ready(x)
    yield "(d) jax.pmap(obj.pstep) rebuilt, none kept alive, 10 leaves", {
        "traces": TRACES["pmethod"] - before, "compiles": COMPILES[0] - compiles, "calls_rebuilt": calls}

def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=400)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--json", action="store_true", help="one JSON object per line instead of a table")
    args = ap.parse_args()
    warnings.simplefilter("ignore")  # donation is not implemented on CPU: jax warns and copies
    head = f"jax {jax.__version__}, {jax.default_backend()} ({jax.devices()[0].device_kind}), " \
           f"{args.calls} calls x {args.repeats} repeats, median us per call"
    print(head if not args.json else json.dumps({"header": head}))
    if not args.json:
        print(f"{'case':58} {'hoisted':>9} {'rebuilt':>9} {'extra':>8} {'ratio':>6}  rebuilt calls: compiles, traces")
    for name, row in cases(args.calls, args.repeats):
        if args.json:
            print(json.dumps({"case": name, **row}))
            continue
        cols = " ".join(f"{row[k]:{w}.{p}f}" if k in row else " " * w for k, w, p in (
            ("hoisted_us", 9, 1), ("rebuilt_us", 9, 1), ("extra_us", 8, 1), ("ratio", 6, 2)))
        counts = f"{row['calls_rebuilt']}: {row['compiles']} compiles" + (
            f", {row['traces']} traces" if "traces" in row else "")
        print(f"{name:58} {cols}  {counts}")
    print(json.dumps({"module_function_traces": {"f": TRACES["f"], "fs": TRACES["fs"], "pf": TRACES["pf"]}})
          if args.json else f"traces of the module functions (once per shape/static value is no retrace): "
          f"f {TRACES['f']}, fs {TRACES['fs']}, pf {TRACES['pf']}")


if __name__ == "__main__":
    np.set_printoptions(precision=3)
    main()
