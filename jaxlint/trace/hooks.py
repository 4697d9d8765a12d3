"""The instrumentation: what is patched in JAX, and how events reach collectors.

Exactness rules this module keeps:

* The function JAX traces is never replaced or wrapped, so its caches see
  exactly the objects they would see without jaxlint and the program compiles
  exactly as often. ``jax.jit``/``jax.pmap`` still return JAX's own wrapper;
  jaxlint only puts a forwarding object around that result to count calls.
* Traces are observed where JAX runs one trace-cache miss of ``jax.jit``
  (``jax._src.pjit._trace_for_jit`` on jax 0.9+, the memoized body of
  ``pjit._create_pjit_jaxpr`` before; one module per JAX era in ``adapters``,
  chosen once when the hooks install) and compilations by the public
  ``jax.monitoring`` compile events, attributed to a function through the
  jaxpr being compiled. When an era's private names are missing (an untested
  JAX), the run still completes, the report says which parts are partial,
  and counts matched by function name are labelled as such.
* Host transfers are counted where Python converts a concrete ``jax.Array``
  (``float``, ``int``, ``bool``, ``.item()``, ``.tolist()``, ``str``/``repr``/
  ``format``, ``__array__`` for NumPy, ``jax.device_get``), attributed to the
  innermost frame in the user's files. Conversions JAX performs internally are
  not counted.
"""

from __future__ import annotations

import functools
import inspect
import os
import sys
import threading
import time
import types
import weakref
from typing import Any, NamedTuple, Optional

import jax

from . import eager, frames, memory
from .adapters import base
from .adapters import select as select_era
from .collector import CallKey, Collector, Signature
from .forwarding import Forwarding
from .userfiles import UserFiles

_TLS = threading.local()
_INTERNAL = object()  # compile target for JAX's own functions
_TRACE_EVENT, _LOWER_EVENT, _COMPILE_EVENT = base.events()
_TRANSFER_METHODS = {
    "__bool__": "bool", "__float__": "float", "__int__": "int", "__complex__": "complex",
    "__index__": "index", "item": "item", "tolist": "tolist", "__str__": "str",
    "__repr__": "repr", "__format__": "format", "__array__": "numpy",
}
_MISSING = object()


def code_of(fun: Any):
    """The code object that defines ``fun``: through jit wrappers, partials, bound methods, ``__wrapped__``."""
    for _ in range(32):
        if isinstance(fun, Counted):
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


def _entry_point(frame, collectors, fun: Any = None) -> Optional[EntryPoint]:
    """The innermost user frame from ``frame`` outwards, as an :class:`EntryPoint`; None when
    no frame on the stack is the user's. Named by the call as written there (``env.step``); when
    that cannot be read (a call over several lines before Python 3.11 gives column positions),
    by the library function ``fun`` (``envlib.Env.step``), never by JAX's own wrapper frames."""
    callee = None
    f = frame
    while f is not None:
        if any(c.user_files(f.f_code.co_filename) for c in collectors):
            name = _call_text(f) or (_library_name(fun, qualified=True) if fun is not None else _code_name(callee))
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


def _library_name(fun: Any, qualified: bool = False) -> str:
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


def _attribute(owner: Any, name: str) -> Any:
    """What ``owner.name`` holds now: a class's own ``__dict__`` entry, a module's attribute."""
    if isinstance(owner, type):
        return owner.__dict__.get(name, _MISSING)
    return getattr(owner, name, _MISSING)


class Counted(Forwarding):
    """What the instrumented ``jax.jit``/``jax.pmap`` return: JAX's own wrapper plus a call counter.

    Attribute access, binding as a method, equality and hashing all go to the
    wrapped object, so caches keyed on it behave as without jaxlint.
    """

    def __init__(self, real: Any, key: Any, maker: str = "jit"):
        functools.update_wrapper(self, real)
        self._jaxlint_real = real
        self._jaxlint_key = key
        self._jaxlint_maker = maker  # "jit" or "pmap": the jax function that made it

    def __call__(self, *args, **kwargs):
        __tracebackhide__ = True  # noqa: F841 (pytest and IPython hide the frame)
        collectors = INSTRUMENTATION.collectors
        if collectors:
            key = self._jaxlint_key
            for c in collectors:
                c.called(key)
            try:
                nbytes = _host_bytes((args, kwargs), python_data=False)
            except Exception:  # never break the program for a count
                nbytes = None
            if nbytes is not None:
                caller = sys._getframe(1)
                for c in collectors:
                    c.uploaded(caller, "jit argument", nbytes)
            watched = _watch_donation(collectors, self, args, kwargs) if type(key) is types.CodeType else ()
        prev = eager.inside()
        eager._TLS.inside = True  # a compiled call: what JAX does inside is not an eager dispatch
        calling = getattr(_TLS, "calling", None)
        _TLS.calling = self._jaxlint_key  # a trace this call makes tells whose row its calls are
        try:
            out = self._jaxlint_real(*args, **kwargs)
        except BaseException as e:
            # The traceback the program sees has no jaxlint frame (this one included: a bare
            # `raise` re-raises with the exception's own __traceback__ on Python 3.11+).
            frames.hide(e)
            raise
        finally:
            eager._TLS.inside = prev
            _TLS.calling = calling
        if collectors:
            INSTRUMENTATION.dispatched(out)
            for state in watched:
                try:
                    memory.after_call(state, out)
                except Exception as e:  # never break the program for a figure
                    INSTRUMENTATION._error(e)
        return out


def _watch_donation(collectors, counted: Counted, args: tuple, kwargs: dict) -> list:
    """The first calls of a user's jitted function: which array arguments come back as results
    (see :func:`memory.before_call`)."""
    out = []
    for c in collectors:
        try:
            state = memory.before_call(c.memory, counted._jaxlint_key, counted._jaxlint_real, args, kwargs,
                                       counted._jaxlint_maker)
        except Exception as e:
            INSTRUMENTATION._error(e)
            continue
        if state is not None:
            out.append(state)
    return out


class Instrumentation:
    """Process-wide patches, installed while at least one collector listens."""

    def __init__(self):
        self.collectors: list = []
        self.partial: list = []
        self._saved: list = []  # (owner, name, original, jaxlint's wrapper)
        self._token: Optional[object] = None  # new for each install; the wrappers of older ones pass through
        self._lock = threading.RLock()
        self._listening = False
        self._trace_hooked = False
        self._compile_hooked = False
        self.era = None  # the adapter module for this JAX (see adapters/__init__.py)
        self.jaxpr_owner: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()
        self.by_source: dict = {}  # (file, firstlineno) -> code, for jaxprs derived by grad/vmap
        self.by_name: dict = {}  # name -> set of codes, for compiles outside a jit call (AOT)
        self._jax_dirs: tuple = ()
        self._last_outputs: list = []  # weak references to the arrays the last jitted call returned

    def dispatched(self, out: Any) -> None:
        """Remember (weakly) what the last jitted call returned, for the clock hooks to ask
        whether it is still being computed."""
        try:
            refs = []
            for leaf in jax.tree_util.tree_leaves(out):
                if isinstance(leaf, jax.Array):
                    refs.append(weakref.ref(leaf))
            self._last_outputs = refs
        except Exception:  # never break the program for a count
            self._last_outputs = []

    def work_pending(self) -> Optional[bool]:
        """Whether an array the last jitted call returned is not ready yet; None when none is alive."""
        alive = False
        for ref in self._last_outputs:
            a = ref()
            if a is None:
                continue
            alive = True
            try:
                if not a.is_ready():
                    return True
            except Exception:
                continue
        return False if alive else None

    # -- install / remove ----------------------------------------------------
    def attach(self, collector: Collector) -> None:
        with self._lock:
            if not self.collectors:
                self._install()
            collector.partial = list(self.partial)
            collector.names_only = not self._trace_hooked  # every row's counts are then guesses
            self.collectors = self.collectors + [collector]

    def detach(self, collector: Collector) -> None:
        if collector.t_end is None:
            collector.t_end = time.perf_counter()
        with self._lock:
            self.collectors = [c for c in self.collectors if c is not collector]
            if not self.collectors:
                self._uninstall()

    def _patch(self, owner: Any, name: str, new: Any) -> None:
        self._saved.append((owner, name, _attribute(owner, name), new))
        setattr(owner, name, new)

    def _uninstall(self) -> None:
        # The original goes back only where the attribute still holds jaxlint's wrapper. Where
        # the program replaced it meanwhile (its own `jax.jit = my_jit`, `numpy.asarray` set
        # back), the program's value stays: putting JAX's back would undo the program's choice
        # for whatever runs after the run or audit (atexit handlers, the rest of a test
        # session). A jaxlint wrapper still reachable from such a value (`my_jit` calling the
        # `jax.jit` it replaced) is inert from here on: its install token is no longer current,
        # so it only passes calls through to the original, and never counts twice under a
        # later install.
        self._token = None
        for owner, name, old, new in reversed(self._saved):
            if _attribute(owner, name) is not new:
                continue
            if old is _MISSING:
                try:
                    delattr(owner, name)
                except AttributeError:
                    pass
            else:
                setattr(owner, name, old)
        self._saved = []

    def _install(self) -> None:
        self.partial = []
        self._token = object()
        import os

        self._jax_dirs = tuple(
            os.path.dirname(os.path.realpath(m.__file__)) + os.sep
            for m in (sys.modules.get("jax"), sys.modules.get("jaxlib"))
            if m is not None and getattr(m, "__file__", None)
        )
        self._listen()
        frames.hide_from_jax()  # JAX's traceback filter drops the trace hooks' frames
        self._hook_jit_constructors()
        self._hook_traces()
        self._hook_compiles()
        self._hook_pmap()
        self._hook_transfers()
        self._hook_uploads()
        self._hook_clocks()
        self._hook_callbacks()
        self._hook_eager()
        self.partial.extend(memory.install(self, self._patch, self._compile_target))

    def _compile_target(self) -> Any:
        """For the memory hooks: the record key of the user function whose jit call is compiling
        on this thread; False inside a call of JAX's own; None when none is known (an
        ahead-of-time ``.lower().compile()``, or a JAX whose jit calls are matched by name)."""
        t = getattr(_TLS, "target", None)
        return False if t is _INTERNAL else t

    def compiled_by_name(self, module_name: str) -> Any:
        """The user function an ahead-of-time compile of the module ``jit_<name>`` belongs to,
        when exactly one user function has that name; else None."""
        name = module_name[4:] if module_name.startswith("jit_") else module_name
        code = self._match_name(name) if name else _INTERNAL
        return None if code is _INTERNAL else code

    def _hook_eager(self) -> None:
        """Eager dispatches per user line (see :mod:`.eager`)."""
        try:
            self.partial.extend(eager.install(self, self._patch))
        except Exception as e:  # an unknown JAX layout: no eager counts, nothing broken
            self.partial.append(f"eager dispatches not counted ({e!r})")

    def _listen(self) -> None:
        if self._listening:
            return
        jax.monitoring.register_event_duration_secs_listener(self._on_duration)
        self._listening = True

    # -- jit / pmap: count calls, remember where the wrapper was made ----------
    def _hook_jit_constructors(self) -> None:
        for name in ("jit", "pmap"):
            original = getattr(jax, name, None)
            if original is None:
                self.partial.append(f"jax.{name} not found: calls of its functions are not counted")
                continue
            self._patch(jax, name, self._constructor(original))

    def _constructor(self, original):
        inst, token = self, self._token

        @functools.wraps(original)
        def instrumented(fun=_MISSING, *args, **kwargs):
            if inst._token is not token:  # left over from an earlier install
                return original(*args, **kwargs) if fun is _MISSING else original(fun, *args, **kwargs)
            site = sys._getframe(1)
            if fun is _MISSING:  # jax.jit(static_argnames=...) used as a decorator factory
                decorator = original(*args, **kwargs)
                return lambda f: inst._counted(decorator(f), f, site, maker)
            return inst._counted(original(fun, *args, **kwargs), fun, site, maker)

        maker = getattr(original, "__name__", "jit")

        return instrumented

    def _counted(self, real: Any, fun: Any, site, maker: str = "jit") -> Any:
        collectors = self.collectors
        code = code_of(fun)
        if not collectors or code is None or not callable(real):
            return real
        if not any(c.user_files(code.co_filename) for c in collectors):
            if self._is_jax_code(code):
                return real  # JAX's own jits: eager operations (eager.py counts their calls)
            # a library's jit: its calls are counted for the row its first trace is attributed to
            try:
                return Counted(real, CallKey())
            except Exception as e:
                self._error(e)
                return real
        try:
            self.by_name.setdefault(code.co_name, set()).add(code)
            self.by_source[(code.co_filename, code.co_firstlineno)] = code
            for c in collectors:
                rec = c.record(code, describe)
                if rec.calls is None:
                    rec.calls = 0
                rec.created_at[c.user_files.site(site)] += 1
            return Counted(real, code, maker)
        except Exception as e:  # never break the user's program
            self._error(e)
            return real

    # -- traces ----------------------------------------------------------------
    def _hook_traces(self) -> None:
        self._trace_hooked = False
        try:
            era, misses = select_era()
        except Exception as e:
            era, misses = None, [repr(e)]
        self.era = era
        if era is None:
            self.partial.append(f"trace attribution unavailable on jax {jax.__version__} "
                                f"({'; '.join(misses)}): traces, miss reasons and jaxpr facts not recorded; "
                                "traces and compiles matched by function name (rows say so)")
            return
        try:
            from jax._src import core as jcore

            clean = jcore.trace_state_clean
        except Exception:
            clean = lambda: True  # noqa: E731
        inst, token = self, self._token

        def on_trace(run, call):
            if not inst.collectors or inst._token is not token:
                return run()
            return inst._trace(run, clean, call)

        try:
            era.hook_traces(self._patch, on_trace)
        except Exception as e:
            self.partial.append(f"trace attribution unavailable ({era.NAME}: {e!r}); "
                                "traces and compiles matched by function name (rows say so)")
            return
        self._trace_hooked = True

    def _trace(self, run, clean, call):
        collectors = self.collectors
        fun = call.fun
        code = code_of(fun)
        user = code is not None and any(c.user_files(code.co_filename) for c in collectors)
        top = clean()
        finder = None
        if not user and top and sys.getprofile() is None:
            finder = _FirstUserCall(collectors)
            sys.setprofile(finder)
        start = time.perf_counter()
        prev = eager.inside()
        eager._TLS.inside = True  # JAX's own operations while tracing are not eager dispatches
        try:
            result = run()
        finally:
            eager._TLS.inside = prev
            if finder is not None:
                sys.setprofile(None)
        seconds = time.perf_counter() - start
        try:
            target = code if user else (finder.code if finder else None)
            if target is None and finder is not None and code is not None and not self._is_jax_code(code):
                # a library's jit that traced no user function given to it (numpyro's sampler
                # around the user's model): the program belongs to the library call the user
                # made. JAX's own functions (the eager operations) stay JAX's.
                # Its row is keyed by its code, as a user function's is (one row, every call site
                # under it, its calls counted by its wrapper), and named by the first call of it
                # in this run or audit as the user wrote it (``env.step`` at ``prog.py:9``).
                first_call = _entry_point(sys._getframe(1), collectors, fun)
                if first_call is not None:
                    self._traced(code, None, fun, call, result, seconds, top, first_call)
                    return result
            self._traced(target, fun if user else None, None if user else fun, call, result, seconds, top)
        except Exception as e:  # bookkeeping must never break the user's program
            self._error(e)
        return result

    def _traced(self, code, fun, library_fun, call, result, seconds, top: bool = True,
                first_call: Optional[EntryPoint] = None) -> None:
        """Record one trace of ``code``'s row; ``first_call``: for a library's function, the user's
        call that names its row if the row is new."""
        start = time.perf_counter() - seconds
        jaxpr = self.era.jaxpr_of(result)
        if code is None:
            for c in self.collectors:
                c.internal_traces += 1
                c.spent(None, start, seconds)
            return
        if jaxpr is not None:
            try:
                self.jaxpr_owner[jaxpr] = code
            except TypeError:
                pass
        entry = isinstance(code, EntryPoint) or first_call is not None
        if not entry:  # an entry point has no definition site and no name a compile event carries
            self.by_source[(code.co_filename, code.co_firstlineno)] = code
            self.by_name.setdefault(code.co_name, set()).add(code)
        sig = signature(fun if fun is not None else library_fun, call.ji, call.dbg, call.avals,
                        call.args, call.kwargs)
        caller = sys._getframe(1)
        facts = None
        # the call being made, for the outermost trace only (a trace nested in another belongs to
        # that one's call, not to the wrapper called around both)
        calling = getattr(_TLS, "calling", None) if top else None
        named = describe if first_call is None else (lambda _, fc=first_call: describe(fc))
        for c in self.collectors:
            rec = c.record(code, named)
            if calling is not None:
                c.calls_belong_to(calling, rec)
            if library_fun is not None and rec.via is None:
                rec.via = _library_name(library_fun, qualified=entry)
            rec.traced(fun, sig)
            rec.trace_seconds += seconds
            c.log("trace", code, start, seconds, rec.last_reason)
            site = c.user_files.site(caller)
            rec.traced_from[site] += 1
            c.spent(rec, start, seconds, site, trace=True)
            if rec.jaxpr is None and jaxpr is not None:
                if facts is None:
                    from .jaxpr_facts import jaxpr_facts

                    facts = jaxpr_facts(jaxpr, self.era.consts_of(result), c.user_files)
                rec.jaxpr = facts

    # -- compiles --------------------------------------------------------------
    def _hook_compiles(self) -> None:
        inst, token = self, self._token

        def on_compile(run, jaxpr):
            if not inst.collectors or inst._token is not token:
                return run()
            prev = getattr(_TLS, "target", None)
            _TLS.target = inst._owner(jaxpr)
            try:
                return run()
            finally:
                _TLS.target = prev

        why = base.hook_compiles(self._patch, on_compile)
        self._compile_hooked = why is None
        if why is not None:
            self.partial.append(f"compile attribution by jaxpr unavailable ({why}); compiles matched by name "
                                "(rows say so)")

    def _hook_pmap(self) -> None:
        """The classic ``jax.pmap`` (before it ran through ``jit``): each miss of its cache
        traces, lowers and compiles the function ``jax.pmap`` was given."""
        inst, token = self, self._token

        def on_pmap(run, fun, avals):
            if not inst.collectors or inst._token is not token:
                return run()
            code = code_of(fun)
            if code is None or not any(c.user_files(code.co_filename) for c in inst.collectors):
                return run()
            prev = getattr(_TLS, "target", None)
            _TLS.target = code
            try:  # its lowering and compile are reported before its trace: they belong to this miss
                caller = sys._getframe(1)
                for c in inst.collectors:
                    c.record(code, describe).cost.begin(c.user_files.site(caller))
            except Exception as e:
                inst._error(e)
            start = time.perf_counter()
            try:
                return run()
            finally:
                _TLS.target = prev
                try:
                    inst._pmap_traced(code, fun, avals, start)
                except Exception as e:
                    inst._error(e)

        base.hook_pmap(self._patch, on_pmap)  # unavailable: pmap runs through jit, seen as a trace

    def _pmap_traced(self, code, fun, avals, start) -> None:
        self.by_source[(code.co_filename, code.co_firstlineno)] = code
        self.by_name.setdefault(code.co_name, set()).add(code)
        sig = signature(fun, None, None, avals, (), {})
        caller = sys._getframe(2)
        for c in self.collectors:
            rec = c.record(code, describe)
            rec.via = rec.via or "jax.pmap"
            rec.traced(fun, sig)
            c.log("trace", code, start, time.perf_counter() - start, rec.last_reason)
            site = c.user_files.site(caller)
            rec.traced_from[site] += 1
            # the trace's own seconds are not measured apart from the lowering and compile in it
            c.spent(rec, start, 0.0, site, trace=True)

    def _owner(self, jaxpr) -> Any:
        if jaxpr is None:
            return _INTERNAL
        if not self._trace_hooked:
            return None  # no jaxpr is known: the compile event's name decides (labelled)
        try:
            code = self.jaxpr_owner.get(jaxpr)
        except TypeError:
            code = None
        if code is not None:
            return code
        try:  # a jaxpr derived from a user function (grad, vmap): its debug info names the source
            src = jaxpr.jaxpr.debug_info.func_src_info or ""
            where = src.rsplit(" at ", 1)[1]
            file, line = where.rsplit(":", 1)
            return self.by_source.get((file, int(line)), _INTERNAL)
        except Exception:
            return _INTERNAL

    def _on_duration(self, event: str, duration: float, **kwargs) -> None:
        collectors = self.collectors
        if not collectors or event not in (_COMPILE_EVENT, _LOWER_EVENT, _TRACE_EVENT):
            return
        try:
            name = str(kwargs.get("fun_name", ""))
            if event == _TRACE_EVENT:
                if not self._trace_hooked:
                    self._by_name_trace(name, duration)
                return
            target = getattr(_TLS, "target", None)
            guessed = target is None
            if guessed:
                target = self._match_name(name)
                if not name:
                    self._unnamed(collectors)
            key = None if target is _INTERNAL else target
            for c in collectors:
                if event == _COMPILE_EVENT:
                    c.compiled(key, duration, by_name=guessed)
                else:
                    c.lowered(key, duration)
        except Exception as e:
            self._error(e)

    def _unnamed(self, collectors) -> None:
        note = (f"jax.monitoring events carry no function name on jax {jax.__version__}: compiles outside "
                "a jit call that jaxlint saw cannot be matched to a function (counted as internal)")
        for c in collectors:
            if note not in c.partial:
                c.partial.append(note)

    def _match_name(self, fun_name: str) -> Any:
        """The user function a compile belongs to when no jit call is on the stack (AOT), by name."""
        name = fun_name[4:-1] if fun_name.startswith("jit(") and fun_name.endswith(")") else fun_name
        codes = self.by_name.get(name)
        if codes and len(codes) == 1:
            return next(iter(codes))
        return _INTERNAL

    def _by_name_trace(self, name: str, duration: float) -> None:
        """Fallback when traces cannot be attributed to a code object: match the name
        against the functions the user passed to ``jax.jit``/``jax.pmap``."""
        target = self._match_name(name)
        frame = sys._getframe(2)
        for c in self.collectors:
            start = time.perf_counter() - duration
            if target is _INTERNAL:
                c.internal_traces += 1
                c.spent(None, start, duration)
                continue
            rec = c.record(target, describe)
            rec.by_name = True
            rec.traced(None, None)
            rec.trace_seconds += duration
            c.log("trace", target, start, duration, rec.last_reason)
            site = c.user_files.site(frame)
            rec.traced_from[site] += 1
            c.spent(rec, start, duration, site, trace=True, by_name=True)

    # -- host transfers -----------------------------------------------------
    def _hook_transfers(self) -> None:
        try:
            from jax._src.array import ArrayImpl
        except Exception as e:
            self.partial.append(f"host transfers not counted ({e!r})")
            return
        for method, kind in _TRANSFER_METHODS.items():
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
                self._patch(numpy, name, self._transfer_hook(original, "numpy", lambda a: type(a) is ArrayImpl))

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
            if getattr(_TLS, "busy", False) or not inst.collectors or inst._token is not token or not clean():
                return original(value, *args, **kwargs)
            caller = sys._getframe(1)
            if inst._is_jax_frame(caller):
                return original(value, *args, **kwargs)
            result = original(value, *args, **kwargs)
            try:
                nbytes = _host_bytes(value)
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
            if (not args or type(args[0]) is not str or getattr(_TLS, "staging_callback", False)
                    or not inst.collectors or inst._token is not token):
                return original(*args, **kwargs)
            try:
                caller = sys._getframe(1)
                fmt = _CountedFormat(args[0])
                fmt._sites = [(c, c.user_files.site(caller)) for c in inst.collectors]
            except Exception as e:  # never break the program for a count
                inst._error(e)
                return original(*args, **kwargs)
            _TLS.staging_callback = True  # older JAX: debug.print -> debug_callback, one count
            try:
                return original(fmt, *args[1:], **kwargs)
            finally:
                _TLS.staging_callback = False

        return hooked

    def _callback_hook(self, original):
        inst, token = self, self._token

        @functools.wraps(original)
        def hooked(callback, *args, **kwargs):
            if (getattr(_TLS, "staging_callback", False) or not inst.collectors or inst._token is not token
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

            _TLS.staging_callback = True  # jax.debug.print -> debug_callback: one count
            try:
                return original(counted, *args, **kwargs)
            finally:
                _TLS.staging_callback = False

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

    def _is_jax_frame(self, frame) -> bool:
        return frame.f_code.co_filename.startswith(self._jax_dirs)

    def _is_jax_code(self, code) -> bool:
        return os.path.realpath(code.co_filename).startswith(self._jax_dirs)

    def _transfer_hook(self, original, kind: str, applies=None):
        """Wrap a conversion so that each call from outside JAX on a jax.Array counts once."""
        inst, token = self, self._token

        @functools.wraps(original)
        def hooked(value, *args, **kwargs):
            if (getattr(_TLS, "busy", False) or not inst.collectors or inst._token is not token
                    or (applies is not None and not applies(value))):
                return original(value, *args, **kwargs)
            caller = sys._getframe(1)
            if inst._is_jax_frame(caller):
                return original(value, *args, **kwargs)
            _TLS.busy = True  # nested conversions (str -> __array__) count once
            try:
                result = original(value, *args, **kwargs)
            finally:
                _TLS.busy = False
            for c in inst.collectors:
                c.transferred(caller, kind)
            return result

        return hooked

    def _error(self, e: BaseException) -> None:
        for c in self.collectors:
            c.errors[f"{type(e).__name__}: {e}"] += 1


class _CountedFormat(str):
    """A ``jax.debug.print`` format string, equal to the user's, whose ``format`` (called on the
    host each time the print runs) counts the run for the line that made the print."""

    def format(self, *args, **kwargs):  # noqa: A003
        for c, site in getattr(self, "_sites", ()):
            c.callback_ran(site)
        return str.format(self, *args, **kwargs)


class _FirstUserCall:
    """A profile function that finds the user function a library's trace is tracing.

    Used when JAX traces a library wrapper (``jax.pmap``'s shard_map body,
    ``nnx.jit``, ``eqx.filter_jit``) instead of the user's function itself: the
    first user function called from library code with a tracer among its
    arguments. User code that merely runs during a trace (a monitoring listener,
    a pytree flatten function, a numpyro model, which gets its values from
    effect handlers, not arguments) is passed over, and so are user functions
    called by user code (the model's helpers); when none is found, the program
    belongs to the library call the user made (:func:`_entry_point`).
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
        if _has_tracer(frame.f_locals.values()):
            self.code = code
            sys.setprofile(None)

    def _user(self, filename: str) -> bool:
        return any(c.user_files(filename) for c in self.collectors)


def _host_bytes(value: Any, python_data: bool = True) -> Optional[int]:
    """Bytes of host array data (NumPy arrays and scalars; with ``python_data``, also a list or
    tuple of Python numbers) in a value that JAX copies to the device; None when there is none
    (JAX arrays, tracers, static Python objects)."""
    import numpy

    total, host = 0, False
    for leaf in jax.tree_util.tree_leaves(value):
        if isinstance(leaf, (numpy.ndarray, numpy.generic)):
            total += leaf.nbytes
            host = True
    if not host and python_data and isinstance(value, (list, tuple)) and value and all(
            isinstance(v, (int, float, bool, complex)) for v in jax.tree_util.tree_leaves(value)):
        return numpy.asarray(value).nbytes
    return total if host else None


def _tracer_type():
    try:
        from jax._src.core import Tracer
    except Exception:  # pragma: no cover - other JAX layouts
        Tracer = getattr(jax.core, "Tracer", ())
    return Tracer


_TRACER = _tracer_type()


def _has_tracer(values) -> bool:
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


def _safe_repr(value: Any) -> str:
    if value is None or isinstance(value, (bool, int, float, complex, str, bytes)):
        text = repr(value)
    elif isinstance(value, tuple) and all(v is None or isinstance(v, (bool, int, float, str)) for v in value):
        text = repr(value)
    else:
        text = f"<{type(value).__qualname__} object>"
    return text if len(text) <= 40 else text[:39] + "…"


def signature(fun: Any, ji: Any, dbg: Any, avals: Any, args: tuple, kwargs: dict) -> Signature:
    """The parts of jit's cache key that users can change, named by parameter."""
    positional, star = base.positional_params(fun, ji)

    def name_of(i: int) -> str:
        if i < len(positional):
            return positional[i]
        return f"{star or 'args'}[{i - len(positional)}]"

    static_nums = set(getattr(ji, "static_argnums", ()) or ())
    static_names = set(getattr(ji, "static_argnames", ()) or ())
    static, trees = {}, {}
    partitioned, partitioned_trees = None, {}
    for i, value in enumerate(args):
        if i in static_nums:
            by_arg = _equinox_static(fun, value)
            if by_arg is not None:  # the user's own arguments, as filter_jit split them
                static.update(by_arg[0])
                partitioned = "equinox.filter_jit"
                partitioned_trees = by_arg[1]
                continue
            static[name_of(i)] = (_safe_repr(value), _hash(value))
        else:
            trees[name_of(i)] = jax.tree_util.tree_structure(value)
    for k, value in kwargs.items():
        if k in static_names:
            static[k] = (_safe_repr(value), _hash(value))
        else:
            trees[k] = jax.tree_util.tree_structure(value)
    if partitioned:
        # filter_jit's dynamic halves are flat lists of array leaves: the structure of the user's
        # arguments is in the static half, one entry per argument
        for k in [k for k in trees if k.startswith("dynamic_")]:
            del trees[k]
        trees.update(partitioned_trees)
    names = list(getattr(dbg, "arg_names", None) or ())
    avals = list(avals)
    if len(names) != len(avals):
        names = [f"leaf[{i}]" for i in range(len(avals))]
    leaves = {}
    for path, aval in zip(names, avals):
        leaves[path] = (tuple(getattr(aval, "shape", ())), str(getattr(aval, "dtype", "?")),
                        bool(getattr(aval, "weak_type", False)), getattr(aval, "sharding", None))
    sig = Signature(static, trees, leaves)
    sig.partitioned = partitioned
    return sig


def _equinox_static(fun: Any, value: Any) -> Optional[tuple]:
    """The static half of ``eqx.filter_jit``'s arguments, per argument of the user's function:
    filter_jit calls one ``jax.jit``-ed function with every non-array leaf of the call (Python
    floats included) packed in one static argument ``(static_fun, static_first, static_rest)``,
    each ``(leaves, treedef)`` with None where an array was. ``({parameter name: (shown value,
    hash)} for the parameters with a static leaf, {parameter name: pytree structure} for the
    others)``; None when ``value`` is not that."""
    if getattr(fun, "__module__", None) != "equinox._jit" or not (isinstance(value, tuple) and len(value) == 3):
        return None
    try:
        parts = []
        for leaves, treedef in value:
            parts.append(jax.tree_util.tree_unflatten(treedef, list(leaves)))
        fun_part, first, (rest, kwargs) = parts
        user = fun_part[0] if isinstance(fun_part, tuple) and fun_part else fun_part
        params = [p.name for p in inspect.signature(user).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        given = [first, *list(rest)[:-1]]  # filter_jit adds one dummy None to the positional ones
        named = [(params[i] if i < len(params) else f"args[{i - len(params)}]", v) for i, v in enumerate(given)]
        named += list(dict(kwargs).items())
    except Exception:
        return None
    static, trees = {}, {}
    for name, v in named:
        if jax.tree_util.tree_leaves(v):  # a Python value (or a module's static fields): static
            static[name] = (_safe_repr(v), _hash(v))
        else:  # arrays only (None here): its structure; shapes and dtypes are in the leaves
            trees[name] = jax.tree_util.tree_structure(v)
    return static, trees


def _hash(value: Any) -> Any:
    try:
        return hash(value)
    except Exception:
        return id(value)


INSTRUMENTATION = Instrumentation()


class Audit:
    """``with audit() as a:`` — record compilations and transfers inside the block."""

    def __init__(self, user_roots=None, namespace: Optional[dict] = None):
        self.collector = Collector(UserFiles(user_roots))
        # the module globals whose jitted functions made before the block get a call counter for
        # its duration (the caller's, or the test module's for the pytest fixture)
        self._namespace = namespace
        self._counted: list = []  # (namespace, name, original, counter) put in place, to restore

    def __enter__(self) -> "Audit":
        INSTRUMENTATION.attach(self.collector)
        namespace = self._namespace if self._namespace is not None else sys._getframe(1).f_globals
        try:
            self._count_existing(namespace)
        except Exception as e:  # never break the user's code for a count
            INSTRUMENTATION._error(e)
        return self

    def __exit__(self, *exc) -> None:
        for namespace, name, original, counter in reversed(self._counted):
            if namespace.get(name) is counter:  # the user did not rebind it meanwhile
                namespace[name] = original
        self._counted = []
        INSTRUMENTATION.detach(self.collector)

    def _count_existing(self, namespace: dict) -> None:
        """A function of the user's jitted before the block (``@jax.jit`` at module level in a test)
        has no call counter: jaxlint wraps only what ``jax.jit`` makes while it listens. Its name
        in ``namespace`` holds a counting wrapper while the block runs, so calls through that name
        (the way a module calls its own functions) are counted; other references are not."""
        jitted = base.jitted_type()
        for name, value in list(namespace.items()):
            if type(value) is not jitted:
                continue
            code = code_of(value)
            if code is None or not self.collector.user_files(code.co_filename):
                continue
            rec = self.collector.record(code, describe)
            if rec.calls is None:
                rec.calls = 0
            counter = Counted(value, code)
            namespace[name] = counter
            self._counted.append((namespace, name, value, counter))

    def _record(self, fn: Any):
        code = code_of(fn)
        if code is None:
            raise TypeError(f"cannot find the definition of {fn!r}")
        return self.collector.records.get(code)

    def compiles(self, fn: Any) -> int:
        """Compilations of ``fn`` (a jitted function or the function it wraps) in the block."""
        rec = self._record(fn)
        return rec.compiles if rec else 0

    def traces(self, fn: Any) -> int:
        rec = self._record(fn)
        return rec.traces if rec else 0

    def calls(self, fn: Any) -> Optional[int]:
        """Calls of ``fn`` in the block: through a wrapper ``jax.jit``/``jax.pmap`` made while
        jaxlint listened, or, for a function jitted before the block, through its name in the
        module that opened the block; None when no call of it could be counted."""
        rec = self._record(fn)
        return rec.calls if rec else 0

    def miss_reasons(self, fn: Any) -> list:
        """``[(reason, argument, before, after, count)]`` for every retrace of ``fn``."""
        rec = self._record(fn)
        return [(*k, n) for k, n in rec.miss_reasons.most_common()] if rec else []

    def assert_compiles(self, fn: Any, at_most: Optional[int] = None, *, exactly: Optional[int] = None) -> None:
        """Raise AssertionError unless ``fn`` compiled at most (or exactly) N times in the block;
        the message has the count, every retrace reason and the fix."""
        __tracebackhide__ = True  # pytest shows the user's assert line, not this one
        from .budget import compile_assertion

        message = compile_assertion(self._record(fn), fn, at_most, exactly, self.collector.names_only)
        if message:
            raise AssertionError(message)

    def assert_no_recompile(self, fn: Any) -> None:
        """``assert_compiles(fn, at_most=1)``: one compile in the block at most."""
        __tracebackhide__ = True
        self.assert_compiles(fn, at_most=1)

    def memory(self, fn: Any) -> list:
        """XLA's memory figures of each compile of ``fn`` in the block (bytes: ``argument``,
        ``output``, ``temp``, ``alias``, ``generated_code``, ``peak`` (None where this jaxlib
        reports none), ``footprint`` and ``footprint_exact``), as ``memory_analysis()`` gives them."""
        rec = self._record(fn)
        return memory.function_keys(self.collector.memory, rec)["memory"]["compiles"] if (
            rec is not None and self.collector.memory.programs.get(rec.key)) else []

    def assert_memory(self, fn: Any, at_most: Any) -> None:
        """Raise AssertionError if a compile of ``fn`` in the block needs more than ``at_most``
        (bytes, or a size such as ``"2 GB"``/``"512 MiB"``): XLA's peak, or arguments + outputs +
        temporaries - aliased where this jaxlib reports no peak; the message has the breakdown.
        Also fails when ``fn`` did not compile in the block (its memory is then unknown)."""
        __tracebackhide__ = True
        from .budget import memory_assertion

        message = memory_assertion(self._record(fn), self.memory(fn), fn, at_most)
        if message:
            raise AssertionError(message)

    def transfers(self) -> list:
        """``[Transfer(file, line, kind, count)]``, most frequent first."""
        from .report import Transfer

        return [Transfer(f, l, k, n) for (f, l, k), n in self.collector.transfers.most_common()]

    def transfer_count(self) -> int:
        return sum(self.collector.transfers.values())

    @property
    def internal_compiles(self) -> int:
        return self.collector.internal_compiles

    def report(self) -> dict:
        """The JSON-ready report (without static findings) of what the block did."""
        from .report import build

        return build(self.collector, findings=None, exit_code=None)
