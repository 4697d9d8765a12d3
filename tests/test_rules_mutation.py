"""Tests of the mutation rules: JAX401, JAX402, JAX403.

Positive cases mark every line where a finding is expected with ``# expect: CODE`` (as the
fixtures do) and compare the engine's findings of *all* rules with those marks, so a case
also fails when another rule fires on it.
"""

from __future__ import annotations

import os
import textwrap

import pytest

import jaxlint_rules
from jaxlint_rules.mutation import DiscardedFunctionalUpdate, InplaceItemAssignment
from jaxlint_rules.removed_api import RemovedIndexUpdateApi
from ruletools import assert_marked, findings, messages, opt_in_findings

RULES = [InplaceItemAssignment, RemovedIndexUpdateApi, DiscardedFunctionalUpdate]


def assert_clean(src: str) -> None:
    assert findings(src) == []


# --------------------------------------------------------------------------- the rules' own examples


def test_rules_are_registered():
    codes = {r.code for r in jaxlint_rules.ALL_RULES}
    assert {"JAX401", "JAX402", "JAX403"} <= codes
    assert jaxlint_rules.RULES_BY_CODE["JAX401"].name == "inplace-item-assignment"
    assert jaxlint_rules.RULES_BY_CODE["JAX402"].name == "removed-index-update-api"
    assert jaxlint_rules.RULES_BY_CODE["JAX403"].name == "discarded-functional-update"


# --------------------------------------------------------------------------- JAX401 positives


def test_jax401_assign_aug_and_del_on_jnp_arrays():
    assert_marked("""
    import jax.numpy as jnp

    def build(n):
        x = jnp.zeros(n)
        x[0] = 1.0  # expect: JAX401
        x[1:3] += 2.0  # expect: JAX401
        x[-1] *= 0.5  # expect: JAX401
        del x[2]  # expect: JAX401
        return x

    table = jnp.ones((4, 4))
    table[0, 0] = 7.0  # expect: JAX401
    """)


def test_jax401_numpy_branch_of_a_function_written_for_both_libraries():
    assert_marked("""
    import jax
    import jax.numpy as jnp
    import numpy as np

    def pairwise(x, use_jax=True):
        _np = jnp if use_jax else np
        d = _np.square(x).sum(-1)
        if use_jax:
            d = jax.nn.relu(d)
        else:
            d[d < 0] = 0  # the NumPy arm: `d` is the NumPy result bound before the if
        return d

    def always_jax(x, flag):
        d = jnp.square(x).sum(-1)
        if flag:
            d = jax.nn.relu(d)
        else:
            d[d < 0] = 0  # expect: JAX401
        return d
    """)


def test_jax401_arrays_derived_from_arrays():
    assert_marked("""
    import jax
    import jax.numpy as jnp

    def f(key, a):
        y = jnp.eye(3).at[0, 0].set(2.0)
        y[1, 1] = 3.0  # expect: JAX401
        z = jnp.arange(6).reshape(2, 3) * 2
        z[0] = 0  # expect: JAX401
        q, r = jnp.linalg.qr(jnp.eye(3))
        q[0] = 0.0  # expect: JAX401
        k1, k2 = jax.random.split(key)
        noise = jax.random.normal(k1, (3,))
        noise += 1.0
        noise[0] = 0.0  # expect: JAX401
        row = y[0]
        row[1] = 5.0  # expect: JAX401
        dup = z.copy()
        dup[1] = 1  # expect: JAX401
        return y, z, q, noise, row, dup
    """)


def test_jax401_tracer_parameters_used_as_arrays():
    assert_marked("""
    import jax
    import jax.numpy as jnp

    @jax.jit
    def zero_first_column(x):
        x[:, 0] = 0.0  # expect: JAX401
        return x

    @jax.jit
    def clamp_first(x, lo):
        n = x.shape[0]
        x[0] = jnp.maximum(x[0], lo)  # expect: JAX401
        return x * n

    @jax.jit
    def bump(x):
        x[1] += 1  # expect: JAX401
        return x.reshape(-1)

    def body(i, acc):
        acc[i] = i * 2.0  # expect: JAX401
        return jnp.sum(acc) + acc

    out = jax.lax.fori_loop(0, 3, body, jnp.zeros(3))
    """)


def test_jax401_matmul_and_array_methods_of_pytree_leaves():
    assert_marked("""
    import jax
    import jax.numpy as jnp

    @jax.jit
    def logits(params, x):
        h = (x @ params["w"]).mean(axis=0)
        out = h @ params["out"]
        out[0] = -jnp.inf  # expect: JAX401
        return out
    """)


def test_jax401_in_a_closure_and_a_loop():
    assert_marked("""
    import jax.numpy as jnp

    def make(n):
        buf = jnp.zeros(n)

        def push(i, v):
            buf[i] = v  # expect: JAX401

        for i in range(n):
            push(i, float(i))
        return buf
    """)


def test_jax401_messages_name_the_functional_form():
    src = """
    import jax.numpy as jnp

    x = jnp.zeros((3, 3))
    x[0, 1] = 2.0
    x[1] += 1.0
    del x[0]
    """
    msgs = messages(src, "JAX401")
    assert "`x = x.at[0, 1].set(...)`" in msgs[0]
    assert "`x = x.at[1].add(v)` for +=" in msgs[1] and ".multiply" in msgs[1] and ".divide" in msgs[1]
    assert "no functional `.at[]` form" in msgs[2]


def test_jax401_floor_division_and_modulo_messages_say_what_to_do():
    """`.at[]` has no floor_divide or mod: the message spells the `.set()` that does it."""
    src = """
    import jax.numpy as jnp

    x = jnp.zeros((3, 3))
    x[0] //= 2
    x[i, 1] %= n
    x[2] |= 1
    x[1] += 1.0
    """
    msgs = messages(src, "JAX401")
    assert msgs[0] == ("JAX arrays are immutable: `x[0] //= ...` raises TypeError, and `.at[]` has no method for "
                       "`//`; compute the new value and set it: `x = x.at[0].set(x[0] // v)`")
    assert msgs[1].endswith("no method for `%`; compute the new value and set it: `x = x.at[i, 1].set(x[i, 1] % v)`")
    assert msgs[2].endswith("`x = x.at[2].set(x[2] | v)`")
    # the operators with an `.at[]` method keep their message, byte for byte
    assert msgs[3] == ("JAX arrays are immutable: augmented assignment to `x[1]` raises TypeError; use "
                       "`x = x.at[1].add(v)` for +=, `.add(-v)` for -=, `.multiply(v)`, `.divide(v)`, `.power(v)` "
                       "for *=, /=, **=")


# --------------------------------------------------------------------------- JAX401 near misses


def test_jax401_numpy_copies_are_mutable():
    assert_clean("""
    import jax
    import jax.numpy as jnp
    import numpy as np

    def to_host(y):
        x = np.asarray(jnp.tanh(y))
        x[0] = 1.0
        z = jax.device_get(jnp.ones(3))
        z[1] += 2.0
        w = np.array(jnp.zeros((2, 2)))
        w[:, 0] = 5.0
        del_me = np.zeros(3)
        return x, z, w, del_me
    """)


def test_jax401_pytrees_returned_by_jitted_functions():
    assert_clean("""
    import jax
    import jax.numpy as jnp

    @jax.jit
    def train_step(params, batch):
        grads = jax.tree_util.tree_map(lambda p: p * jnp.mean(batch), params)
        return jax.tree_util.tree_map(lambda p, g: p - 0.1 * g, params, grads)

    @jax.jit
    def split_heads(x):
        return [x[:, :4], x[:, 4:]]

    def train(params, batches, x):
        for batch in batches:
            params = train_step(params, batch)
            params["w"] = params["w"] * 0.5
            key = "b"
            params[key] = jnp.zeros(3)
        heads = split_heads(x)
        heads[0] = heads[1]
        grads = jax.grad(lambda p: jnp.sum(p["w"]))(params)
        grads["w"] = jnp.clip(grads["w"], -1, 1)
        return params, heads, grads
    """)


def test_jax401_containers_of_arrays_are_mutable():
    assert_clean("""
    import jax
    import jax.numpy as jnp

    def stack_layers(x, n):
        outs = [jnp.zeros(3)] * n
        outs[0] = x
        parts = jnp.split(x, 3)
        parts[0] = parts[0] * 2
        first, *rest = jnp.split(x, 3)
        rest[0] = first
        cache = {}
        cache[0] = jnp.ones(3)
        stats = {"mean": jnp.mean(x)}
        stats["mean"] += 1.0
        quot = jnp.polydiv(x, jnp.ones(2))
        quot[0] = x
        copied = {"w": x}.copy()
        copied[0] = x
        return outs, parts, rest, cache, stats, quot, copied
    """)


def test_jax401_tracer_parameters_that_may_be_containers():
    assert_clean("""
    import jax
    import jax.numpy as jnp

    @jax.jit
    def update(params, grads, xs):
        params["w"] = params["w"] - grads["w"]
        for k in ("b", "c"):
            params[k] = params[k] * 0.9
        xs[0] = xs[1]
        return params, xs

    def scan_body(carry, x):
        carry[0] = carry[0] + x
        return carry, None

    out = jax.lax.scan(scan_body, [jnp.zeros(3)], jnp.ones((4, 3)))
    """)


def test_jax401_refs_and_nnx_variables_are_mutable():
    assert_clean("""
    import jax
    import jax.numpy as jnp
    from flax import nnx

    def accumulate(xs):
        ref = jax.new_ref(jnp.zeros(3))
        for x in xs:
            ref[...] += x
        count = nnx.Variable(jnp.zeros(()))
        count[...] = count[...] + 1
        return ref[...], count

    def kernel(x_ref, o_ref):
        o_ref[...] = x_ref[...] * 2.0
    """)


def test_jax401_pallas_kernels_behind_a_decorator_or_a_partial_are_refs():
    # issue 37: a kernel wrapped in jax.named_call and handed to pallas_call through
    # functools.partial writes refs in place: no finding
    assert_clean("""
    import functools
    import jax
    from jax.experimental import pallas as pl

    @functools.partial(jax.named_call, name="scale_kernel")
    def kernel(x_ref, o_ref, *, scale):
        o_ref[...] = x_ref[...] * scale

    def run(x):
        return pl.pallas_call(functools.partial(kernel, scale=2.0),
                              out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x)
    """)


def test_jax401_under_a_pass_through_transform_called_elsewhere_is_opt_in():
    # traced only by jax.named_call and called nowhere in the module: its parameters may be refs
    # (handed to pallas_call in another module), so the immutable-array fact is unknown; called
    # here with arrays, it is proven
    src = """
    import functools
    import jax
    import jax.numpy as jnp

    @functools.partial(jax.named_call, name="kernel")
    def kernel(x_ref, o_ref):
        o_ref[...] = x_ref[...] + 1  # expect: JAX401 (opt-in)

    @functools.partial(jax.named_call, name="update")
    def update(x, y):
        x[0, :] = y[0, :]  # expect: JAX401
        return x

    def main():
        return update(jnp.zeros((2, 2)), jnp.ones((2, 2)))
    """
    assert_marked(src)
    assert [why for _, code, why in opt_in_findings(src)] == [
        "immutable-array unknown: `o_ref` is a parameter of `kernel`, traced only under jax.named_call and "
        "called nowhere in this module: it may be a Pallas or state ref, which is written in place"]


# --------------------------------------------------------------------------- JAX402 positives


def test_jax402_calls_and_index_helper():
    assert_marked("""
    import jax
    import jax.numpy as jnp

    def f(x, v):
        x = jax.ops.index_update(x, jax.ops.index[0], v)  # expect: JAX402
        x = jax.ops.index_add(x, jax.ops.index[1:], 1.0)  # expect: JAX402
        x = jax.ops.index_mul(x, 2, 3.0)  # expect: JAX402
        x = jax.ops.index_min(x, jax.ops.index[:, 0], v)  # expect: JAX402
        return jax.ops.index_max(x, 0, v)  # expect: JAX402
    """)


def test_jax402_through_aliases():
    assert_marked("""
    import jax
    import jax.numpy as jnp
    from jax import ops
    from jax.ops import index_add, index_update as upd
    from jax.ops import index

    set_item = jax.ops.index_update

    def f(x, v):
        x = ops.index_update(x, ops.index[0], v)  # expect: JAX402
        x = index_add(x, index[2], v)  # expect: JAX402
        x = upd(x, 1, v)  # expect: JAX402
        return set_item(x, 3, v)  # expect: JAX402
    """)


def test_jax402_index_helper_on_its_own():
    assert_marked("""
    import jax
    import jax.numpy as jnp

    HEAD = jax.ops.index[:2]  # expect: JAX402

    def g(x):
        idx = jax.ops.index[1, :]  # expect: JAX402
        return x[idx]
    """)


def test_jax402_evidence_and_a_project_pinned_before_the_removal(tmp_path):
    """JAX402 asks the project's declared JAX as JAX404 does: `jax.ops.index_update` exists up to 0.3.1 (read from
    JAX's tags), so a project pinning `jax<0.3.2` gets an opt-in finding naming the pin; with no declaration current
    JAX is assumed, and the evidence says so."""
    from jaxlint.engine import check_path
    import jaxlint_rules
    from ruletools import make_project

    src = "import jax\n\ndef reset(x):\n    return jax.ops.index_update(x, 0, 0.0)\n"

    def found(root):
        res = check_path(str(root / "m.py"), [r() for r in jaxlint_rules.ALL_RULES])
        return [(f.line, f.opt_in, f.evidence) for f in res.findings if f.code == "JAX402"]

    pinned = make_project(tmp_path / "a", {"requirements.txt": "jax==0.2.28\n", "m.py": src})
    ((line, opt_in, evidence),) = found(pinned)
    assert line == 4 and opt_in.startswith("reaches disproven: ") and "0.3.2" in opt_in
    bare = make_project(tmp_path / "b", {"m.py": src})
    ((line, opt_in, evidence),) = found(bare)
    assert opt_in is None
    assert evidence[0] == "removed (proven): `jax.ops.index_update` is JAX's (through the module's imports), removed in JAX 0.3.2"
    assert evidence[1].startswith("reaches (proven): ") and "current JAX assumed" in evidence[1]


def test_jax402_message_spells_the_at_form():
    msgs = messages("""
    import jax

    def f(x, v):
        return jax.ops.index_add(x, jax.ops.index[1:, 0], v)
    """, "JAX402")
    assert msgs == ["`jax.ops.index_add` was removed in JAX 0.3.2: on current JAX looking it up raises AttributeError; "
                    "use `x.at[1:, 0].add(v)`"]


def test_jax402_message_says_how_each_spelling_fails():
    """A name imported from jax.ops fails at the import (ImportError); an attribute of jax.ops, or
    an alias assigned from one, fails at the lookup (AttributeError)."""
    msgs = messages("""
    import jax
    from jax import ops
    from jax.ops import index_add, index_update as upd
    from jax.ops import index

    set_item = jax.ops.index_update
    HEAD = index[:2]

    def f(x, v):
        x = ops.index_update(x, ops.index[0], v)
        x = index_add(x, 2, v)
        x = upd(x, 1, v)
        return set_item(x, 3, v)
    """, "JAX402")
    assert msgs == [
        "`jax.ops.index` was removed in JAX 0.3.2: on current JAX `from jax.ops import index` raises ImportError; "
        "index through `.at` instead: `x.at[:2].set(v)`",
        "`jax.ops.index_update` was removed in JAX 0.3.2: on current JAX looking it up raises AttributeError; "
        "use `x.at[0].set(v)`",
        "`jax.ops.index_add` was removed in JAX 0.3.2: on current JAX `from jax.ops import index_add` raises "
        "ImportError; use `x.at[2].add(v)`",
        "`jax.ops.index_update` was removed in JAX 0.3.2: on current JAX `from jax.ops import index_update` raises "
        "ImportError; use `x.at[1].set(v)`",
        "`jax.ops.index_update` was removed in JAX 0.3.2: on current JAX looking it up raises AttributeError; "
        "use `x.at[3].set(v)`",
    ]


# --------------------------------------------------------------------------- JAX402 near misses


def test_jax402_current_api_and_other_ops_modules():
    assert_clean("""
    import jax
    import jax.numpy as jnp
    import mylib.ops as ops
    from mylib.ops import index_update

    def f(x, v, seg):
        x = x.at[0].set(v)
        x = ops.index_update(x, ops.index[0], v)
        x = index_update(x, 0, v)
        s = jax.ops.segment_sum(x, seg, num_segments=4)
        return x, s
    """)


def test_jax402_local_names_shadowing_the_import():
    assert_clean("""
    import jax.numpy as jnp
    from jax.ops import segment_max

    def index_update(x, idx, v):
        return x.at[idx].set(v)

    def f(x, v, seg):
        index = {0: slice(None)}
        return index_update(x, index[0], v), segment_max(x, seg, num_segments=2)
    """)


# --------------------------------------------------------------------------- JAX403 positives


def test_jax403_each_update_method():
    assert_marked("""
    import jax.numpy as jnp

    def f(x, i, v):
        x.at[i].set(v)  # expect: JAX403
        x.at[i].add(v)  # expect: JAX403
        x.at[i].subtract(v)  # expect: JAX403
        x.at[i].multiply(v)  # expect: JAX403
        x.at[i].divide(v)  # expect: JAX403
        x.at[i].power(2)  # expect: JAX403
        x.at[i].min(v)  # expect: JAX403
        x.at[i].max(v)  # expect: JAX403
        x.at[i].apply(jnp.sin)  # expect: JAX403
        return x
    """)


def test_jax403_in_traced_code_and_lax_bodies():
    assert_marked("""
    import jax
    import jax.numpy as jnp

    @jax.jit
    def reset(state, done):
        state.at[done].set(0.0)  # expect: JAX403
        return state

    def body(i, acc):
        acc.at[i].add(1.0)  # expect: JAX403
        return acc

    out = jax.lax.fori_loop(0, 4, body, jnp.zeros(4))
    """)


def test_jax403_attributes_and_nested_receivers():
    assert_marked("""
    import jax.numpy as jnp

    class Buffer:
        def __init__(self, n):
            self.data = jnp.zeros((n, 2))

        def write(self, i, v):
            self.data.at[i].set(v)  # expect: JAX403
            self.data[0].at[1].set(v)  # expect: JAX403

    def f(bufs, i, v):
        bufs["a"].at[i, :].set(v)  # expect: JAX403
    """)


def test_jax403_in_loops_with_keywords():
    assert_marked("""
    import jax.numpy as jnp

    def scatter(x, idx, vals):
        for j in range(len(vals)):
            x.at[idx[j]].set(vals[j], mode="drop")  # expect: JAX403
        while x.sum() > 0:
            x.at[0].add(-1.0, indices_are_sorted=True)  # expect: JAX403
            break
        return x
    """)


def test_jax403_message_shows_the_assignment():
    msgs = messages("""
    import jax

    def f(x, i, v):
        x.at[i].add(v)
        return x
    """, "JAX403")
    assert msgs == [("`.at[].add()` returns a new array and leaves `x` unchanged (JAX arrays are immutable); "
                     "assign it back: `x = x.at[i].add(v)`")]


# --------------------------------------------------------------------------- JAX403 near misses


def test_jax403_used_results():
    assert_clean("""
    import jax
    import jax.numpy as jnp

    def f(x, i, v, out):
        x = x.at[i].set(v)
        y = x.at[i].add(v) * 2
        out.append(x.at[0].multiply(v))
        print(x.at[i].get())
        x.at[i].get()
        return x.at[i].max(v), [x.at[i].min(v)], lambda: x.at[i].set(0)
    """)


def test_jax403_mutable_refs():
    assert_clean("""
    import jax
    import jax.numpy as jnp

    def kernel(x_ref, o_ref, acc_refs):
        o_ref.at[0].set(x_ref[0] * 2.0)
        acc_refs[0].at[1:].add(x_ref[1:])

    class Tile:
        def write(self, v):
            self.out_ref.at[0].set(v)

    def run(x):
        ref = jax.new_ref(jnp.zeros(3))
        ref.at[0].set(1.0)
        return ref[...]
    """)


def test_jax403_numpy_and_pandas_at():
    assert_clean("""
    import jax
    import numpy as np

    def f(a, idx, df):
        np.add.at(a, idx, 1)
        np.maximum.at(a, idx, 0)
        df.at[0, "col"] = 1.0
        df.loc[0, "col"] = 2.0
        return a, df
    """)


def test_jax403_set_methods_of_other_objects():
    assert_clean("""
    import jax

    def f(cfg, counter, seen):
        cfg.at("lr").set(1e-3)
        counter.set(1)
        seen.add(3)
        cfg.options["a"].set(2)
    """)


# --------------------------------------------------------------------------- runtime truth (jax 0.10.2)


@pytest.fixture(scope="module")
def jax():
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    return pytest.importorskip("jax")


def _run(src: str) -> dict:
    ns: dict = {}
    exec(compile(textwrap.dedent(src), "<rule example>", "exec"), ns)
    return ns


def test_runtime_jax401_item_assignment_raises(jax):
    ns = _run(InplaceItemAssignment.bad)
    jnp = jax.numpy
    with pytest.raises(TypeError, match="immutable"):
        ns["one_hot"](jnp.array([0, 2]), 3)
    x = jnp.zeros(3)
    with pytest.raises(TypeError, match="immutable"):
        x[0] += 1
    with pytest.raises(AttributeError, match="__delitem__"):
        del x[0]
    fixed = _run(InplaceItemAssignment.good)
    assert fixed["one_hot"](jnp.array([0, 2]), 3).tolist() == [[1.0, 0.0, 0.0], [0.0, 0.0, 1.0]]


def test_runtime_jax402_index_update_is_gone(jax):
    ns = _run(RemovedIndexUpdateApi.bad)
    with pytest.raises(AttributeError):
        ns["reset_first"](jax.numpy.ones(3))
    with pytest.raises(ImportError):
        exec("from jax.ops import index_add", {})
    for name in ("index_update", "index_add", "index_mul", "index_min", "index_max", "index"):
        assert not hasattr(jax.ops, name)
    fixed = _run(RemovedIndexUpdateApi.good)
    assert fixed["reset_first"](jax.numpy.ones(3)).tolist() == [0.0, 1.0, 1.0]


def test_runtime_jax403_discarded_update_leaves_array_unchanged(jax):
    jnp = jax.numpy
    x = jnp.zeros(3)
    x.at[0].set(5)
    assert x.tolist() == [0.0, 0.0, 0.0]
    ns = _run(DiscardedFunctionalUpdate.bad)
    logits = jnp.zeros((2, 3))
    assert ns["mask_padding"](logits, [1, 2]).tolist() == logits.tolist()  # nothing masked
    fixed = _run(DiscardedFunctionalUpdate.good)
    assert fixed["mask_padding"](logits, [1, 2]).tolist()[0][1:] == [-float("inf")] * 2


def test_jax403_a_jax_numpy_call_whose_result_is_dropped():
    assert_marked("""
    import jax.numpy as jnp
    import numpy as np

    def losses(d, m):
        jnp.nan_to_num(d, copy=False)  # expect: JAX403
        jnp.fill_diagonal(m, 0.0, inplace=False)  # expect: JAX403
        np.nan_to_num(m, copy=False)  # NumPy does change `m`
        jnp.save("d.npy", d)  # written to a file: done for its effect
        jnp.zeros(1)  # no variable it could have meant to change: starts the backend
        try:
            jnp.linalg.cholesky(m)  # called to see whether it raises
        except ValueError:
            pass
        jnp.broadcast_shapes(d, m)  # makes no array: checks that the shapes fit
        d = jnp.nan_to_num(d)
        return jnp.mean(d)

    jnp.sum(jnp.ones(3))  # module level: a notebook cell's displayed value

    def test_rejects_strings(d):
        jnp.nan_to_num(d, copy=False)  # in a test: expected to raise, or to run
    """)
    assert "`d = jnp.nan_to_num(d, copy=False)`" in messages("""
    import jax.numpy as jnp

    def f(d):
        jnp.nan_to_num(d, copy=False)
        return d
    """, "JAX403")[0]



def test_jax401_an_assignment_whose_error_is_caught_is_opt_in():
    # a tutorial showing immutability: the TypeError is caught and printed (six such findings on the
    # review sets, all judged HARMLESS); an except of another class, or one around the def of a
    # function that assigns later, catches nothing
    src = """
    import jax.numpy as jnp

    x = jnp.zeros(3)
    try:
        x[0] = 1.0  # expect: JAX401 (opt-in)
    except TypeError as e:
        print(e)
    try:
        x[1] = 2.0  # expect: JAX401
    except ValueError:
        pass

    def f():
        try:
            def g():
                x[2] = 3.0  # expect: JAX401
            g()
        except Exception:
            pass

    try:
        try:
            del x[0]  # expect: JAX401 (opt-in)
        except KeyError:
            pass
    except (AttributeError, KeyError):
        pass
    """
    assert_marked(src)


# --------------------------------------------------------------------------- JAX403: a discarded state.replace


def test_jax403_a_discarded_replace_of_a_flax_train_state():
    """Fresh set AX (a NeRF): `state.replace(rngs=...)` as a statement in the jitted step, after `state =
    state.apply_gradients(...)`: flax's TrainState is frozen, so the new keys are lost and every step samples
    with the same ones. Also a parameter annotated with a TrainState subclass, a `TrainState.create` result,
    a `flax.struct.dataclass` and a `PyTreeNode`."""
    assert_marked("""
    import jax
    from flax import struct
    from flax.training import train_state

    class TrainState(train_state.TrainState):
        rngs: jax.Array = None

    @struct.dataclass
    class Carry:
        step: int

    class Node(struct.PyTreeNode):
        count: int

    @jax.jit
    def train_step(state, grads):
        state = state.apply_gradients(grads=grads)
        state.replace(rngs=jax.random.split(state.rngs[1]))  # expect: JAX403
        return state

    def bump(state: TrainState, carry: Carry, node: Node):
        state.replace(step=state.step + 1)  # expect: JAX403
        carry.replace(step=carry.step + 1)  # expect: JAX403
        node.replace(count=node.count + 1)  # expect: JAX403
        return state

    def make(apply_fn, params, tx):
        state = TrainState.create(apply_fn=apply_fn, params=params, tx=tx)
        state.replace(rngs=None)  # expect: JAX403
        return state
    """)


def test_jax403_replace_near_misses():
    """Not reported: the result used, a string's `replace` (positional arguments), an object of unknown type,
    a class of the module with its own (mutating) `replace`, a notebook's top-level value."""
    assert_clean("""
    import jax

    class Config:
        def replace(self, **kw):
            self.__dict__.update(kw)
            return self

    def f(state, text, cfg: Config, other):
        state = state.apply_gradients(grads=None)
        state = state.replace(step=1)
        new = state.replace(step=2)
        text.replace("a", "b")
        cfg.replace(lr=0.1)
        other.replace(step=3)
        return state, new
    """)


def test_jax403_replace_message_and_fix(tmp_path, capsys):
    src = textwrap.dedent("""
    import jax

    @jax.jit
    def train_step(state, grads):
        state = state.apply_gradients(grads=grads)
        state.replace(rngs=jax.random.split(state.rngs[1]))
        return state
    """)
    (msg,) = messages(src, "JAX403")
    assert msg.startswith("`state.replace(...)` returns a new object and leaves `state` unchanged")
    assert "so the update is lost; assign it: `state = state.replace(rngs=jax.random.split(" in msg
    from jaxlint.cli import main

    p = tmp_path / "m.py"
    p.write_text(src)
    main(["check", "--no-cache", "--fix", "--select", "JAX403", str(p)])
    assert "\n    state = state.replace(rngs=jax.random.split(state.rngs[1]))\n" in p.read_text()


def test_runtime_a_train_state_replace_changes_nothing():
    pytest.importorskip("flax")
    import jax.numpy as jnp
    import optax
    from flax.training import train_state

    state = train_state.TrainState.create(apply_fn=None, params={"w": jnp.ones(2)}, tx=optax.sgd(0.1))
    state.replace(step=5)
    assert int(state.step) == 0
    assert int(state.replace(step=5).step) == 5
