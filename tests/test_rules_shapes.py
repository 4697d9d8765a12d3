"""Tests of the shape and traced-control-flow rules: JAX301-JAX305.

Positive cases mark every line where a finding is expected with ``# expect: CODE`` (as the
fixtures do) and compare the engine's findings of *all* rules with those marks, so a case
also fails when another rule fires on it. The last section runs small snippets under JAX to
show that what each rule predicts really happens.
"""

from __future__ import annotations

import textwrap

import pytest

from jaxlint.engine import check_source
from jaxlint_rules.shape_churn import ShapeChurn
from jaxlint_rules.shapes import DataDependentShape, TracedControlFlow, TracedShapeArgument, UnrolledLoopInTracedCode
from ruletools import assert_marked, default_findings, findings, line_of, messages, opt_in_findings

RULES = [DataDependentShape, TracedControlFlow, TracedShapeArgument, ShapeChurn, UnrolledLoopInTracedCode]


def assert_quiet(src: str) -> None:
    """No finding of any rule; with --pedantic, at most JAX102's opt-in finding for a wrapper built
    in a function that only its name says runs once (issue 26: a name decides opt-in, not silence)."""
    assert default_findings(src) == []
    assert all(code == "JAX102" and "named like code that runs once" in why
               for _, code, why in opt_in_findings(src)), opt_in_findings(src)


# --------------------------------------------------------------------------- the rules' own examples


# --------------------------------------------------------------------------- JAX301 data-dependent-shape

_JAX301_POSITIVE = [
    # comparison masks, direct and through names, ~ and &
    """
    import jax
    import jax.numpy as jnp

    @jax.jit
    def stats(x, y):
        a = x[x > 0].sum()  # expect: JAX301
        keep = (y < 1.0) & ~jnp.isnan(y)
        b = y[keep].mean()  # expect: JAX301
        c = x[:, x[0] != 0]  # expect: JAX301
        return a + b + c.sum()
    """,
    # index-producing functions without size=, and the nonzero method
    """
    from jax import jit
    import jax.numpy as jnp

    @jit
    def picks(x, labels):
        i = jnp.nonzero(x)[0]  # expect: JAX301
        j = jnp.argwhere(x > 0)  # expect: JAX301
        k = jnp.flatnonzero(x)  # expect: JAX301
        u, counts = jnp.unique(labels, return_counts=True)  # expect: JAX301
        v = x.nonzero()  # expect: JAX301
        w = jnp.where(x > 0)  # expect: JAX301
        z = jnp.compress(x > 0, x)  # expect: JAX301
        s = jnp.setdiff1d(labels, i)  # expect: JAX301
        return i, j, k, u, counts, v, w, z, s
    """,
    # a helper called from jitted code, and .at[mask]
    """
    import jax
    import jax.numpy as jnp

    def zero_negatives(x):
        return x.at[x < 0].set(0.0)  # expect: JAX301

    @jax.jit
    def forward(x):
        return zero_negatives(x) * 2
    """,
    # vmapped and lax-body functions, repeat with traced repeats
    """
    import jax
    import jax.numpy as jnp

    def per_row(row):
        return jnp.unique_values(row)  # expect: JAX301

    def body(carry, x):
        return carry + jnp.repeat(x, x.astype(int)).sum(), None  # expect: JAX301

    def run(xs):
        rows = jax.vmap(per_row)(xs)
        return jax.lax.scan(body, 0.0, xs), rows
    """,
]


@pytest.mark.parametrize("src", _JAX301_POSITIVE)
def test_jax301_reported(src):
    assert_marked(src)


_JAX301_NEGATIVE = [
    # size= given; jnp.where with three arguments; masked reductions
    """
    import jax
    import jax.numpy as jnp

    @jax.jit
    def picks(x):
        i = jnp.nonzero(x > 0, size=8, fill_value=-1)[0]
        u = jnp.unique(x, size=4)
        w = jnp.where(x > 0, x, 0.0)
        return i, u, w, jnp.sum(x, where=x > 0), x.nonzero(size=2)
    """,
    # outside traced code, boolean masks and nonzero are ordinary eager NumPy-style code
    """
    import jax.numpy as jnp
    import numpy as np

    def summarize(x):
        pos = x[x > 0]
        idx = jnp.nonzero(x)[0]
        host = np.asarray(x)
        return pos.mean(), idx, host[host < 0]
    """,
    # integer indexing, slices, and static (NumPy) masks inside jit
    """
    import jax
    import jax.numpy as jnp
    import numpy as np

    KEEP = np.array([True, False, True])

    @jax.jit
    def gather(x, idx):
        static_mask = np.arange(x.shape[0]) % 2 == 0
        return x[idx], x[1:-1], x[KEEP], x[static_mask], x[jnp.argmax(x)]
    """,
    # autodiff alone traces concrete values: boolean masks work there
    """
    import jax
    import jax.numpy as jnp

    def positive_energy(x):
        return jnp.sum(x[x > 0] ** 2)

    grad_energy = jax.grad(positive_energy)
    """,
    # comparisons used as values, not as indices; a non-boolean index computed from a comparison
    """
    import jax
    import jax.numpy as jnp

    @jax.jit
    def step(x, table):
        mask = x > 0
        n = jnp.sum(mask)
        return table[jnp.argmax(mask)], jnp.where(mask, x, -x), n
    """,
]


@pytest.mark.parametrize("src", _JAX301_NEGATIVE)
def test_jax301_near_miss_not_reported(src):
    assert_quiet(src)


# --------------------------------------------------------------------------- JAX302 traced-control-flow

_JAX302_POSITIVE = [
    # if / elif / ternary / assert in a jitted function
    """
    import jax
    import jax.numpy as jnp

    @jax.jit
    def f(x, y):
        if jnp.any(x < 0):  # expect: JAX302
            x = -x
        elif y.sum() > 1:  # expect: JAX302
            y = y / y.sum()
        assert jnp.isfinite(x).all(), "bad input"  # expect: JAX302
        return x if x.mean() > 0 else y  # expect: JAX302
    """,
    # a boolean test is one finding, and and/or/not outside tests are each one finding
    """
    import jax
    import jax.numpy as jnp

    @jax.jit
    def g(x, lo, hi):
        if x.min() > lo and x.max() < hi:  # expect: JAX302
            return x
        ok = not jnp.all(x > 0)  # expect: JAX302
        flag = (x.sum() > 0) or lo  # expect: JAX302
        return jnp.where(ok & flag, x, 0.0)
    """,
    # a non-static flag argument of a jitted function, and a lax body
    """
    from functools import partial
    import jax
    import jax.numpy as jnp

    @partial(jax.jit, static_argnames=("mode",))
    def layer(x, training, mode):
        if training:  # expect: JAX302
            x = x * 0.5
        return x

    def solve(x0):
        def cond(state):
            x, err = state
            return err > 1e-6

        def body(state):
            x, err = state
            while err > 1.0:  # expect: JAX302
                err = err / 2
            return x - 0.1 * x, err * 0.5
        return jax.lax.while_loop(cond, body, (x0, 1.0))
    """,
    # vmap, a helper called from traced code, and grad inside jit
    """
    import jax
    import jax.numpy as jnp

    def relu_or_zero(v):
        return v if v > 0 else 0.0  # expect: JAX302

    def loss(w, x):
        if w.sum() > 10:  # expect: JAX302
            w = w / 10
        return jnp.sum((x @ w) ** 2)

    @jax.jit
    def step(w, x):
        return w - 0.1 * jax.grad(loss)(w, x)

    batched = jax.vmap(relu_or_zero)
    """,
    # jitted through a name: f = jax.jit(g)
    """
    import jax
    import jax.numpy as jnp

    def clamp(x, limit):
        while jnp.max(x) > limit:  # expect: JAX302
            x = x * 0.5
        return x

    fast_clamp = jax.jit(clamp)
    """,
]


# Values known to be arrays: still reported even where a parameter has a default, is fixed by a
# partial, or is a field of a pytree.
_JAX302_POSITIVE += [
    # an Optional parameter that a staged caller does pass an array
    """
    import jax
    import jax.numpy as jnp

    def masked(x, mask=None):
        if mask:  # expect: JAX302
            x = x * mask
        return x

    @jax.jit
    def step(x):
        return masked(x, mask=jnp.ones_like(x) > 0)
    """,
    # a flag fixed to True by a partial does not short-circuit `and`; a static flag may be True
    """
    from functools import partial
    import jax
    import jax.numpy as jnp

    def _solve(x, *, check=False):
        if check and x.sum() < 0:  # expect: JAX302
            x = -x
        return x

    solve = jax.jit(partial(_solve, check=True))

    @partial(jax.jit, static_argnames=("strict",))
    def clipped(x, strict):
        if strict and jnp.max(x) > 1:  # expect: JAX302
            x = jnp.clip(x, 0, 1)
        return x
    """,
    # elements and fields of a traced argument used as numbers; arithmetic with a number
    """
    import jax
    import jax.numpy as jnp

    @jax.jit
    def train_step(state, batch):
        if batch["mask"][0] > 0:  # expect: JAX302
            state = state.replace(step=state.step + 1)
        if state.step % 100 == 0:  # expect: JAX302 (opt-in)
            state = state.replace(lr=state.lr * 0.5)
        if state.lr * 2:  # expect: JAX302 (opt-in)
            pass
        return state
    """,
]


@pytest.mark.parametrize("src", _JAX302_POSITIVE)
def test_jax302_reported(src):
    assert_marked(src)


_JAX302_NEGATIVE = [
    # static arguments, shapes, ndim, dtypes, len() of a pytree, is None
    """
    from functools import partial
    import jax
    import jax.numpy as jnp

    @partial(jax.jit, static_argnames=("training", "n"))
    def f(x, params, training, n, mask=None):
        if training and n > 3:
            x = x * 0.5
        if x.shape[0] > 3 and x.ndim == 2:
            x = x[:3]
        if x.dtype == jnp.float16 or jnp.issubdtype(x.dtype, jnp.integer):
            x = x.astype(jnp.float32)
        if len(params) > 1:
            x = x + params[0]
        if mask is None or not isinstance(mask, tuple):
            mask = jnp.ones_like(x)
        assert x.shape == mask.shape, "shape mismatch"
        return x * mask if n else x
    """,
    # Python control flow on values is fine under grad alone and outside traced code
    """
    import jax
    import jax.numpy as jnp

    def f(x):
        if x > 0:
            return x ** 2
        return -x

    df = jax.grad(f)

    def check_input(x):
        if jnp.any(x < 0) or not jnp.all(jnp.isfinite(x)):
            raise ValueError("expected finite non-negative input")
        return x
    """,
    # *args / **kwargs containers, literal defaults of lax bodies, str defaults
    """
    import jax
    import jax.numpy as jnp

    @jax.jit
    def f(x, *args, **kwargs):
        if args and kwargs:
            x = x + args[0]
        return x

    @jax.jit
    def g(x, method="exact"):
        if method == "exact":
            return jnp.exp(x)
        return 1 + x

    def run(xs):
        def body(x, scale=False):
            return x * 2 if scale else x
        return jax.lax.map(body, xs)
    """,
    # a helper called only from a differentiated `step`; another function named `step` is jitted
    """
    import jax

    def helper(x):
        if x > 0:
            return x
        return -x

    def step(x):
        return helper(x)

    g = jax.grad(step)

    def step(y):
        return y * 2

    fast = jax.jit(step)
    """,
    # control flow already on device
    """
    import jax
    import jax.numpy as jnp

    @jax.jit
    def f(x):
        y = jax.lax.cond(x.sum() > 0, lambda v: v, lambda v: -v, x)
        z = jnp.where(jnp.logical_and(x > 0, x < 1), x, 0.0)
        return jax.lax.while_loop(lambda s: s < 10, lambda s: s + 1, y.sum()) + z
    """,
    # functools.partial-bound keyword arguments of a vmapped function are Python values
    """
    from functools import partial
    import jax
    import jax.numpy as jnp

    def kernel(x, mode):
        if mode == "same":
            return x
        return jnp.flip(x)

    def apply(xs, mode):
        return jax.vmap(partial(kernel, mode=mode))(xs)
    """,
    # isinstance narrowing
    """
    import jax
    import jax.numpy as jnp

    @jax.jit
    def pad(x, left):
        if isinstance(left, (int, float)):
            left = jnp.full((1,), left) if left > 0 else jnp.zeros((1,))
        return jnp.concatenate([left, x])
    """,
]


# Values that are not known to be arrays: None guards, containers, objects, config flags fixed
# before jit, fields that may be static, flags that short-circuit.
_JAX302_NEGATIVE += [
    # Optional parameters, a dict fallback, tuple-or-None, a bool default no caller passes
    """
    from typing import Optional
    import jax
    import jax.numpy as jnp

    @jax.jit
    def prefill(params, tokens, existing_prefix: Optional[jax.Array] = None, padding=None,
                softmax_logits: bool = False):
        if existing_prefix:  # expect: JAX302 (opt-in)
            raise ValueError("prefixes are not supported")
        if padding:  # expect: JAX302 (opt-in)
            tokens = jnp.pad(tokens, padding)
        logits = tokens @ params["w"]
        if softmax_logits:  # expect: JAX302 (opt-in)
            logits = jax.nn.softmax(logits)
        return logits

    @jax.jit
    def apply(x, variables):
        variables = variables or {}
        return x + sum(variables.values())
    """,
    # an optional object used as one; a field of the state, and one declared static
    """
    import jax
    import jax.numpy as jnp
    from flax import struct

    class State(struct.PyTreeNode):
        params: dict
        apply_fn: object = struct.field(pytree_node=False)
        warmup: int = struct.field(pytree_node=False)

    @jax.jit
    def train_step(state, batch, dynamic_scale):
        if dynamic_scale:
            grad_fn = dynamic_scale.value_and_grad(lambda p: jnp.sum(p["w"] * batch))
        if state.dynamic_scale:  # expect: JAX302 (opt-in)
            batch = batch * 2
        if state.warmup > 0:
            batch = batch * 0.5
        return state.apply_fn(state.params, batch)
    """,
    # config values from a config bound with functools.partial before pmap, passed to helpers
    """
    import functools
    import jax
    import jax.numpy as jnp

    def mixup(batch, alpha, mixmod=False):
        if mixmod:
            return batch * alpha
        return batch

    def targets(batch, config):
        kind = config.masked_feature_loss.target
        if kind == FeatureTargets.RGB:
            return batch
        elif kind == "spectrogram":
            return -batch
        return batch

    def train_step(state, batch, config, debug=False):
        batch = mixup(batch, 0.2, mixmod=config.get("mixmod", False))
        return state, targets(batch, config)

    def train(config, state, batches):
        step = jax.pmap(functools.partial(train_step, config=config, debug=config.debug), axis_name="b")
        for batch in batches:
            state, _ = step(state, batch)
        return state
    """,
    # a parameter compared with an enum member or a string is a Python value (jit would reject an
    # enum argument); an isinstance test on it
    """
    import enum
    import jax
    import jax.numpy as jnp

    class Mode(enum.Enum):
        TRAIN = 1
        EVAL = 2

    @jax.jit
    def forward(x, mode, kind):
        if mode == Mode.TRAIN:
            x = x * 0.5
        if kind in ("relu", "gelu"):
            x = jax.nn.relu(x)
        return x
    """,
    # a flag fixed to False by the only jit that compiles the function short-circuits `and`
    """
    from functools import partial
    import jax
    import jax.numpy as jnp

    def _lstsq(a, b, *, numpy_resid=False):
        x = jnp.linalg.pinv(a) @ b
        rank = jnp.linalg.matrix_rank(a)
        if numpy_resid and (rank < a.shape[1]):
            return x, jnp.asarray([])
        if not numpy_resid or rank < a.shape[1]:
            return x, jnp.sum((a @ x - b) ** 2)
        return x, None

    _jit_lstsq = jax.jit(partial(_lstsq, numpy_resid=False))
    """,
]


@pytest.mark.parametrize("src", _JAX302_NEGATIVE)
def test_jax302_near_miss_not_reported(src):
    if "(opt-in)" in src:
        # a value the model cannot show to be a tracer (a field of an argument of unknown class, an
        # optional argument no call passes): opt-in, and the finding names the unknown fact
        assert default_findings(src) == []
        assert_marked(src)
        assert all(why.startswith("tracer unknown: ") for _, _, why in opt_in_findings(src))
    else:
        assert_quiet(src)


def test_autodiff_is_staged_only_where_it_runs_under_jit_or_vmap():
    assert_marked("""
    import jax
    import jax.numpy as jnp

    def loss(w):
        if w.sum() > 0:  # expect: JAX302
            return jnp.sum(w ** 2)
        return jnp.sum(w)

    grad_loss = jax.grad(loss)

    @jax.jit
    def step(w):
        return w - grad_loss(w)

    def loss2(w):
        return jnp.mean(w[w > 0])  # expect: JAX301

    fast = jax.jit(jax.grad(loss2))

    def loss3(w):
        return jnp.mean(w[w > 0])

    eager_grad = jax.grad(loss3)

    def loss4(w):
        return jnp.mean(w[w > 0])  # expect: JAX301

    per_example = jax.vmap(jax.grad(loss4))
    """)


def test_jax302_range_of_a_traced_count():
    # fresh set U (flaxdocs' MAML): `inner_steps` is passed to the jitted step by keyword, so the trace
    # gets a tracer, reaching `range` through a gradient's closure and two helpers
    assert_marked("""
    import functools
    import jax
    import jax.numpy as jnp

    def inner_loop(w, x, inner_steps=1):
        for _ in range(inner_steps):  # expect: JAX302
            w = w - 0.1 * jax.grad(lambda v: jnp.sum((v * x) ** 2))(w)
        return w

    @jax.jit
    def meta_step(w, x, inner_steps: int = 1):
        def loss(w):
            return jnp.sum(inner_loop(w, x, inner_steps))
        return jax.value_and_grad(loss)(w)

    @functools.partial(jax.jit, static_argnames="inner_steps")
    def static_step(w, x, inner_steps=1):
        for _ in range(inner_steps):
            w = w * x
        return w

    @jax.jit
    def default_only(w, n=3):
        for _ in range(n):  # expect: JAX302 (opt-in)
            # no call passes `n`: the default, a Python int, unless a caller elsewhere passes one
            w = w * 2
        return w

    @jax.jit
    def shaped(w):
        for _ in range(w.shape[0]):   # a shape: static
            w = w * 2
        return default_only(w) + fixed(w, 4)

    def fixed(w, n):
        for _ in range(n):   # its traced caller passes a Python int
            w = w + 1
        return w

    def train(w, x, k, steps):
        for _ in range(steps):
            w = meta_step(w, x, inner_steps=k)[0] + static_step(w, x, inner_steps=k)
        return shaped(w)
    """)


def test_jax302_boolean_if_test_is_one_finding():
    src = """
    import jax

    @jax.jit
    def f(x, y):
        if x.sum() > 0 and not y.any() or x.max() > 9:
            return x
        return y
    """
    assert findings(src) == [(6, "JAX302")]


# --------------------------------------------------------------------------- JAX303 traced-shape-argument

_JAX303_POSITIVE = [
    """
    import jax
    import jax.numpy as jnp

    @jax.jit
    def f(x, n):
        a = jnp.zeros(n)  # expect: JAX303
        b = jnp.ones((x.shape[0], n))  # expect: JAX303
        c = jnp.full((n,), 3.0)  # expect: JAX303
        d = jnp.empty([2, n])  # expect: JAX303
        e = jnp.eye(n)  # expect: JAX303
        g = jnp.identity(n)  # expect: JAX303
        h = jnp.tri(3, n)  # expect: JAX303
        return a, b, c, d, e, g, h
    """,
    """
    import jax
    import jax.numpy as jnp

    @jax.jit
    def g(x, lengths):
        k = jnp.sum(x > 0)
        r1 = jnp.arange(k)  # expect: JAX303
        r2 = jnp.linspace(0.0, 1.0, k)  # expect: JAX303
        r3 = x.reshape(k, -1)  # expect: JAX303
        r4 = jnp.reshape(x, (2, lengths.max()))  # expect: JAX303
        r5 = jnp.broadcast_to(x, (k,) + x.shape)  # expect: JAX303
        return r1, r2, r3, r4, r5
    """,
    # jax.random: positional and keyword shapes, split's num
    """
    import jax

    @jax.jit
    def noise(key, n):
        k1, k2, k3, k4, k5 = jax.random.split(key, 5)
        a = jax.random.normal(k1, (n, 3))  # expect: JAX303
        b = jax.random.uniform(k2, shape=(n,))  # expect: JAX303
        c = jax.random.randint(k3, (n,), 0, 10)  # expect: JAX303
        d = jax.random.bernoulli(k4, 0.5, (n,))  # expect: JAX303
        keys = jax.random.split(k5, n)  # expect: JAX303
        return a, b, c, d, keys
    """,
    # lax sizes, in a helper called from a lax body
    """
    import jax
    import jax.numpy as jnp

    def window(x, start, size):
        return jax.lax.dynamic_slice(x, (start,), (size,))  # expect: JAX303

    def body(i, acc):
        return acc + window(acc, i, i + 1).sum() + jax.lax.iota(jnp.int32, i).sum()  # expect: JAX303

    def run(x):
        return jax.lax.fori_loop(0, 4, body, x)
    """,
]


_JAX303_POSITIVE += [
    # psum of a traced value is a tracer
    """
    import jax
    import jax.numpy as jnp

    def collective(x):
        total = jax.lax.psum(x.sum().astype(int), axis_name="i")
        return jnp.zeros(total)  # expect: JAX303

    batched = jax.vmap(collective, axis_name="i")
    """,
]


@pytest.mark.parametrize("src", _JAX303_POSITIVE)
def test_jax303_reported(src):
    assert_marked(src)


_JAX303_NEGATIVE = [
    # sizes from .shape / ndim / len(), and static arguments
    """
    from functools import partial
    import jax
    import jax.numpy as jnp

    @partial(jax.jit, static_argnums=(1,))
    def f(x, n):
        a = jnp.zeros((x.shape[0] * 2, n))
        b = x.reshape(x.shape[0], -1)
        c = jnp.arange(len(x))
        d = jnp.ones(x.ndim)
        e = jax.random.normal(jax.random.PRNGKey(0), x.shape)
        return a, b, c, d, e
    """,
    # traced values that are not sizes: linspace endpoints, fill values, eye's offset, bernoulli's p
    """
    import jax
    import jax.numpy as jnp

    @jax.jit
    def g(key, lo, hi, fill, p):
        k1, k2 = jax.random.split(key)
        return (jnp.linspace(lo, hi, 8), jnp.full((4,), fill), jnp.zeros_like(lo),
                jax.random.bernoulli(k1, p, (3,)), jax.random.uniform(k2, (2,), minval=lo, maxval=hi))
    """,
    # outside traced code a concrete array can give a size
    """
    import jax.numpy as jnp

    def host(lengths):
        n = int(jnp.max(lengths))
        return jnp.zeros(n), jnp.arange(jnp.max(lengths))
    """,
    # reshape of a NumPy array, and vmap with an unmapped size argument
    """
    import jax
    import jax.numpy as jnp
    import numpy as np

    TABLE = np.arange(12)

    def embed(x, n):
        return x + jnp.zeros(n)

    def run(xs):
        return jax.vmap(embed, in_axes=(0, None))(xs, 3), TABLE.reshape(3, 4)
    """,
]


_JAX303_NEGATIVE += [
    # psum of a Python constant is the axis size, a static int; sizes closed over from eager code
    """
    import jax
    import jax.numpy as jnp

    def collective(x):
        axis_size = jax.lax.psum(1, axis_name="i")
        return jnp.zeros((x.shape[0] * axis_size, 2)) + jnp.arange(axis_size).sum()

    batched = jax.vmap(collective, axis_name="i")

    def make(xs, n_steps):
        width = int(xs.max())

        @jax.jit
        def run(x):
            return jnp.zeros(width) + x
        return run
    """,
]


@pytest.mark.parametrize("src", _JAX303_NEGATIVE)
def test_jax303_near_miss_not_reported(src):
    assert_quiet(src)


# --------------------------------------------------------------------------- JAX304 shape-churn

_STEP = """
    from functools import partial
    import jax
    import jax.numpy as jnp

    @jax.jit
    def step(x):
        return jnp.sum(x ** 2)

    @partial(jax.jit, static_argnames=("n",))
    def step_n(x, n):
        return x[:n]
"""

_JAX304_POSITIVE = [
    _STEP + """
    def prefixes(x):
        out = []
        for i in range(1, x.shape[0]):
            out.append(step(x[:i]))  # expect: JAX304
        return out
    """,
    _STEP + """
    def windows(x, starts, ends):
        for i, j in zip(starts, ends):
            step(x[i:j])  # expect: JAX304
            step(x=x[:, :j])  # expect: JAX304
    """,
    _STEP + """
    def grow(x):
        t = 1
        while t < x.shape[1]:
            step(x[:, :t])  # expect: JAX304
            t += 1
    """,
    # a bound named in the loop from the counter alone: the width grows
    _STEP + """
    def prefixes(x, n, bs):
        for i in range(n):
            batch_end = (i + 1) * bs
            step(x[0:batch_end])  # expect: JAX304
    """,
    _STEP + """
    def tails(x, batches):
        for b in batches:
            n = len(b)
            chunk = x[n:]
            step(chunk)  # expect: JAX304
    """,
    # jitted through a name, a method attribute, or a comprehension loop
    """
    import jax
    import jax.numpy as jnp

    def energy(x):
        return jnp.sum(x ** 2)

    fast_energy = jax.jit(energy)

    class Model:
        def __init__(self):
            self.apply = jax.jit(energy)

        def scan_all(self, x):
            for t in range(x.shape[0]):
                self.apply(x[t:])  # expect: JAX304
            return [fast_energy(x[:k]) for k in range(8, 64)]  # expect: JAX304
    """,
]


@pytest.mark.parametrize("src", _JAX304_POSITIVE)
def test_jax304_reported(src):
    assert_marked(src)


_JAX304_NEGATIVE = [
    # integer indexing and fixed-width windows
    _STEP + """
    def batches(x, bs):
        for i in range(x.shape[0] // bs):
            step(x[i])
            step(x[i:i + 32])
            step(x[i * bs:(i + 1) * bs])
            start = i * bs
            step(x[start:start + bs])
            step(x[:, 2:10])
    """,
    # a literal list of bucket sizes, a short literal range, a benchmark harness
    _STEP + """
    import time

    def buckets(x):
        for n in (128, 256, 512):
            step(x[:n])
        for n in range(1, 4):
            step(x[:n])

    def benchmark(x, sizes):
        for n in sizes:
            t0 = time.perf_counter()
            step(x[:n]).block_until_ready()
            print(n, time.perf_counter() - t0)
    """,
    # a non-jitted callee, and jitted code itself (shapes inside a trace are fixed per trace)
    _STEP + """
    def host_sum(x):
        return float(x.sum())

    def prefixes(x):
        return [host_sum(x[:i]) for i in range(x.shape[0])]

    @jax.jit
    def inner(x):
        total = 0.0
        for i in range(1, 4):
            total = total + step(x[:i])
        return total
    """,
    # a slice bound assigned a constant in the loop, a static argument (JAX103's business)
    _STEP + """
    def fixed(x, n_iter):
        for it in range(n_iter):
            width = 16
            step(x[:width])
            step_n(x, n=it)
    """,
    # bounds named in the loop, each a function of the counter: a fixed width (fresh set L's MNIST
    # notebook), directly and through a second name
    _STEP + """
    def batches(x, n_batches, bs):
        for i in range(n_batches):
            batch_start = i * bs
            batch_end = (i + 1) * bs
            step(x[batch_start:batch_end])
            offset = batch_start + 2
            step(x[offset:batch_end + 2])
    """,
    # a nested loop over a few literal sizes inside a long loop: each shape compiles once
    _STEP + """
    def epochs(x, n_epochs):
        for epoch in range(n_epochs):
            for n in (16, 32):
                step(x[:n])
            for k in range(1, 4):
                step(x[:, :k])
    """,
]


@pytest.mark.parametrize("src", _JAX304_NEGATIVE)
def test_jax304_near_miss_not_reported(src):
    assert findings(src, "JAX304") == []


# A sweep in fixed-size batches whose last batch is shorter compiles twice, not once per
# iteration: reported with its own message wherever the length need not be a multiple.
_JAX304_RAGGED = _STEP + """
    import math

    def sweep(x, bs):
        n = x.shape[0]
        for i in range(0, n, bs):
            step(x[i:i + bs])  # expect: JAX304 (opt-in)
        for i in range(0, len(x), bs):
            end = min(i + bs, n)
            step(x[i:end])  # expect: JAX304 (opt-in)
        for start in range(0, n, 32):
            batch = x[start:min(n, start + 32)]
            step(batch)  # expect: JAX304 (opt-in)
        for i in range(math.ceil(n / bs)):
            step(x[i * bs:(i + 1) * bs])  # expect: JAX304 (opt-in)
        for i in range((n + bs - 1) // bs):
            step(x[:, i * bs:(i + 1) * bs])  # expect: JAX304 (opt-in)
        for b, i in enumerate(range(0, n, bs)):
            step(x[i:i + bs])  # expect: JAX304 (opt-in)
        for i in reversed(range(0, n, bs)):
            step(x[i:i + bs])  # expect: JAX304 (opt-in)
"""


def test_jax304_ragged_last_batch_reported_as_one_extra_compilation():
    # opt-in since issue 26: one extra compile per program (the shorter shape is cached), judged
    # HARMLESS on real code (review2: 6 of 6); still reported with --pedantic
    assert_marked(_JAX304_RAGGED)
    assert default_findings(_JAX304_RAGGED, "JAX304") == []
    assert len(opt_in_findings(_JAX304_RAGGED, "JAX304")) == 7
    for msg in messages(_JAX304_RAGGED, "JAX304"):
        assert "compiles once more for the last, shorter batch" in msg, msg
        assert "pad it" in msg and "drop it" in msg, msg
        assert "every iteration" not in msg, msg
    assert "multiple of `32`" in messages(_JAX304_RAGGED, "JAX304")[2]


_JAX304_FULL_BATCHES = [
    # every batch is full: the sweep stops at a multiple of the batch size, a batch short of the
    # end, or the count of full batches; literal bounds that divide
    _STEP + """
    def sweep(x, bs, k):
        n = x.shape[0]
        for i in range(0, n - bs + 1, bs):
            step(x[i:i + bs])
        for i in range(0, (n // bs) * bs, bs):
            step(x[i:i + bs])
        for i in range(0, k * bs, bs):
            step(x[i:i + bs])
        for i in range(n // bs):
            step(x[i * bs:(i + 1) * bs])
        for i in range(0, 4096, 32):
            step(x[i:i + 32])
    """,
    # the loop drops the short batch
    _STEP + """
    def sweep(x, bs):
        for i in range(0, len(x), bs):
            batch = x[i:i + bs]
            if len(batch) < bs:
                break
            step(batch)
        for i in range(0, len(x), bs):
            batch = x[i:i + bs]
            if batch.shape[0] == bs:
                step(batch)
    """,
    # not a batch sweep: a window of a fixed size at offsets from a list
    _STEP + """
    def sweep(x, bs, offsets):
        for i in offsets:
            step(x[i:i + bs])
    """,
]


@pytest.mark.parametrize("src", _JAX304_FULL_BATCHES)
def test_jax304_full_batches_not_reported(src):
    assert findings(src, "JAX304") == []


def test_jax304_churn_message_says_every_iteration():
    src = _STEP + """
    def prefixes(x):
        for i in range(1, x.shape[0]):
            step(x[:i])
        for i in range(0, x.shape[0], 8):
            step(x[:i + 8])
    """
    msgs = messages(src, "JAX304")
    assert len(msgs) == 2
    assert all("traced and compiled again in every iteration" in m for m in msgs)


# Shapes that follow the loop beyond slices: built with a size from the loop, stacked from a list
# that grows, converted from per-item data of varying length, drawn from a list of arrays of
# different sizes, data-dependent sizes without size=.
_JAX304_SHAPES = [
    _STEP + """
    def curriculum(key, steps, d):
        for n in range(16, steps):
            key, sub = jax.random.split(key)
            step(jnp.ones(n))  # expect: JAX304
            step(jnp.arange(n))  # expect: JAX304
            step(jax.random.normal(sub, (n, d)))  # expect: JAX304
            length = 2 * n
            mask = jnp.zeros((length, d))
            step(mask)  # expect: JAX304
    """,
    _STEP + """
    def decode(first, max_new):
        tokens = [first]
        for _ in range(max_new):
            out = step(jnp.stack(tokens))  # expect: JAX304
            tokens.append(out)
    """,
    _STEP + """
    def encode(sentences, vocab):
        for sentence in sentences:
            ids = jnp.array([vocab[w] for w in sentence.split()])
            step(ids)  # expect: JAX304
    """,
    _STEP + """
    def make_batch(key, n):
        return jax.random.uniform(key, (n, 3))

    def sweep(key):
        keys = jax.random.split(key, 3)
        batches = [make_batch(k, n) for k, n in zip(keys, (5, 9, 12))]
        for b in batches:
            step(b)  # expect: JAX304
    """,
    _STEP + """
    def selected(loader, x):
        for batch in loader:
            idx = jnp.nonzero(batch > 0)[0]
            step(x[idx])  # expect: JAX304
    """,
]


@pytest.mark.parametrize("src", _JAX304_SHAPES)
def test_jax304_shapes_that_follow_the_loop_reported(src):
    assert_marked(src)


_JAX304_SHAPES_NEGATIVE = [
    # batches from a loader, their rows, sizes read from them, arrays of a fixed size
    _STEP + """
    def train(loader, steps, bs, d):
        for batch in loader:
            step(batch)
            step(batch[0])
            step(jnp.zeros(batch.shape))
            step(jnp.ones((len(batch), d)))
        for i in range(steps):
            step(jnp.zeros((bs, d)))
    """,
    # padded text, bucketed sizes (a helper, //), a buffer flushed when full
    _STEP + """
    def next_bucket(n):
        return 1 << (n - 1).bit_length()

    def encode(sentences, vocab, max_len, rows, bs):
        for sentence in sentences:
            ids = [vocab[w] for w in sentence.split()][:max_len]
            ids = ids + [0] * (max_len - len(ids))
            step(jnp.array(ids))
            step(jnp.zeros(next_bucket(len(sentence.split()))))
            step(jnp.zeros((len(sentence) // 64 + 1) * 64))
        buf = []
        for row in rows:
            buf.append(row)
            if len(buf) == bs:
                step(jnp.stack(buf))
                buf = []
    """,
    # not jitted: no compilation to repeat
    _STEP + """
    def host_norm(x):
        return float((x ** 2).sum())

    def run(sentences, vocab, steps):
        for s in sentences:
            host_norm(jnp.array([vocab[w] for w in s.split()]))
        for n in range(steps):
            host_norm(jnp.arange(n))
    """,
    # a few literal sizes in the loop header (buckets, once each), arrays of one size, size= given
    _STEP + """
    def sweep(x, loader, d, sizes):
        for n in (128, 256, 512):
            step(jnp.zeros(n))
        for n in sizes:
            step(jax.random.normal(jax.random.key(0), (n, n)))
        xs = [jnp.ones(d) for _ in range(8)]
        for v in xs:
            step(v)
        for batch in loader:
            step(jnp.unique(batch, size=16))
    """,
]


@pytest.mark.parametrize("src", _JAX304_SHAPES_NEGATIVE)
def test_jax304_fixed_shapes_not_reported(src):
    assert findings(src, "JAX304") == []


def test_jax304_message_counts_the_compilations():
    src = _STEP + """
    def run(steps, sizes, sentences, vocab, key):
        for n in range(steps):
            step(jnp.arange(n))
        for s in sentences:
            w = len(s.split())
            step(jnp.ones(w))
        for s in sentences:
            step(jnp.array([vocab[t] for t in s.split()]))
        for x in [jnp.ones(n) for n in (5, 9, 12)]:
            step(x)
        for lo, hi in zip(sizes, sizes[1:]):
            step(key[lo:hi])
    """
    counter, value, length, listed, width = messages(src, "JAX304")
    assert "compiled again in every iteration" in counter and "fixed size" in counter
    assert "once per distinct value of `w`" in value and "every iteration" not in value
    assert "once per distinct length" in length and "sentence" not in length and "s.split()" in length
    assert "compiled 3 times, once per size" in listed and "(5, 9, 12)" in listed
    assert "once per distinct width" in width and "dynamic_slice" in width
    assert all("bucket" in m for m in (counter, value, length, listed, width))


def test_jax304_reports_the_argument():
    src = _STEP + """
    def prefixes(x):
        for i in range(1, 9):
            step(x[:i * 3])
        for i in range(1, 99):
            step(x[:i])
    """
    got = check_source(textwrap.dedent(src), "t.py", [ShapeChurn()]).findings
    assert [(f.line, f.col) for f in got] == [(18, 13)]
    assert "x[:i]" in got[0].message and "`step`" in got[0].message


# --------------------------------------------------------------------------- JAX305 unrolled loop

_JAX305_POSITIVE = [
    """
    import jax
    import jax.numpy as jnp

    N_STEPS = 500

    @jax.jit
    def simulate(x):
        for _ in range(N_STEPS):  # expect: JAX305
            x = x + 0.01 * jnp.sin(x)
        for i in range(10, 10 + 2 * 60):  # expect: JAX305
            x = x * 0.999
        return x
    """,
    """
    import jax
    import jax.numpy as jnp

    def body(i, x):
        for _ in reversed(range(1000)):  # expect: JAX305
            x = x * 0.5
        return x

    def run(x):
        return jax.lax.fori_loop(0, 3, body, x)
    """,
    # a jitted step function called per iteration, with an unknown trip count
    """
    from functools import partial
    import jax
    import jax.numpy as jnp

    @jax.jit
    def sgd_step(w, g):
        return w - 0.1 * g

    @partial(jax.jit, static_argnums=(2,))
    def train(w, g, n_steps):
        for i in range(n_steps):  # expect: JAX305
            w = sgd_step(w, g)
        return w
    """,
    # a helper called from jitted code, with a local literal
    """
    import jax
    import jax.numpy as jnp

    def integrate(x, v):
        steps = 20 * 10
        for t in range(steps):  # expect: JAX305
            v = v - 0.01 * x
            x = x + 0.01 * v
        return x

    @jax.jit
    def energy(x, v):
        return jnp.sum(integrate(x, v) ** 2)
    """,
]


@pytest.mark.parametrize("src", _JAX305_POSITIVE)
def test_jax305_reported(src):
    assert_marked(src)


_JAX305_NEGATIVE = [
    # short loops over layers, leaves, ranks, and small literal ranges
    """
    import jax
    import jax.numpy as jnp

    N_LAYERS = 12

    @jax.jit
    def mlp(params, x):
        for w, b in params:
            x = jax.nn.relu(x @ w + b)
        for leaf in jax.tree_util.tree_leaves(params):
            x = x + 0.0 * leaf.sum()
        for axis in range(x.ndim):
            x = jnp.flip(x, axis)
        for _ in range(N_LAYERS):
            x = jnp.tanh(x)
        for _ in range(99):
            x = x * 1.0
        return x
    """,
    # long loops outside traced code, and lax loops inside
    """
    import jax
    import jax.numpy as jnp

    @jax.jit
    def step(x):
        return jax.lax.fori_loop(0, 1000, lambda i, v: v * 0.99, x)

    def train(x):
        for _ in range(100000):
            x = step(x)
        return x
    """,
    # a constant rebound elsewhere is not a constant; a non-jitted callee in a loop of unknown length
    """
    import jax
    import jax.numpy as jnp

    STEPS = 1000
    STEPS = 10

    def helper(x):
        return x * 2

    @jax.jit
    def f(x, n):
        for _ in range(STEPS):
            x = x + 1
        return x
    """,
    # autodiff alone does not compile: a long loop under grad outside jit is not unrolled into XLA
    """
    import jax
    import jax.numpy as jnp

    def rollout(x):
        for _ in range(1000):
            x = jnp.tanh(x)
        return x.sum()

    g = jax.grad(rollout)
    """,
    # Python bookkeeping in a long loop records no JAX operations
    """
    import jax
    import jax.numpy as jnp

    @jax.jit
    def shuffle(x):
        perm = []
        for i in range(256):
            perm.append((i * 7) % 256)
        return x[jnp.array(perm)]
    """,
    # library functions (which jit themselves) called in a loop over a shape
    """
    import jax
    import jax.numpy as jnp

    @jax.jit
    def f(x, ws):
        for i in range(x.shape[0]):
            x = x.at[i].set(jnp.round(x[i]))
        return x
    """,
]


@pytest.mark.parametrize("src", _JAX305_NEGATIVE)
def test_jax305_near_miss_not_reported(src):
    assert_quiet(src)


_JAX305_SWEEP = """
    import equinox as eqx
    import jax
    import jax.numpy as jnp

    @jax.jit
    def solve(y0, dt):
        return y0 * dt

    @eqx.filter_jit
    def strong_order(y0, levels, dts):
        lo, hi = levels
        errs = []
        for level in range(lo, hi + 1):
            errs.append(solve(y0, dts[level]))
        for state in range(hi):
            y0, err = carried(y0, dts[state])
        return jnp.stack(errs), y0

    @jax.jit
    def carried(y, dt):
        return y - dt, dt
"""


def test_jax305_loop_of_unknown_length_reported_by_default_only_when_it_carries_state():
    # A sweep over a few settings (each traced on purpose) calls the jitted function without
    # feeding it its own result: its length is unknown, so the finding is opt-in; the loop that
    # continues from the last call's result is an iteration, reported.
    got = check_source(textwrap.dedent(_JAX305_SWEEP), "t.py", [UnrolledLoopInTracedCode()]).findings
    by_line = {f.line: f for f in got}
    sweep_line = line_of(_JAX305_SWEEP, "for level in")
    carried_line = line_of(_JAX305_SWEEP, "for state in")
    assert sorted(by_line) == [sweep_line, carried_line]
    sweep, carried = by_line[sweep_line], by_line[carried_line]
    assert sweep.opt_in and "unknown" in sweep.opt_in
    assert "of unknown length" in sweep.message and "`solve`" in sweep.message
    assert carried.opt_in is None and "feeds the jitted `carried` its own result" in carried.message
    assert UnrolledLoopInTracedCode.opt_in_cases


_JAX305_UNDER_VMAP = """
    import jax
    import jax.numpy as jnp

    @jax.jit
    def update(p, g):
        return p - 0.1 * g

    def train(p, x, steps):
        for _ in range(steps):
            p = update(p, x)
        return p

    def train_staged(p, x, steps):
        for _ in range(steps):
            p = update(p, x)
        return p

    def run(ps, x, steps):
        eager = jax.vmap(lambda p: train(p, x, steps))(ps)
        compiled = jax.jit(jax.vmap(lambda p: train_staged(p, x, 100)))(ps)
        return eager, compiled
"""


def test_jax305_under_a_transform_alone_is_opt_in_under_jit_default():
    # fresh set F (fourier-feature-networks): a training loop run under a bare jax.vmap, no jit around it,
    # dispatches the compiled step once per iteration; nothing is unrolled into one program
    got = check_source(textwrap.dedent(_JAX305_UNDER_VMAP), "t.py", [UnrolledLoopInTracedCode()]).findings
    by_line = {f.line: f for f in got}
    loops = [i + 1 for i, t in enumerate(textwrap.dedent(_JAX305_UNDER_VMAP).split("\n")) if "for _ in range(steps)" in t]
    eager, staged = by_line[loops[0]], by_line[loops[1]]
    assert eager.opt_in.startswith("whether a compiled program holds the loop is unknown: `train` is traced ")
    assert "jax.vmap" in eager.opt_in
    assert staged.opt_in is None


def test_staging_compiled_is_proven_under_jit_and_lax_unknown_under_a_transform_alone():
    import ast as _ast

    from jaxlint.model import build_model

    m = build_model(_ast.parse(textwrap.dedent(_JAX305_UNDER_VMAP + '''
    def body(i, c):
        return c + i

    def scanned(c):
        return jax.lax.fori_loop(0, 3, body, c)

    def plain(x):
        return x + 1
    ''')))
    fn = {f.name: f for f in m.functions}
    st = m.staging
    assert st.compiled(fn["update"]) is True and st.compiled(fn["body"]) is True
    assert st.compiled(fn["train"]) is None  # only jax.vmap called outside jit: not shown
    assert st.compiled(fn["plain"]) is False  # not traced at all


def test_jax305_messages_state_the_unrolled_copies():
    src = """
    import jax

    @jax.jit
    def f(x):
        for _ in range(500):
            x = x * 0.5
        return x
    """
    (msg,) = messages(src, "JAX305")
    assert "500 copies of its body" in msg and "jax.lax.fori_loop" in msg


# --------------------------------------------------------------------------- runtime truth (under JAX)


def test_runtime_jax301_boolean_mask_fails_under_jit():
    jax = pytest.importorskip("jax")
    jnp = jax.numpy

    def positive_mean(x):
        return jnp.mean(x[x > 0])

    x = jnp.array([-1.0, 2.0, 4.0])
    assert float(positive_mean(x)) == 3.0  # eager: fine
    assert findings(DataDependentShape.bad) == [(7, "JAX301")]
    with pytest.raises(jax.errors.NonConcreteBooleanIndexError):
        jax.jit(positive_mean)(x)
    with pytest.raises(jax.errors.ConcretizationTypeError):
        jax.jit(lambda v: jnp.nonzero(v))(x)
    # the fix keeps the shape static and gives the same answer
    fixed = jax.jit(lambda v: jnp.sum(jnp.where(v > 0, v, 0.0)) / jnp.maximum(jnp.sum(v > 0), 1))
    assert float(fixed(x)) == 3.0


def test_runtime_jax302_python_if_on_tracer_fails_under_jit_but_not_under_grad():
    jax = pytest.importorskip("jax")
    jnp = jax.numpy

    def relu(x):
        if x.sum() > 0:
            return x
        return jnp.zeros_like(x)

    with pytest.raises(jax.errors.TracerBoolConversionError):
        jax.jit(relu)(jnp.ones(3))
    with pytest.raises(jax.errors.TracerBoolConversionError):
        jax.vmap(relu)(jnp.ones((2, 3)))
    # autodiff alone traces concrete values: the rule stays quiet there, and rightly so
    assert float(jax.grad(lambda v: relu(v).sum())(jnp.ones(3))[0]) == 1.0


def test_runtime_jax302_range_of_a_passed_argument_fails_under_jit_but_not_its_default():
    jax = pytest.importorskip("jax")
    jnp = jax.numpy

    @jax.jit
    def adapt(w, inner_steps=1):
        for _ in range(inner_steps):
            w = w * 2
        return w

    with pytest.raises(jax.errors.TracerIntegerConversionError):
        adapt(jnp.ones(3), inner_steps=2)
    assert float(adapt(jnp.ones(3))[0]) == 2.0  # the default is not traced: a Python int
    static = jax.jit(adapt.__wrapped__, static_argnames="inner_steps")
    assert float(static(jnp.ones(3), inner_steps=2)[0]) == 4.0


def test_runtime_jax303_traced_size_fails_under_jit():
    jax = pytest.importorskip("jax")
    jnp = jax.numpy

    def pad_to(x, length):
        return jnp.concatenate([x, jnp.zeros(length - x.shape[0])])

    with pytest.raises((jax.errors.ConcretizationTypeError, TypeError)):
        jax.jit(pad_to)(jnp.ones(3), 5)
    with pytest.raises((jax.errors.ConcretizationTypeError, TypeError)):
        jax.jit(lambda x, k: x.reshape(k, -1))(jnp.ones(6), 2)
    # static, it compiles; start/stop of linspace may be traced (not a size)
    assert jax.jit(pad_to, static_argnames="length")(jnp.ones(3), 5).shape == (5,)
    assert jax.jit(lambda lo: jnp.linspace(lo, 1.0, 4))(0.0).shape == (4,)


def test_runtime_jax304_prefix_slices_retrace_every_iteration():
    jax = pytest.importorskip("jax")
    jnp = jax.numpy
    traces = []

    @jax.jit
    def energy(x):
        traces.append(x.shape)  # runs once per trace
        return jnp.sum(x ** 2)

    x = jnp.arange(10.0)
    for i in range(1, 6):
        energy(x[:i])
    assert len(traces) == 5  # one trace (and compile) per iteration
    for i in range(0, 3):
        energy(x[i:i + 7])  # fixed width: one more trace, then cache hits
    assert len(traces) == 6


def test_runtime_jax304_ragged_last_batch_compiles_once_more():
    jax = pytest.importorskip("jax")
    jnp = jax.numpy
    traces = []

    @jax.jit
    def energy(x):
        traces.append(x.shape)
        return jnp.sum(x ** 2)

    x = jnp.arange(100.0)
    for i in range(0, x.shape[0], 32):  # 32, 32, 32, then 4
        energy(x[i:i + 32])
    assert traces == [(32,), (4,)]  # twice, not once per iteration
    for i in range(0, x.shape[0] - 32 + 1, 32):  # full batches only: no new compilation
        energy(x[i:i + 32])
    assert len(traces) == 2


def test_runtime_jax302_none_defaults_partial_flags_and_psum_constants_are_static():
    jax = pytest.importorskip("jax")
    jnp = jax.numpy
    from functools import partial

    @jax.jit
    def f(x, mask=None, params=None):
        if mask:  # None: fine under jit
            x = x * mask
        params = params or {}
        return x + len(params)

    def _g(x, *, exact=False):
        if exact and x.sum() > 0:  # short-circuits: the traced test never runs
            x = -x
        return x

    g = jax.jit(partial(_g, exact=False))

    def h(x):
        n = jax.lax.psum(1, "i")
        return x + jnp.zeros(n).sum()  # a static size

    assert float(f(jnp.ones(3)).sum()) == 3.0
    assert float(g(jnp.ones(3)).sum()) == 3.0
    assert jax.vmap(h, axis_name="i")(jnp.ones(4)).shape == (4,)
    with pytest.raises(jax.errors.TracerBoolConversionError):
        f(jnp.ones(3), mask=jnp.array(True))  # the case JAX302 reports: a caller passes an array


def test_runtime_jax305_python_loop_unrolls_into_the_program():
    jax = pytest.importorskip("jax")

    def unrolled(x):
        for _ in range(200):
            x = x * 0.99 + 1.0
        return x

    def rolled(x):
        return jax.lax.fori_loop(0, 200, lambda i, v: v * 0.99 + 1.0, x)

    n_unrolled = len(jax.make_jaxpr(unrolled)(1.0).jaxpr.eqns)
    n_rolled = len(jax.make_jaxpr(rolled)(1.0).jaxpr.eqns)
    assert n_unrolled >= 200
    assert n_rolled < 20
    assert float(jax.jit(unrolled)(1.0)) == pytest.approx(float(jax.jit(rolled)(1.0)), rel=1e-5)


def test_jax303_dynamic_slice_in_dim_with_a_traced_size():
    assert_marked("""
    import jax
    import jax.numpy as jnp
    from jax import lax
    from jax.lax import dynamic_slice_in_dim

    @jax.jit
    def window(x, start, size):
        return lax.dynamic_slice_in_dim(x, start, size)  # expect: JAX303

    @jax.jit
    def longest(x, lengths):
        return dynamic_slice_in_dim(x, 0, slice_size=jnp.max(lengths), axis=0)  # expect: JAX303

    def prefix_sums(x):
        def body(i, acc):
            return acc + jnp.sum(lax.dynamic_slice_in_dim(x, 0, i + 1))  # expect: JAX303
        return lax.fori_loop(0, x.shape[0], body, 0.0)
    """)


def test_jax303_a_staticmethod_called_through_self_binds_no_self():
    # `self.extract(self.betas, t, x.shape)`: a staticmethod's first parameter is `a`, so `x_shape` is
    # the static `x.shape`, not the traced `t`; a traced `t[0]` passed as a size is still reported
    assert_marked("""
    import jax
    import jax.numpy as jnp

    class Diffusion:
        def __init__(self, betas):
            self.betas = betas

        @staticmethod
        def extract(a, t, x_shape):
            batch = x_shape[0]
            return jnp.reshape(jnp.take_along_axis(a, t, axis=-1), (batch, 1))

        @staticmethod
        def bad_extract(a, t, n):
            return jnp.reshape(a[t], (n, 1))  # expect: JAX303

        def p_sample(self, x, t):
            return x * self.extract(self.betas, t, x.shape) + self.bad_extract(self.betas, t, t[0])

        def sample(self, x, b):
            def body(i, img):
                t = jnp.full((b,), i, dtype=jnp.int32)
                return self.p_sample(img, t)
            return jax.lax.fori_loop(0, 10, body, x)
    """)


def test_jax303_dynamic_slice_in_dim_with_static_sizes_is_not_reported():
    assert findings("""
    from functools import partial

    import jax
    from jax import lax

    @partial(jax.jit, static_argnames="size")
    def window(x, start, size):
        return lax.dynamic_slice_in_dim(x, start, size)

    @jax.jit
    def halves(x, start):
        half = x.shape[0] // 2
        return (lax.dynamic_slice_in_dim(x, start, half),
                lax.dynamic_update_slice_in_dim(x, x[:2], start, axis=0))
    """, "JAX303") == []


def test_jax304_a_call_with_several_arguments_sliced_alike_is_one_finding():
    src = _STEP + """
    @jax.jit
    def loss(a, b, c):
        return jnp.sum(a) + jnp.sum(b) + jnp.sum(c)

    def evaluate(xs, ys, zs, bs):
        for i in range(0, len(xs), bs):
            loss(xs[i:i + bs], ys[i:i + bs], zs[i:i + bs])  # expect: JAX304 (opt-in)
    """
    assert_marked(src)
    assert len(opt_in_findings(src, "JAX304")) == 1


def test_jax303_size_from_an_array_computed_eagerly_and_closed_over_is_concrete():
    # brax's pattern: the size is a jnp array computed outside the traced function, a constant when tracing
    assert findings("""
    import jax
    import jax.numpy as jnp

    def train(num_updates, num_evals):
        updates_per_epoch = jnp.round(num_updates / num_evals)

        def epoch(state):
            return jax.lax.scan(lambda c, i: (c + i, c), state, jnp.arange(updates_per_epoch))

        return jax.pmap(epoch)
    """, "JAX303") == []


def test_jax303_size_from_a_tracer_of_the_enclosing_traced_function_is_still_reported():
    assert_marked("""
    import jax
    import jax.numpy as jnp

    @jax.jit
    def outer(x):
        n = jnp.sum(x > 0)

        def inner(y):
            return jnp.zeros(n) + y  # expect: JAX303

        return jax.vmap(inner)(x)
    """)


# --------------------------------------------------------------------------- JAX304: arrays grown in a loop (issue 39)


def test_jax304_an_array_grown_by_an_eager_join_every_iteration():
    assert_marked("""
    import jax
    import jax.numpy as jnp

    @jax.jit
    def eval_step(x):
        return jnp.mean(x), jnp.sum(x)

    def validate(loader):
        losses, accs = jnp.array([]), jnp.array([])
        for batch in loader:
            loss, acc = eval_step(batch)
            losses = jnp.append(losses, loss)  # expect: JAX304
            accs = jnp.concatenate([accs, acc[None]])  # expect: JAX304
        return losses.mean(), accs

    def log_metrics(metrics, n, state):
        for i in range(n):
            state, current = eval_step(state)
            metrics = jax.tree.map(lambda m, c: jnp.concatenate([m, c], axis=0), metrics, current)  # expect: JAX304
        return metrics

    step = jax.jit(lambda ids: ids[:, -1:] + 1)

    def generate(ids, n):
        while ids.shape[1] < n:
            ids = jnp.concatenate([ids, step(ids)], axis=1)  # expect: JAX304
        return ids

    history = jnp.zeros(0)
    for epoch in range(int(input())):                       # module-level code: a script
        history = jnp.append(history, epoch)  # expect: JAX304
    """)


def test_jax304_a_grown_array_in_code_that_may_run_under_its_callers_jit_is_opt_in():
    src = """
    import jax.numpy as jnp

    class DenseBlock:
        def __init__(self, layers):
            self.layers = layers

        def __call__(self, x):
            for layer in self.layers:
                x = jnp.concatenate([x, layer(x)], axis=-1)  # HERE
            return x
    """
    assert default_findings(src, "JAX304") == []
    ((line, code, reason),) = opt_in_findings(src, "JAX304")
    assert (line, code) == (line_of(src, "# HERE"), "JAX304")
    assert reason.startswith("eager unknown: whether the function around the loop runs under a trace of its caller")


def test_jax304_eager_generation_on_a_growing_sequence_called_from_the_entry_point():
    src = """
    import jax
    import jax.numpy as jnp

    def generate(model, tokens, max_length):
        for _ in range(max_length):
            logits = model(tokens)
            key = jax.random.key(0)
            nxt = jax.random.categorical(key, logits[0, -1])
            tokens = jnp.concatenate([tokens, nxt[None, None]], axis=1)  # HERE
            if tokens.shape[1] > 128:
                tokens = tokens[:, -128:]
        return tokens

    def tile(pos, box, tiles):
        out = pos
        for dx in range(tiles):
            for dy in range(tiles):
                out = jnp.concatenate((out, pos + box * jnp.array([[dx, dy]])))  # TILE
        return out

    def main(model, prompt, pos):
        print(generate(model, jnp.array(prompt)[None], 100), tile(pos, 2.0, 3))

    if __name__ == "__main__":
        main(None, [1, 2, 3], None)
    """
    assert default_findings(src, "JAX304") == [(line_of(src, "# HERE"), "JAX304"), (line_of(src, "# TILE"), "JAX304")]
    assert opt_in_findings(src, "JAX304") == []
    # the same function never called in this module may run under a caller's jit elsewhere: opt-in
    alone = src.split("    def tile")[0]
    assert default_findings(alone, "JAX304") == []
    ((line, code, reason),) = opt_in_findings(alone, "JAX304")
    assert line == line_of(alone, "# HERE") and reason.startswith("eager unknown: whether the function around")


def test_jax304_a_chat_loop_that_reads_each_token_on_the_host_runs_eagerly():
    # fresh set T (jaxpt's generate_chat): no caller in the module, but `int(x_next[0])` in the loop's
    # `if` test would raise under jit: the loop runs eagerly, so the growing context compiles per length
    src = """
    import jax
    import jax.numpy as jnp

    def generate_chat(model, x, stop_tokens):
        while True:
            logits = model(x)[:, -1, :]
            x_next = jnp.argmax(logits, axis=-1)
            if int(x_next[0]) in stop_tokens:
                break
            x = jnp.concatenate((x, x_next[..., None]), axis=1)  # HERE
        return x

    def logged(model, x, n, verbose):
        for _ in range(n):
            x_next = jnp.argmax(model(x)[:, -1, :], axis=-1)
            if verbose:
                print(int(x_next[0]))
            x = jnp.concatenate((x, x_next[..., None]), axis=1)  # OPT
        return x
    """
    assert default_findings(src, "JAX304") == [(line_of(src, "# HERE"), "JAX304")]
    assert [f[:2] for f in opt_in_findings(src, "JAX304")] == [(line_of(src, "# OPT"), "JAX304")]


def test_jax304_a_compiled_step_that_returns_its_argument_one_token_longer():
    # fresh set S (awesome-jax-flax-llms' GPT-2): `idx = generate_step(params, idx, ...)`, the jitted step
    # appending the sampled token: a longer `idx` at every call, so a compile per token
    assert_marked("""
    from functools import partial
    import jax
    import jax.numpy as jnp

    @partial(jax.jit, static_argnums=(2,))
    def generate_step(params, idx, block_size, rng_key=None):
        logits = params @ idx[:, -block_size:].T
        sample = jax.random.categorical(rng_key, logits, axis=-1)
        return jnp.concatenate([idx, sample[:, None]], axis=1)

    @jax.jit
    def fixed_step(params, buf, i, rng_key):
        sample = jax.random.categorical(rng_key, params @ buf.T, axis=-1)
        return buf.at[:, i].set(sample[0])

    def generate(params, idx, key, max_new_tokens):
        for _ in range(max_new_tokens):
            key, sub = jax.random.split(key)
            idx = generate_step(params, idx, 256, rng_key=sub)  # expect: JAX304
        buf = jnp.zeros((1, max_new_tokens), jnp.int32)
        for i in range(max_new_tokens):
            key, sub = jax.random.split(key)
            buf = fixed_step(params, buf, jnp.int32(i), sub)
        return idx, buf
    """)


def test_jax304_joins_that_do_not_grow_across_iterations_are_not_reported():
    assert findings("""
    import jax
    import jax.numpy as jnp

    def window(x, n, every):
        for i in range(n):
            x = jnp.concatenate([x, x[-1:]])[-10:]   # a window of fixed size
        for i in range(n):
            buf = jnp.zeros(0)                        # reset in each iteration
            buf = jnp.concatenate([buf, x])
        for i in range(3):
            x = jnp.concatenate([x, x])               # a few literal iterations
        for i in range(n):
            x = jnp.concatenate([x, x[:1]])           # one compile next to a whole program per iteration
            x = jax.lax.scan(lambda c, _: (c * 2, None), x, None, length=1000)[0]
        for i in range(n):
            if i % every == 0:
                x = jnp.concatenate([x, x[:1]])       # once per period, not per iteration
        for i in range(n):
            y = jnp.concatenate([x, x])               # a new name each time, from a fixed x
        rows = []
        for i in range(n):
            rows.append(x)                            # the fix: a list, joined once
        return jnp.concatenate(rows), y, buf

    @jax.jit
    def traced(x):
        for i in range(4):
            x = jnp.concatenate([x, x])               # unrolled at trace time: shapes are static
        return x
    """, "JAX304") == []


def test_jax304_an_eager_join_compiles_again_for_every_new_length():
    """Under jax: growing an array by one element per iteration compiles the eager concatenation
    once per iteration; joining a list once compiles it once."""
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp

    compiles = []

    def listener(event, duration, **kwargs):
        if event == "/jax/core/compile/backend_compile_duration":
            compiles.append(duration)

    jax.monitoring.register_event_duration_secs_listener(listener)
    try:
        piece = jnp.ones(1, dtype=jnp.float32)
        grown = jnp.zeros(0, dtype=jnp.float32)
        jnp.concatenate([grown, piece])  # the first shapes, compiled before counting
        start = len(compiles)
        for _ in range(12):
            grown = jnp.concatenate([grown, piece])
        per_iteration = len(compiles) - start
        start = len(compiles)
        jnp.concatenate([piece] * 12)
        once = len(compiles) - start
    finally:
        getattr(jax.monitoring, "unregister_event_duration_listener", lambda cb: None)(listener)
    assert grown.shape == (12,)
    assert per_iteration >= 11 and once <= 1


_JAX305_LAYERS = """
    import jax
    import jax.numpy as jnp

    @jax.jit
    def relu(x):
        return jnp.maximum(0, x)

    @jax.jit
    def predict(model, x, n_steps):
        n = len(model)
        mid = n // 2
        for i in range({bound}):
            weight, bias = model[i]
            x = relu(jnp.dot(weight, x) + bias)
        return x
"""


def test_jax305_a_pass_over_a_models_layers_is_not_an_unrolled_step_loop():
    # fresh AM's U-Net: `for i in range(0, mid)` with `mid = len(model) // 2`, indexing `model[i]`: as many
    # copies as the model has layers, which is what a forward pass is
    for bound in ("0, mid", "n", "len(model)"):
        src = _JAX305_LAYERS.replace("{bound}", bound)
        assert check_source(textwrap.dedent(src), "t.py", [UnrolledLoopInTracedCode()]).findings == [], bound


def test_jax305_a_step_count_bound_still_unrolls_its_iterations():
    src = _JAX305_LAYERS.replace("{bound}", "n_steps").replace("model[i]", "model[0]")
    got = check_source(textwrap.dedent(src), "t.py", [UnrolledLoopInTracedCode()]).findings
    assert [f.line for f in got] == [line_of(src, "for i in range")] and "feeds the jitted `relu`" in got[0].message


def test_model_walked_structure_names_the_structure_a_loop_indexes_by_its_counter():
    import ast

    from jaxlint.model import build_model
    from jaxlint.model.facts import hostvalues

    for bound, walked in (("0, mid", "model"), ("len(model)", "model"), ("n_steps", None)):
        m = build_model(ast.parse(textwrap.dedent(_JAX305_LAYERS.replace("{bound}", bound))))
        f = next(fn for fn in m.functions if fn.name == "predict")
        loop = f.loops[0].node
        assert hostvalues.walked_structure(m, loop, loop.iter.args, f.scope) == walked, bound
