"""Keeping jaxlint's own frames out of the tracebacks a traced program shows.

Under ``jaxlint trace`` (and ``audit()``, the pytest plugin) a jitted call runs through
jaxlint's forwarding wrapper and trace hooks, so an error raised inside a jitted function
unwinds through a few jaxlint frames that plain ``python`` never has. Two things hide them:

* :func:`hide_from_jax` registers jaxlint's trace package with JAX's own traceback filter
  (``jax._src.traceback_util.register_exclusion``, the way JAX hides its internal frames):
  the frames below a JAX API boundary (the trace hooks) are dropped wherever JAX filters.
* :func:`strip` rebuilds a traceback without jaxlint's frames; the forwarding wrapper uses
  it before re-raising (Python 3.11+ re-raises with the exception's own ``__traceback__``)
  and the runner before printing, for the whole ``__cause__``/``__context__`` chain.
"""

from __future__ import annotations

import os
import types
from typing import Optional

_DIR = os.path.dirname(os.path.abspath(__file__))
OWN_DIRS = tuple(sorted({_DIR + os.sep, os.path.realpath(_DIR) + os.sep}))
_hidden_from_jax = False


def own(filename: str) -> bool:
    """Whether ``filename`` is one of jaxlint's trace modules (hooks, adapters, runner)."""
    return filename.startswith(OWN_DIRS)


def hide_from_jax() -> Optional[str]:
    """Register jaxlint's trace package with JAX's traceback filter, once per process;
    None, or why it could not be done (the runner still strips the frames it prints)."""
    global _hidden_from_jax
    if _hidden_from_jax:
        return None
    try:
        from jax._src import traceback_util

        for d in OWN_DIRS:
            traceback_util.register_exclusion(d.rstrip(os.sep))
    except Exception as e:  # another JAX layout: nothing hidden by JAX, nothing broken
        return repr(e)
    _hidden_from_jax = True
    return None


def strip(tb: Optional[types.TracebackType], leading=()) -> Optional[types.TracebackType]:
    """``tb`` without entries in jaxlint's files (and, before the first kept entry, without
    entries whose file starts with one of ``leading``); ``tb`` itself when nothing goes."""
    entries = []
    t, dropped, start = tb, False, True
    while t is not None:
        name = t.tb_frame.f_code.co_filename
        if own(name) or (start and leading and name.startswith(leading)):
            dropped = True
        else:
            entries.append(t)
            start = False
        t = t.tb_next
    if not dropped:
        return tb
    out = None
    for t in reversed(entries):
        out = types.TracebackType(out, t.tb_frame, t.tb_lasti, t.tb_lineno)
    return out


def hide(exc: BaseException, leading=()) -> None:
    """Strip jaxlint's frames from ``exc``'s traceback and from every exception chained to it."""
    seen = set()
    stack = [(exc, leading)]
    while stack:
        e, lead = stack.pop()
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        try:
            tb = e.__traceback__
            new = strip(tb, lead)
            if new is not tb:
                e.__traceback__ = new
        except Exception:  # an exception type that refuses a new traceback keeps its own
            pass
        stack.append((e.__cause__, lead))
        stack.append((e.__context__, lead))
        for sub in getattr(e, "exceptions", None) or ():  # an ExceptionGroup's members
            if isinstance(sub, BaseException):
                stack.append((sub, lead))
