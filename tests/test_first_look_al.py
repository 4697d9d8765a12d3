"""Classes from fresh set AL's first look (issue 39): a burst of training steps under a periodic guard (each
step of the burst runs its update), and a timed call through a lambda whose callee waits (it returns NumPy)."""

from __future__ import annotations

from ruletools import assert_marked, default_findings

_BURST = """
import jax
import jax.numpy as jnp
import optax


@jax.jit
def loss_fn(p, x):
    return jnp.sum((p * x) ** 2)


grad_fn = jax.value_and_grad(loss_fn)


def train(p, env_steps, update_every, batches):
    opt = optax.adam(1e-3)
    opt_state = opt.init(p)
    for step in range(env_steps):
        if step > 1000 and step % update_every == 0:
            for _ in range(update_every):
                loss, g = grad_fn(p, batches[step])
                updates, opt_state = opt.update(g, opt_state, p)  # expect: JAX701
                p = optax.apply_updates(p, updates)
    return p


if __name__ == "__main__":
    train(jnp.ones(3), 100000, 50, jnp.ones((100000, 3)))
"""


def test_jax701_each_step_of_a_burst_of_updates_under_a_periodic_guard():
    # SAC's `update_every` gradient steps every `update_every` environment steps: the guard is outside the
    # inner loop, which threads the parameters and optimizer state: every gradient step runs the eager update
    assert_marked(_BURST)


def test_an_evaluation_pass_under_a_periodic_guard_stays_periodic():
    src = """
    import jax
    import jax.numpy as jnp

    @jax.jit
    def step(p, x):
        return p - 0.1 * x, jnp.sum(x)

    @jax.jit
    def evaluate(p, x):
        return jnp.sum(p * x)

    def train(p, batches, eval_batches, every):
        for i, x in enumerate(batches):
            p, loss = step(p, x)
            if i % every == 0:
                for y in eval_batches:
                    print(float(evaluate(p, y)))
        return p

    if __name__ == "__main__":
        train(jnp.ones(3), [jnp.ones(3)] * 1000, [jnp.ones(3)] * 10, 100)
    """
    assert default_findings(src, "JAX201") == []


_TIMED = """
import time
import numpy as np
import jax
import jax.numpy as jnp


@jax.jit
def _unpack(x):
    return x * 2


def unpack(packed, use_jit):
    if use_jit:
        return np.array(_unpack(jnp.asarray(packed)))
    return packed * 2


def run(tree, backend):
    if backend == "jax":
        fn = lambda p: unpack(p, use_jit=True)
    else:
        fn = lambda p: unpack(p, use_jit=False)
    times = []
    for leaf in tree:
        t0 = time.perf_counter()
        out = fn(np.array(leaf))
        times.append(time.perf_counter() - t0)
    return times


if __name__ == "__main__":
    run([np.ones(3)] * 10, "jax")
"""


def test_jax204_a_timed_lambda_whose_callee_returns_numpy_waits():
    # fresh AL's MXFP4 unpacking: every backend's function converts the jitted result with `np.array`
    assert default_findings(_TIMED, "JAX204") == []


def test_jax204_a_timed_lambda_around_a_compiled_call_does_not_wait():
    src = _TIMED.replace("fn = lambda p: unpack(p, use_jit=True)", "fn = lambda p: _unpack(jnp.asarray(p))").replace(
        "fn = lambda p: unpack(p, use_jit=False)", "fn = lambda p: _unpack(jnp.asarray(p) + 1)")
    assert src != _TIMED
    assert [c for _, c in default_findings(src, "JAX204")] == ["JAX204"]


_FIRST = """
import jax
import jax.numpy as jnp
from tqdm import tqdm


@jax.jit
def step(p, x):
    return p - 0.1 * x, jnp.sum(x)


def generate(p, xs, n, show):
    iterator = range(n)
    if show:
        iterator = tqdm(iterator, desc="tokens")
    for i in iterator:
        p, loss = step(p, xs[i])
        if {test}:
            print(f"token {i}: loss {loss}"){mark}
    return p


if __name__ == "__main__":
    generate(jnp.ones(3), jnp.ones((1000, 3)), 1000, True)
"""


def test_jax201_a_print_in_the_first_iterations_only_is_not_per_step():
    # fresh AL's decoder prints timings for its first 3 tokens (`if i < 3`), of a loop counted from 0
    for test in ("i < 3", "i <= 2", "i == 0", "3 > i", "show and i < 3"):
        assert default_findings(_FIRST.replace("{test}", test).replace("{mark}", ""), "JAX201") == [], test


def test_jax201_a_print_after_the_first_iterations_is_per_step():
    for test in ("i > 3", "i >= 0", "i < n", "3 < i", "0 <= i"):
        assert_marked(_FIRST.replace("{test}", test).replace("{mark}", "  # expect: JAX201"))
