"""NumPy arrays indexed with a JAX value in a step loop (NumPy copies the index to the host and waits
for the device): the model's proof that a value is a NumPy array (jaxlint/model/facts/hostarrays.py)
and JAX201's findings on such subscripts."""

from __future__ import annotations

import ast
import textwrap

import pytest

from jaxlint.model import build_model
from jaxlint.model.facts import hostarrays
from ruletools import assert_marked, default_findings, make_project, messages, path_default_codes


def _numpy(src: str, expr: str) -> bool:
    """Whether the expression ``expr``, read on the last line of ``src`` (inside ``def f``), is proven NumPy."""
    text = textwrap.dedent(src) + f"    probe = {expr}\n"
    tree = ast.parse(text)
    m = build_model(tree)
    f = next(fn for fn in m.functions if fn.name == "f")
    node = f.node.body[-1].value
    return hostarrays.numpy_array(m, node, f.scope)


_HEAD = """
import jax
import jax.numpy as jnp
import numpy as np
import tensorflow_datasets as tfds

def load():
    images, labels = tfds.as_numpy(tfds.load("mnist", split="train", batch_size=-1, as_supervised=True))
    return {"image": images, "label": labels}, {"image": images[:100], "label": labels[:100]}

def f(path, arr, flag):
    x = np.load(path)
    y = np.asarray(arr)
    train, test = load()
    z = y if flag else np.zeros(3)
    t = arr.numpy()
    d = jnp.asarray(x)
    w = jax.device_put(np.asarray(arr))
    mixed = x if flag else d
    stored = {"a": x}
"""


@pytest.mark.parametrize("expr", ["x", "y[3:]", "train['image']", "test['label']", "z", "t", "x.copy()",
                                  "stored['a']", "np.arange(4)", "x.reshape(-1)"])
def test_model_numpy_arrays_are_proven_through_names_returns_and_keys(expr):
    assert _numpy(_HEAD, expr)


@pytest.mark.parametrize("expr", ["arr", "d", "w", "mixed", "train", "stored['b']", "load()", "path",
                                  "np.shape(x)", "jnp.zeros(3)", "unknown_loader()"])
def test_model_values_not_proven_numpy(expr):
    assert not _numpy(_HEAD, expr)


def test_model_a_name_rebound_to_a_device_array_in_one_branch_is_not_proven():
    src = """
    import jax.numpy as jnp
    import numpy as np

    def f(path, flag):
        data = np.load(path)
        if flag:
            data = jnp.asarray(data)
    """
    assert not _numpy(src, "data")


_KERAS = """
import jax.numpy as jnp
import numpy as np
from tensorflow.keras.datasets import fashion_mnist

def f(scale, dev):
    (x_train, y_train), (x_test, y_test) = fashion_mnist.load_data()
    x_train = x_train.astype("float32") / 255.
    flat = x_train.reshape((len(x_train), np.prod(x_train.shape[1:])))
    shifted = -1.0 + flat * 2
    scaled = flat * scale
    on_device = flat + dev
    grown = np.zeros(3)
    grown = grown + jnp.ones(3)
"""


@pytest.mark.parametrize("expr, numpy", [
    ("x_train", True),  # Keras's load_data gives NumPy arrays; rebound to itself scaled by a number
    ("y_test", True),
    ("flat", True),
    ("shifted", True),  # arithmetic with numbers keeps a NumPy array
    ("scaled", False),  # times a parameter: a JAX value would make it one
    ("on_device", False),
    ("grown", False),  # a self-rebinding that adds a JAX array is not NumPy, whatever the first binding
])
def test_model_keras_datasets_and_arithmetic_with_numbers(expr, numpy):
    # fresh AD: a notebook's ``x_train_standard[permutation[...]]`` per step, the data from Keras's fashion_mnist
    assert _numpy(_KERAS, expr) is numpy


def test_model_a_function_of_another_module_that_returns_numpy(tmp_path):
    root = make_project(tmp_path, {
        "data.py": """
            import numpy as np

            def _split(ds):
                return {"x": np.concatenate([ds["x"][:10], ds["x"][20:]])}, {"x": ds["x"][10:20]}

            def load_split(path):
                a, b = _split({"x": np.load(path)})
                return a, b
        """,
        "train.py": """
            import jax
            import numpy as np
            from data import load_split

            @jax.jit
            def step(state, x):
                return state + x.sum()

            def train(state, key, n, bs, path):
                first, second = load_split(path)
                for epoch in range(n):
                    perm = jax.random.permutation(jax.random.fold_in(key, epoch), 1000).reshape((-1, bs))
                    for i in range(perm.shape[0]):
                        state = step(state, first["x"][perm[i]])
                return state
        """,
    })
    assert path_default_codes(root / "train.py") == [(15, "JAX201")]


# --------------------------------------------------------------------------- JAX201 on such subscripts

_LOOP = """
import jax
import jax.numpy as jnp
import numpy as np

@jax.jit
def step(state, x, y):
    return state + (x * y).sum()

def train(state, key, n_epochs, batch_size, path):
    images = np.load(path + "/x.npy")
    labels = np.load(path + "/y.npy")
    for epoch in range(n_epochs):
        batch_ix = jax.random.permutation(jax.random.fold_in(key, epoch), images.shape[0])
        batch_ix = batch_ix.reshape((-1, batch_size))
        for i in range(batch_ix.shape[0]):
            p = batch_ix[i, :]
            x = images[p, ...]  # expect: JAX201
            y = labels[p]
            state = step(state, x, y)
    return state
"""


def test_jax201_numpy_data_indexed_with_a_device_permutation_every_step():
    # reported once per index and loop: ``labels[p]`` reads the copy ``images[p, ...]`` already made
    assert_marked(_LOOP)
    (msg,) = messages(_LOOP, "JAX201")
    assert "`images[p, ...]`, a NumPy array indexed with the JAX value `p`" in msg
    assert "np.asarray(perm)" in msg


@pytest.mark.parametrize("change", [
    ("p = batch_ix[i, :]", "p = np.asarray(batch_ix[i, :])"),  # a host index
    ("batch_ix = batch_ix.reshape((-1, batch_size))", "batch_ix = np.asarray(batch_ix).reshape((-1, batch_size))"),
    ("jax.random.permutation(jax.random.fold_in(key, epoch), images.shape[0])",
     "np.random.permutation(images.shape[0])"),  # permuted on the host
    ("np.load(", "jnp.load("),  # data on device (both arrays)
    ("            x = images[p, ...]  # expect: JAX201\n            y = labels[p]\n",
     "            if i % 100 == 0:\n                x = images[p, ...]\n                y = labels[p]\n"),
])
def test_jax201_near_misses_of_a_numpy_index(change):
    src = _LOOP.replace(*change)
    assert src != _LOOP and default_findings(src, "JAX000") == []
    assert [c for _, c in default_findings(src) if c == "JAX201"] == []


def test_jax201_a_numpy_index_in_traced_code_is_not_a_host_read():
    src = """
    import jax
    import numpy as np

    TABLE = np.arange(10)

    @jax.jit
    def f(i):
        for k in range(3):
            i = i + TABLE[k]
        return i
    """
    assert default_findings(src, "JAX201") == []


def test_jax201_a_scripts_module_level_loop():
    assert_marked("""
    import jax
    import numpy as np

    step = jax.jit(lambda s, x: s + x.sum())
    data = np.load("x.npy")
    state = 0.0
    key = jax.random.PRNGKey(0)
    for epoch in range(int(input())):
        order = jax.random.permutation(jax.random.fold_in(key, epoch), data.shape[0]).reshape((-1, 32))
        for i in range(order.shape[0]):
            state = step(state, data[order[i]])  # expect: JAX201
    """)


_ROWS = """
import jax
import numpy as np

@jax.jit
def step(state, x):
    return state + x.sum()

def train(state, key, n_steps, path):
    rays = np.load(path)
    for it in range(n_steps):
        index = jax.random.randint(jax.random.fold_in(key, it), (4,), 0, len(rays))
        batch = rays[tuple(index), ...]  # expect: JAX201
        state = step(state, batch)
    return state
"""


def test_jax201_a_numpy_array_indexed_with_the_rows_of_a_jax_array():
    # ``tuple(index)``: each element is a JAX scalar, which NumPy reads on the host
    assert_marked(_ROWS)
    assert "indexed with the JAX value `tuple(index)`" in messages(_ROWS, "JAX201")[0]
    assert_marked(_ROWS.replace("rays[tuple(index), ...]", "rays[list(index)]"))


@pytest.mark.parametrize("change", [
    ("jax.random.randint(jax.random.fold_in(key, it), (4,), 0, len(rays))",
     "np.random.randint(0, len(rays), (4,))"),  # drawn on the host
    ("rays = np.load(path)", "rays = jax.numpy.load(path)"),  # the data on the device
    ("rays[tuple(index), ...]", "rays[sorted(index)]"),  # not a plain unpacking of the array
])
def test_jax201_near_misses_of_rows_of_a_jax_array_as_an_index(change):
    src = _ROWS.replace(*change)
    assert src != _ROWS
    assert [c for _, c in default_findings(src) if c == "JAX201"] == []


_CLASS = """
import jax
import numpy as np

class Trainer:
    def __init__(self, path, flag):
        self.rays = np.stack([np.load(path), np.load(path)])
        self.maybe = np.load(path) if flag else None
        self.later = np.zeros(3)
        self.rows = np.load(path)

    def reset(self, arr):
        self.later = arr
        self.rows = self.rows[::2]

    def f(self):
        probe = {expr}

t = Trainer("x.npy", True)
t.rows2 = None
"""


@pytest.mark.parametrize("expr, numpy", [
    ("self.rays", True),  # every store in the class is a NumPy array
    ("self.rows", True),  # a slice of itself is one too
    ("self.maybe", False),  # None on one branch
    ("self.later", False),  # another method stores a parameter
    ("self.unknown", False),  # never stored here
])
def test_model_a_self_attribute_is_numpy_when_every_store_of_it_is(expr, numpy):
    src = _CLASS.replace("{expr}", expr)
    m = build_model(ast.parse(src))
    f = next(fn for fn in m.functions if fn.name == "f")
    node = f.node.body[-1].value
    assert hostarrays.numpy_array(m, node, f.scope) is numpy


def test_model_a_self_attribute_stored_from_outside_the_class_is_not_proven():
    src = _CLASS.replace("{expr}", "self.rays").replace("t.rows2 = None", "t.rays = None")
    m = build_model(ast.parse(src))
    f = next(fn for fn in m.functions if fn.name == "f")
    assert not hostarrays.numpy_array(m, f.node.body[-1].value, f.scope)
