"""After equinox's RNN example, reduced: a GRU cell scanned over sequences, trained with optax in
an eqx.filter_jit step on synthetic clockwise/anticlockwise spirals."""
import equinox as eqx
import jax
import jax.numpy as jnp
import optax


class RNN(eqx.Module):
    cell: eqx.nn.GRUCell
    linear: eqx.nn.Linear

    def __init__(self, key):
        k1, k2 = jax.random.split(key)
        self.cell = eqx.nn.GRUCell(2, 16, key=k1)
        self.linear = eqx.nn.Linear(16, 1, key=k2)

    def __call__(self, xs):
        h0 = jnp.zeros(16)

        def f(h, x):
            return self.cell(x, h), None

        h, _ = jax.lax.scan(f, h0, xs)
        return jax.nn.sigmoid(self.linear(h))[0]


def data(key, n=64, length=20):
    theta = jnp.linspace(0, 2 * jnp.pi, length)
    sign = jnp.where(jax.random.bernoulli(key, 0.5, (n,)), 1.0, -1.0)
    xs = jnp.stack([jnp.cos(theta)[None] * jnp.ones((n, 1)), sign[:, None] * jnp.sin(theta)[None]], -1)
    return xs, (sign > 0).astype(jnp.float32)


model = RNN(jax.random.PRNGKey(0))
optim = optax.adam(3e-3)
opt_state = optim.init(eqx.filter(model, eqx.is_array))


@eqx.filter_jit
def step(model, opt_state, xs, ys):
    def loss(m):
        p = jax.vmap(m)(xs)
        return -jnp.mean(ys * jnp.log(p + 1e-6) + (1 - ys) * jnp.log(1 - p + 1e-6))

    l, grads = eqx.filter_value_and_grad(loss)(model)
    updates, opt_state = optim.update(grads, opt_state)
    return eqx.apply_updates(model, updates), opt_state, l


key = jax.random.PRNGKey(1)
for i in range(30):
    key, sub = jax.random.split(key)
    xs, ys = data(sub)
    model, opt_state, l = step(model, opt_state, xs, ys)
print(f"loss {float(l):.2f}")
