"""jax 0.9 and later: ``pjit._trace_for_jit(fun, ji, ctx_mesh, dbg, avals, args, kwargs)`` is
called once per trace-cache miss with everything jaxlint needs, and returns ``PjitParams``
(``params["jaxpr"]`` is the closed jaxpr compiled later, ``consts`` its hoisted constants)."""

from __future__ import annotations

import functools
from typing import Any, Optional

from .base import TraceCall, params_of

NAME = "jax 0.9+ (pjit._trace_for_jit)"
ENTRY_POINT = ("jax._src.pjit", "_trace_for_jit")
PATCHED = "_trace_for_jit"  # the pjit attribute hook_traces replaces
_PARAMS = ["fun", "ji", "ctx_mesh", "dbg", "avals", "args", "kwargs"]


def detect() -> Optional[str]:
    from jax._src import pjit

    original = getattr(pjit, "_trace_for_jit", None)
    if original is None:
        return "no jax._src.pjit._trace_for_jit"
    if params_of(original) != _PARAMS:
        return "jax._src.pjit._trace_for_jit changed"
    return None


def hook_traces(patch, on_trace) -> None:
    from jax._src import pjit

    original = pjit._trace_for_jit

    @functools.wraps(original)
    def trace_for_jit(fun, ji, ctx_mesh, dbg, avals, args, kwargs):
        return on_trace(lambda: original(fun, ji, ctx_mesh, dbg, avals, args, kwargs),
                        TraceCall(fun, ji, dbg, tuple(avals), args, kwargs))

    patch(pjit, "_trace_for_jit", trace_for_jit)


def jaxpr_of(result: Any) -> Any:
    return getattr(result, "params", {}).get("jaxpr")


def consts_of(result: Any) -> Any:
    return getattr(result, "consts", ())
