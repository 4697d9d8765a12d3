"""The haiku key fact (jaxlint/model/facts/haikurng.py): ``net.apply(params, rng, ...)`` of a
haiku-transformed function of the module draws from ``rng`` where a ``hk.next_rng_key()`` is reached
with every ``if`` around it opened by literal arguments; and JAX502 on a key handed unchanged to
such an ``apply`` at every step (fresh AN's RoBERTa notebooks: the same dropout masks for 31,250 steps)."""

from __future__ import annotations

import ast
import textwrap

import pytest

from jaxlint.model import build_model
from jaxlint.model.facts import haikurng
from ruletools import _check, default_findings, opt_in_findings

MODEL = """
import jax
import haiku as hk

class Block(hk.Module):
    def __call__(self, x, training=False):
        if training:
            x = hk.dropout(hk.next_rng_key(), 0.1, x)
        return x

class Early(hk.Module):
    def __call__(self, x, deterministic):
        if deterministic:
            return x
        return hk.dropout(hk.next_rng_key(), 0.1, x)

class Always(hk.Module):
    def __call__(self, x):
        return x + jax.random.normal(hk.next_rng_key(), x.shape)

def forward(x, training):
    return Block()(x, training=training)

def forward_default(x):
    return Block()(x)

def forward_early(x, deterministic=False):
    layer = Early()
    return layer(x, deterministic)

def forward_always(x):
    return Always()(x)

def forward_none(x):
    return x * 2
"""


@pytest.mark.parametrize("maker, call, drawn", [
    ("hk.transform(forward)", "net.apply(params, rng, x, training=True)", True),
    ("hk.transform(forward)", "net.apply(params, rng, x, True)", True),
    ("hk.transform(forward)", "net.apply(params, rng, x, training=False)", False),
    ("hk.transform(forward)", "net.apply(params, rng, x, training=flag)", False),  # not known
    ("hk.transform(forward_default)", "net.apply(params, rng, x)", False),  # Block's default: training=False
    ("hk.transform(forward_early)", "net.apply(params, rng, x)", True),  # deterministic=False: no early return
    ("hk.transform(forward_early)", "net.apply(params, rng, x, deterministic=True)", False),
    ("hk.transform(forward_always)", "net.apply(params, rng, x)", True),
    ("hk.transform_with_state(forward_always)", "net.apply(params, rng, state, x)", False),  # rng is third there
    ("hk.transform_with_state(forward_always)", "net.apply(params, state, rng, x)", True),
    ("hk.transform(forward_none)", "net.apply(params, rng, x)", False),  # draws nothing
    ("hk.without_apply_rng(hk.transform(forward_always))", "net.apply(params, rng, x)", False),  # takes no key
    ("make_net(forward_always)", "net.apply(params, rng, x)", False),  # not haiku's
])
def test_apply_draws_from_its_key(maker, call, drawn):
    src = MODEL + f"\nnet = {maker}\n\ndef step(params, rng, x, flag):\n    return {call}\n"
    m = build_model(ast.parse(textwrap.dedent(src)))
    apply = next(c for c in m.calls if isinstance(c.func, ast.Attribute) and c.func.attr == "apply")
    passed = [(i, None) for i, a in enumerate(apply.args) if isinstance(a, ast.Name) and a.id == "rng"]
    found = haikurng.apply_draw(m, apply, m.scope_at(apply), passed)
    assert (found is not None) is drawn
    if drawn:
        assert ast.unparse(found.func) == "hk.next_rng_key"


LOOP = MODEL + """
net = hk.transform(forward)

@jax.jit
def update(params, rng, x):
    return jax.grad(lambda p: net.apply(p, rng, x, training={training}).sum())(params)

rng = jax.random.PRNGKey(42)
params = net.init(rng, 1.0, training=True)
for step in range(10000):
    params = update(params, {key}, 1.0)
"""


def test_jax502_a_constant_key_into_a_haiku_apply_that_drops_out_every_step():
    src = LOOP.format(training="True", key="rng")
    lines = src.splitlines()
    found = default_findings(src, "JAX502")
    assert [line for line, _ in found] == [lines.index("    params = update(params, rng, 1.0)") + 1]
    dropout = next(i for i, text in enumerate(lines) if "hk.dropout(hk.next_rng_key(), 0.1, x)" in text) + 1
    [finding] = [f for f in _check(src) if f.code == "JAX502"]
    assert f"`hk.next_rng_key` on line {dropout}" in finding.message


@pytest.mark.parametrize("training, key", [
    ("False", "rng"),  # evaluation: no dropout, the key is not drawn from
    ("True", "jax.random.fold_in(rng, step)"),  # a new key every step
])
def test_jax502_near_misses_of_a_haiku_apply(training, key):
    src = LOOP.format(training=training, key=key)
    assert default_findings(src, "JAX502") == []
    if training == "False":  # what haiku does with a key it is handed stays unknown: opt-in
        assert [why for _, _, why in opt_in_findings(src, "JAX502")] == ["whether the callee draws from the key is unknown"]
