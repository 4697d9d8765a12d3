"""Host reads of device values that are not spelled as a conversion: a multi-host gather or
comparison (``multihost_utils.assert_equal``), and a JAX value used as a slice bound (read through
``__index__``). Model facts (jaxlint/model/facts/fetches.py) and JAX201's findings on them."""

from __future__ import annotations

import ast
import textwrap

from jaxlint.model import build_model
from jaxlint.model.facts import fetches
from ruletools import assert_marked, default_findings, findings


def _model(src: str):
    tree = ast.parse(textwrap.dedent(src))
    return tree, build_model(tree)


def _call(tree, attr: str) -> ast.Call:
    found = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
             and n.func.attr == attr]
    assert len(found) == 1
    return found[0]


# --------------------------------------------------------------------------- model: multi-host gathers

_STEP = """
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax.experimental import multihost_utils

    @jax.jit
    def step(state, batch):
        return state + batch, {"loss": jnp.mean(state)}
"""


def test_model_assert_equal_and_allgather_fetch_a_jax_tree():
    tree, m = _model(_STEP + """
    def train(state, batches):
        for batch in batches:
            state, info = step(state, batch)
            multihost_utils.assert_equal(info, "infos equal")
            gathered = multihost_utils.process_allgather(info)
        return state
    """)
    for attr in ("assert_equal", "process_allgather"):
        value = fetches.host_fetch(m, _call(tree, attr))
        assert isinstance(value, ast.Name) and value.id == "info", attr


def test_model_assert_equal_of_host_data_is_no_fetch():
    tree, m = _model(_STEP + """
    def train(state, batches, seed):
        for batch in batches:
            state, info = step(state, batch)
            multihost_utils.assert_equal(np.uint32(seed), "seeds equal")
        return state
    """)
    assert fetches.host_fetch(m, _call(tree, "assert_equal")) is None


def test_model_a_user_function_named_assert_equal_is_no_gather():
    # facts, not names: only JAX's own multihost_utils is known to copy its argument to the host
    tree, m = _model(_STEP + """
    class Checks:
        def assert_equal(self, tree, msg):
            pass

    def train(state, batches, checks: Checks):
        for batch in batches:
            state, info = step(state, batch)
            checks.assert_equal(info, "infos equal")
        return state
    """)
    assert fetches.host_fetch(m, _call(tree, "assert_equal")) is None


# --------------------------------------------------------------------------- model: slice bounds


def test_model_slice_bound_from_a_device_arange_is_a_host_read():
    tree, m = _model("""
    import jax.numpy as jnp

    def minibatches(idxes, size, n):
        for _ in range(3):
            parts = [idxes[start:start + size] for start in jnp.arange(0, n, size)]
            firsts = [idxes[:stop] for stop in range(0, n, size)]
        return parts, firsts
    """)
    reads = fetches.slice_bound_reads(m)
    assert [(ast.unparse(s), ast.unparse(b)) for s, b in reads] == [("idxes[start:start + size]", "start")]


def test_model_slice_bounds_of_python_ints_and_shapes_are_no_host_reads():
    tree, m = _model("""
    import jax
    import jax.numpy as jnp

    def batches(x, size):
        n = x.shape[0]
        out = []
        for i in range(0, n, size):
            out.append(x[i:i + size])
            out.append(x[:, : x.shape[1] // 2])
        return out
    """)
    assert fetches.slice_bound_reads(m) == []


def test_model_slice_bound_in_traced_code_is_not_a_host_read():
    # under jit the bound is a tracer: an error at trace time (another rule's), not a per-call sync
    tree, m = _model("""
    import jax
    import jax.numpy as jnp

    @jax.jit
    def f(x):
        out = 0.0
        for start in jnp.arange(0, 8, 2):
            out = out + x[start:start + 2].sum()
        return out
    """)
    assert fetches.slice_bound_reads(m) == []


# --------------------------------------------------------------------------- JAX201


def test_jax201_assert_equal_every_step():
    assert_marked(_STEP + """
    def train(state, batches):
        for batch in batches:
            state, info = step(state, batch)
            multihost_utils.assert_equal(info, "infos equal")  # expect: JAX201
        return state
    """)


def test_jax201_assert_equal_periodic_or_after_the_loop_is_quiet():
    src = _STEP + """
    def train(state, batches):
        for i, batch in enumerate(batches):
            state, info = step(state, batch)
            if i % 1000 == 0:
                multihost_utils.assert_equal(info, "infos equal")
        multihost_utils.assert_equal(state, "states equal")
        return state
    """
    assert findings(src, "JAX201") == []


def test_jax201_slice_bounds_from_a_device_array_every_epoch():
    assert_marked("""
    import jax
    import jax.numpy as jnp

    @jax.jit
    def update(state, idx):
        return state + idx.sum()

    def train(state, rng, n, size, epochs):
        idxes = jnp.arange(n)
        for _ in range(epochs):
            rng, sub = jax.random.split(rng)
            idxes = jax.random.permutation(sub, idxes)
            parts = [idxes[start:start + size] for start in jnp.arange(0, n, size)]  # expect: JAX201
            for part in parts:
                state = update(state, part)
        return state
    """)


def test_jax201_slice_bounds_from_host_integers_are_quiet():
    src = """
    import jax
    import jax.numpy as jnp

    @jax.jit
    def update(state, idx):
        return state + idx.sum()

    def train(state, rng, n, size, epochs):
        idxes = jnp.arange(n)
        for _ in range(epochs):
            rng, sub = jax.random.split(rng)
            idxes = jax.random.permutation(sub, idxes)
            parts = [idxes[start:start + size] for start in range(0, n, size)]
            for part in parts:
                state = update(state, part)
        return state
    """
    assert default_findings(src, "JAX201") == []


def test_jax201_slice_bound_message_names_the_bound_and_fix():
    src = """
    import jax.numpy as jnp

    def chunks(x, n, size, epochs):
        out = []
        for _ in range(epochs):
            out += [x[s:s + size] for s in jnp.arange(0, n, size)]
        return out
    """
    from ruletools import messages
    (msg,) = messages(src, "JAX201")
    assert "slice bound `s`" in msg and "dynamic_slice" in msg
