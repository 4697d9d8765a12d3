"""Python values the array-producer tables would call JAX values: ranks (``x.ndim``,
``len(x.shape)``) and the results of JAX libraries' private or utility helpers (dtypes, flags),
directly or through a name bound to one (JAX30x ask before they call a test or a size a tracer);
and copies made into host memory with ``jax.device_put`` to the CPU (reading one waits for no accelerator).

Functions of the model (``m``), imported explicitly.
"""

from __future__ import annotations

import ast
from typing import Optional

from ..python import limits as L
from ..python.records import Scope
from ..python.syntax import call_arg, walk


def _internal(qn: Optional[str]) -> bool:
    """A private or utility helper of a JAX library (``jax._src.lax.lax._ndim``,
    ``jax._src.numpy.util._arraylike``): the model's array-producer prefixes cover them, but they
    mostly return Python values (dtypes, ranks, flags)."""
    if not qn or not qn.startswith(("jax.", "flax.", "equinox.")):
        return False
    parts = qn.split(".")[1:]
    return any(p.startswith("_") or p in ("util", "utils", "dtypes", "core", "config") for p in parts)


def rank_derived(m, e: ast.AST, scope: Scope, depth: int = 0) -> bool:
    """``x.ndim``, ``np.ndim(x)``, ``len(x.shape)``, or a name bound to one."""
    for n in walk(e):
        if isinstance(n, ast.Attribute) and n.attr == "ndim":
            return True
        if isinstance(n, ast.Call):
            qn = m.resolve(n.func, scope) or ""
            if qn.endswith(".ndim"):
                return True
            if qn == "builtins.len" and n.args and isinstance(n.args[0], ast.Attribute) and n.args[0].attr == "shape":
                return True
        if isinstance(n, ast.Name) and depth < L.RANK_HORIZON:
            ev = m.binding(n.id, scope, (n.lineno, n.col_offset))
            if ev is not None and ev.kind == "assign" and ev.value is not None and ev.scope is scope:
                if rank_derived(m, ev.value, scope, depth + 1):
                    return True
    return False


def walked_structure(m, loop_node: ast.For, bounds: list, scope: Scope) -> Optional[str]:
    """The name of a structure a ``for i in range(...)`` loop walks element by element: a bound derives from
    ``len(s)`` (``n = len(model); mid = n // 2; range(0, mid)``) and the body indexes ``s`` with the loop's
    counter (``weight, bias = model[i]``): a pass over a model's layers, as many as it has, not a step count."""
    target = loop_node.target
    if not isinstance(target, ast.Name):
        return None
    measured = set()
    for b in bounds:
        measured |= _len_of(m, b, scope, 0)
    if not measured:
        return None
    for n in walk(loop_node):
        if isinstance(n, ast.Subscript) and isinstance(n.value, ast.Name) and n.value.id in measured and any(
                isinstance(x, ast.Name) and x.id == target.id for x in walk(n.slice)):
            return n.value.id
    return None


def _len_of(m, e: ast.AST, scope: Scope, depth: int) -> set:
    """Names ``s`` whose ``len(s)`` the integer expression ``e`` is computed from (through names bound once)."""
    out: set = set()
    for n in walk(e):
        if isinstance(n, ast.Call) and m.resolve(n.func, scope) == "builtins.len" and len(n.args) == 1 \
                and isinstance(n.args[0], ast.Name):
            out.add(n.args[0].id)
        elif isinstance(n, ast.Name) and depth < L.RANK_HORIZON:
            ev = m.binding(n.id, scope, (n.lineno, n.col_offset))
            if ev is not None and ev.kind == "assign" and ev.value is not None and ev.scope is scope:
                out |= _len_of(m, ev.value, scope, depth + 1)
    return out


def reads_internal_helper(m, e: ast.AST, scope: Scope, depth: int = 0) -> bool:
    """Whether ``e`` reads the result of such a helper, directly or through a name bound to one."""
    for n in walk(e):
        if isinstance(n, ast.Call) and _internal(m.resolve(n.func, scope)):
            return True
        if isinstance(n, ast.Name) and depth < L.INTERNAL_HELPER_HORIZON:
            ev = m.binding(n.id, scope, (n.lineno, n.col_offset))
            if ev is not None and ev.kind == "assign" and ev.value is not None and ev.scope is scope:
                if reads_internal_helper(m, ev.value, ev.scope, depth + 1):
                    return True
    return False


def host_cpu_copy(m, call: ast.Call, scope: Scope) -> bool:
    """``jax.device_put(x, jax.devices("cpu")[0])`` (or ``jax.local_devices(backend="cpu")``): to the host's CPU."""
    device = call_arg(call, 1, "device")
    while isinstance(device, ast.Subscript):
        device = device.value
    if not isinstance(device, ast.Call) or m.resolve(device.func, scope) not in ("jax.devices", "jax.local_devices"):
        return False
    return any(isinstance(a, ast.Constant) and a.value == "cpu"
               for a in [*device.args, *(kw.value for kw in device.keywords if kw.arg == "backend")])
