"""The flax dropout-key fact (jaxlint/model/facts/flaxrng.py): ``model.apply(params, x, rngs={"dropout":
key})`` of a flax linen module of this module draws from ``key`` where a non-deterministic ``nn.Dropout``
with a rate that is not zero (or ``self.make_rng``) is reached with the values known along the calls;
and JAX502 on a key that stays the same from step to step: made once at module level and read by the
jitted step (fresh AO's nanoGPT: the same dropout masks for 5,000 steps), or handed unchanged to the
step in the loop (fresh H's d2l notebooks)."""

from __future__ import annotations

import ast
import textwrap

import pytest

from jaxlint.model import build_model
from jaxlint.model.facts import flaxrng
from ruletools import _check, default_findings, opt_in_findings

MODEL = """
import functools
import jax
import flax.linen as nn
from flax.training import train_state

RATE = 0.2
NO_RATE = 0.0


class Block(nn.Module):
    @nn.compact
    def __call__(self, x, training: bool = False):
        return nn.Dropout(rate=RATE)(nn.Dense(4)(x), deterministic=not training)


class Net(nn.Module):
    @nn.compact
    def __call__(self, x, training: bool = False):
        return Block()(x, training=training)


class Stack(nn.Module):
    @nn.compact
    def __call__(self, x, training: bool = False):
        return nn.Sequential([Block() for _ in range(3)])(x, training=training)


class Stored(nn.Module):
    rate: float = 0.5

    def setup(self):
        self.drop = nn.Dropout(self.rate)

    def __call__(self, x, train=True):
        return self.drop(x, deterministic=not train)


Half = functools.partial(Stored, 0.5)
Off = functools.partial(Stored, 0.0)


class Zero(nn.Module):
    @nn.compact
    def __call__(self, x):
        return nn.Dropout(NO_RATE, deterministic=False)(x)


class Branch(nn.Module):
    @nn.compact
    def __call__(self, x, train):
        if train:
            x = x + jax.random.normal(self.make_rng("noise"), x.shape)
        return x


class Always(nn.Module):
    @nn.compact
    def __call__(self, x, *rest):
        return nn.Dropout(0.3, deterministic=False)(x)


class Own(nn.Module):
    @nn.compact
    def __call__(self, x):
        return nn.Dropout(0.1, deterministic=False)(x, rng=jax.random.PRNGKey(0))
"""


@pytest.mark.parametrize("made, call, drawn", [
    ("Net()", 'model.apply(params, x, training=True, rngs={"dropout": key})', "nn.Dropout(rate=RATE)"),
    ("Net()", 'model.apply(params, x, True, rngs={"dropout": key})', "nn.Dropout(rate=RATE)"),
    ("Net()", 'model.apply(params, x, training=False, rngs={"dropout": key})', None),  # deterministic
    ("Net()", 'model.apply(params, x, rngs={"dropout": key})', None),  # the default: training=False
    ("Net()", 'model.apply(params, x, training=flag, rngs={"dropout": key})', None),  # not known
    ("Net()", 'model.apply(params, x, training=True, rngs={"other": key})', None),  # not the dropout stream
    ("Net()", 'model.apply(params, x, training=True, rngs={"dropout": key}, method=Net.other)', None),
    ("Stack()", 'model.apply(params, x, training=True, rngs={"dropout": key})', "nn.Dropout(rate=RATE)"),
    ("Stored()", 'model.apply(params, x, rngs={"dropout": key})', "self.drop"),  # field default 0.5
    ("Stored(rate=0.0)", 'model.apply(params, x, rngs={"dropout": key})', None),  # no dropout at rate 0
    ("Stored(rate=r)", 'model.apply(params, x, rngs={"dropout": key})', None),  # rate not known
    ("Zero()", 'model.apply(params, x, rngs={"dropout": key})', None),
    ("Half()", 'model.apply(params, x, rngs={"dropout": key})', "self.drop"),  # functools.partial(Stored, 0.5)
    ("Off()", 'model.apply(params, x, rngs={"dropout": key})', None),  # functools.partial(Stored, 0.0)
    ("Branch()", 'model.apply(params, x, True, rngs={"noise": key})', "self.make_rng"),
    ("Branch()", 'model.apply(params, x, False, rngs={"noise": key})', None),
    ("Own()", 'model.apply(params, x, rngs={"dropout": key})', None),  # the layer is handed its own key
    ("make_model()", 'model.apply(params, x, training=True, rngs={"dropout": key})', None),  # not known
])
def test_apply_draws_from_its_dropout_key(made, call, drawn):
    src = MODEL + f"\nmodel = {made}\n\ndef step(params, x, key, flag):\n    return {call}\n"
    m = build_model(ast.parse(textwrap.dedent(src)))
    apply = next(c for c in m.calls if isinstance(c.func, ast.Attribute) and c.func.attr == "apply")
    found = flaxrng.apply_draw(m, apply, m.scope_at(apply), lambda v: isinstance(v, ast.Name) and v.id == "key")
    assert (ast.unparse(found.func) if found is not None else None) == drawn


@pytest.mark.parametrize("creates, drawn", [
    (["train_state.TrainState.create(apply_fn=model.apply, params=p, tx=tx)"], True),
    (["train_state.TrainState.create(apply_fn=model.apply, params=p, tx=tx)",
      "train_state.TrainState.create(apply_fn=other.apply, params=p, tx=tx)"], False),  # two modules: not known
    (["train_state.TrainState.create(apply_fn=forward, params=p, tx=tx)"], False),  # not a module's apply
    (["train_state.TrainState.create(apply_fn=model.apply, params=p, tx=tx)",
      "s0.replace(apply_fn=forward)"], False),  # replaced by another function
    (["train_state.TrainState.create(apply_fn=model.apply, params=p, tx=tx)",
      "s0.apply_fn = forward"], False),  # stored by other code
    ([], False),
])
def test_a_train_states_apply_fn_is_the_one_module_it_was_created_with(creates, drawn):
    body = "\n".join(c if " = " in c else f"s{i} = {c}" for i, c in enumerate(creates))
    src = (MODEL + "\nmodel = Net()\nother = Always()\n" + body +
           '\n\ndef step(state, x, key):\n    return state.apply_fn(state.params, x, True, rngs={"dropout": key})\n')
    m = build_model(ast.parse(textwrap.dedent(src)))
    apply = next(c for c in m.calls if isinstance(c.func, ast.Attribute) and c.func.attr == "apply_fn")
    found = flaxrng.apply_draw(m, apply, m.scope_at(apply), lambda v: isinstance(v, ast.Name) and v.id == "key")
    assert (found is not None) is drawn


GLOBAL = MODEL + """
import optax

dropout_rng = {key}
model = Net()
params = model.init(jax.random.PRNGKey(0), jax.numpy.ones((2, 4)))
opt = optax.adam(1e-3)
opt_state = opt.init(params)


@jax.jit
def train_step(params, opt_state, xb):
    def loss_fn(params):
        return model.apply(params, xb, training={training}, rngs={{"dropout": dropout_rng}}).sum()
    grads = jax.grad(loss_fn)(params)
    updates, opt_state = opt.update(grads, opt_state)
    return optax.apply_updates(params, updates), opt_state


for step in range(5000):
    params, opt_state = train_step(params, opt_state, jax.numpy.ones((2, 4)))
"""


def test_jax502_a_module_level_dropout_key_read_by_the_jitted_step():
    src = GLOBAL.format(key="jax.random.PRNGKey(42)", training="True")
    lines = src.splitlines()
    [finding] = [f for f in _check(src) if f.code == "JAX502"]
    assert finding.line == next(i for i, t in enumerate(lines) if "rngs={\"dropout\": dropout_rng}" in t) + 1
    dropout = next(i for i, t in enumerate(lines) if "nn.Dropout(rate=RATE)" in t) + 1
    loop = next(i for i, t in enumerate(lines) if t.startswith("for step in range(5000)")) + 1
    assert f"`train_step` is called in the loop on line {loop} and runs `loss_fn` on every call" in finding.message
    assert f"`nn.Dropout(rate=RATE)` on line {dropout}" in finding.message


@pytest.mark.parametrize("key, training", [
    ("jax.random.PRNGKey(42)", "False"),  # evaluation: the dropout is off
    ("make_key()", "True"),  # not shown to be a key
])
def test_jax502_near_misses_of_a_module_level_dropout_key(key, training):
    src = GLOBAL.format(key=key, training=training)
    assert default_findings(src, "JAX502") == []
    assert opt_in_findings(src, "JAX502") == []


HANDED = MODEL + """
import optax

model = Stored()
params = model.init(jax.random.PRNGKey(0), jax.numpy.ones((2, 4)))
state = train_state.TrainState.create(apply_fn=model.apply, params=params, tx=optax.sgd(0.1))


@jax.jit
def train_step(state, x, key):
    def loss_fn(p):
        return state.apply_fn(p, x, train={train}, rngs={{"dropout": key}}).sum()
    return state.apply_gradients(grads=jax.grad(loss_fn)(state.params))


key = jax.random.PRNGKey(1)
for epoch in range(10):
    state = train_step(state, jax.numpy.ones((2, 4)), {passed})
"""


def test_jax502_a_key_handed_unchanged_to_a_step_whose_module_drops_out():
    src = HANDED.format(train="True", passed="key")
    lines = src.splitlines()
    [finding] = [f for f in _check(src) if f.code == "JAX502"]
    assert finding.line == lines.index("    state = train_step(state, jax.numpy.ones((2, 4)), key)") + 1
    assert "`train_step` draws from it (`self.drop` on line" in finding.message


@pytest.mark.parametrize("train, passed", [
    ("False", "key"),  # no dropout: whether the module draws stays unknown (opt-in, as before)
    ("True", "jax.random.fold_in(key, epoch)"),  # a new key every step
])
def test_jax502_near_misses_of_a_handed_dropout_key(train, passed):
    src = HANDED.format(train=train, passed=passed)
    assert default_findings(src, "JAX502") == []


PAIRS = MODEL + """
g_a = Stored()
g_b = Stored()
other = Always()


@jax.jit
def generator_step(pa, pb, x, key):
    key, dropout_key = jax.random.split(key)
    fake = g_a.apply(pa, x, rngs={{"dropout": dropout_key}})
    back = {second}
    return fake, back, key
"""


@pytest.mark.parametrize("second, expected", [
    ('g_b.apply(pb, fake, rngs={{"dropout": dropout_key}})', "default"),  # two instances of one class
    ('g_a.apply(pa, fake, rngs={{"dropout": dropout_key}})', "default"),  # the same module again
    ('other.apply(pb, fake, rngs={{"dropout": dropout_key}})', "opt-in"),  # other classes: shared paths not shown
    ('g_b.apply(pb, fake, train=False, rngs={{"dropout": dropout_key}})', None),  # no dropout there
    ('jax.random.normal(dropout_key, x.shape)', None),  # flax derives the layer's key by its path
    ('g_b.apply(pb, fake, rngs={{"dropout": key}})', None),  # its own key
])
def test_jax502_one_dropout_key_for_two_applies(second, expected):
    src = PAIRS.format(second=second.replace("{{", "{").replace("}}", "}"))
    lines = src.splitlines()
    line = next(i for i, t in enumerate(lines) if t.startswith("    back = ")) + 1
    default = [n for n, _ in default_findings(src, "JAX502")]
    opt_in = [n for n, _, _ in opt_in_findings(src, "JAX502")]
    assert (default, opt_in) == {"default": ([line], []), "opt-in": ([], [line]), None: ([], [])}[expected]


def test_jax502_a_direct_apply_in_a_step_loop_with_a_key_never_split():
    src = MODEL + """
model = Stored()


def run(params, x, n):
    key = jax.random.PRNGKey(0)
    for i in range(n):
        x = model.apply(params, x, rngs={"dropout": key})
    return x
"""
    lines = src.splitlines()
    line = next(i for i, t in enumerate(lines) if "x = model.apply(params, x" in t) + 1
    assert default_findings(src, "JAX502") == [(line, "JAX502")]
    assert default_findings(src.replace('rngs={"dropout": key}', 'train=False, rngs={"dropout": key}'), "JAX502") == []


@pytest.mark.parametrize("call, keyed", [
    ("model.apply(params, x, rngs={'dropout': jax.random.PRNGKey(0)})", True),  # a key made in place
    ("model.apply(params, x, rngs={'dropout': key, 'noise': sub})", True),  # keys split before
    ("state.apply_fn({'params': p}, x, rngs={'dropout': key})", True),
    ("model.apply(params, x)", False),  # no keys: nothing says it is a JAX module's apply
    ("model.apply(params, x, rngs=rngs)", False),  # not a dict of keys shown here
    ("model.apply(params, x, rngs={'dropout': 0})", False),  # a Python int is no key
    ("model.predict(params, x, rngs={'dropout': key})", False),  # not an apply
])
def test_keyed_apply_is_a_modules_apply_given_prng_keys(call, keyed):
    src = textwrap.dedent(f"""
        import jax

        def run(model, state, params, p, x, seed):
            key, sub = jax.random.split(jax.random.PRNGKey(seed))
            rngs = {{'dropout': key}}
            return {call}
    """)
    m = build_model(ast.parse(src))
    node = next(n for n in ast.walk(m.tree) if isinstance(n, ast.Return)).value
    from jaxlint.model.facts import keys

    assert keys.keyed_apply(m, node, m.scope_at(node)) is keyed
