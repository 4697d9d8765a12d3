"""Elements of Python containers: an element read ``n[i]`` is a JAX value only when every value
the code stores into the container is one (jaxlint/model/facts/containers.py,
``stored_elements_unproven``). Fresh AB: a list of ``jnp.array(1.)`` placeholders overwritten by
Python ints (``n_md[l] = X.shape[0]``) and read back as a slice bound on the next iteration."""

from __future__ import annotations

import ast
import textwrap

from jaxlint.model import build_model
from jaxlint.model.facts import values as V
from ruletools import assert_marked, default_findings


def _kinds(src: str) -> dict:
    tree = ast.parse(textwrap.dedent(src))
    m = build_model(tree)
    sinks = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "sink"]
    return {ast.unparse(a): V.is_jax(m, a, m.scope_at(call)) for call in sinks for a in call.args}


def test_an_element_of_a_list_overwritten_with_python_ints_is_not_proven_a_jax_value():
    got = _kinds("""
    import jax.numpy as jnp

    def f(blocks, k):
        sizes = [jnp.array(1.)] * k
        outs = [jnp.zeros(3)] * k
        kept = [jnp.zeros(3)] * k
        counts = [jnp.zeros(())] * k
        for l in range(k):
            sink(sizes[l - 1], outs[l - 1], kept[l], counts[l])
            x = blocks[l]
            sizes[l] = x.shape[0]
            outs[l] = jnp.hstack([x, x])
            counts[l] += 1
    """)
    # sizes: a Python int stored (unknown); outs: only JAX values stored; kept: no stores;
    # counts: an augmented store keeps the element's kind
    assert got == {"sizes[l - 1]": False, "outs[l - 1]": True, "kept[l]": True, "counts[l]": True}


def test_a_store_of_an_unknown_value_or_by_unpacking_leaves_the_element_unknown():
    got = _kinds("""
    import jax.numpy as jnp

    def f(helper, k):
        a = [jnp.zeros(3) for _ in range(k)]
        b = {"w": jnp.zeros(3)}
        for l in range(k):
            a[l] = helper(l)
            b["w"], _ = helper(l)
            sink(a[0], b["w"])
    """)
    assert got == {"a[0]": False, "b['w']": False}


def test_an_array_with_an_item_store_is_still_an_array():
    # ``x[i] = v`` on a JAX array is JAX401's error; what is read from ``x`` stays a JAX value
    got = _kinds("""
    import jax.numpy as jnp

    def f(k):
        x = jnp.zeros(k)
        x[0] = 1
        sink(x[1])
    """)
    assert got == {"x[1]": True}


_SLICE = """
    import jax.numpy as jnp

    def connect(raw, ng):
        sizes = [jnp.array(1.)] * (ng - 1)
        pairs = raw[0:-1]
        for l in range(ng - 1):
            if l == 0:
                first = raw[l]
            else:
                start = sizes[l - 1]
                first = raw[l][start:]{mark}
            n = first.shape[0]
            pairs[l] = jnp.hstack([first, raw[l + 1][0:n, :]])
            sizes[l] = {stored}
        return pairs
"""


def test_a_slice_bound_read_from_a_list_of_device_scalars_syncs():
    assert_marked(_SLICE.format(mark="  # expect: JAX201", stored="jnp.asarray(n)"))


def test_a_slice_bound_read_from_a_list_overwritten_with_shape_ints_does_not():
    assert default_findings(_SLICE.format(mark="", stored="n"), "JAX201") == []
