"""Module names bound more than once, read inside a function (jaxlint/model/python/module.py,
``ModuleModel._global_at_calls``): a notebook defines a NumPy ``T`` and a ``solve`` that calls it, runs
``solve`` in its cell, and later redefines ``T`` with ``jax.jit``. The ``T`` that ``solve`` reads is the
one bound when the module-level code calls ``solve`` (fresh AQ's QuantEcon lectures: two syncs reported
in the NumPy baseline, judged FALSE), not the module's last binding."""

from __future__ import annotations

import ast
import textwrap

import pytest

from jaxlint.model import build_model
from ruletools import findings

NOTEBOOK = """
import jax
import numpy as np


def T(v):
    return np.maximum(v, 0.5 * v)


def solve(v, tol=1e-6):
    error = tol + 1
    while error > tol:
        v_new = T(v)
        error = np.max(np.abs(v_new - v))
        v = v_new
    return v


{first}
T = jax.jit(lambda v: jax.numpy.maximum(v, 0.5 * v))
{second}
"""


def _read_of_t(src: str):
    m = build_model(ast.parse(textwrap.dedent(src)))
    call = next(c for c in m.calls if isinstance(c.func, ast.Name) and c.func.id == "T"
                and m.function_at(c) is not None and m.function_at(c).name == "solve")
    return m.binding("T", m.scope_at(call), (call.lineno, call.col_offset))


@pytest.mark.parametrize("first, second, binding", [
    ("solve(np.ones(3))", "", "def"),  # called before the redefinition: the NumPy T
    ("", "solve(np.ones(3))", "assign"),  # called after it: the jitted T
    ("solve(np.ones(3))", "solve(np.ones(3))", "assign"),  # both: not one binding, the last as before
    ("", "", "assign"),  # never called at module level: the last binding, as before
])
def test_a_global_read_in_a_function_sees_the_binding_its_module_level_calls_see(first, second, binding):
    ev = _read_of_t(NOTEBOOK.format(first=first, second=second))
    assert ev.kind == binding


def test_a_function_rebound_later_is_called_only_in_its_own_cells():
    src = NOTEBOOK.format(first="solve(np.ones(3))", second="") + textwrap.dedent("""
    def solve(v):
        return T(v)

    solve(np.ones(3))
    """)
    assert _read_of_t(src).kind == "def"  # the first solve's only call comes before T's redefinition


def test_jax201_not_reported_on_the_numpy_baseline_of_a_notebook_that_redefines_it_later():
    src = NOTEBOOK.format(first="solve(np.ones(3))", second="")
    assert findings(src, "JAX201") == []
    after = NOTEBOOK.format(first="", second="solve(np.ones(3))")
    assert [code for _, code in findings(after, "JAX201")] == ["JAX201"]  # the jitted T: a sync per iteration
