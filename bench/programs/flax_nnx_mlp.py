"""After flax's NNX MNIST tutorial, reduced: an nnx MLP trained with nnx.jit and optax, with the
loss read with .item() every step, on synthetic data."""
import jax
import jax.numpy as jnp
import optax
from flax import nnx


class MLP(nnx.Module):
    def __init__(self, rngs):
        self.l1 = nnx.Linear(32, 64, rngs=rngs)
        self.l2 = nnx.Linear(64, 10, rngs=rngs)

    def __call__(self, x):
        return self.l2(nnx.relu(self.l1(x)))


model = MLP(nnx.Rngs(0))
optimizer = nnx.Optimizer(model, optax.adam(1e-3), wrt=nnx.Param)


@nnx.jit
def train_step(model, optimizer, x, y):
    def loss_fn(m):
        return optax.softmax_cross_entropy_with_integer_labels(m(x), y).mean()

    loss, grads = nnx.value_and_grad(loss_fn)(model)
    optimizer.update(model, grads)
    return loss


key = jax.random.PRNGKey(0)
losses = []
for i in range(40):
    key, k1, k2 = jax.random.split(key, 3)
    x = jax.random.normal(k1, (32, 32))
    y = jax.random.randint(k2, (32,), 0, 10)
    losses.append(train_step(model, optimizer, x, y).item())
print(f"loss {losses[-1]:.2f}")
