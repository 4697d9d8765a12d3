"""``with audit() as a:``: what JAX did inside a block of the user's own code (tests, notebooks)."""

from __future__ import annotations

import sys
from typing import Any, Optional

from . import memory_report
from .adapters import base
from .attribution import code_of, describe
from .collector import Collector
from .hooks import INSTRUMENTATION, Counted
from .userfiles import UserFiles


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
        return memory_report.function_keys(self.collector.memory, rec)["memory"]["compiles"] if (
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
