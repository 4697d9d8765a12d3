"""A small MLP trained for 2,000 jitted steps on synthetic data (the trace-overhead workload).

Prints one JSON line: the training loop's own wall time, measured here, so that
start-up, imports and jaxlint's report are not part of the comparison.
"""
import json
import sys
import time

import jax
import jax.numpy as jnp

STEPS = int(sys.argv[1]) if len(sys.argv) > 1 else 2000


def init(key, sizes=(784, 256, 128, 10)):
    params = []
    for din, dout in zip(sizes[:-1], sizes[1:]):
        key, sub = jax.random.split(key)
        params.append((jax.random.normal(sub, (din, dout)) * (2.0 / din) ** 0.5, jnp.zeros(dout)))
    return params


def loss_fn(params, x, y):
    for w, b in params[:-1]:
        x = jax.nn.relu(x @ w + b)
    w, b = params[-1]
    logits = x @ w + b
    return -jnp.mean(jnp.sum(jax.nn.log_softmax(logits) * y, axis=-1))


@jax.jit
def train_step(params, x, y):
    loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
    return jax.tree_util.tree_map(lambda p, g: p - 0.01 * g, params, grads), loss


key_params, key_x, key_y = jax.random.split(jax.random.PRNGKey(0), 3)
params = init(key_params)
xs = jax.random.normal(key_x, (8, 64, 784))
ys = jax.nn.one_hot(jax.random.randint(key_y, (8, 64), 0, 10), 10)
params, loss = train_step(params, xs[0], ys[0])  # compile outside the timed loop
jax.block_until_ready(params)

start = time.perf_counter()
history = []
for step in range(STEPS):
    params, loss = train_step(params, xs[step % 8], ys[step % 8])
    if step % 100 == 0:
        history.append(float(loss))  # the usual periodic logging
jax.block_until_ready(params)
print(json.dumps({"loop_seconds": time.perf_counter() - start, "steps": STEPS, "final_loss": float(loss)}))
