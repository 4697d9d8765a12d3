"""Tests of the random-number rules: JAX501, JAX502, JAX503.

Positive cases mark every line where a finding is expected with ``# expect: CODE`` and compare
the engine's findings of *all* rules with those marks, so a case also fails when another rule
fires on it.
"""

from __future__ import annotations

import textwrap

import pytest

from jaxlint_rules.rng import ConstantKeyInLoop, GlobalRngInTracedCode, KeyReuse
from ruletools import _check, assert_marked, default_findings, expected, findings, messages, opt_in_findings, line_of

RULES = [GlobalRngInTracedCode, KeyReuse, ConstantKeyInLoop]


# --------------------------------------------------------------------------- the rules' own examples


# --------------------------------------------------------------------------- JAX501 positives


def test_jax501_numpy_and_stdlib_random_in_jit_and_scan():
    assert_marked("""
    import random

    import jax
    import jax.numpy as jnp
    import numpy as np

    @jax.jit
    def jitter(x):
        return x + random.gauss(0.0, 0.1)  # expect: JAX501

    def noisy_cumsum(xs):
        def body(carry, x):
            carry = carry + x + np.random.normal()  # expect: JAX501
            return carry, carry
        return jax.lax.scan(body, 0.0, xs)
    """)


def test_jax501_aliased_numpy_random_under_vmap_and_pmap():
    assert_marked("""
    import jax
    import jax.numpy as jnp
    import numpy.random as npr
    from numpy import random as nprandom

    def augment(x):
        shift = npr.randint(0, 4)  # expect: JAX501
        return jnp.roll(x, shift)

    batched_augment = jax.vmap(augment)

    @jax.pmap
    def perturb(x):
        return x * nprandom.uniform(0.9, 1.1)  # expect: JAX501
    """)


def test_jax501_host_generator_made_outside_the_traced_function():
    assert_marked("""
    import jax
    import jax.numpy as jnp
    import numpy as np

    rng = np.random.default_rng(0)

    @jax.jit
    def add_noise(x):
        return x + rng.normal(size=x.shape)  # expect: JAX501

    def make_step(scale):
        gen = np.random.RandomState(1)

        @jax.jit
        def step(x):
            return x * scale + gen.standard_normal()  # expect: JAX501
        return step
    """)


def test_jax501_helper_called_from_jit_and_jitted_method():
    assert_marked("""
    import jax
    import jax.numpy as jnp
    import numpy as np

    def shuffle_features(x):
        perm = np.random.permutation(x.shape[-1])  # expect: JAX501
        return x[..., perm]

    @jax.jit
    def forward(w, x):
        return jnp.tanh(shuffle_features(x) @ w)

    class Dropout:
        def __init__(self, rate):
            self.rate = rate
            self.apply = jax.jit(self.forward)

        def forward(self, x):
            mask = np.random.binomial(1, 1.0 - self.rate, x.shape)  # expect: JAX501
            return x * mask
    """)


# --------------------------------------------------------------------------- JAX501 negatives


def test_jax501_host_rng_in_data_pipeline_is_not_reported():
    assert findings("""
    import jax
    import jax.numpy as jnp
    import numpy as np

    @jax.jit
    def train_step(w, x):
        return w - 0.1 * jnp.mean(x @ w)

    def batches(data, batch_size, seed):
        rng = np.random.default_rng(seed)
        order = rng.permutation(len(data))
        for i in range(0, len(data), batch_size):
            yield data[order[i:i + batch_size]]

    def train(w, data):
        np.random.seed(0)
        for batch in batches(data, 32, seed=np.random.randint(1000)):
            w = train_step(w, jnp.asarray(batch))
        return w
    """) == []


def test_jax501_jax_random_is_not_reported():
    assert findings("""
    import jax
    import jax.numpy as jnp
    from jax import random

    @jax.jit
    def dropout(key, x, rate):
        k_keep, k_noise = random.split(key)
        keep = random.bernoulli(k_keep, 1.0 - rate, x.shape)
        noise = jax.random.normal(k_noise, x.shape) * 0.0
        return jnp.where(keep, x / (1.0 - rate), noise)
    """) == []


def test_jax501_callback_host_function_is_not_reported():
    # The callback runs on the host on every call: drawing host randomness there is fine.
    assert findings("""
    import jax
    import jax.numpy as jnp
    import numpy as np

    def host_noise(x):
        return (np.asarray(x) + np.random.normal(size=x.shape)).astype(np.float32)

    @jax.jit
    def noisy(x):
        return jax.pure_callback(host_noise, jax.ShapeDtypeStruct(x.shape, jnp.float32), x)
    """) == []


def test_jax501_generator_seeded_inside_the_function_and_setup_calls_are_not_reported():
    # A generator seeded inside the function gives the same numbers on every call, jit or not;
    # constructors and seeding are not draws.
    assert findings("""
    import jax
    import jax.numpy as jnp
    import numpy as np

    @jax.jit
    def fixed_projection(x):
        rng = np.random.default_rng(0)
        proj = rng.standard_normal((x.shape[-1], 8)).astype(np.float32)
        ss = np.random.SeedSequence(42)
        return x @ proj
    """) == []


# --------------------------------------------------------------------------- JAX502 positives


def test_jax502_key_used_after_split_and_subkey_used_twice():
    assert_marked("""
    import jax
    import jax.numpy as jnp

    def init_mlp(key, sizes):
        k1, k2 = jax.random.split(key)
        w1 = jax.random.normal(k1, (sizes[0], sizes[1]))
        w2 = jax.random.normal(key, (sizes[1], sizes[2]))  # expect: JAX502
        b1 = jax.random.uniform(k2, (sizes[1],))
        b2 = jax.random.uniform(k2, (sizes[2],))  # expect: JAX502
        return w1, w2, b1, b2
    """)


def test_jax502_two_weights_from_one_key_through_an_initializer():
    """Fresh AU's MNIST model: `initializer(rngs, (784, 256))` and `initializer(rngs, (256, 10))` with
    `initializer = jax.nn.initializers.glorot_normal()`: the second weight is a rescaled copy of the first
    2,560 values of the first (probed on jax 0.10.2)."""
    assert_marked("""
    import jax
    import jax.numpy as jnp

    class MLP:
        @staticmethod
        def params(rngs):
            initializer = jax.nn.initializers.glorot_normal()
            return [
                [initializer(rngs, (784, 256)), jnp.zeros(256)],
                [initializer(rngs, (256, 10)), jnp.zeros(10)],  # expect: JAX502
            ]
    """)
    assert messages("""
    import jax

    def params(rngs):
        init = jax.nn.initializers.glorot_normal()
        w1 = init(rngs, (4, 4))
        w2 = init(rngs, (4, 2))
        return w1, w2
    """, "JAX502")[0].startswith("PRNG key `rngs` was already used by `init` on line 6; both draws get the same")


def test_jax502_initializer_near_misses():
    assert findings("""
    import jax
    import jax.numpy as jnp

    def params(key):
        init = jax.nn.initializers.glorot_normal()
        k1, k2 = jax.random.split(key)
        w1 = init(k1, (4, 4))
        w2 = init(k2, (4, 2))
        b1 = jax.nn.initializers.zeros(key, (4,))  # zeros ignores its key
        b2 = jax.nn.initializers.zeros(key, (2,))
        return w1, w2, b1, b2

    def layers(key, sizes):
        init = jax.nn.initializers.he_normal()
        out = []
        for n in sizes:
            key, sub = jax.random.split(key)
            out.append(init(sub, (n, n)))
        return out
    """, "JAX502") == []


def test_jax502_keyword_key_and_aliased_module_in_jit():
    assert_marked("""
    import jax
    import jax.numpy as jnp
    from jax import random as jr

    @jax.jit
    def corrupt(rng, x):
        mask = jr.bernoulli(key=rng, p=0.9, shape=x.shape)
        noise = jr.normal(rng, x.shape)  # expect: JAX502
        return jnp.where(mask, x, noise)
    """)


def test_jax502_key_not_replaced_in_a_step_loop():
    assert_marked("""
    import jax
    import jax.numpy as jnp

    def sample_chain(key, x, num_steps):
        for step in range(num_steps):
            x = x + 0.1 * jax.random.normal(key, x.shape)  # expect: JAX502
        return x

    def langevin(key, x, num_steps):
        i = 0
        while i < num_steps:
            k1, k2 = jax.random.split(key)  # expect: JAX502
            x = x - 0.01 * x + jax.random.normal(k1, x.shape)
            i += 1
        return x

    def ensemble(key, n):
        return [jax.random.normal(key, (3,)) for _ in range(n)]  # expect: JAX502
    """)


def test_jax502_closure_key_used_twice_and_fold_in_with_the_same_data():
    assert_marked("""
    import jax
    import jax.numpy as jnp

    def make_init(key):
        def init(shape):
            w = jax.random.normal(key, shape)
            b = jax.random.normal(key, shape[-1:])  # expect: JAX502
            return w, b
        return init

    def two_streams(key):
        a = jax.random.fold_in(key, 0)
        b = jax.random.fold_in(key, 0)  # expect: JAX502
        return a, b

    def derived_then_sampled(key, x):
        sub = jax.random.fold_in(key, 1)
        return jax.random.normal(key, x.shape), sub  # expect: JAX502
    """)


# --------------------------------------------------------------------------- JAX502 negatives


def test_jax502_a_key_used_in_one_iteration_only_is_not_reused():
    src = """
    import jax

    def dropout(x, key, rate):
        return x * jax.random.bernoulli(key, 1 - rate, x.shape) / (1 - rate)

    def block(x, params, key, rate=0.15):
        y = x
        for n in [0, 1]:
            if n == 1:
                y = dropout(y, key, rate)
            y = conv(y, params[n])
        return y

    def both(x, params, key, rate=0.15):
        y = x
        for n in [0, 1]:
            y = dropout(y, key, rate)  # BOTH
            y = conv(y, params[n])
        return y

    def first_step(x, key, steps):
        for i in range(steps):
            if i == 0:
                x = x + jax.random.normal(key, x.shape)
            x = step(x)
        return x
    """
    # `block` hands the key over in the second iteration only; `both` draws the same dropout mask twice
    assert findings(src, "JAX502") == [(line_of(src, "# BOTH"), "JAX502")]


def test_jax502_split_and_rebind_is_not_reported():
    assert findings("""
    import jax
    import jax.numpy as jnp

    def train(key, params, num_steps):
        for step in range(num_steps):
            key, sub = jax.random.split(key)
            noise = jax.random.normal(sub, params.shape)
            params = params - 0.01 * noise
        key, k_eval = jax.random.split(key)
        return params, jax.random.uniform(k_eval, ())

    def walk(key, x, n):
        i = 0
        while i < n:
            key = jax.random.split(key)[0]
            x = x + jax.random.normal(key, x.shape)
            i += 1
        return x
    """) == []


def test_jax502_fold_in_per_step_is_not_reported():
    assert findings("""
    import jax
    import jax.numpy as jnp

    def per_step_keys(key, num_steps):
        noises = []
        for step in range(num_steps):
            step_key = jax.random.fold_in(key, step)
            noises.append(jax.random.normal(step_key, (4,)))
        return noises

    def named_streams(key):
        k_dropout = jax.random.fold_in(key, 0)
        k_noise = jax.random.fold_in(key, 1)
        return k_dropout, k_noise
    """) == []


def test_jax502_exclusive_branches_are_not_reported():
    assert findings("""
    import jax
    import jax.numpy as jnp

    def init_weight(key, shape, kind):
        if kind == "normal":
            w = jax.random.normal(key, shape)
        else:
            w = jax.random.uniform(key, shape, minval=-1.0, maxval=1.0)
        return w

    def sample(key, shape, truncated):
        if truncated:
            return jax.random.truncated_normal(key, -2.0, 2.0, shape)
        return jax.random.normal(key, shape)

    def noise(key, shape, gaussian):
        return jax.random.normal(key, shape) if gaussian else jax.random.uniform(key, shape)
    """) == []


def test_jax502_key_passed_to_key_utilities_and_unknown_functions_is_not_reported():
    assert findings("""
    import jax
    import jax.numpy as jnp
    from layers import init_layer

    def describe(key):
        return jax.random.key_data(key)  # reads the key, draws nothing

    def init_model(key, shape):
        # a function of another module: we cannot tell whether it consumes the key
        a = init_layer(key, shape)
        b = init_layer(key, shape)
        data = jax.random.key_data(key)
        copy = jax.random.clone(key)
        info = describe(key)
        return a, b, data, jax.random.normal(key, shape), copy, info
    """) == []


def test_jax502_key_drawn_by_a_module_function_and_used_again():
    # `init_layer(key, ...)` twice gives two identical layers: the helper draws from its parameter.
    assert_marked("""
    import jax

    def init_layer(key, shape):
        return jax.random.normal(key, shape)

    def init_model(key, shape):
        a = init_layer(key, shape)
        b = init_layer(key, shape)  # expect: JAX502
        return a, b

    def init_and_noise(key, shape):
        w = init_layer(key, shape)
        return w, jax.random.normal(key, shape)  # expect: JAX502
    """)


def test_jax502_module_function_near_misses_are_not_reported():
    assert findings("""
    import jax

    def init_layer(key, shape):
        return jax.random.normal(key, shape)

    def fresh(key, shape):
        key = jax.random.PRNGKey(0)  # rebinds its parameter: the caller's key is not drawn
        return jax.random.normal(key, shape)

    def advanced(key, shape):
        a = init_layer(key, shape)
        key, sub = jax.random.split(key)  # advancing after the draw
        return a, init_layer(sub, shape)

    def split_first(key, shape):
        k1, k2 = jax.random.split(key)
        return init_layer(k1, shape), init_layer(k2, shape)

    def either(key, shape, wide):
        if wide:
            return init_layer(key, shape)
        return jax.random.normal(key, shape)

    def rebinding_helper(key, shape):
        return fresh(key, shape), fresh(key, shape)
    """, "JAX502") == []


def test_jax502_same_key_for_each_configuration_is_not_reported():
    # Looping over test cases or shapes with one key is deliberate: comparable inputs per case.
    assert findings("""
    import jax
    import jax.numpy as jnp

    SHAPES = [(2, 3), (4, 5)]

    def check_shapes(key, fn):
        for shape in SHAPES:
            x = jax.random.normal(key, shape)
            assert fn(x).shape == shape
    """) == []


# --------------------------------------------------------------------------- JAX503 positives


def test_jax503_literal_and_module_constant_seeds_in_loops():
    assert_marked("""
    import jax
    import jax.numpy as jnp

    SEED = 42

    def rollout(policy, obs, num_steps):
        for t in range(num_steps):
            key = jax.random.key(SEED)  # expect: JAX503
            action = policy(obs, key)
            obs = obs + action
        return obs

    def train(params, it):
        while True:
            batch = next(it, None)
            if batch is None:
                return params
            rng = jax.random.PRNGKey(0)  # expect: JAX503
            params = params - 0.01 * jax.random.normal(rng, params.shape) * batch
    """)


def test_jax503_in_comprehension_and_unrolled_jit_loop():
    assert_marked("""
    import jax
    import jax.numpy as jnp

    def noise_bank(n, shape):
        return [jax.random.normal(jax.random.PRNGKey(7), shape) for _ in range(n)]  # expect: JAX503

    @jax.jit
    def diffuse(x):
        for i in range(4):
            x = x + jax.random.normal(jax.random.key(-1), x.shape)  # expect: JAX503
        return x
    """)


def test_jax503_from_import_spelling():
    assert_marked("""
    import jax.numpy as jnp
    from jax.random import PRNGKey, uniform

    def mc_estimate(f, n):
        total = 0.0
        for i in range(n):
            total = total + f(uniform(PRNGKey(123), (128,)))  # expect: JAX503
        return total / n
    """)


def test_jax503_local_aliases_of_the_key_maker():
    """The rule looks at calls spelled PRNGKey/key or a local alias of one (import or module-level
    assignment), as the key queries do."""
    assert_marked("""
    import jax
    from jax.random import PRNGKey as make_key

    new_key = jax.random.key

    def run(x, n):
        for i in range(n):
            x = x + jax.random.normal(make_key(0), x.shape)  # expect: JAX503
            x = x + jax.random.normal(new_key(1), x.shape)  # expect: JAX503
        return x
    """)


def test_jax503_nested_step_loops():
    assert_marked("""
    import jax
    import jax.numpy as jnp

    def epochs(params, num_epochs, steps):
        for epoch in range(num_epochs):
            for step in range(steps):
                dropout_key = jax.random.PRNGKey(1)  # expect: JAX503
                mask = jax.random.bernoulli(dropout_key, 0.9, params.shape)
                params = params * mask
        return params
    """)


# --------------------------------------------------------------------------- JAX503 negatives


def test_jax503_constant_key_in_the_body_of_a_device_loop():
    # the body's compiled code runs at every iteration of the scan, whatever the body is named
    src = """
    import jax
    from jax import lax

    def collect(env, state, n):
        def fill(env_state, unused):
            k_a, k_s = jax.random.split(jax.random.PRNGKey(0))
            action = env.sample(k_a)
            return env.step(k_s, env_state, action), action
        return lax.scan(fill, state, None, n)

    def four_times(x):
        def body(i, c):
            k = jax.random.PRNGKey(0)
            return c + jax.random.normal(k, c.shape)
        return lax.fori_loop(0, 4, body, x)
    """
    found = _found(src, "JAX503")
    assert [(line, opt_in) for line, opt_in, _ in found] == [(7, None)]
    assert "the body of `lax.scan` on line 10" in found[0][2]


def test_jax503_constant_key_in_a_function_the_body_of_a_device_loop_calls():
    # fresh AH (a PPO agent): the minibatch shuffle's `PRNGKey(1)` sits in a method the update step
    # calls, and `lax.fori_loop` runs the update step: the same permutation at every update
    src = """
    import jax
    import jax.numpy as jnp
    from jax import lax

    class Agent:
        def _loss_input(self, batch):
            idx = jax.random.choice(jax.random.PRNGKey(1), jnp.arange(128), replace=False, shape=(128,))
            return jnp.take(batch, idx, axis=0)

        def _update_step(self, i, carry):
            return carry + self._loss_input(carry)

        def train(self, x, n):
            return lax.fori_loop(0, n, self._update_step, x)

    def shuffled(batch):
        return jax.random.permutation(jax.random.PRNGKey(2), batch)

    def folded(batch, i):
        return jax.random.permutation(jax.random.fold_in(jax.random.PRNGKey(3), i), batch)

    def noise(shape):
        return jax.random.normal(jax.random.PRNGKey(4), shape)

    def run(x, n):
        def body(i, c):
            return shuffled(c) + folded(c, i)
        def few(i, c):
            return c + noise(c.shape)
        x = lax.fori_loop(0, n, body, x)
        return lax.fori_loop(0, 4, few, x)
    """
    found = _found(src, "JAX503")
    assert [(line, opt_in) for line, opt_in, _ in found] == [
        (line_of(src, "PRNGKey(1)"), None), (line_of(src, "PRNGKey(2)"), None)]
    assert f"called from the body of `lax.fori_loop` on line {line_of(src, 'self._update_step, x')}" in found[0][2]
    assert f"called from the body of `lax.fori_loop` on line {line_of(src, 'n, body, x')}" in found[1][2]
    # not: a key folded with the iteration (line 20), a helper only a short literal loop runs (line 23)


def test_jax503_a_constant_key_in_a_helper_called_outside_device_loops_is_not_a_device_loop_finding():
    src = """
    import jax
    from jax import lax

    def shuffled(batch):
        return jax.random.permutation(jax.random.PRNGKey(2), batch)

    def body(i, c):
        return c + 1

    def run(x, n):
        x = lax.fori_loop(0, n, body, x)
        return shuffled(x)
    """
    assert _found(src, "JAX503") == []


def test_jax503_a_draw_whose_result_is_thrown_away_is_not_reported():
    """``jax.random.normal(random.key(0), ()).block_until_ready()`` after each sampling step is a device
    barrier (fresh set Q's flow-matching trainer; the block itself is JAX202's): no number it draws is
    used. A kept draw from a constant key is reported."""
    assert_marked("""
    import jax

    def sample(step, state, n):
        out = []
        for i in range(n):
            images = step(state, i)
            jax.random.normal(jax.random.key(0), ()).block_until_ready()  # expect: JAX202
            jax.random.uniform(jax.random.PRNGKey(1), (3,))
            noise = jax.random.normal(jax.random.PRNGKey(2), images.shape)  # expect: JAX503
            out.append(images + noise)
        return out
    """)


_PREDICT = """
import flax.linen as nn
import jax
import jax.numpy as jnp


class Net(nn.Module):
    rate: float = 0.1

    @nn.compact
    def __call__(self, x, training: bool):
        x = nn.Dense(16)(x)
        x = nn.Dropout(self.rate, deterministic=not training)(x)
        return nn.Dense(2)(x)


def predict(variables, batches, n):
    model = Net()
    out = []
    for i in range(n):
        images = batches[i]
        dummy_rng = jax.random.PRNGKey(0)
        logits = model.apply(variables, images, training={training}, rngs={{"dropout": dummy_rng}})
        out.append(jnp.argmax(logits, axis=-1))
    return out
"""


def test_jax503_a_constant_key_only_for_an_apply_that_may_not_draw_is_opt_in():
    """Fresh AY (judged FALSE): ``dummy_rng = PRNGKey(0)`` per batch of an inference loop, handed only to
    ``model.apply(..., training=False, rngs={"dropout": dummy_rng})``: with dropout off nothing draws, so
    whether the iterations repeat numbers is unknown; where the module's dropout is shown to run
    (``training=True``), the same mask every iteration is proven and reported."""
    off = _PREDICT.format(training="False")
    assert default_findings(off, "JAX503") == []
    ((line, code, why),) = opt_in_findings(off, "JAX503")
    assert (line, code) == (22, "JAX503")
    assert why.startswith("draws (unknown): the key goes only to the `rngs` of `model.apply(...)` on line 23")
    assert default_findings(_PREDICT.format(training="True"), "JAX503") == [(22, "JAX503")]
    # a draw of its own besides the apply: proven, reported
    drawn = off.replace("        out.append(", "        logits = logits + jax.random.normal(dummy_rng, logits.shape)\n"
                                              "        out.append(")
    assert default_findings(drawn, "JAX503") == [(22, "JAX503")]


def test_jax503_a_constant_key_in_a_loop_says_why_in_its_evidence():
    """The facts a loop finding rests on, in its JSON evidence: the constant seed, the loop's role, and whether
    the function itself draws from the key or hands it on (not followed)."""
    from ruletools import _check

    src = """
    import jax

    def sample(params, n, run):
        out = []
        for i in range(n):
            noise = jax.random.normal(jax.random.PRNGKey(0), (3,))
            out.append(run(params, jax.random.PRNGKey(1)) + noise)
        return out
    """
    found = {f.line: f.evidence for f in _check(src) if f.code == "JAX503"}
    assert sorted(found) == [7, 8]
    assert found[7][0].startswith("the seed `0` is a constant")
    assert found[7][-1] == "a `jax.random` call in the same function draws from it or splits it"
    assert found[8][-1] == "it is handed to other code (where it is drawn from is not followed)"
    assert any("the loop on line 6" in e for e in found[7])


def test_jax503_seed_from_the_loop_variable_is_not_reported():
    assert findings("""
    import jax
    import jax.numpy as jnp

    SEED = 0

    def ensemble(n, shape):
        members = []
        for i in range(n):
            key = jax.random.PRNGKey(i)
            members.append(jax.random.normal(key, shape))
        for j in range(n):
            members.append(jax.random.normal(jax.random.key(SEED + j), shape))
        return members
    """) == []


def test_jax503_constant_key_folded_with_the_iteration_is_not_reported():
    src = """
    import jax

    def fid(n, shape, run):
        out = []
        for it in range(n):
            key = jax.random.PRNGKey(42)
            key = jax.random.fold_in(key, it)
            key = jax.random.fold_in(key, jax.process_index())
            out.append(run(jax.random.normal(key, shape)))
        for it in range(n):
            key = jax.random.PRNGKey(42)  # SAME
            key = jax.random.fold_in(key, jax.process_index())
            out.append(run(jax.random.normal(key, shape)))
        for it in range(n):
            key = jax.random.PRNGKey(42)  # PARTLY
            a = jax.random.normal(jax.random.fold_in(key, it), shape)
            out.append(run(a, jax.random.normal(key, shape)))
        return out
    """
    # the first folds in the loop's counter before any draw; the second folds in a per-process
    # constant, the same in every iteration; the third also draws from the constant key itself
    assert findings(src, "JAX503") == [(line_of(src, "# SAME"), "JAX503"), (line_of(src, "# PARTLY"), "JAX503")]


def test_jax503_key_made_once_before_the_loop_is_not_reported():
    assert findings("""
    import jax
    import jax.numpy as jnp

    def train(params, num_steps):
        key = jax.random.PRNGKey(0)
        for step in range(num_steps):
            key, sub = jax.random.split(key)
            params = params - 0.01 * jax.random.normal(sub, params.shape)
        return params
    """) == []


def test_jax503_same_seed_per_configuration_or_benchmark_trial_is_not_reported():
    assert findings("""
    import time

    import jax
    import jax.numpy as jnp

    @jax.jit
    def matmul(a, b):
        return a @ b

    def sweep(sizes):
        for n in sizes:
            a = jax.random.normal(jax.random.key(0), (n, n))
            b = jax.random.normal(jax.random.key(1), (n, n))
            print(n, matmul(a, b).shape)

    def bench(n, trials):
        times = []
        for _ in range(trials):
            a = jax.random.normal(jax.random.key(0), (n, n))
            t0 = time.perf_counter()
            matmul(a, a).block_until_ready()
            times.append(time.perf_counter() - t0)
        return min(times)
    """) == []


def test_jax503_seed_from_a_parameter_or_rebound_constant_is_not_reported():
    assert findings("""
    import jax
    import jax.numpy as jnp

    SEED = 0
    SEED = 1

    def restarts(seed, n, shape):
        out = []
        for _ in range(n):
            out.append(jax.random.normal(jax.random.PRNGKey(seed), shape))
            out.append(jax.random.normal(jax.random.PRNGKey(SEED), shape))
        return out
    """) == []


# --------------------------------------------------------------------------- runtime truth


def test_runtime_jax501_numpy_random_is_frozen_by_jit():
    jax = pytest.importorskip("jax")
    import numpy as np

    def noisy(x):
        return x + np.random.rand()

    assert noisy(0.0) != noisy(0.0)  # eager: a new number per call
    frozen = jax.jit(noisy)
    assert float(frozen(0.0)) == float(frozen(0.0)) == float(frozen(0.0))


def test_runtime_jax502_same_key_gives_identical_samples():
    jax = pytest.importorskip("jax")
    key = jax.random.PRNGKey(0)
    a = jax.random.normal(key, (4,))
    b = jax.random.normal(key, (4,))
    assert (a == b).all()


def test_runtime_jax503_constant_key_in_loop_repeats():
    jax = pytest.importorskip("jax")
    samples = []
    for _ in range(3):
        key = jax.random.PRNGKey(0)
        samples.append(jax.random.uniform(key, (3,)))
    assert all((s == samples[0]).all() for s in samples)


# --------------------------------------------------------------------------- JAX502 dataflow: what repeats


def _found(src: str, code: str, path: str = "t.py") -> list:
    """(line, opt_in reason or None, message) of the findings of ``code`` in ``src`` (dedented);
    ``path`` is the file's path (the model sees it only when the file exists)."""
    import jaxlint_rules
    from jaxlint.engine import check_source

    result = check_source(textwrap.dedent(src), path, [r() for r in jaxlint_rules.ALL_RULES])
    assert not result.internal_errors, result.internal_errors
    return sorted((f.line, f.opt_in, f.message) for f in result.findings if f.code == code)


def _default(src: str, code: str, path: str = "t.py") -> list:
    """Lines of the findings of ``code`` reported without --pedantic."""
    return [line for line, opt_in, _ in _found(src, code, path) if opt_in is None]


def test_jax502_splitting_one_key_twice_is_reported_with_what_repeats():
    # split(key) returns the first two keys of split(key, 5): key_r == key_a, key_q == key_b
    src = """
    import jax

    def sample_task(key, n):
        key_a, key_b, key_c, key_d, key_e = jax.random.split(key, 5)
        a = jax.random.normal(key_a, (n,))
        b = jax.random.uniform(key_b, (n,))
        key_r, key_q = jax.random.split(key)  # expect: JAX502
        return a, b, key_c, key_d, key_e, jax.random.normal(key_r, (n,)), jax.random.normal(key_q, (n,))
    """
    assert_marked(src)
    assert messages(src, "JAX502") == [
        "PRNG key `key` was already used by `jax.random.split` on line 5; splitting it again returns the same "
        "subkeys as there (the first keys of `split(key, n)` are the same for every n), so draws from them "
        "repeat; split `key` once into all the keys needed, or split a subkey"]


def test_jax502_messages_say_what_each_kind_of_reuse_repeats():
    src = """
    import jax

    def two_draws(key):
        a = jax.random.normal(key, (3,))
        b = jax.random.bernoulli(key, 0.5, (3,))
        return a, b

    def split_then_draw(key):
        k1, k2 = jax.random.split(key)
        return k1, k2, jax.random.normal(key, (3,))

    def draw_then_split(key):
        x = jax.random.normal(key, (3,))
        k1, k2 = jax.random.split(key)
        return x, k1, k2

    def fold_in_inside_split(key):
        keys = jax.random.split(key, 4)
        extra = jax.random.fold_in(key, 1)
        return keys, extra
    """
    msgs = messages(src, "JAX502")
    assert [m.split("; ")[1] for m in msgs] == [
        "both draws get the same random bits, so their results are identical or correlated",
        "this draw uses the random bits the derived keys were made from, so it is correlated with them",
        "the keys derived here are made from the same random bits as that draw, so they are correlated with it",
        "`fold_in(key, i)` is the same key as `split(key, n)[i]` for i < n, so draws from them repeat",
    ]
    assert msgs[0].endswith("split the key (`k1, k2 = jax.random.split(key)`) and draw from each subkey once")


def test_jax502_first_use_whose_result_is_never_read_is_not_reported():
    assert findings("""
    import jax

    def run(key, n_devices, evaluate, steps):
        key, key_e = jax.random.split(key)
        eval_keys = jax.random.split(key_e, n_devices)  # overwritten before any use
        for step in range(steps):
            key_e, *eval_keys = jax.random.split(key_e, n_devices + 1)
            evaluate(eval_keys)
        return key

    def discarded(key):
        jax.random.normal(key, (3,))
        return jax.random.uniform(key, (3,))
    """) == []


def test_jax502_first_use_read_on_some_path_is_still_reported():
    assert_marked("""
    import jax

    def run(key, n, evaluate, warmup):
        eval_keys = jax.random.split(key, n)
        if warmup:
            eval_keys = None
        evaluate(eval_keys)
        return jax.random.split(key, n + 1)  # expect: JAX502

    def closure(key):
        x = jax.random.normal(key, (3,))
        get = lambda: x
        x = jax.random.uniform(key, (3,))  # expect: JAX502
        return get, x
    """)


def test_jax502_advancing_the_key_after_a_draw_is_not_reported():
    # the dataloader idiom: draw, then replace the key by a key derived from it; nothing drawn repeats
    assert findings("""
    import jax
    import jax.numpy as jnp

    def dataloader(arrays, batch_size, *, key):
        indices = jnp.arange(arrays[0].shape[0])
        while True:
            perm = jax.random.permutation(key, indices)
            (key,) = jax.random.split(key, 1)
            for start in range(0, len(indices), batch_size):
                yield tuple(a[perm[start:start + batch_size]] for a in arrays)

    def shuffled_forever(data, key):
        while True:
            order = jax.random.permutation(key, len(data))
            key = jax.random.split(key, 1)[0]
            yield data[order]

    HASH_KEY = jax.random.PRNGKey(7)
    SIDE_TABLE = jax.random.randint(HASH_KEY, (2,), 0, 2 ** 31 - 1)
    HASH_KEY, HASH_SUB = jax.random.split(HASH_KEY)
    BOARD_TABLE = jax.random.randint(HASH_SUB, (9, 2), 0, 2 ** 31 - 1)
    """) == []


def test_jax502_advancing_split_after_a_split_is_still_reported():
    # unlike a draw, a split before it makes the same subkeys: data_key == key, model_key == init_key
    assert_marked("""
    import jax

    def main(seed, load, build):
        key = jax.random.PRNGKey(seed)
        data_key, model_key = jax.random.split(key)
        data = load(data_key)
        model = build(model_key)
        key, init_key, dropout_key = jax.random.split(key, 3)  # expect: JAX502
        return data, model, key, init_key, dropout_key
    """)


def test_jax502_fold_in_past_the_split_count_and_paired_index_draws_are_not_reported():
    assert findings("""
    import jax

    def ask(key, population_size):
        keys = jax.random.split(key, population_size)
        dither_key = jax.random.fold_in(key, population_size)
        return keys, dither_key

    def sample_batch(key, x, y, batch_size):
        # the same key on purpose: the same rows of x and y, so images keep their labels
        xb = jax.random.choice(key, x, (batch_size,), replace=False)
        yb = jax.random.choice(key, y, (batch_size,), replace=False)
        return xb, yb

    def shuffle_pair(key, x, y):
        return jax.random.permutation(key, x), jax.random.permutation(key, y)
    """) == []


def test_jax502_the_same_index_draw_indexing_two_arrays_pairs_them():
    """Fresh AZ (judged FALSE twice): ``data[permutation(key, arange(n))]`` and ``masks[permutation(key,
    arange(n))]`` draw the same indices on purpose, so every sample keeps its mask. The same draw indexing one
    array twice, or two equal draws kept as arrays, is still a reuse."""
    assert findings("""
    import jax
    import jax.numpy as jnp

    def shuffle_with_masks(key, data, masks, n):
        data_shuffled = data[jax.random.permutation(key, jnp.arange(n))]
        masks_shuffled = masks[jax.random.permutation(key, jnp.arange(n))]
        return data_shuffled, masks_shuffled
    """) == []
    assert_marked("""
    import jax
    import jax.numpy as jnp

    def twice(key, data, n):
        a = data[jax.random.permutation(key, jnp.arange(n))]
        b = data[jax.random.permutation(key, jnp.arange(n))]  # expect: JAX502
        return a, b

    def kept(key, n):
        p1 = jax.random.permutation(key, jnp.arange(n))
        p2 = jax.random.permutation(key, jnp.arange(n))  # expect: JAX502
        return p1, p2
    """)


def test_jax502_fold_in_with_a_loop_index_offset_past_the_split_count_is_not_reported():
    # fold_in(key, 100 + i) is never split(key, 3)[d]: its data is at least 100; fold_in(key, i) is, for i < 3
    assert_marked("""
    import jax

    def make(seed, n, cards):
        key = jax.random.key(seed)
        k_num, k_w, k_c = jax.random.split(key, 3)
        cols = [jax.random.normal(k_num, (n,))]
        for i, card in enumerate(cards):
            cols.append(jax.random.randint(jax.random.fold_in(key, 100 + i), (n,), 0, card))
        for j in range(3, 9):
            cols.append(jax.random.normal(jax.random.fold_in(key, j), (n,)))
        return cols

    def make_overlapping(seed, n, cards):
        key = jax.random.key(seed)
        k_num, k_w, k_c = jax.random.split(key, 3)
        cols = [jax.random.normal(k_num, (n,))]
        for i, card in enumerate(cards):
            cols.append(jax.random.randint(jax.random.fold_in(key, i), (n,), 0, card))  # expect: JAX502
        return cols
    """)


def test_jax502_index_draws_that_differ_in_more_than_the_data_are_reported():
    assert_marked("""
    import jax

    def sample_batch(key, x, y, n):
        xb = jax.random.choice(key, x, (n,), replace=False)
        yb = jax.random.choice(key, y, (2 * n,), replace=False)  # expect: JAX502
        return xb, yb

    def twice(key, x):
        return jax.random.permutation(key, x), jax.random.permutation(key, x)  # expect: JAX502
    """)


# --------------------------------------------------------------------------- JAX502/JAX503 in test code


def test_jax502_two_draws_from_one_key_in_a_test_are_opt_in(tmp_path):
    src = """
    import jax

    def test_loss_shape():
        key = jax.random.PRNGKey(0)
        logits = jax.random.normal(key, (4, 3))
        labels = jax.random.randint(key, (4,), 0, 3)
        assert loss(logits, labels).shape == (4,)

    def model_init(key):
        w = jax.random.normal(key, (4, 3))
        b = jax.random.normal(key, (3,))
        return w, b
    """
    found = _found(src, "JAX502")
    assert [(line, opt_in) for line, opt_in, _ in found] == [(7, "test inputs from one key"), (12, None)]
    # in a test module by its path, every function is test code (the model knows the path of a file)
    for name, default in (("test_model.py", []), ("model.py", [12])):
        path = tmp_path / "tests" / name if name.startswith("test") else tmp_path / name
        path.parent.mkdir(exist_ok=True)
        path.write_text(textwrap.dedent(src))
        assert _default(src, "JAX502", path=str(path)) == default


def test_jax502_draws_from_a_literal_seed_outside_a_loop_are_reported():
    # issue 37: `rng = PRNGKey(0)` then two draws from `rng` is how the bug is most often written;
    # the draws are correlated whatever the seed: a default finding
    src = """
    import jax

    def get_fake_batch(batch_size):
        rng = jax.random.PRNGKey(0)
        images = jax.random.normal(rng, (batch_size, 28, 28, 1))
        labels = jax.random.randint(rng, (batch_size,), 0, 10)
        return images, labels

    def make_data(seed, n):
        key = jax.random.PRNGKey(seed)
        x = jax.random.normal(key, (n, 3))
        noise = jax.random.normal(key, (n,))
        return x, noise

    def train(n, steps):
        rng = jax.random.PRNGKey(0)
        for _ in range(steps):
            rng, k = jax.random.split(rng)
            noise = jax.random.normal(k, (n,))
            mask = jax.random.bernoulli(k, 0.5, (n,))
        return noise, mask

    def features(key, shape):
        return jax.random.normal(key, shape)

    def gate(key, shape):
        return jax.random.normal(key, shape) > 0

    def attention(q, shape):
        rng_key = jax.random.PRNGKey(17)
        f = features(rng_key, shape)
        g = gate(rng_key, shape)
        return q * f * g

    def fake_tokens(batch_size):
        rng = jax.random.PRNGKey(0)
        batch = {}
        for k in ("inputs", "targets"):
            batch[k] = jax.random.randint(rng, (batch_size, 128), 0, 999)
        return batch

    def init_layers(key, shape):
        layers = {}
        for k in ("w1", "w2"):
            layers[k] = jax.random.normal(key, shape)
        return layers
    """
    found = _found(src, "JAX502")
    assert [(line, opt_in) for line, opt_in, _ in found] == [
        (7, None),                         # two draws from one literal-seeded key
        (13, None),                        # the seed comes from the caller
        (21, None),                        # a key split per step from a literal seed is new each step
        (33, None),                        # a fixed key handed to two drawing functions of the module
        (40, None),                        # a literal loop keeping its draws: the loop case, by default
        (46, None),                        # ... also from the caller's key: two identical layers
    ]


def test_jax502_key_never_advanced_in_a_test_loop_is_reported_when_the_iterations_are_otherwise_alike():
    src = """
    import jax
    import jax.numpy as jnp

    def test_round_trip():
        rng = jax.random.PRNGKey(0)
        for _ in range(1000):
            rng1, rng2 = jax.random.split(rng)
            state = init(rng2)
            assert jnp.all(decode(encode(state)) == state)

    def test_rollout_terminates():
        key = jax.random.PRNGKey(0)
        state = init(key)
        for _ in range(50):
            action = jax.random.choice(key, legal(state))
            state = step(state, action)
        assert state.terminated
    """
    found = _found(src, "JAX502")
    assert [(line, opt_in) for line, opt_in, _ in found] == [(8, None), (16, "test loop varies otherwise")]
    assert found[0][2] == (
        "PRNG key `rng` is never replaced in the loop on line 7, so every iteration draws the same random numbers "
        "(`split` returns the same subkeys each time), and the test checks the same case over and over; split it "
        "in the loop (`rng, sub = jax.random.split(rng)`) and use `sub`, or derive a key per step "
        "(`jax.random.fold_in(rng, step)`)")


def test_jax502_loop_reuse_outside_tests_is_reported_even_when_iterations_differ():
    assert_marked("""
    import jax

    def update_actor(params, key, delay, update):
        for _ in range(delay):
            actor_key, alpha_key = jax.random.split(key)  # expect: JAX502
            params = update(params, actor_key, alpha_key)
        return params
    """)


def test_jax503_constant_key_in_test_loops():
    src = """
    import jax

    def test_decode_matches_reference(model, x, ref):
        state = model.init(x[:, :1])
        out = []
        for i in range(x.shape[1]):
            y, state = model.apply(x[:, i:i + 1], state, jax.random.PRNGKey(0))
            out.append(y)
        assert close(out, ref)

    def test_sampler_is_valid(sampler):
        for _ in range(100):
            key = jax.random.PRNGKey(0)
            assert valid(sampler(key))
    """
    found = _found(src, "JAX503")
    assert [(line, opt_in) for line, opt_in, _ in found] == [(8, "test loop varies otherwise"), (14, None)]
    assert found[1][2] == (
        "`jax.random.PRNGKey(0)` with a constant seed inside the loop on line 13 makes the same key every "
        "iteration, so every iteration draws the same random numbers, and the test checks the same case over "
        "and over; create the key once before the loop and split it per iteration, or derive one with "
        "`jax.random.fold_in(key, step)`")


def test_explain_lists_the_opt_in_cases():
    assert "Reported only with --pedantic" in KeyReuse.explain()
    assert "Reported only with --pedantic" in ConstantKeyInLoop.explain()


# --------------------------------------------------------------------------- JAX501 calls and messages


def test_jax501_function_compiled_and_called_once_is_not_reported():
    assert findings("""
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax.experimental.pjit import pjit

    def gen_data():
        key = jax.random.PRNGKey(np.random.randint(0, 256))
        return jax.random.normal(key, (8, 8))

    data_fn = pjit(gen_data)
    data = data_fn()
    """) == [(5, "JAX404")]  # only the deprecated pjit import (opt-in, JAX404)


def test_jax501_function_compiled_and_called_more_than_once_is_reported():
    assert_marked("""
    import jax
    import jax.numpy as jnp
    import numpy as np

    def gen_data():
        key = jax.random.PRNGKey(np.random.randint(0, 256))  # expect: JAX501
        return jax.random.normal(key, (8, 8))

    data_fn = jax.jit(gen_data)
    train_data = data_fn()
    test_data = data_fn()
    """)


def test_jax501_message_says_who_gets_the_same_number():
    msgs = messages("""
    import jax
    import jax.numpy as jnp
    import numpy as np

    @jax.jit
    def jitter(x):
        return x + np.random.normal()

    def per_row(x):
        return x * np.random.rand()

    batched = jax.vmap(per_row)

    def noisy_cumsum(xs):
        def body(c, x):
            return c + x + np.random.normal(), c
        return jax.lax.scan(body, 0.0, xs)
    """, "JAX501")
    assert msgs == [
        "`np.random.normal()` runs in Python while JAX traces the function, so its value is a constant of the "
        "traced program: every call of the compiled function gets the same number; pass a `jax.random` key in "
        "and draw with `jax.random`",
        "`np.random.rand()` runs in Python while JAX traces the function, so its value is a constant of the traced "
        "program: every row of the vmap gets the same number; pass a `jax.random` key in and draw with "
        "`jax.random`",
        "`np.random.normal()` runs in Python while JAX traces the function, so its value is a constant of the "
        "traced program: every step of the `scan` gets the same number; pass a `jax.random` key in and draw "
        "with `jax.random`",
    ]


# --------------------------------------------------------------------------- runtime truth of the messages


def test_runtime_split_twice_and_fold_in_give_the_same_subkeys():
    jax = pytest.importorskip("jax")
    if not jax.config.jax_threefry_partitionable:
        pytest.skip("the messages describe JAX's default (partitionable) threefry")
    data = jax.random.key_data
    key = jax.random.key(0)
    five = jax.random.split(key, 5)
    assert (data(jax.random.split(key)) == data(five[:2])).all()
    assert (data(jax.random.fold_in(key, 3)) == data(five[3])).all()
    assert not (data(jax.random.fold_in(key, 5))[None] == data(five)).all(-1).any()  # past the count: apart
    assert not (data(jax.random.fold_in(key, 100 + 2))[None] == data(five)).all(-1).any()


def test_runtime_two_distributions_from_one_key_are_functions_of_each_other():
    jax = pytest.importorskip("jax")
    key = jax.random.key(0)
    normal = jax.random.normal(key, (64,))
    coin = jax.random.bernoulli(key, 0.5, (64,))
    assert (coin == (normal < 0)).all()
    prefix = (jax.random.normal(key, (8,))[:4] == jax.random.normal(key, (4,))).all()
    # draws of different sizes share their first numbers with the partitionable threefry (JAX's
    # default since 0.5); jax 0.4.x's default derives the bits from the whole shape
    assert bool(prefix) == bool(jax.config.jax_threefry_partitionable)


def test_runtime_paired_choice_picks_the_same_rows():
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp
    key = jax.random.key(1)
    x = jnp.arange(10)
    xb = jax.random.choice(key, x, (4,), replace=False)
    yb = jax.random.choice(key, x * 10, (4,), replace=False)
    assert (yb == xb * 10).all()


# --------------------------------------------------------------------------- keys shared across calls (issue 12)


def test_jax502_module_level_key_drawn_by_a_helper_called_for_each_layer():
    assert_marked("""
    import jax

    KEY = jax.random.PRNGKey(0)

    def init_layer(shape):
        return jax.random.normal(KEY, shape) * 0.02  # expect: JAX502

    def init_bias(n):
        k1, k2 = jax.random.split(KEY)  # expect: JAX502
        return jax.random.normal(k1, (n,))

    def init_mlp(sizes):
        layers = [init_layer((a, b)) for a, b in zip(sizes[:-1], sizes[1:])]
        return layers, init_bias(3), init_bias(4)
    """)


def test_jax502_key_stored_on_self_in_init_and_drawn_per_call():
    assert_marked("""
    import jax

    class Explorer:
        def __init__(self, seed):
            self.key = jax.random.PRNGKey(seed)

        def act(self, logits):
            return jax.random.categorical(self.key, logits)  # expect: JAX502

        def noise(self, shape):
            return jax.random.normal(self.key, shape)  # expect: JAX502

        def rollout(self, logits, n):
            return [self.noise((2,)) for _ in range(n)]
    """)


def test_jax502_key_fixed_across_calls_near_misses_are_not_reported():
    assert findings("""
    import jax

    KEY = jax.random.PRNGKey(0)
    state = {"key": jax.random.PRNGKey(1)}

    def sample_once(shape):
        # called once: one draw per run
        return jax.random.normal(KEY, shape)

    def per_step(shape, step):
        return jax.random.normal(jax.random.fold_in(KEY, step), shape)

    def from_argument(key, shape):
        return jax.random.normal(key, shape)

    class Advancing:
        def __init__(self, seed):
            self.key = jax.random.PRNGKey(seed)

        def act(self, logits):
            self.key, sub = jax.random.split(self.key)
            return jax.random.categorical(sub, logits)

    class Reseeded:
        def __init__(self, seed):
            self.key = jax.random.PRNGKey(seed)

        def reset(self, seed):
            self.key = jax.random.PRNGKey(seed)

        def act(self, logits):
            return jax.random.categorical(self.key, logits)

    def main():
        x = sample_once((2,))
        ys = [per_step((2,), i) for i in range(3)]
        zs = [from_argument(k, (2,)) for k in jax.random.split(KEY, 3)]
        return x, ys, zs
    """, "JAX502") == []


def test_jax502_key_fixed_across_calls_in_a_test_helper_is_opt_in(tmp_path):
    src = """
    import jax

    class TestModel:
        def setUp(self):
            self.rng = jax.random.PRNGKey(0)

        def get_data(self):
            return jax.random.normal(self.rng, (2, 3))

        def test_a(self):
            assert self.get_data().shape == (2, 3)

        def test_b(self):
            assert self.get_data().shape == (2, 3)
    """
    assert opt_in_findings(src, "JAX502") == [(9, "JAX502", "test inputs from one key")]


def test_jax502_same_key_kept_for_each_name_of_a_literal_loop():
    assert_marked("""
    import jax

    def init(key, shape):
        params = {}
        for name in ("w1", "w2", "w3"):
            params[name] = jax.random.normal(key, shape) * 0.02  # expect: JAX502
        return params

    def init_layers(key, shapes):
        ws = []
        for shape in shapes:
            ws.append(jax.random.uniform(key, shape))  # expect: JAX502 (opt-in)
        return ws, [jax.random.normal(key, s) for s in shapes]  # expect: JAX502 (opt-in)
    """)


def test_jax502_literal_loop_near_misses_are_not_reported():
    assert findings("""
    import jax

    def compare(key, fns, shape):
        # comparable inputs per implementation, used within the iteration
        outs = {}
        for name in ("ref", "fast"):
            x = jax.random.normal(key, shape)
            outs[name] = fns[name](x)
        return outs

    def init_folded(key, shape):
        params = {}
        for i, name in enumerate(("w1", "w2")):
            params[name] = jax.random.normal(jax.random.fold_in(key, i), shape)
        return params

    def init_split(key, shape):
        params = {}
        for name in ("w1", "w2"):
            key, sub = jax.random.split(key)
            params[name] = jax.random.normal(sub, shape)
        return params

    def init_per_key(keys, shape):
        return {name: jax.random.normal(k, shape) for name, k in zip(("a", "b"), keys)}
    """, "JAX502") == []


def test_jax502_key_passed_to_the_callers_own_lambda_or_def():
    assert_marked("""
    import jax

    def sinespe(rng_key, shape):
        functor = lambda *args: jax.random.normal(*args) - 4.0
        freqs = functor(rng_key, shape)
        offsets = jax.random.normal(rng_key, shape)  # expect: JAX502

        def init_gains(key, shape):
            return jax.random.normal(key, shape) / 2

        gains = init_gains(rng_key, shape)  # expect: JAX502
        return freqs, offsets, gains
    """)


def test_jax502_key_passed_to_a_def_of_the_enclosing_function():
    """An environment's ``__init__`` defines ``_step`` and ``_soft_reset`` side by side (pax's
    in_the_matrix, fresh set P): ``_step`` draws from its key and hands the same key to the sibling,
    which draws from it again; the sibling may be defined after ``_step``. A sibling that splits it
    makes keys correlated with the draw (reported, as a split after a draw is); one that ignores the
    key, or a method of another object, draws nothing proven: not reported."""
    assert_marked("""
    import jax
    import jax.numpy as jnp

    class Env:
        def __init__(self):
            def _step(key, state):
                flip = jax.random.choice(key, jnp.array([0, 1]))
                state = _soft_reset(key, state + flip)  # expect: JAX502
                return _keep(key, state), _fresh_keys(key)  # expect: JAX502

            def _soft_reset(key, state):
                return state + jax.random.randint(key, (), 0, 5)

            def _keep(key, state):
                return state

            def _fresh_keys(key):
                return jax.random.split(key)

            self.step = jax.jit(_step)

    def make(policy):
        def _step(key, state):
            flip = jax.random.choice(key, jnp.array([0, 1]))
            return policy.act(key, state + flip)

        return jax.jit(_step)
    """)


def test_jax502_a_key_made_again_from_the_same_literal_seed():
    """Two ``PRNGKey(0)`` calls make one key (fresh set J: d2l's weight-decay data, whose label noise
    is the first feature column scaled): reported where the two results meet in one computation, opt-in
    where they never do (whether the shared bits matter is not shown: 17 of 19 such pairs on the review
    sets were demos or deliberate reruns). Different seeds, a seed from a variable, draws in exclusive
    branches, and a literal seed in a loop (JAX503's) are not this finding."""
    assert_marked("""
    import jax
    import jax.numpy as jnp

    def make_data(n, d):
        X = jax.random.normal(jax.random.PRNGKey(0), (n, d))
        noise = jax.random.normal(jax.random.PRNGKey(0), (n, 1)) * 0.01  # expect: JAX502
        return X, X @ jnp.ones((d, 1)) + noise

    def init(d):
        key = jax.random.PRNGKey(7)
        w1 = jax.random.normal(key, (d, d))
        k2 = jax.random.PRNGKey(7)
        w2, w3 = jax.random.split(k2)  # expect: JAX502 (opt-in)
        return w1, w2, w3

    def dummy_inputs(model):
        x = jax.random.normal(jax.random.PRNGKey(0), (1, 8))
        mask = jax.random.normal(jax.random.PRNGKey(0), (1, 2))  # expect: JAX502 (opt-in)
        return model.init(x, mask)

    def near_misses(n, seed, flag):
        a = jax.random.normal(jax.random.PRNGKey(1), (n,))
        b = jax.random.normal(jax.random.PRNGKey(2), (n,))
        c = jax.random.normal(jax.random.PRNGKey(seed), (n,))
        d = jax.random.normal(jax.random.PRNGKey(seed), (n,))
        if flag:
            e = jax.random.normal(jax.random.PRNGKey(3), (n,))
        else:
            e = jax.random.uniform(jax.random.PRNGKey(3), (n,))
        return a, b, c, d, e
    """)


def test_jax502_a_key_closed_over_by_the_function_a_tree_map_calls_per_leaf():
    """``jax.tree.map`` calls its function once per leaf: a draw from a key of the code around it
    gives every leaf the same bits (fresh set O: a Bayesian network's ``sample_params``). A tree of
    keys mapped alongside, a key derived per leaf, and a permutation shared by a batch's arrays (PPO's
    minibatch shuffle, on purpose) are not reported."""
    assert_marked("""
    import jax
    import jax.numpy as jnp

    def sample_params(dist, key):
        def sample_gaussian(mu, logvar):
            eps = jax.random.normal(key, shape=mu.shape)  # expect: JAX502
            return eps * jnp.exp(logvar / 2) + mu
        return jax.tree_util.tree_map(sample_gaussian, dist["mu"], dist["logvar"])

    def perturb(params, key):
        return jax.tree.map(lambda p: p + 0.01 * jax.random.normal(key, p.shape), params)  # expect: JAX502

    def near_misses(params, batch, key):
        leaves, treedef = jax.tree_util.tree_flatten(params)
        keys = jax.tree_util.tree_unflatten(treedef, list(jax.random.split(key, len(leaves))))
        noisy = jax.tree.map(lambda p, k: p + jax.random.normal(k, p.shape), params, keys)
        shuffled = jax.tree.map(lambda x: jax.random.permutation(key, x), batch)
        return noisy, shuffled
    """)


def test_jax502_distribution_sample_with_a_consumed_key():
    assert_marked("""
    import jax

    def update_actor(actor, params, obs, key, delay):
        for _ in range(delay):
            actor_key, alpha_key = jax.random.split(key)  # expect: JAX502
            pi = actor.apply(params, obs)
            action = pi.sample(seed=key)  # expect: JAX502
        return action, actor_key, alpha_key

    def act(actor, params, obs, key):
        k1, k2 = jax.random.split(key)
        pi = actor.apply(params, obs)
        return pi.sample(seed=key), k1, k2  # expect: JAX502
    """)


def test_jax502_lambdas_defs_and_sample_near_misses_are_not_reported():
    assert findings("""
    import jax

    def init_layer(key, shape):
        return jax.random.normal(key, shape)

    def f(key, shape, pi):
        # a lambda that does not draw, and a def given a subkey
        scale = lambda k, s: s * 2
        k1, k2 = jax.random.split(key)
        def gains(k, s):
            return jax.random.normal(k, s)
        a = scale(key, shape)
        b = gains(k1, shape)
        c = pi.sample(seed=k2)
        d = pi.sample(10)
        return a, b, c, d

    def g(key, shape, pi):
        key, sub = jax.random.split(key)
        x = pi.sample(seed=sub)
        key, sub = jax.random.split(key)
        y = pi.sample(seed=sub)
        return x, y
    """, "JAX502") == []


def test_jax503_constant_seed_in_a_helper_called_every_step():
    assert_marked("""
    import jax

    def noise(shape):
        key = jax.random.PRNGKey(0)  # expect: JAX503
        return jax.random.normal(key, shape)

    def train(x, n):
        for step in range(n):
            x = x + noise(x.shape)
        return x

    class Policy:
        def act(self, logits):
            return jax.random.categorical(jax.random.key(1), logits)  # expect: JAX503
    """)


def test_jax503_constant_seed_in_helpers_that_run_once_or_per_configuration_is_not_reported():
    assert findings("""
    import jax

    def make_data(shape):
        key = jax.random.PRNGKey(0)
        return jax.random.normal(key, shape)

    def init(shape):
        return jax.random.normal(jax.random.PRNGKey(0), shape)

    def seeded(shape, seed):
        return jax.random.normal(jax.random.PRNGKey(seed), shape)

    def main():
        params = init((3,))
        for cfg in ("small", "large"):
            x = make_data((2,))
        for step in range(10):
            y = seeded((2,), step)
        return params, x, y
    """, "JAX503") == []


def test_jax503_constant_key_in_a_per_step_helper_not_drawn_from_or_a_default_is_not_reported():
    assert findings("""
    import jax

    class Sampler:
        def sample(self, prompt, rng=None):
            if rng is None:
                rng = jax.random.PRNGKey(42)  # a default when the caller gives none
            return self.decode(prompt, rng)

        def __call__(self, model, params, x, cell, shape):
            # dummy keys handed to code that may not draw (eval-mode dropout, a zeros carry)
            carry = cell.initialize_carry(jax.random.PRNGKey(0), shape)
            return model.apply(params, x, rngs={"dropout": jax.random.key(0)}, train=False), carry

    def test_step():
        key = jax.random.PRNGKey(0)
        assert jax.random.normal(key, (2,)).shape == (2,)
    """, "JAX503") == []


# --------------------------------------------------------------------------- keys passed inside tuples (issue 12 gap 4)


def test_jax502_key_passed_in_a_tuple_to_the_callers_own_def_or_lambda():
    assert_marked("""
    import jax

    def run_experiment(key, config):
        def setup(keys, cfg):
            key, init_key = keys
            key, *env_keys = jax.random.split(key, cfg.num_envs + 1)
            params = jax.random.normal(init_key, (cfg.width,))
            return params, env_keys

        key, init_key = jax.random.split(key)
        params, env_keys = setup((key, init_key), config)
        eval_keys = jax.random.split(key, config.num_devices)  # expect: JAX502
        return params, env_keys, eval_keys

    def noisy_pair(key, n):
        draw = lambda ks, m: jax.random.normal(ks[0], (m,))
        a = draw((key, 1), n)
        b = jax.random.normal(key, (n,))  # expect: JAX502
        return a, b

    def init_and_perturb(key, shape):
        def init(args):
            key, scale = args
            return jax.random.normal(key, shape) * scale
        w = init((key, 0.02))
        noise = jax.random.normal(key, shape)  # expect: JAX502
        return w + noise
    """)


def test_jax502_tuples_near_misses_are_not_reported():
    assert findings("""
    import jax

    def subkeys_in_the_tuple(key, config):
        def setup(keys, cfg):
            key, init_key = keys
            return jax.random.normal(key, (cfg.width,)), jax.random.normal(init_key, (cfg.width,))
        key, k1, k2 = jax.random.split(key, 3)
        params = setup((k1, k2), config)
        return params, jax.random.split(key, 4)

    def key_only_carried(key, config):
        def setup(args):
            key, cfg = args
            return cfg.width, key
        width, key = setup((key, config))
        return jax.random.normal(key, (width,))

    def other_element_drawn(key, k1, shape):
        def init(keys):
            a, b = keys
            return jax.random.normal(a, shape), b
        w, _ = init((k1, key))
        return w, jax.random.normal(key, shape)

    def advanced_after_the_draw(key, shape):
        def init(args):
            k, scale = args
            return jax.random.normal(k, shape) * scale
        w = init((key, 0.02))
        key, sub = jax.random.split(key)
        return w, key, sub

    def one_branch_or_the_other(key, shape, from_helper):
        def init(args):
            k, scale = args
            return jax.random.normal(k, shape) * scale
        if from_helper:
            w = init((key, 0.02))
        else:
            w = jax.random.normal(key, shape)
        return w

    def unknown_position(key, keys, shape):
        def init(ks):
            k, other = ks
            return jax.random.normal(k, shape)
        w = init((*keys, key))
        return w, jax.random.normal(key, shape)
    """, "JAX502") == []


def test_jax502_key_passed_in_a_tuple_to_a_module_function():
    # the Mava learner_setup pattern: a bundle of keys handed to a set-up function that unpacks
    # and splits them, while the caller keeps using one of them
    assert_marked("""
    import jax

    def learner_setup(env, keys, config):
        key, actor_key, critic_key = keys
        key, *env_keys = jax.random.split(key, config.num_envs + 1)
        actor = jax.random.normal(actor_key, (config.width,))
        critic = jax.random.normal(critic_key, (config.width,))
        return (actor, critic), env_keys

    def run_experiment(env, config):
        key, key_e, actor_key, critic_key = jax.random.split(jax.random.PRNGKey(config.seed), num=4)
        params, env_keys = learner_setup(env, (key, actor_key, critic_key), config)
        eval_keys = jax.random.split(key_e, config.num_devices)
        abs_keys = jax.random.split(key, config.num_devices)  # expect: JAX502
        return params, env_keys, eval_keys, abs_keys
    """)


def test_jax502_module_function_tuple_near_misses_are_not_reported():
    assert findings("""
    import jax

    def learner_setup(keys, config):
        key, actor_key = keys
        key, *env_keys = jax.random.split(key, config.num_envs + 1)
        return jax.random.normal(actor_key, (config.width,)), env_keys

    def init_layer(key, shape):
        return jax.random.normal(key, shape)

    def fresh_keys(config):
        key, setup_key, actor_key = jax.random.split(jax.random.PRNGKey(config.seed), 3)
        params, env_keys = learner_setup((setup_key, actor_key), config)
        return params, env_keys, jax.random.split(key, config.num_devices)

    class Learner:
        def setup(self, keys):
            key, other = keys
            return jax.random.normal(key, (3,))

    def method_is_not_followed(learner, key):
        w = learner.setup((key, None))
        return w, jax.random.normal(key, (3,))
    """, "JAX502") == []


def test_jax502_same_key_into_a_module_function_that_splits_it_every_iteration():
    # pgx's MCTS demo: `jax.jit(run_mcts)(key, state)` on every move with a key never advanced:
    # the search noise is the same each move. (The wrapper rebuilt per move around the same
    # function is JAX104's: no recompile, a slow dispatch per move.)
    src = """
    import jax

    def run_mcts(key, state):
        key, subkey = jax.random.split(key)
        return state + jax.random.normal(subkey, state.shape)

    def play(state, seed, moves):
        key = jax.random.PRNGKey(seed)
        for _ in range(moves):
            state = jax.jit(run_mcts)(key, state)  # expect: JAX502
        return state

    def play_plain(state, key, moves):
        for _ in range(moves):
            state = run_mcts(key, state)  # expect: JAX502
        return state
    """
    assert default_findings(src) == expected(src)
    assert findings(src, "JAX101") == []  # the same function: no recompile
    # the plain wrapper rebuilt per move: JAX104, opt-in (no donation or shardings to set up again)
    assert [(line, code) for line, code, _ in opt_in_findings(src, "JAX104")] == [(11, "JAX104")]


def test_jax502_module_function_that_splits_near_misses_are_not_reported():
    assert findings("""
    import jax

    def choose_point(key, n):
        _, subkey = jax.random.split(key)
        return jax.random.choice(subkey, n)

    def vertex(key, n):
        # the helper's `choice` and this `uniform` read the same subkey, but `choice` splits it
        # again before drawing: no bits are shared
        point = choose_point(key, n)
        key, subkey = jax.random.split(key)
        return point, jax.random.uniform(subkey, (2,))

    def play(state, key, moves):
        for _ in range(moves):
            key, sub = jax.random.split(key)
            state = jax.jit(choose_point)(sub, state)
        return state

    def colors(key, n):
        key, *subkeys = jax.random.split(key, n + 1)
        shape_colors = [jax.random.randint(subkey, (3,), 0, 255) for subkey in subkeys]
        _, subkey = jax.random.split(key)  # a new key: the comprehension's `subkey` is its own
        return shape_colors, jax.random.randint(subkey, (3,), 0, 255)
    """, "JAX502") == []


def test_jax503_a_fallback_key_for_an_argument_given_in_another_form_is_not_per_step():
    # the else of a test on what the caller passed: a default, not a key made at every step
    assert findings("""
    import jax

    def sample(logits, generator=None):
        if isinstance(generator, jax.Array):
            key = generator
        else:
            key = jax.random.key(0)
        return jax.random.categorical(key, logits)

    def step(x, rng):
        if rng is not None:
            key = rng
        else:
            key = jax.random.PRNGKey(0)
        return x + jax.random.normal(key, x.shape)
    """, "JAX503") == []


def test_jax503_a_constant_key_in_a_per_step_method_under_another_test_is_still_reported():
    assert_marked("""
    import jax

    def step(x, noisy):
        if noisy:
            key = jax.random.PRNGKey(0)  # expect: JAX503
            x = x + jax.random.normal(key, x.shape)
        return x
    """)


def test_jax503_a_constant_key_folded_with_the_step_is_the_fix_not_the_pitfall():
    # issue 26, class 5: the rule's own recommended fix, in a per-step function
    assert findings("""
    import jax

    @jax.jit
    def train_step(state, batch):
        dropout = jax.random.fold_in(jax.random.key(0), state.step)
        base = jax.random.PRNGKey(1)
        noise = jax.random.fold_in(base, batch.shape[0] + state.step)
        return state, jax.random.normal(dropout, batch.shape) + jax.random.normal(noise, batch.shape)
    """, "JAX503") == []


def test_jax503_a_constant_key_folded_with_a_constant_is_still_constant():
    assert_marked("""
    import jax

    def step(x):
        key = jax.random.fold_in(jax.random.key(0), 3)  # expect: JAX503
        return x + jax.random.normal(key, x.shape)
    """)


def test_jax502_in_a_helper_only_tests_use_is_test_code():
    # a fixture helper that only test functions call or hand on (by the module's call graph) is test
    # code: its inputs only need to exist, so a reused key there is opt-in; the same helper also
    # called from training code is not
    src = """
    import jax

    def get_fake_batch(n):
        rng = jax.random.PRNGKey(0)
        images = jax.random.normal(rng, (n, 28, 28, 1))
        labels = jax.random.randint(rng, (n,), 0, 10)  # expect: JAX502 (opt-in)
        return images, labels

    def get_args(config):
        return get_fake_batch(config.batch_size)

    def test_trace(state):
        run_benchmark(get_args, state)

    def make_data(n):
        key = jax.random.PRNGKey(1)
        x = jax.random.normal(key, (n, 3))
        y = jax.random.normal(key, (n,))  # expect: JAX502
        return x, y

    def test_data():
        assert make_data(3)

    def train(n):
        return make_data(n)
    """
    assert_marked(src)
    assert [why for _, _, why in opt_in_findings(src)] == ["test inputs from one key"]


def test_jax502_a_draw_in_a_branch_every_call_skips_by_its_default_is_not_reported():
    """A module-level key drawn only under ``if random_color:``, whose default is False and which no
    call passes, never draws (issue 39, fresh set A: judged FALSE); the branch the default takes does."""
    assert_marked("""
    import jax
    import jax.numpy as jnp

    key = jax.random.PRNGKey(3)

    def show_mask(mask, *, random_color=False):
        if random_color:
            rgb = jax.random.uniform(key, (3,))
        else:
            rgb = jnp.ones(3)
        return mask * rgb.sum()

    def show_noise(mask, noisy=True):
        if noisy:
            return mask + jax.random.normal(key, mask.shape)  # expect: JAX502
        return mask

    def show_masks(masks):
        for m in masks:
            show_mask(m)
            show_noise(m)
    """)


def test_jax502_a_branch_a_call_turns_on_is_still_reported():
    assert_marked("""
    import jax
    import jax.numpy as jnp

    key = jax.random.PRNGKey(3)

    def show_mask(mask, *, random_color=False):
        if random_color:
            rgb = jax.random.uniform(key, (3,))  # expect: JAX502
        else:
            rgb = jnp.ones(3)
        return mask * rgb.sum()

    def show_masks(masks):
        for m in masks:
            show_mask(m, random_color=True)
    """)


def test_jax503_a_helper_called_under_a_periodic_guard_keeps_its_fixed_noise():
    """Set I's FALSE: `evaluate` samples with `PRNGKey(0)` and runs only at snapshots
    (`if step % snapshot_freq == 0`): the same noise at each snapshot is how checkpoints are compared.
    Called at every step, the same helper is reported."""
    periodic = """
        import jax

        @jax.jit
        def update(state, batch):
            return state - batch

        def evaluate(state, n):
            key = jax.random.PRNGKey(0)
            return jax.random.normal(key, (n,)) + state

        def train(state, batches, num_steps, snapshot_freq, n):
            for step in range(num_steps):
                state = update(state, next(batches))
                if step % snapshot_freq == 0 and n > 0:
                    evaluate(state, n)
            return state
    """
    assert findings(periodic, "JAX503") == []
    every_step = periodic.replace("if step % snapshot_freq == 0 and n > 0:", "if n > 0:").replace(
        "key = jax.random.PRNGKey(0)", "key = jax.random.PRNGKey(0)  # expect: JAX503")
    assert_marked(every_step)


# --------------------------------------------------------------------------- JAX503: a key made once as a default

_DEFAULT_KEY = """
    import jax
    import jax.numpy as jnp

    def dropout_layer(x, rate, key=jax.random.PRNGKey(0)):  # expect: JAX503
        mask = jax.random.uniform(key, x.shape) > rate
        return jnp.where(mask, x / (1.0 - rate), 0.0)

    def forward(params, x):
        h1 = dropout_layer(jax.nn.relu(x @ params[0]), 0.5)
        return dropout_layer(jax.nn.relu(h1 @ params[1]), 0.5)
"""


def test_jax503_a_key_made_once_as_a_default_and_drawn_by_calls_that_omit_it():
    assert_marked(_DEFAULT_KEY)
    (msg,) = messages(_DEFAULT_KEY, "JAX503")
    assert msg.startswith("the default `key=jax.random.PRNGKey(0)` of `dropout_layer` is made once")
    assert "the calls on lines 10, 11 pass no `key`" in msg


def test_jax503_a_default_key_of_a_helper_called_in_a_loop():
    assert_marked("""
    import jax

    def noise(shape, key=jax.random.key(1)):  # expect: JAX503
        return jax.random.normal(key, shape)

    def run(n, shape):
        return [noise(shape) for _ in range(n)] + [noise(shape) * 2 for _ in range(n)]
    """)


@pytest.mark.parametrize("change", [
    ("dropout_layer(jax.nn.relu(x @ params[0]), 0.5)", "dropout_layer(jax.nn.relu(x @ params[0]), 0.5, k1)"),
    ("dropout_layer(jax.nn.relu(h1 @ params[1]), 0.5)", "dropout_layer(jax.nn.relu(h1 @ params[1]), 0.5, key=k2)"),
    ("dropout_layer(jax.nn.relu(h1 @ params[1]), 0.5)", "dropout_layer(jax.nn.relu(h1 @ params[1]), 0.5, **kw)"),
    ("key=jax.random.PRNGKey(0)", "key=make_key()"),  # not known to be a key maker... 
    ("mask = jax.random.uniform(key, x.shape) > rate", "mask = x > rate"),  # never drawn from
])
def test_jax503_near_misses_of_a_default_key(change):
    src = _DEFAULT_KEY.replace(*change).replace("  # expect: JAX503", "")
    assert src != _DEFAULT_KEY.replace("  # expect: JAX503", "")
    if change[1] == "key=make_key()":
        # ... but drawn from directly in the function: the draw makes it a key, so still reported
        assert [c for _, c in default_findings(src)] == ["JAX503"]
    else:
        assert [c for _, c in default_findings(src) if c == "JAX503"] == []


def test_jax503_a_default_key_of_a_function_called_once_is_quiet():
    src = """
    import jax

    def once(shape, key=jax.random.PRNGKey(2)):
        return jax.random.normal(key, shape)

    x = once((3,))
    """
    assert default_findings(src, "JAX503") == []


def test_jax502_the_same_row_of_a_key_array_read_twice():
    # fresh set U (distribution_shift_framework): `rng[0]` draws the random labels and then the noise
    # mask; fresh set H (probml): `subkeys[3]` draws the same noise for every instance of a loop
    assert_marked("""
    import jax
    import numpy as np

    def noisy_labels(rng, labels, n_classes, threshold):
        random_labels = jax.random.randint(rng[0], labels.shape, 0, n_classes)
        mask = jax.random.uniform(rng[0], labels.shape) < threshold  # expect: JAX502
        return random_labels * mask + labels * (1 - mask)

    def generate(key, n):
        subkeys = jax.random.split(key, 4)
        x = jax.random.uniform(subkeys[0], (n,))
        y = np.zeros(n)
        for i in range(n):
            y[i] = x[i] + jax.random.normal(subkeys[3])  # expect: JAX502
        return y

    def distinct_rows(rng, shape):
        return jax.random.normal(rng[0], shape), jax.random.uniform(rng[1], shape)

    def row_per_step(keys, n):
        return [jax.random.normal(keys[i], (3,)) for i in range(n)]

    def advanced(rng, shape, steps):
        out = []
        for _ in range(steps):
            rng = jax.random.split(rng[0], 2)
            out.append(jax.random.normal(rng[1], shape))
        return out
    """)


# --------------------------------------------------------------------------- keys imported from another module


@pytest.mark.parametrize("body, reported", [
    # fresh X's dit_flow: `from dit import randkey`, drawn from twice in one step: the same bits
    ("    x0 = jrand.normal(randkey, shape)\n    t = jrand.uniform(randkey, (n,))\n    return x0, t\n", [7]),
    ("    k1, k2 = jrand.split(randkey)\n    return jrand.normal(k1, shape), jrand.uniform(k2, (n,))\n", []),
    ("    return jrand.normal(randkey, shape)\n", []),  # one draw
])
def test_jax502_a_key_imported_from_another_module_is_one_object(body, reported):
    src = "import jax.random as jrand\nfrom dit import randkey\n\n\ndef noise(shape, n):\n" + body
    assert [line for line, _ in default_findings(src, "JAX502")] == reported


def test_an_import_binding_is_the_key_every_read_sees_unless_the_scope_rebinds_it():
    import ast as _ast
    from jaxlint.model import build_model

    m = build_model(_ast.parse("from dit import randkey, config\nimport jax.random as jr\n"
                               "def f():\n    return randkey\n"
                               "config = config.copy()\n"))
    f = next(g for g in m.functions if g.name == "f")
    ev = m.imported_binding("randkey", f.scope)
    assert ev is not None and ev.kind == "import" and ev.pos == (1, 0) and ev.scope is m.module_scope
    assert m.imported_binding("config", f.scope) is None  # also assigned at module level
    assert m.imported_binding("jr", f.scope) is None  # a module, not a value


NESTED_DRAW = """
import jax

KEY = jax.random.PRNGKey(0)


@jax.jit
def step(params, x):
    def loss_fn(p):
        noise = jax.random.normal(KEY, x.shape)
        return ((p * x + noise) ** 2).sum()
{grad}
    return params


params = jax.numpy.ones(3)
for i in range(100):
    params = step(params, jax.numpy.ones(3))
"""


def test_jax502_module_key_drawn_in_a_loss_the_step_differentiates_every_call():
    src = NESTED_DRAW.format(grad="    params = params - 0.1 * jax.grad(loss_fn)(params)")
    lines = src.splitlines()
    [finding] = [f for f in _check(src) if f.code == "JAX502"]
    assert finding.line == next(i for i, t in enumerate(lines) if "jax.random.normal(KEY" in t) + 1
    assert "`step` is called in the loop on line" in finding.message
    assert "runs `loss_fn` on every call" in finding.message


def test_jax502_near_miss_a_loss_differentiated_only_under_an_if():
    src = NESTED_DRAW.format(grad="    if x.ndim > 3:\n        params = params - 0.1 * jax.grad(loss_fn)(params)")
    assert findings(src, "JAX502") == []


MALA = """
import jax
import jax.numpy as jnp

def chain(x, n):
    step = 0
    for i in range(n):
        proposal = x + 0.1 * jax.random.normal(jax.random.PRNGKey(step), (2,))
        {between}accept = jax.random.uniform(jax.random.PRNGKey({seed})) < jnp.exp(-jnp.sum(proposal ** 2))
        x = jnp.where(accept, proposal, x)
        step += 1
    return x
"""


def test_jax502_one_iterations_key_made_twice_from_a_variable_seed():
    # fresh AO's MALA chain: the proposal's noise and the acceptance test's uniform from PRNGKey(step_count)
    src = MALA.format(between="", seed="step")
    lines = src.splitlines()
    [finding] = [f for f in _check(src) if f.code == "JAX502"]
    assert finding.line == next(i for i, t in enumerate(lines) if "accept = " in t) + 1
    assert finding.opt_in is None and "the same seed `step`" in finding.message


@pytest.mark.parametrize("between, seed", [
    ("step += 1\n        ", "step"),  # a new value of the seed in between
    ("", "step + 1"),  # another seed
    ("", "i"),  # another variable
])
def test_jax502_near_misses_of_a_variable_seed_made_twice(between, seed):
    assert findings(MALA.format(between=between, seed=seed), "JAX502") == []


def test_jax501_a_key_seeded_from_the_clock_inside_traced_code():
    # fresh set AR: a transformer's jitted sampler seeds its key with the time, read once at trace
    src = """
        import time
        import jax
        import jax.random as jrand

        @jax.jit
        def inference(probs):
            get_token = lambda p: jrand.choice(jrand.PRNGKey(int(1000 * time.time())), p.shape[-1], p=p)  # expect: JAX501
            return jax.vmap(get_token)(probs)

        @jax.jit
        def noise(x, step):
            key = jax.random.fold_in(jax.random.key(0), time.time_ns())  # expect: JAX501
            return x + jax.random.normal(key, x.shape)

        def loop(probs, x):
            for i in range(100):
                probs = inference(probs)
                x = noise(x, i)
    """
    assert_marked(src)
    assert messages(src, "JAX501")[0].startswith("the key's seed `int(1000 * time.time())` reads the clock "
                                                 "(`time.time()`): it runs in Python while JAX traces")


@pytest.mark.parametrize("src", [
    # outside traced code: a new seed every call
    "import time\nimport jax\n\ndef sample(x):\n    key = jax.random.PRNGKey(int(time.time()))\n"
    "    return jax.random.normal(key, x.shape)\n",
    # inside jit, a seed passed in
    "import jax\n\n@jax.jit\ndef sample(x, seed):\n    key = jax.random.PRNGKey(seed)\n"
    "    return jax.random.normal(key, x.shape)\n\nfor i in range(10):\n    sample(1.0, i)\n",
    # a clock read in traced code that is not a seed (a timing print at trace)
    "import time\nimport jax\n\n@jax.jit\ndef f(x):\n    t = time.time()\n    return x * 2\n",
])
def test_jax501_clock_seed_near_misses(src):
    assert [f for f in findings(src) if f[1] == "JAX501"] == []


def test_jax502_a_module_key_as_a_parameter_default_that_no_call_passes():
    # fresh set AR: a DiT's masking helper `get_mask(n, length, ratio, key=randkey)`, called from the model's
    # `__call__` without a key: every training step masks the same tokens
    src = """
        import jax
        import jax.numpy as jnp

        randkey = jax.random.key(0)

        def get_mask(batch, length, key=randkey):
            noise = jax.random.uniform(key, (batch, length))  # expect: JAX502
            return jnp.argsort(noise, axis=1)

        class Model:
            def __call__(self, x):
                return x[:, get_mask(x.shape[0], x.shape[1])[0]]
    """
    assert_marked(src)
    assert ("made once at module level as the default of `get_mask`'s parameter `key`, which no call passes"
            in messages(src, "JAX502")[0])


@pytest.mark.parametrize("call", [
    "get_mask(x.shape[0], x.shape[1], self.key)",      # passed positionally
    "get_mask(x.shape[0], x.shape[1], key=self.key)",  # passed by keyword
    "get_mask(*x.shape)",                               # spread: unknown
])
def test_jax502_parameter_default_key_near_misses(call):
    src = f"""
import jax
import jax.numpy as jnp

randkey = jax.random.key(0)

def get_mask(batch, length, key=randkey):
    noise = jax.random.uniform(key, (batch, length))
    return jnp.argsort(noise, axis=1)

class Model:
    def __call__(self, x):
        return x[:, {call}[0]]
"""
    assert [f for f in findings(src) if f[1] == "JAX502"] == []


def test_jax502_parameter_default_key_is_not_a_module_key():
    # the default is a literal seed's key made per call (``key=None`` then a fresh key) or a number
    src = """
        import jax

        def sample(n, seed=0):
            return jax.random.normal(jax.random.key(seed), (n,))

        class Model:
            def __call__(self, x):
                return sample(3)
    """
    assert [f for f in findings(src) if f[1] == "JAX502"] == []


def test_jax501_a_clock_seed_is_frozen_at_trace_at_runtime():
    """What the clock-seed finding states, under the installed jax: the seed is read once, while tracing, so
    later calls (a millisecond apart or more) draw the same numbers."""
    jax = pytest.importorskip("jax")
    import time

    @jax.jit
    def draw(x):
        return x + jax.random.normal(jax.random.PRNGKey(int(1000 * time.time())), x.shape)

    x = jax.numpy.zeros(4)
    first = draw(x)
    time.sleep(0.01)
    assert bool((draw(x) == first).all())
