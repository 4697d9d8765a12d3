"""A dispatch-bound loop for bench/trace_overhead_parts.py --script: a tiny jitted step called N
times (then N more with an eager index per step), so jaxlint's per-call cost is most of the time.
Prints one JSON line with the loop's own seconds."""
import json, sys, time
import jax, jax.numpy as jnp
N = int(sys.argv[1]) if len(sys.argv) > 1 else 20000
@jax.jit
def step(p, x):
    return p * 0.999 + x, x.sum()
p = jnp.ones((256,)); xs = jnp.ones((8, 256))
p, l = step(p, xs[0]); jax.block_until_ready(p)
x0 = xs[0]
t = time.perf_counter()
for i in range(N):
    p, l = step(p, x0)
jax.block_until_ready(p)
a = time.perf_counter() - t
t = time.perf_counter()
for i in range(N):
    p, l = step(p, xs[i % 8])
jax.block_until_ready(p)
b = time.perf_counter() - t
print(json.dumps({"loop_seconds": a + b, "us_jit_only": a / N * 1e6, "us_with_index": b / N * 1e6}))
