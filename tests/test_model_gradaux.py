"""The auxiliary output of a ``has_aux`` gradient (jaxlint/model/facts/gradaux.py): JAX hands the aux
back as the loss function returned it, so a host value there (a host game's reward) is not a JAX
value, while the value, the gradients, and an aux computed from a differentiated argument are. Model
tests of the value kind, and JAX201 on the loop that reads them (fresh X's Q-learning notebook)."""

from __future__ import annotations

import ast
import textwrap

import pytest

from jaxlint.model import build_model
from jaxlint.model.facts import values as V
from ruletools import findings

HEAD = """
import jax
import jax.numpy as jnp
from flax import nnx


def loss_fn(model, state, game):
    q = model(state)
    game.move(q)
    reward = game.reward()
    return jnp.mean(q ** 2), (reward, q)


def loss2(params, x):
    pred = x @ params
    return jnp.mean(pred ** 2), {"acc": jnp.mean(pred > 0), "n": x.shape[0]}
"""


def kinds(body: str) -> dict:
    """Whether each name read on the last line of ``body`` (run in ``def run(...)``) is a JAX value."""
    src = textwrap.dedent(HEAD) + "\ndef run(model, state, game, params, x, step):\n" + textwrap.indent(
        textwrap.dedent(body), "    ")
    tree = ast.parse(src)
    m = build_model(tree, src)
    last = max(tree.body[-1].body, key=lambda s: s.lineno)
    return {n.id: V.is_jax(m, n, m.scope_at(n)) for n in ast.walk(last) if isinstance(n, ast.Name)}


@pytest.mark.parametrize("body, expected", [
    # the aux's host part is what loss_fn returned: a Python value
    ("(loss, (reward, q)), grads = nnx.value_and_grad(loss_fn, has_aux=True)(model, state, game)\n"
     "use(loss, reward, q, grads)", {"loss": True, "reward": False, "q": True, "grads": True}),
    # through names bound to parts
    ("loss_and_aux, grads = jax.value_and_grad(loss_fn, has_aux=True)(model, state, game)\n"
     "loss, aux = loss_and_aux\nreward, q = aux\nuse(reward, q)", {"reward": False, "q": True}),
    # grad's has_aux: (grads, aux)
    ("grads, (reward, q) = jax.grad(loss_fn, has_aux=True)(model, state, game)\nuse(grads, reward, q)",
     {"grads": True, "reward": False, "q": True}),
    # a dict aux computed on device
    ("(l, metrics), g = jax.value_and_grad(loss2, has_aux=True)(params, x)\nuse(metrics)", {"metrics": True}),
    # argnums=2 differentiates `game`: what is computed from it is a JAX value
    ("(l, (reward, q)), g = jax.value_and_grad(loss_fn, argnums=2, has_aux=True)(model, state, game)\nuse(reward)",
     {"reward": True}),
])
def test_the_aux_of_a_gradient_is_what_the_loss_function_returned(body, expected):
    got = kinds(body)
    assert {k: got[k] for k in expected} == expected, got


def test_without_has_aux_or_a_known_loss_function_the_result_is_a_jax_value():
    # no has_aux: a pair of (value, grads), JAX values
    assert kinds("v, g = jax.value_and_grad(loss2)(params, x)\nuse(v, g)") == {"use": False, "v": True, "g": True}
    # a loss function from elsewhere: nothing shows its aux, the transform's result stays a JAX value
    got = kinds("(l, aux), g = jax.value_and_grad(step, has_aux=True)(params, x)\nuse(aux)")
    assert got["aux"] is True


NOTEBOOK = HEAD + """

def train_epoch(model, state, game):
    loss_and_aux, grads = nnx.value_and_grad(loss_fn, has_aux=True)(model, state, game)
    loss, aux = loss_and_aux
    reward, q = aux
    return loss, reward, q


def play(model, state, game):
    status = 1
    while status == 1:
        loss, reward, q = train_epoch(model, state, game)
        if reward != -1:
            status = 0
        if q.sum() > 0:  # expect: JAX201
            status = 0


def loss_fn(model, states, targets):  # a later cell defines another loss function: not the one with has_aux
    return jnp.mean((model(states) - targets) ** 2)
"""


def test_jax201_reads_a_host_aux_without_a_sync_and_a_device_one_with():
    lines = textwrap.dedent(NOTEBOOK).splitlines()
    device = 1 + next(i for i, ln in enumerate(lines) if "q.sum() > 0" in ln)
    assert findings(NOTEBOOK, "JAX201") == [(device, "JAX201")]



def test_an_argnums_that_is_no_literal_proves_no_parameter_differentiated():
    # `argnums=step` (a name): which parameters are JVP tracers is not shown, so what the aux computes from
    # a parameter (`q = model(state)`) is not proven a JAX value; with the default argnums it is
    got = kinds("(l, (reward, q)), g = jax.value_and_grad(loss_fn, argnums=step, has_aux=True)(model, state, game)\n"
                "use(reward, q)")
    assert (got["reward"], got["q"]) == (False, False)
