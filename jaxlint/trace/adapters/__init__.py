"""Where each JAX era lets jaxlint observe a trace-cache miss, a compile and a jaxpr.

One module per era, chosen once, by feature detection (not by version number), when
the hooks install. Each era module has the same small interface:

* ``NAME``: the era, as the report names it.
* ``ENTRY_POINT``: ``(module, attribute)`` of the JAX function whose shape the era
  relies on (tests replace it to see the fallback).
* ``detect()``: None when this JAX has the era's entry points in the expected shape,
  else one line saying what is missing.
* ``hook_traces(patch, on_trace)``: install the hook that calls
  ``on_trace(run, call)`` once per trace-cache miss of ``jax.jit``, where ``call`` is a
  :class:`~jaxlint.trace.adapters.base.TraceCall` (the function, its jit info, debug
  info, avals, arguments) and ``run()`` performs JAX's own trace and returns its result.
* ``jaxpr_of(result)`` / ``consts_of(result)``: the closed jaxpr that trace produced
  (the object later passed to the compile entry point) and its hoisted constants.

What is the same in every supported era (the compile entry point
``pjit._pjit_call_impl_python(*args, jaxpr=...)``, the ``jax.monitoring`` event names,
the ``pmap`` cache ``pxla.parallel_callable``) lives in :mod:`.base`.

Importing this package imports nothing from JAX; :func:`select` does.
"""

from __future__ import annotations

from typing import Optional

ERA_MODULES = ("jax_0_9", "jax_0_5", "jax_0_4")  # newest first


def select() -> tuple:
    """(the era module that fits the installed JAX, or None; why each era did not fit)."""
    import importlib

    misses = []
    for name in ERA_MODULES:
        try:
            era = importlib.import_module(f"{__name__}.{name}")
            why: Optional[str] = era.detect()
        except Exception as e:  # an era module that cannot even be read on this JAX
            why = f"{type(e).__name__}: {e}"
        if why is None:
            return era, misses
        misses.append(f"{name}: {why}")
    return None, misses
