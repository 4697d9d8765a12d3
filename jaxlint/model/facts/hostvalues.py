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
