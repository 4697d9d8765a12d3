"""Which user function a trace, a compile or a jitted call belongs to (no patching here).

``code_of`` finds the code object that defines a function through JAX's and jaxlint's wrappers,
``describe`` names it, :class:`EntryPoint` is the row of a program a library jitted for the
user, and :class:`FirstUserCall` finds the user function a library's trace is tracing.
"""

from __future__ import annotations

import functools
import sys
import types
from typing import Any, NamedTuple, Optional

import jax

from . import frames
from .forwarding import Forwarding


def code_of(fun: Any):
    """The code object that defines ``fun``: through jit wrappers, partials, bound methods, ``__wrapped__``."""
    for _ in range(32):
        if isinstance(fun, Forwarding):  # jaxlint's own stand-in (a counted jit wrapper)
            fun = fun._jaxlint_real
            continue
        if isinstance(fun, functools.partial):
            fun = fun.func
            continue
        wrapped = getattr(fun, "__wrapped__", None)
        if wrapped is not None and wrapped is not fun:
            fun = wrapped
            continue
        code = getattr(fun, "__code__", None)
        if isinstance(code, types.CodeType):
            if not hasattr(code, "co_qualname"):  # Python 3.10: the qualified name is the function's
                _QUALNAMES.setdefault(code, getattr(fun, "__qualname__", code.co_name))
            return code
        func = getattr(fun, "__func__", None)
        if func is not None:
            fun = func
            continue
        call = getattr(type(fun), "__call__", None)
        code = getattr(call, "__code__", None)
        return code if isinstance(code, types.CodeType) else None
    return None


# code -> the ``__qualname__`` of the function it was found through, for Python 3.10, whose code
# objects have no ``co_qualname`` (kept for the process: code objects live as long as their functions).
_QUALNAMES: dict = {}



def describe(code) -> tuple:
    if isinstance(code, EntryPoint):
        return (code.name, code.name, code.file, code.line)
    qualname = getattr(code, "co_qualname", None) or _QUALNAMES.get(code, code.co_name)
    return (code.co_name, qualname, code.co_filename, code.co_firstlineno)


class EntryPoint(NamedTuple):
    """The row of a program a library jitted on the user's behalf without tracing a function
    the user gave it: the user's line that called into the library (``mcmc.run`` at
    ``funnel.py:15``), and the library function called there."""

    file: str
    line: int
    name: str  # the call as written (``mcmc.run``), else the library function's qualified name


def entry_point(frame, collectors, fun: Any = None) -> Optional[EntryPoint]:
    """The innermost user frame from ``frame`` outwards, as an :class:`EntryPoint`; None when
    no frame on the stack is the user's. Named by the call as written there (``env.step``); when
    that cannot be read (a call over several lines before Python 3.11 gives column positions),
    by the library function ``fun`` (``envlib.Env.step``), never by JAX's own wrapper frames."""
    callee = None
    f = frame
    while f is not None:
        if any(c.user_files(f.f_code.co_filename) for c in collectors):
            name = _call_text(f) or (library_name(fun, qualified=True) if fun is not None else _code_name(callee))
            return EntryPoint(f.f_code.co_filename, f.f_lineno, name)
        if not frames.own(f.f_code.co_filename):
            callee = f.f_code
        f = f.f_back
    return None


def _code_name(code) -> str:
    if code is None:
        return "?"
    return getattr(code, "co_qualname", code.co_name)


def _call_text(frame) -> Optional[str]:
    """The callee of the call a frame is executing, as written in its source (``mcmc.run``), or
    None (no source, no column positions before Python 3.11, a callee that is not a name or
    attribute chain)."""
    try:
        import linecache
        import re

        pos = list(frame.f_code.co_positions())[frame.f_lasti // 2]
        line, end, col = pos[0], pos[1], pos[2]
        if line is None or col is None or line != end:
            return None
        text = linecache.getline(frame.f_code.co_filename, line)[col:]
        m = re.match(r"([A-Za-z_][\w]*(?:\s*\.\s*[A-Za-z_]\w*)*)\s*\(", text)
        return re.sub(r"\s+", "", m.group(1)) if m else None
    except Exception:
        return None


def library_name(fun: Any, qualified: bool = False) -> str:
    """A library function as the report names it: its qualified name; with ``qualified``, its
    module too (``numpyro.infer.mcmc._body_fn``), through partials and wrappers. equinox's
    ``filter_jit`` wraps the user's function (``__wrapped__``): it is named as the wrapper."""
    if getattr(fun, "__module__", None) == "equinox._jit":
        return "equinox.filter_jit"
    target = fun
    for _ in range(8):
        if isinstance(target, functools.partial):
            target = target.func
        elif getattr(target, "__wrapped__", None) is not None and target.__wrapped__ is not target:
            target = target.__wrapped__
        else:
            break
    name = getattr(target, "__qualname__", None) or getattr(fun, "__qualname__", None)
    if name is None:
        return repr(fun)
    module = getattr(target, "__module__", None)
    return f"{module}.{name}" if qualified and module else name


class FirstUserCall:
    """A profile function that finds the user function a library's trace is tracing.

    Used when JAX traces a library wrapper (``jax.pmap``'s shard_map body,
    ``nnx.jit``, ``eqx.filter_jit``) instead of the user's function itself: the
    first user function called from library code with a tracer among its
    arguments. User code that merely runs during a trace (a monitoring listener,
    a pytree flatten function, a numpyro model, which gets its values from
    effect handlers, not arguments) is passed over, and so are user functions
    called by user code (the model's helpers); when none is found, the program
    belongs to the library call the user made (:func:`entry_point`).
    """

    __slots__ = ("collectors", "code")

    def __init__(self, collectors):
        self.collectors = collectors
        self.code = None

    def __call__(self, frame, event, arg):
        if event != "call" or self.code is not None:
            return
        code = frame.f_code
        if not self._user(code.co_filename):
            return
        back = frame.f_back
        if back is not None and self._user(back.f_code.co_filename):
            return  # called by user code (a helper of the user's model): not what the library traced
        if has_tracer(frame.f_locals.values()):
            self.code = code
            sys.setprofile(None)

    def _user(self, filename: str) -> bool:
        return any(c.user_files(filename) for c in self.collectors)


def _tracer_type():
    try:
        from jax._src.core import Tracer
    except Exception:  # pragma: no cover - other JAX layouts
        Tracer = getattr(jax.core, "Tracer", ())
    return Tracer


_TRACER = _tracer_type()


def has_tracer(values) -> bool:
    for v in values:
        if isinstance(v, _TRACER):
            return True
        if isinstance(v, (tuple, list)):
            if any(isinstance(x, _TRACER) for x in v):
                return True
        elif isinstance(v, dict):
            if any(isinstance(x, _TRACER) for x in v.values()):
                return True
    return False
