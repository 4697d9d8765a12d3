"""What a gradient step computed outside jit costs, next to the same step jitted (JAX701).

    python bench/eager_grad_cost.py [--calls 300] [--repeats 5]

Runs on whatever backend jax picks. For each case it times `--calls` calls of `jax.grad(f)` and
of `jax.value_and_grad(f)` made once and called eagerly, and of `jax.jit` of the same product,
`--repeats` times alternately, and prints the median milliseconds per call (each call waited
for). It also counts how often `f`'s Python body runs: the eager wrapper traces it at every call
(`jax.grad` keeps no compiled cache), the jitted one once.

Cases: a scalar polynomial (`3 x**2 + 4 x - 3`, the gradient-descent demo of a course notebook),
and the mean squared error of a two-layer tanh MLP (8 -> 32 -> 1, 64 examples).
"""

from __future__ import annotations

import argparse
import statistics
import time

import jax
import jax.numpy as jnp

TRACES = {"n": 0}


def poly(x):
    TRACES["n"] += 1
    return 3 * x ** 2 + 4 * x - 3


def mlp_loss(p, x, y):
    TRACES["n"] += 1
    h = jnp.tanh(x @ p["w1"] + p["b1"])
    return jnp.mean((h @ p["w2"] + p["b2"] - y) ** 2)


def _time(fn, args, calls: int) -> float:
    jax.block_until_ready(fn(*args))
    start = time.perf_counter()
    for _ in range(calls):
        jax.block_until_ready(fn(*args))
    return (time.perf_counter() - start) / calls * 1e3


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=300)
    ap.add_argument("--repeats", type=int, default=5)
    a = ap.parse_args()
    k = jax.random.PRNGKey(0)
    params = {"w1": jax.random.normal(k, (8, 32)), "b1": jnp.zeros(32),
              "w2": jax.random.normal(k, (32, 1)), "b2": jnp.zeros(1)}
    cases = [("scalar polynomial", poly, (3.0,)),
             ("2-layer MLP", mlp_loss, (params, jax.random.normal(k, (64, 8)), jnp.zeros((64, 1))))]
    print(f"jax {jax.__version__} on {jax.devices()[0].platform}; ms per call, median of {a.repeats}")
    for name, f, args in cases:
        for transform in (jax.grad, jax.value_and_grad):
            eager, jitted = transform(f), jax.jit(transform(f))
            times: dict = {"eager": [], "jit": []}
            for _ in range(a.repeats):
                times["eager"].append(_time(eager, args, a.calls))
                times["jit"].append(_time(jitted, args, a.calls))
            TRACES["n"] = 0
            eager(*args), eager(*args)
            traced_eager = TRACES["n"]
            TRACES["n"] = 0
            jitted(*args), jitted(*args)
            e, j = statistics.median(times["eager"]), statistics.median(times["jit"])
            print(f"{name:18} {transform.__name__:15} eager {e:7.3f}  jit {j:7.3f}  ({e / j:5.0f}x); "
                  f"traces in 2 calls: eager {traced_eager}, jit {TRACES['n']}")


if __name__ == "__main__":
    main()
