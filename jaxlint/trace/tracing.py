"""Traces and compilations: the hooks at JAX's trace-cache miss and its compile events, and
the attribution of each to a user function's row (a mixin of :class:`.hooks.Instrumentation`).

Traces are observed where JAX runs one trace-cache miss of ``jax.jit`` (one module per JAX era
in ``adapters``); compilations by the public ``jax.monitoring`` compile events, attributed to a
function through the jaxpr being compiled, or by the function's name where nothing else tells
(labelled so). The function JAX traces is never replaced or wrapped.
"""

from __future__ import annotations

import sys
import threading
import time
from typing import Any, Optional

import jax

from . import eager, stale
from .adapters import base
from .adapters import select as select_era
from .attribution import EntryPoint, FirstUserCall, code_of, describe, entry_point, library_name
from .signature import signature

TLS = threading.local()  # .target: whose compile runs on this thread; .calling: the counted call in progress
INTERNAL = object()  # compile target for JAX's own functions
TRACE_EVENT, LOWER_EVENT, COMPILE_EVENT = base.events()


class TraceHooks:
    """Traces, lowerings and compiles (methods of :class:`.hooks.Instrumentation`)."""

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
            finder = FirstUserCall(collectors)
            sys.setprofile(finder)
        self.compile_events += 1
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
                first_call = entry_point(sys._getframe(1), collectors, fun)
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
        calling = getattr(TLS, "calling", None) if top else None
        named = describe if first_call is None else (lambda _, fc=first_call: describe(fc))
        for c in self.collectors:
            rec = c.record(code, named)
            if calling is not None:
                c.calls_belong_to(calling, rec)
            if library_fun is not None and rec.via is None:
                rec.via = library_name(library_fun, qualified=entry)
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
        if fun is not None:
            self._watch_reads(code, fun)

    def _watch_reads(self, code, fun) -> None:
        """What the trace of the user's ``fun`` just read from globals, closures and ``self``
        (JAX603's runtime evidence, :mod:`.stale`)."""
        collectors = self.collectors
        stale.watch(self.stale_watches, code, fun, lambda f: any(c.user_files(f) for c in collectors))
        w = self.stale_watches.get(code)
        for c in collectors:
            c.record(code, describe).watch = w

    # -- compiles --------------------------------------------------------------
    def _hook_compiles(self) -> None:
        inst, token = self, self._token

        def on_compile(run, jaxpr):
            if not inst.collectors or inst._token is not token:
                return run()
            prev = getattr(TLS, "target", None)
            TLS.target = inst._owner(jaxpr)
            try:
                return run()
            finally:
                TLS.target = prev

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
            prev = getattr(TLS, "target", None)
            TLS.target = code
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
                TLS.target = prev
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
        self._watch_reads(code, fun)

    def _owner(self, jaxpr) -> Any:
        if jaxpr is None:
            return INTERNAL
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
            return self.by_source.get((file, int(line)), INTERNAL)
        except Exception:
            return INTERNAL

    def _on_duration(self, event: str, duration: float, **kwargs) -> None:
        collectors = self.collectors
        if not collectors or event not in (COMPILE_EVENT, LOWER_EVENT, TRACE_EVENT):
            return
        try:
            name = str(kwargs.get("fun_name", ""))
            if event == TRACE_EVENT:
                if not self._trace_hooked:
                    self._by_name_trace(name, duration)
                return
            target = getattr(TLS, "target", None)
            guessed = target is None
            if guessed:
                target = self._match_name(name)
                if not name:
                    self._unnamed(collectors)
            key = None if target is INTERNAL else target
            self.compile_events += 1
            for c in collectors:
                if event == COMPILE_EVENT:
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
        return INTERNAL

    def _by_name_trace(self, name: str, duration: float) -> None:
        """Fallback when traces cannot be attributed to a code object: match the name
        against the functions the user passed to ``jax.jit``/``jax.pmap``."""
        target = self._match_name(name)
        frame = sys._getframe(2)
        for c in self.collectors:
            start = time.perf_counter() - duration
            if target is INTERNAL:
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

