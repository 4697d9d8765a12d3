"""Host transfers, host-to-device copies, host callbacks and clock reads per user line (a
mixin of :class:`.hooks.Instrumentation`).

Host transfers are counted where Python converts a concrete ``jax.Array`` (``float``, ``int``,
``bool``, ``.item()``, ``.tolist()``, ``str``/``repr``/``format``, ``__array__`` for NumPy,
``jax.device_get``), attributed to the innermost frame in the user's files. Conversions JAX
performs internally are not counted.
"""

from __future__ import annotations

import functools
import sys
import threading
import time
from typing import Any, Optional

import jax
import numpy

TLS = threading.local()  # .busy: a counted conversion runs; .staging_callback: a callback is being staged
TRANSFER_METHODS = {
    "__bool__": "bool", "__float__": "float", "__int__": "int", "__complex__": "complex",
    "__index__": "index", "item": "item", "tolist": "tolist", "__str__": "str",
    "__repr__": "repr", "__format__": "format", "__array__": "numpy",
}


class HostHooks:
    """What crosses between host and device (methods of :class:`.hooks.Instrumentation`)."""

    # -- host transfers -----------------------------------------------------
    def _hook_transfers(self) -> None:
        try:
            from jax._src.array import ArrayImpl
        except Exception as e:
            self.partial.append(f"host transfers not counted ({e!r})")
            return
        for method, kind in TRANSFER_METHODS.items():
            original = ArrayImpl.__dict__.get(method)
            if original is None or not callable(original):
                self.partial.append(f"jax.Array.{method} not found: {kind} transfers not counted")
                continue
            self._patch(ArrayImpl, method, self._transfer_hook(original, kind))
        original = getattr(jax, "device_get", None)
        if original is not None:
            has_array = lambda x: any(isinstance(v, jax.Array) for v in jax.tree_util.tree_leaves(x))  # noqa: E731
            self._patch(jax, "device_get", self._transfer_hook(original, "device_get", has_array))
        # On CPU, NumPy reads a jax.Array through the buffer protocol and never
        # calls __array__, so the NumPy entry points are counted themselves.
        import numpy

        for name in ("asarray", "array", "asanyarray", "ascontiguousarray"):
            original = getattr(numpy, name, None)
            if original is not None:
                self._patch(numpy, name, self._transfer_hook(original, "numpy", of_type=ArrayImpl))

    # -- host-to-device copies ----------------------------------------------
    def _hook_uploads(self) -> None:
        """``jax.device_put``, ``jnp.asarray`` and ``jnp.array`` called from user code on NumPy
        arrays or Python data (implicit copies of NumPy arguments to jitted functions are counted
        in :class:`Counted`)."""
        import jax.numpy as jnp

        for owner, name, kind in ((jax, "device_put", "device_put"), (jnp, "asarray", "jnp.asarray"),
                                  (jnp, "array", "jnp.array")):
            original = getattr(owner, name, None)
            if original is None:
                self.partial.append(f"{owner.__name__}.{name} not found: its host-to-device copies not counted")
                continue
            self._patch(owner, name, self._upload_hook(original, kind))

    def _upload_hook(self, original, kind: str):
        """Counts the copies that run: while a function is being traced (``jnp.array(table)``
        inside a jitted function), the call makes a constant of the program being built, not a
        copy per call, and is not counted (as eager dispatches are not)."""
        inst, token = self, self._token
        try:
            from jax._src import core as jcore

            clean = jcore.trace_state_clean
        except Exception:  # no way to tell: count every call, as before
            clean = lambda: True  # noqa: E731

        @functools.wraps(original)
        def hooked(value, *args, **kwargs):
            if getattr(TLS, "busy", False) or not inst.collectors or inst._token is not token or not clean():
                return original(value, *args, **kwargs)
            caller = sys._getframe(1)
            if inst._is_jax_frame(caller):
                return original(value, *args, **kwargs)
            result = original(value, *args, **kwargs)
            try:
                nbytes = host_bytes(value)
                if nbytes is not None:
                    for c in inst.collectors:
                        c.uploaded(caller, kind, nbytes)
            except Exception as e:  # never break the program for a count
                inst._error(e)
            return result

        return hooked

    # -- host callbacks ------------------------------------------------------
    def _hook_callbacks(self) -> None:
        """Host callbacks per user line (JAX206): the functions that stage a callback into a
        traced program (``jax.debug.callback``, and the internal one ``jax.debug.print`` calls,
        ``jax.pure_callback``, ``jax.experimental.io_callback``) get, in place of the user's
        callback, one that counts each time it runs on the host, for the user line that made
        it, and then calls it."""
        import importlib

        for module, name in (("jax.debug", "callback"), ("jax._src.debugging", "debug_callback"),
                             ("jax", "pure_callback"), ("jax.experimental", "io_callback"),
                             ("jax.experimental", "pure_callback")):
            try:
                owner = importlib.import_module(module)
            except Exception:
                continue
            original = getattr(owner, name, None)
            if original is None or not callable(original):
                if module != "jax.experimental":
                    self.partial.append(f"{module}.{name} not found: its host callbacks not counted")
                continue
            self._patch(owner, name, self._callback_hook(original))
        import jax.debug

        original = getattr(jax.debug, "print", None)
        if original is not None:
            self._patch(jax.debug, "print", self._debug_print_hook(original))

    def _debug_print_hook(self, original):
        """``jax.debug.print(fmt, ...)``: newer JAX binds its own primitive, with no Python callback
        to wrap; what runs on the host at every execution is ``fmt.format(...)``, so ``fmt`` is
        handed on as an equal string whose ``format`` counts first."""
        inst, token = self, self._token

        @functools.wraps(original)
        def hooked(*args, **kwargs):
            if (not args or type(args[0]) is not str or getattr(TLS, "staging_callback", False)
                    or not inst.collectors or inst._token is not token):
                return original(*args, **kwargs)
            try:
                caller = sys._getframe(1)
                fmt = _CountedFormat(args[0])
                fmt._sites = [(c, c.user_files.site(caller)) for c in inst.collectors]
            except Exception as e:  # never break the program for a count
                inst._error(e)
                return original(*args, **kwargs)
            TLS.staging_callback = True  # older JAX: debug.print -> debug_callback, one count
            try:
                return original(fmt, *args[1:], **kwargs)
            finally:
                TLS.staging_callback = False

        return hooked

    def _callback_hook(self, original):
        inst, token = self, self._token

        @functools.wraps(original)
        def hooked(callback, *args, **kwargs):
            if (getattr(TLS, "staging_callback", False) or not inst.collectors or inst._token is not token
                    or not callable(callback)):
                return original(callback, *args, **kwargs)
            try:
                caller = sys._getframe(1)
                sites = [(c, c.user_files.site(caller)) for c in inst.collectors]
            except Exception as e:  # never break the program for a count
                inst._error(e)
                return original(callback, *args, **kwargs)

            def counted(*a, **k):
                for c, site in sites:
                    c.callback_ran(site)
                return callback(*a, **k)

            TLS.staging_callback = True  # jax.debug.print -> debug_callback: one count
            try:
                return original(counted, *args, **kwargs)
            finally:
                TLS.staging_callback = False

        return hooked

    # -- clock reads ---------------------------------------------------------
    def _hook_clocks(self) -> None:
        """``time.perf_counter()``/``time.time()``/``time.monotonic()`` (and ``_ns``) called from user
        code: whether the last jitted call's result was still being computed at the read (a
        measurement that does not wait, JAX204). Spellings bound before jaxlint started
        (``from time import perf_counter``, ``timeit``'s own timer) are not seen."""
        for name in ("perf_counter", "perf_counter_ns", "time", "time_ns", "monotonic", "monotonic_ns"):
            original = getattr(time, name, None)
            if original is not None:
                self._patch(time, name, self._clock_hook(original))

    def _clock_hook(self, original):
        inst, token = self, self._token

        @functools.wraps(original)
        def hooked():
            value = original()
            collectors = inst.collectors
            if not collectors or inst._token is not token or not inst._last_outputs:
                return value
            caller = sys._getframe(1)
            mine = [c for c in collectors if c.user_files(caller.f_code.co_filename)]
            if mine:
                pending = inst.work_pending()
                if pending is not None:
                    for c in mine:
                        c.clock_read(caller, pending)
            return value

        return hooked


    def _transfer_hook(self, original, kind: str, applies=None, of_type=None):
        """Wrap a conversion so that each call from outside JAX on a jax.Array counts once
        (``applies``: a test of the value; ``of_type``: the value's exact type, tested without a
        call: NumPy's entry points run many times per eager operation inside JAX)."""
        inst, token = self, self._token

        @functools.wraps(original)
        def hooked(value, *args, **kwargs):
            if ((of_type is not None and type(value) is not of_type) or getattr(TLS, "busy", False)
                    or not inst.collectors or inst._token is not token
                    or (applies is not None and not applies(value))):
                return original(value, *args, **kwargs)
            caller = sys._getframe(1)
            if inst._is_jax_frame(caller):
                return original(value, *args, **kwargs)
            TLS.busy = True  # nested conversions (str -> __array__) count once
            try:
                result = original(value, *args, **kwargs)
            finally:
                TLS.busy = False
            for c in inst.collectors:
                c.transferred(caller, kind)
            return result

        return hooked



class _CountedFormat(str):
    """A ``jax.debug.print`` format string, equal to the user's, whose ``format`` (called on the
    host each time the print runs) counts the run for the line that made the print."""

    def format(self, *args, **kwargs):  # noqa: A003
        for c, site in getattr(self, "_sites", ()):
            c.callback_ran(site)
        return str.format(self, *args, **kwargs)


_NOT_HOST: set = set()  # leaf types seen not to be NumPy arrays or scalars


def host_bytes(value: Any, python_data: bool = True) -> Optional[int]:
    """Bytes of host array data (NumPy arrays and scalars; with ``python_data``, also a list or
    tuple of Python numbers) in a value that JAX copies to the device; None when there is none
    (JAX arrays, tracers, static Python objects)."""
    total, host = 0, False
    leaves = jax.tree_util.tree_leaves(value)
    host_kinds = (numpy.ndarray, numpy.generic)
    # one type test per distinct type, not per leaf (a step's arguments hold hundreds of arrays),
    # and none for the types already seen not to be host arrays
    kinds = set(map(type, leaves))
    if kinds <= _NOT_HOST:
        pass
    elif any(issubclass(k, host_kinds) for k in kinds):
        for leaf in leaves:
            if isinstance(leaf, host_kinds):
                total += leaf.nbytes
                host = True
    else:
        _NOT_HOST.update(kinds)
    if not host and python_data and isinstance(value, (list, tuple)) and value and all(
            isinstance(v, (int, float, bool, complex)) for v in jax.tree_util.tree_leaves(value)):
        return numpy.asarray(value).nbytes
    return total if host else None

