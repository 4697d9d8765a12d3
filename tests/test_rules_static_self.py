"""JAX103 on a jitted method whose ``self`` is static, called on an instance made anew every iteration (fresh
set AX: ``@partial(jit, static_argnums=0) def update(self, params, batch)`` and ``model = JAXNN(params=...)``
after each step). The model fact (``staticself``), the rule, near misses and the cost, run."""

from __future__ import annotations

import ast
import textwrap

import pytest

from jaxlint.model import build_model
from jaxlint.model.facts import staticself
from ruletools import default_findings, findings, line_of

_SRC = """
from functools import partial
import jax
import jax.numpy as jnp


class Net:
    def __init__(self, params, step_size):
        self.params = params
        self.step_size = step_size

    @partial(jax.jit, static_argnums=0)
    def update(self, params, batch):
        return params - self.step_size * batch


class Hashed(Net):
    def __hash__(self):
        return hash(self.step_size)

    def __eq__(self, other):
        return isinstance(other, Hashed) and other.step_size == self.step_size


class Traced:
    def __init__(self, step_size):
        self.step_size = step_size

    @jax.jit
    def update(self, params, batch):
        return params - batch


def train(batches, step_size):
    model = Net(jnp.ones(3), step_size)
    for batch in batches:
        new_params = model.update(model.params, batch)  # FRESH
        model = Net(new_params, step_size)
    kept = Net(jnp.ones(3), step_size)
    for batch in batches:
        kept.params = kept.update(kept.params, batch)
    hashed = Hashed(jnp.ones(3), step_size)
    for batch in batches:
        p = hashed.update(hashed.params, batch)
        hashed = Hashed(p, step_size)
    for batch in [1.0, 2.0]:
        p = model.update(model.params, batch)
        model = Net(p, step_size)
    return model
"""


def test_jax103_a_static_self_made_anew_every_iteration():
    src = _SRC
    assert default_findings(src, "JAX103") == [(line_of(src, "# FRESH"), "JAX103")]


def test_the_fresh_self_fact_names_the_class_and_the_binding():
    src = textwrap.dedent(_SRC)
    m = build_model(ast.parse(src), src)
    calls = [c for c in m.calls if isinstance(c.func, ast.Attribute) and c.func.attr == "update"]
    found = [staticself.fresh_static_self(m, c) for c in calls]
    hits = [f for f in found if f is not None]
    assert len(hits) == 1
    (hit,) = hits
    assert hit.cls.node.name == "Net" and hit.receiver.id == "model"
    assert ast.unparse(hit.binding.value) == "Net(new_params, step_size)"


@pytest.mark.parametrize("base", ["nn.Module", "NamedTuple"])
def test_a_base_the_module_does_not_show_may_define_equality(base):
    src = _SRC.replace("class Net:", f"class Net({base}):")
    assert [f for f in findings(src) if f[1] == "JAX103"] == []


def test_runtime_each_new_instance_retraces_a_static_self_method():
    jax = pytest.importorskip("jax")
    from functools import partial

    jnp = jax.numpy
    traces = []

    class Net:
        def __init__(self, params):
            self.params = params

        @partial(jax.jit, static_argnums=0)
        def update(self, params, batch):
            traces.append(1)
            return params - 0.1 * batch

    model = Net(jnp.ones(3))
    for _ in range(4):
        model = Net(model.update(model.params, jnp.ones(3)))
    assert len(traces) == 4  # every new instance is a new cache key
    kept, traces[:] = Net(jnp.ones(3)), []
    for _ in range(4):
        kept.params = kept.update(kept.params, jnp.ones(3))
    assert len(traces) == 1
