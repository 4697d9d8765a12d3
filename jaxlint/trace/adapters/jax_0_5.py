"""jax 0.5 to 0.8: ``pjit._infer_params_impl(fun, ji, ctx_mesh, dbg, args, kwargs, in_avals)``
prepares a jit call (its result is cached per jit wrapper), and the trace itself is the body of
the memoized ``pjit._create_pjit_jaxpr(fun, in_type, ...)``, run once per trace-cache miss; it
returns ``(closed_jaxpr, consts, out_avals[, attrs])``."""

from __future__ import annotations

from typing import Optional

from .base import first_of, hook_memoized_trace, memoized_trace_missing, second_of

NAME = "jax 0.5-0.8 (pjit._create_pjit_jaxpr via _infer_params_impl)"
ENTRY_POINT = ("jax._src.pjit", "_create_pjit_jaxpr")
_ENTRY = "_infer_params_impl"
_PARAMS = ["fun", "ji", "ctx_mesh", "dbg", "args", "kwargs", "in_avals"]
PATCHED = _ENTRY  # the pjit attribute hook_traces replaces (besides the body cell of ENTRY_POINT)


def detect() -> Optional[str]:
    return memoized_trace_missing(_ENTRY, _PARAMS)


def _entry_call(fun, ji, ctx_mesh, dbg, args, kwargs, in_avals=None):
    return fun, ji, dbg, args, kwargs


def _body_dbg(body_args, fun):
    return getattr(fun, "debug_info", None)


def hook_traces(patch, on_trace) -> None:
    hook_memoized_trace(patch, on_trace, _ENTRY, _entry_call, _body_dbg)


jaxpr_of = first_of
consts_of = second_of
