"""The model fact ``immutablestate.immutable_state``: a name the module shows holds a flax ``TrainState`` or
struct dataclass (asked by JAX403's discarded ``replace``)."""

from __future__ import annotations

import ast
import textwrap

import pytest

from jaxlint.model import build_model
from jaxlint.model.facts import immutablestate

_HEAD = """
import jax
from flax import struct
from flax.training import train_state
from flax.training.train_state import TrainState as TS

class TrainState(train_state.TrainState):
    rngs: jax.Array = None

class Deeper(TrainState):
    extra: int = 0

@struct.dataclass
class Carry:
    step: int

class Mutable:
    def replace(self, **kw):
        return self
"""


def _fact(body: str):
    src = textwrap.dedent(_HEAD) + textwrap.dedent(body)
    tree = ast.parse(src)
    m = build_model(tree, src)
    target = [n for n in ast.walk(tree) if isinstance(n, ast.Name) and n.id == "x"][-1]
    return immutablestate.immutable_state(m, target, m.scope_at(target))


@pytest.mark.parametrize("body", [
    "def f(s, g):\n    x = s.apply_gradients(grads=g)\n    return x\n",
    "def f(fn, p, tx):\n    x = TrainState.create(apply_fn=fn, params=p, tx=tx)\n    return x\n",
    "def f(fn, p, tx):\n    x = TS.create(apply_fn=fn, params=p, tx=tx)\n    return x\n",
    "def f(x: Deeper):\n    return x\n",
    "def f(x: Carry):\n    return x\n",
    "def f(x: train_state.TrainState):\n    return x\n",
    "def f(s: Carry):\n    x = s.replace(step=1)\n    return x\n",
])
def test_immutable_state_is_proven(body):
    assert _fact(body) is not None


@pytest.mark.parametrize("body", [
    "def f(x):\n    return x\n",  # nothing shows its type
    "def f(x: Mutable):\n    return x\n",
    "def f(fn):\n    x = Mutable.create(fn)\n    return x\n",
    "def f(s):\n    x = s.replace(step=1)\n    return x\n",  # `replace` of an unknown object
    "def f(s: dict):\n    x = s\n    return x\n",
])
def test_immutable_state_is_not_claimed(body):
    assert _fact(body) is None
