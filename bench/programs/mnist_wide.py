"""mnist_ragged.py (after JAX's examples/mnist_classifier_fromscratch.py) with its hidden layer 4096 wide
(parameters 12.4 MiB), for donation measured on a device (bench/trace_donation.py): an MLP trained with a jitted
update on synthetic 784-pixel data, in batches of 128 from 1,000 examples (the last batch has 104),
and the accuracy printed after each epoch."""
import numpy as np
import jax
import jax.numpy as jnp

rng = np.random.default_rng(0)
images = rng.normal(size=(1000, 784)).astype(np.float32)
labels = np.eye(10, dtype=np.float32)[rng.integers(0, 10, 1000)]


def init_params(sizes, key):
    params = []
    for m, n in zip(sizes[:-1], sizes[1:]):
        key, sub = jax.random.split(key)
        params.append((0.1 * jax.random.normal(sub, (m, n)), jnp.zeros(n)))
    return params


def predict(params, x):
    for w, b in params[:-1]:
        x = jnp.tanh(x @ w + b)
    w, b = params[-1]
    logits = x @ w + b
    return logits - jax.scipy.special.logsumexp(logits, axis=1, keepdims=True)


def loss(params, batch):
    x, y = batch
    return -jnp.mean(jnp.sum(predict(params, x) * y, axis=1))


def accuracy(params, batch):
    x, y = batch
    return jnp.mean(jnp.argmax(y, axis=1) == jnp.argmax(predict(params, x), axis=1))


@jax.jit
def update(params, batch):
    grads = jax.grad(loss)(params, batch)
    return [(w - 0.01 * dw, b - 0.01 * db) for (w, b), (dw, db) in zip(params, grads)]


params = init_params([784, 4096, 10], jax.random.PRNGKey(0))
for epoch in range(3):
    for i in range(0, 1000, 128):
        params = update(params, (images[i:i + 128], labels[i:i + 128]))
    print(f"epoch {epoch} accuracy {float(accuracy(params, (images, labels))):.3f}")
