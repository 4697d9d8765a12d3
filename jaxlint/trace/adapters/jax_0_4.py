"""jax 0.4.30 to 0.4.38: the trace is the body of the memoized ``pjit._create_pjit_jaxpr(fun,
in_type, attr_data, debug_info, out_paths, ignored_inline)``, run once per trace-cache miss; it
returns ``(closed_jaxpr, consts, out_type, attrs_tracked)``. The jit call's own arguments come
from ``pjit._infer_params(jit_info, args, kwargs)`` (0.4.30; ``jit_info.fun`` is the function
given to ``jax.jit``) or ``pjit._infer_params_impl(fun, ji, pjit_mesh, resource_env, args, kwargs,
in_avals)`` (0.4.31 to 0.4.38)."""

from __future__ import annotations

from typing import Optional

from .base import first_of, hook_memoized_trace, memoized_trace_missing, second_of

NAME = "jax 0.4.30-0.4.38 (pjit._create_pjit_jaxpr via _infer_params)"
ENTRY_POINT = ("jax._src.pjit", "_create_pjit_jaxpr")


def _from_infer_params(jit_info, args, kwargs):
    return jit_info.fun, jit_info, None, args, kwargs


def _from_infer_params_impl(fun, ji, pjit_mesh, resource_env, args, kwargs, in_avals=None):
    return fun, ji, None, args, kwargs


# (entry point, its parameters, what it was given -> (fun, ji, dbg, args, kwargs)), newest first
_SHAPES = (
    ("_infer_params_impl", ["fun", "ji", "pjit_mesh", "resource_env", "args", "kwargs", "in_avals"],
     _from_infer_params_impl),
    ("_infer_params", ["jit_info", "args", "kwargs"], _from_infer_params),
)
PATCHED = None  # the pjit attribute hook_traces replaces (besides the body cell of ENTRY_POINT)
_entry = None


def detect() -> Optional[str]:
    global PATCHED, _entry
    misses = []
    for name, params, entry_call in _SHAPES:
        why = memoized_trace_missing(name, params)
        if why is None:
            PATCHED, _entry = name, entry_call
            return None
        misses.append(why)
    return "; ".join(misses)


def _body_dbg(body_args, fun):
    # body_args = (in_type, attr_data, debug_info, out_paths, ignored_inline)
    return body_args[2] if len(body_args) > 2 else None


def hook_traces(patch, on_trace) -> None:
    hook_memoized_trace(patch, on_trace, PATCHED, _entry, _body_dbg)


jaxpr_of = first_of
consts_of = second_of
