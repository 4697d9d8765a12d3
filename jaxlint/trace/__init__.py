"""Dynamic mode: run real code and record what JAX actually did.

``jaxlint trace script.py`` is the command-line front end (see ``runner``).
For tests, use the context manager::

    from jaxlint.trace import audit

    with audit() as a:
        for batch in batches:
            state = train_step(state, batch)
    assert a.compiles(train_step) == 1
    assert a.transfer_count() == 0

and, without running anything, ``inspect(train_step, state, batch_spec).equations`` (the jaxpr's
size, per source line, captured constants, callbacks, and the compilations a list of argument
sets would cause: see ``audit_fn``).

This package imports nothing from JAX until ``audit()`` is entered, so that
``import jaxlint.trace`` (and the pytest plugin) stays free for static users.
"""

from __future__ import annotations

__all__ = ["audit", "Audit", "inspect", "Args", "missing_jax"]


# What works today: flake8-jax is not on an index yet, so `pip install 'flake8-jax[trace]'` finds
# nothing; jax itself is, and a clone of jaxlint installs its own `trace` extra (the jax versions
# jaxlint is tested with).
INSTALL_JAX = "install it with `pip install jax` (or, in a clone of jaxlint, `pip install '.[trace]'`)"


def missing_jax():
    """None when jax is installed; else the one line that says how to get it.

    Finds jax without importing it: ``jaxlint trace`` imports it only when the program does, so
    that the settings JAX reads at import (``JAX_ENABLE_X64``, ``JAX_PLATFORMS`` ...) which the
    program puts in ``os.environ`` before its ``import jax`` still take effect."""
    import importlib.util

    try:
        found = importlib.util.find_spec("jax") is not None
        found = found and importlib.util.find_spec("jaxlib") is not None
    except (ImportError, ValueError) as e:
        return f"jaxlint trace: needs jax ({e}); {INSTALL_JAX}"
    if not found:
        return f"jaxlint trace: needs jax (it is not installed); {INSTALL_JAX}"
    return None


def audit(user_roots=None, namespace=None):
    """Record compilations and host transfers for the duration of a ``with`` block.

    ``user_roots`` limits which files count as user code (folders); by default
    every file outside the standard library, site-packages and JAX itself.
    ``namespace``: the module globals whose functions jitted before the block get their calls
    counted during it (default: those of the module that opens the block).
    """
    from .auditing import Audit

    return Audit(user_roots, namespace)


def inspect(fn, *args, **kwargs):
    """Audit ``fn``'s jaxpr for these arguments (``jax.ShapeDtypeStruct`` allowed) without running
    or compiling anything; see :func:`jaxlint.trace.audit_fn.inspect`."""
    from .audit_fn import inspect as _inspect

    return _inspect(fn, *args, **kwargs)


def __getattr__(name):
    if name == "Audit":
        from .auditing import Audit

        return Audit
    if name in ("Args", "Inspection"):
        from . import audit_fn

        return getattr(audit_fn, name)
    raise AttributeError(name)
