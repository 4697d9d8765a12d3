"""jax 0.4.30 to 0.4.x: ``pjit._infer_params(jit_info, args, kwargs)`` prepares every jit call
(``jit_info`` is ``PjitInfo``, its ``fun`` the function given to ``jax.jit``), and the trace
itself is the body of the memoized ``pjit._create_pjit_jaxpr(fun, in_type, attr_data,
debug_info, out_paths, ignored_inline)``, run once per trace-cache miss; it returns
``(closed_jaxpr, consts, out_type, attrs_tracked)``."""

from __future__ import annotations

from typing import Optional

from .base import first_of, hook_memoized_trace, memoized_trace_missing, second_of

NAME = "jax 0.4.30+ (pjit._create_pjit_jaxpr via _infer_params)"
ENTRY_POINT = ("jax._src.pjit", "_create_pjit_jaxpr")
_ENTRY = "_infer_params"
_PARAMS = ["jit_info", "args", "kwargs"]
PATCHED = _ENTRY  # the pjit attribute hook_traces replaces (besides the body cell of ENTRY_POINT)


def detect() -> Optional[str]:
    return memoized_trace_missing(_ENTRY, _PARAMS)


def _entry_call(jit_info, args, kwargs):
    return jit_info.fun, jit_info, None, args, kwargs


def _body_dbg(body_args, fun):
    # body_args = (in_type, attr_data, debug_info, out_paths, ignored_inline)
    return body_args[2] if len(body_args) > 2 else None


def hook_traces(patch, on_trace) -> None:
    hook_memoized_trace(patch, on_trace, _ENTRY, _entry_call, _body_dbg)


jaxpr_of = first_of
consts_of = second_of
