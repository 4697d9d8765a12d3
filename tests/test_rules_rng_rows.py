"""JAX502: a key every row of a ``jax.vmap`` shares (facts/keyrows.py).

The case from fresh set C, catalogued blind: annotated-s4's ``sample()`` vmaps ``update`` over the
batch, and ``update`` draws ``jax.random.categorical(r, out[0])`` from the key ``r`` it closes over,
so every sampled row gets the same Gumbel noise.
"""

from __future__ import annotations

import ast
import textwrap

from jaxlint.model import build_model
from jaxlint.model.facts import keyrows
from ruletools import default_findings, expected, findings, messages, opt_in_findings


def test_key_closed_over_by_the_vmapped_function():
    src = """
    import jax

    def sample(logits, x, rng):
        r, rng = jax.random.split(rng)

        def update(x, out):
            p = jax.random.categorical(r, out)  # expect: JAX502
            return x.at[0].set(p)

        return jax.vmap(update)(x, logits), rng
    """
    assert default_findings(src, "JAX502") == expected(src)
    [msg] = messages(src, "JAX502")
    assert "`r` is the same for every row of the `jax.vmap` on line 11" in msg and "closes over" in msg


def test_key_unmapped_by_in_axes_and_a_split_inside_the_function():
    src = """
    import jax

    def noisy(x, key):
        return x + jax.random.normal(key, x.shape)  # expect: JAX502

    def dropout(x, key):
        k1, k2 = jax.random.split(key)
        return x * jax.random.bernoulli(k2, 0.9, x.shape)  # expect: JAX502

    def run(xs, key):
        a = jax.vmap(noisy, in_axes=(0, None))(xs, key)
        b = jax.vmap(dropout, (0, None))(xs, key)
        c = jax.vmap(lambda x: x * jax.random.uniform(key))(xs)  # expect: JAX502
        return a, b, c
    """
    assert default_findings(src, "JAX502") == expected(src)


def test_per_row_keys_are_not_reported():
    src = """
    import jax

    def noisy(x, key):
        return x + jax.random.normal(key, x.shape)

    def guarded(state, key, value):
        if value is None:
            value = jax.random.uniform(key)
        return state * value

    def run(xs, key, n):
        keys = jax.random.split(key, n)
        a = jax.vmap(noisy)(xs, keys)                                   # mapped: one key per row
        b = jax.vmap(noisy, in_axes=(0, 0))(xs, keys)
        c = jax.vmap(lambda i: jax.random.normal(keys[i]))(jnp.arange(n))  # indexed by the row
        d = jax.vmap(lambda i, x: jax.random.normal(jax.random.fold_in(key, i)) * x)(jnp.arange(n), xs)
        e = jax.vmap(guarded, in_axes=(0, None, 0))(xs, None, xs)        # no key given
        f = jax.vmap(lambda x: x + jax.random.normal(key))  # expect: JAX502
        jax.vmap(lambda x: x)(xs)
        return a, b, c, d, e, f
    """
    # ``f`` is never called here, but it closes over ``key``: broadcast whatever the call gives
    assert default_findings(src, "JAX502") == expected(src)


def test_in_test_code_it_is_opt_in():
    src = """
    import jax

    def test_noise(xs):
        key = jax.random.PRNGKey(0)
        ys = jax.vmap(lambda x: x + jax.random.normal(key, x.shape))(xs)
        assert ys.shape == xs.shape
    """
    assert default_findings(src, "JAX502") == []
    assert [(line, code) for line, code, _ in opt_in_findings(src, "JAX502")] == [(6, "JAX502")]


def test_findings_do_not_change_when_identifiers_are_renamed():
    src = """
    import jax

    def {f}({x}, {k}):
        def {u}(row):
            return jax.random.categorical({k}, row)
        return jax.vmap({u})({x})
    """
    a = findings(src.format(f="sample", x="logits", k="rng", u="update"), "JAX502")
    b = findings(src.format(f="zz", x="q", k="w", u="v"), "JAX502")
    assert a == b == [(6, "JAX502")]


# -- model facts


def test_row_key_draws_records_the_source_and_how_it_is_shared():
    tree = ast.parse(textwrap.dedent("""
    import jax

    def f(xs, key):
        def g(x, k):
            a, b = jax.random.split(k)
            return jax.random.normal(b) + jax.random.normal(key)
        return jax.vmap(g, in_axes=(0, None))(xs, key)
    """))
    m = build_model(tree)
    got = [(d.call.lineno, d.key, d.source, d.how, d.func.name) for d in keyrows.row_key_draws(m)]
    assert got == [(7, "b", "k", "unmapped", "g"), (7, "key", "key", "closed", "g")]


def test_an_rlax_distribution_sampled_per_row_with_a_closed_over_key():
    # fresh AP's baselax DQN: every environment of the vector env takes the same exploration decision
    src = """
    import jax
    import rlax

    def select_action(q, epsilon, key):
        act = jax.vmap(lambda x: rlax.epsilon_greedy(epsilon).sample(key, x))  # expect: JAX502
        return act(q)
    """
    assert default_findings(src, "JAX502") == expected(src)


def test_a_distribution_sampled_per_row_with_seed_given_a_closed_over_key():
    src = """
    import jax
    import distrax

    def sample(logits, key):
        return jax.vmap(lambda l: distrax.Categorical(logits=l).sample(seed=key))(logits)  # expect: JAX502
    """
    assert default_findings(src, "JAX502") == expected(src)


def test_near_misses_of_library_samples_per_row():
    per_row = """
    import jax
    import rlax

    def select_action(q, epsilon, key):
        keys = jax.random.split(key, q.shape[0])
        return jax.vmap(lambda k, x: rlax.epsilon_greedy(epsilon).sample(k, x))(keys, q)
    """
    greedy = """
    import jax
    import rlax

    def select_action(q, key):
        return jax.vmap(lambda x: rlax.greedy().sample(key, x))(q)
    """
    other = """
    import jax

    def select_action(q, key, policy):
        return jax.vmap(lambda x: policy.sample(key, x))(q)
    """
    for src in (per_row, greedy, other):  # a key per row; greedy's sample is the argmax; an unknown policy
        assert findings(src, "JAX502") == [] and opt_in_findings(src, "JAX502") == []
