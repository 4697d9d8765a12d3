"""Syncs inside a function that a step loop calls at every iteration (jaxlint/model/policy/stepfunctions.py,
asked by JAX201), and the loop fact behind it: a loop whose iteration calls a plain function of the module
that dispatches compiled work runs JAX work (jaxlint/model/facts/loops.py). Fresh U's DQN agent: `float(loss)`
in `train_step`, called by `agent.train_step()` at every environment step."""

from __future__ import annotations

import ast
import textwrap

import pytest

from jaxlint.model import build_model
from jaxlint.model.facts import loops
from ruletools import _check, default_findings, findings

HEAD = """
import jax
import jax.numpy as jnp

@jax.jit
def update(params, batch):
    return params - 0.1 * batch, jnp.mean(batch)
"""

HELPER = HEAD + """
def train_step(params, batch):
    params, loss = update(params, batch)
    {sync}
    return params

def main(params, loader):
    for batch in loader:
        {call}
    return params
"""


def _line(src: str, text: str) -> int:
    return next(i for i, line in enumerate(textwrap.dedent(src).splitlines(), 1) if text in line)


@pytest.mark.parametrize("sync", ["print(float(loss))", "losses.append(float(loss))", "print(f'loss {loss}')",
                                  "jax.device_get(loss)"])
def test_a_sync_in_a_function_the_loop_calls_every_step(sync):
    src = HELPER.format(sync=sync, call="params = train_step(params, batch)")
    assert default_findings(src, "JAX201") == [(_line(src, sync), "JAX201")]


@pytest.mark.parametrize("sync, call", [
    ("print(float(loss))", "if step % 100 == 0:\n            params = train_step(params, batch)"),  # now and then
    ("if loss > 0:\n        print(float(loss))", "params = train_step(params, batch)"),  # not at every call
    ("print(float(batch))", "params = train_step(params, batch)"),  # the caller's value: the caller-side rule's
    ("print(float(params.sum()))", "params = train_step(params, batch)"),  # a parameter of it
    ("for _ in range(3):\n        print(float(loss))", "params = train_step(params, batch)"),  # its own loop: JAX201 there
])
def test_near_misses_of_a_sync_in_a_per_step_function(sync, call):
    src = HELPER.replace("for batch in loader:", "for step, batch in enumerate(loader):").format(sync=sync, call=call)
    assert [f.message for f in _check(src) if f.code == "JAX201" and "at every call of" in f.message] == []
    positive = HELPER.replace("for batch in loader:", "for step, batch in enumerate(loader):").format(
        sync="print(float(loss))", call="params = train_step(params, batch)")
    assert [f.line for f in _check(positive) if "at every call of" in f.message] == [_line(positive, "print(float")]


RETURNS = HEAD + """
def act(params, obs):
    params, q = update(params, obs)
    return float(q)

def main(params, env, obs):
    for t in range(10000):
        {call}
"""


@pytest.mark.parametrize("call, reported", [
    ("act(params, obs)", True),  # the returned value is dropped: nothing needs it on the host
    ("obs = env.step(act(params, obs))", False),  # the host needs it (an action for the environment)
    ("a = act(params, obs)\n        obs = env.step(a)", False),
])
def test_a_returned_sync_counts_only_where_every_call_drops_it(call, reported):
    src = RETURNS.format(call=call)
    assert (_line(src, "return float(q)"), "JAX201") in default_findings(src, "JAX201") if reported else \
        default_findings(src, "JAX201") == []


def test_a_second_sync_of_the_same_value_waits_for_nothing():
    """Fresh U's DQN agent: `self.losses.append(float(loss))`, then `return float(loss)`: the first waited."""
    src = RETURNS.replace("    return float(q)", "    print(float(q))\n    return float(q)").format(call="act(params, obs)")
    assert default_findings(src, "JAX201") == [(_line(src, "print(float(q))"), "JAX201")]


def test_a_method_called_through_an_instance_and_a_chain_of_calls():
    src = HEAD + """
class Agent:
    def __init__(self, params):
        self.params = params
        self.losses = []

    def train_step(self, batch):
        self.params, loss = update(self.params, batch)
        self.losses.append(float(loss))

    def observe(self, batch):
        self.train_step(batch)

def main(params, loader):
    agent = Agent(params)
    for batch in loader:
        agent.observe(batch)
"""
    assert default_findings(src, "JAX201") == [(_line(src, "self.losses.append(float(loss))"), "JAX201")]


def test_findings_do_not_change_when_identifiers_are_renamed():
    src = HELPER.format(sync="print(float(loss))", call="params = train_step(params, batch)")
    renamed = src.replace("train_step", "xq").replace("loss", "zz").replace("params", "w").replace("batch", "b")
    assert [c for _, c in findings(src)] == [c for _, c in findings(renamed)]


@pytest.mark.parametrize("body, works", [
    ("params = train_step(params, batch)", True),  # the helper runs the jitted update
    ("log(batch)", False),  # a helper that dispatches nothing
])
def test_a_loop_calling_a_helper_that_dispatches_compiled_work_runs_jax_work(body, works):
    src = HEAD + f"""
def train_step(params, batch):
    return update(params, batch)[0]

def log(batch):
    return len(batch)

def main(params, loader):
    for batch in loader:
        {body}
    return params
"""
    m = build_model(ast.parse(textwrap.dedent(src)))
    loop = next(lp for lp in m.loops if isinstance(lp.node, ast.For))
    assert loops.loop_runs_jax_work(m, loop) is works


def test_a_loop_calling_a_helper_that_runs_its_own_loop_of_steps_is_an_epoch_loop():
    src = HEAD + """
def train_epoch(params, loader):
    for batch in loader:
        params = update(params, batch)[0]
    return params

def main(params, loader, epochs):
    for epoch in range(epochs):
        params = train_epoch(params, loader)
        print(f"epoch {epoch}: {params}")
    return params
"""
    from jaxlint.model.facts import callables

    m = build_model(ast.parse(textwrap.dedent(src)))
    call = next(c for c in m.calls if isinstance(c.func, ast.Name) and c.func.id == "train_epoch")
    assert callables.dispatches_compiled(m, call) is False  # an epoch per call: many steps, not one
    assert default_findings(src, "JAX201") == []
