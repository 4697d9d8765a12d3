"""The instrumentation: what is patched in JAX, and how events reach collectors.

Exactness rules this package keeps:

* The function JAX traces is never replaced or wrapped, so its caches see
  exactly the objects they would see without jaxlint and the program compiles
  exactly as often. ``jax.jit``/``jax.pmap`` still return JAX's own wrapper;
  jaxlint only puts a forwarding object around that result to count calls
  (:class:`Counted`, here).
* Traces and compiles: :mod:`.tracing`. Host transfers, host-to-device copies,
  callbacks and clock reads: :mod:`.hostio`. Eager dispatches: :mod:`.eager`.
  Memory and set-up order: :mod:`.memory`. Step loops and the device's idle
  time: :mod:`.steps`. Each is installed from :meth:`Instrumentation._install`.
* When an era's private names are missing (an untested JAX), the run still
  completes, the report says which parts are partial, and counts matched by
  function name are labelled as such.
"""

from __future__ import annotations

import functools
import os
import sys
import threading
import time
import types
import weakref
from typing import Any, Optional

import jax

from . import eager, frames, memory
from .attribution import code_of, describe
from .collector import CallKey, Collector
from .forwarding import Forwarding
from .hostio import HostHooks, host_bytes
from .steps import Call, Watcher
from .tracing import INTERNAL, TLS, TraceHooks

_MISSING = object()
_ARRAY_KINDS: set = set()  # types of jitted calls' outputs seen to be jax.Array subclasses
_PERF = eager._PERF  # the clock as it was before jaxlint wrapped it


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
        self._jaxlint_state: Optional[_Steady] = None  # what each call would otherwise look up again

    def __call__(self, *args, **kwargs):
        __tracebackhide__ = True  # noqa: F841 (pytest and IPython hide the frame)
        collectors = INSTRUMENTATION.collectors
        call = timed = None  # timed: a call on the watcher's full path, whose own time jaxlint measures
        if collectors:
            entered = _PERF()
            key = self._jaxlint_key
            caller = sys._getframe(1)
            steady = self._jaxlint_state
            if steady is None or steady.collectors is not collectors:
                steady = self._jaxlint_state = _Steady(collectors)
            if steady.events != INSTRUMENTATION.compile_events:
                steady.refresh(key)
            if steady.records is None:
                for c in collectors:
                    c.called(key)
            else:
                for rec in steady.records:
                    rec.calls += 1
            try:
                nbytes = host_bytes((args, kwargs), python_data=False)
            except Exception:  # never break the program for a count
                nbytes = None
            if nbytes is not None:
                for c in collectors:
                    c.uploaded(caller, "jit argument", nbytes)
            if steady.donation_watched or type(key) is not types.CodeType:
                watched = ()
            else:
                watched = _watch_donation(collectors, self, args, kwargs)
                steady.donation_watched = not watched  # every collector has seen its calls
            try:
                if not steady.settled:
                    steady.settled = INSTRUMENTATION.watcher.settled(key)
                call = INSTRUMENTATION.watcher.before(key, caller, steady.settled)
            except Exception as e:  # never break the program for a figure
                INSTRUMENTATION._error(e)
            if type(call) is Call:
                timed = call
        prev = getattr(eager._TLS, "inside", False)  # eager.inside(), without a call
        eager._TLS.inside = True  # a compiled call: what JAX does inside is not an eager dispatch
        calling = getattr(TLS, "calling", None)
        TLS.calling = self._jaxlint_key  # a trace this call makes tells whose row its calls are
        try:
            if timed is not None:
                dispatching = _PERF()
            out = self._jaxlint_real(*args, **kwargs)
            if timed is not None:
                returned = _PERF()
        except BaseException as e:
            # The traceback the program sees has no jaxlint frame (this one included: a bare
            # `raise` re-raises with the exception's own __traceback__ on Python 3.11+).
            frames.hide(e)
            raise
        finally:
            eager._TLS.inside = prev
            TLS.calling = calling
        if collectors:
            leaves = INSTRUMENTATION.dispatched(out)
            if call is not None:
                try:
                    INSTRUMENTATION.watcher.after(call, leaves, nbytes is not None)
                except Exception as e:
                    INSTRUMENTATION._error(e)
            for state in watched:
                try:
                    memory.after_call(state, out)
                except Exception as e:  # never break the program for a figure
                    INSTRUMENTATION._error(e)
            if steady.watch_events != INSTRUMENTATION.compile_events:  # a trace may have made one
                steady.watch = INSTRUMENTATION.stale_watches.get(key)
                steady.watch_events = INSTRUMENTATION.compile_events
            w = steady.watch
            if w is not None:  # JAX603: did this call run a program traced with an older value?
                try:
                    w.check(_stale_call, collectors, key)
                except Exception as e:
                    INSTRUMENTATION._error(e)
            if timed is not None:  # jaxlint's own time in this call: the donation advice's depth
                INSTRUMENTATION.watcher.spent(timed, (dispatching - entered) + (_PERF() - returned))
        return out


class _Steady:
    """What a :class:`Counted` wrapper's calls would otherwise look up again at every call, for
    one set of collectors (a new set starts afresh). Each entry is checked against what can change
    it: the collectors' records and the stale-value watch are looked up again after any trace or
    compile (``compile_events``); the donation watch and the watcher's first calls end for good
    (a new install of the instrumentation has new collectors)."""

    __slots__ = ("collectors", "events", "records", "donation_watched", "settled", "watch", "watch_events")

    def __init__(self, collectors: list):
        self.collectors = collectors
        self.events = -1
        self.records: Optional[list] = None  # each collector's record of this function, when all have one
        self.donation_watched = False  # memory.before_call has seen enough calls for every collector
        self.settled = False  # the watcher has had this function's first calls (steps.WATCH_ALL)
        self.watch = None
        self.watch_events = -1

    def refresh(self, key: Any) -> None:
        self.events = INSTRUMENTATION.compile_events
        records = []
        for c in self.collectors:
            rec = c.records.get(c.call_rows.get(key, key))
            if rec is None or rec.calls is None:
                self.records = None
                break
            records.append(rec)
        else:
            self.records = records


def _stale_call(collectors, key, slot, now) -> None:
    for c in collectors:
        c.stale_call(key, slot, now)


def _watch_donation(collectors, counted: Counted, args: tuple, kwargs: dict) -> list:
    """The first calls of a user's jitted function: which array arguments come back as results
    (see :func:`memory.before_call`)."""
    out = []
    for c in collectors:
        try:
            state = memory.before_call(c.memory, counted._jaxlint_key, counted._jaxlint_real, args, kwargs,
                                       counted._jaxlint_maker, INSTRUMENTATION.watcher.held)
        except Exception as e:
            INSTRUMENTATION._error(e)
            continue
        if state is not None:
            out.append(state)
    return out


class Instrumentation(TraceHooks, HostHooks):
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
        self.stale_watches: dict = {}  # code -> stale.Watch: what its traces read (JAX603)
        self._jax_dirs: tuple = ()
        self._last_outputs: list = []  # weak references to the arrays the last jitted call returned
        self.compile_events = 0  # traces and compiles so far: a call during which it changed compiled
        self.watcher = Watcher(self)  # ready times, in-flight depth, idle windows (steps.py)
        self.watcher.counted_code = Counted.__call__.__code__

    def dispatched(self, out: Any) -> list:
        """Remember (weakly) what the last jitted call returned, for the clock hooks to ask
        whether it is still being computed; return its arrays."""
        try:
            leaves = jax.tree_util.tree_leaves(out)
            # one type test per distinct type, not per leaf (a step returns hundreds of arrays),
            # and none for the types already seen to be arrays
            kinds = set(map(type, leaves))
            if kinds <= _ARRAY_KINDS:
                arrays = leaves
            elif all(issubclass(k, jax.Array) for k in kinds):
                _ARRAY_KINDS.update(kinds)
                arrays = leaves
            else:
                arrays = [leaf for leaf in leaves if isinstance(leaf, jax.Array)]
            # all outputs of one call are ready together: the first and the last one tell
            self._last_outputs = [weakref.ref(a) for a in (arrays[:1] + arrays[-1:] if len(arrays) > 1 else arrays)]
            return arrays
        except Exception:  # never break the program for a count
            self._last_outputs = []
            return []

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
        try:  # every call made so far is watched to its end before the collector's log is read
            if not self.watcher.flush():
                collector.steps.notes.append("the device had not finished the last calls 60 s after the program "
                                             "ended: their steps are not counted")
        except Exception as e:
            self._error(e)
        with self._lock:
            self.collectors = [c for c in self.collectors if c is not collector]
            if not self.collectors:
                self._uninstall()
                self.watcher.stop()

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
        self.stale_watches = {}
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
        t = getattr(TLS, "target", None)
        return False if t is INTERNAL else t

    def compiled_by_name(self, module_name: str) -> Any:
        """The user function an ahead-of-time compile of the module ``jit_<name>`` belongs to,
        when exactly one user function has that name; else None."""
        name = module_name[4:] if module_name.startswith("jit_") else module_name
        code = self._match_name(name) if name else INTERNAL
        return None if code is INTERNAL else code

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

    def _is_jax_frame(self, frame) -> bool:
        return frame.f_code.co_filename.startswith(self._jax_dirs)

    def _is_jax_code(self, code) -> bool:
        return os.path.realpath(code.co_filename).startswith(self._jax_dirs)

    def _error(self, e: BaseException) -> None:
        for c in self.collectors:
            c.errors[f"{type(e).__name__}: {e}"] += 1


INSTRUMENTATION = Instrumentation()
