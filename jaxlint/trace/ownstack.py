"""Samples of the dispatching thread's stack taken by that thread itself, for CPython 3.11.

On CPython 3.11 the watcher thread must not read another running thread's frames (it can crash
the process: :data:`.steploops.SAMPLES_STACKS`). There, when the step loop runs on the main thread,
the watcher asks the main thread for a sample instead: it sends it :data:`SIGNAL` with
``signal.pthread_kill`` (to that thread only), and the handler, which CPython runs in the main
thread at its next bytecode, walks the main thread's own frames. Nothing reads another thread's
frames.

What it changes for the program, and how that is kept from mattering:
- the handler is installed only when the program has none of its own for :data:`SIGNAL`
  (``SIGURG``: ignored by default, so a signal that arrives after jaxlint stopped does nothing),
  a signal is sent only while the handler is still jaxlint's (a program that installs its own
  later gets none), and the program's own is put back when jaxlint stops;
- system calls it interrupts restart (``signal.siginterrupt(SIGNAL, False)``: ``SA_RESTART``), and
  those that cannot (``sleep``, ``select``) are resumed by Python after the handler (PEP 475);
- the handler costs the main thread one walk of its own stack per sample (a few microseconds),
  only while the device waits, at most one per :data:`.steps.SAMPLE_SECONDS` of idle time.

A sample is stamped with the time the watcher asked for it: a thread inside a long C call (a NumPy
operation, a file read) runs the handler only when the call returns, and its line is still the
line that made that call.

Where reading another thread's frames is safe (CPython 3.10, 3.12+), the watcher reads them itself,
with :func:`other_thread_stack` (here with the rest of the stack reading).
"""

from __future__ import annotations

import collections
import functools
import itertools
import operator
import signal
import sys
import threading
from typing import Any, Optional

SIGNAL: Optional[int] = getattr(signal, "SIGURG", None)


class OwnSampler:
    def __init__(self):
        self.rows: "collections.deque" = collections.deque()  # (time asked, [(code, line, module)])
        self._asked: Optional[float] = None
        self._saved: Any = None
        self._installed = False
        self._main = threading.main_thread().ident
        self._bound = self._handler  # one object: a bound method read again is a new one

    @property
    def installed(self) -> bool:
        return self._installed

    def install(self) -> bool:
        """From the main thread: install the handler unless the program has its own. True when
        it is installed (now or before)."""
        if self._installed:
            return True
        if SIGNAL is None or not hasattr(signal, "pthread_kill") or threading.get_ident() != self._main:
            return False
        try:
            saved = signal.getsignal(SIGNAL)
            if saved not in (signal.SIG_DFL, signal.SIG_IGN, None):
                return False  # the program's own: leave it
            signal.signal(SIGNAL, self._bound)
            signal.siginterrupt(SIGNAL, False)
        except (ValueError, OSError, RuntimeError):
            return False
        self._saved, self._installed = saved, True
        return True

    def samples(self, thread: int) -> bool:
        """Whether :meth:`ask` can sample ``thread``."""
        return self._installed and thread == self._main

    def ask(self, thread: int, t: float) -> bool:
        """From the watcher: ask the main thread for one sample, stamped ``t``."""
        if not self._installed or thread != self._main or self._asked is not None:
            return False
        try:
            if signal.getsignal(SIGNAL) is not self._bound:  # the program installed its own since
                self._installed = False
                return False
            self._asked = t
            signal.pthread_kill(thread, SIGNAL)
        except (ValueError, OSError, RuntimeError):
            self._asked = None
            return False
        return True

    def _handler(self, signum, frame) -> None:
        t, self._asked = self._asked, None
        if t is None:
            return
        rows = []
        while frame is not None:  # this thread's own frames
            rows.append((frame.f_code, frame.f_lineno, frame.f_globals.get("__name__", "?")))
            frame = frame.f_back
        self.rows.append((t, rows))

    def drain(self) -> list:
        out = []
        rows = self.rows
        while rows:
            out.append(rows.popleft())
        return out

    def uninstall(self) -> None:
        """Put the program's handler back (from the main thread; elsewhere it stays, doing nothing
        when not asked)."""
        if not self._installed or threading.get_ident() != self._main:
            return
        try:
            if signal.getsignal(SIGNAL) is self._bound:
                signal.signal(SIGNAL, signal.SIG_DFL if self._saved is None else self._saved)
        except (ValueError, OSError, RuntimeError):
            return
        self._installed = False
        self._asked = None
        self.rows.clear()


# One sample of another thread's stack, read in a single call into C: the thread's frames cannot
# change while it runs, because no Python bytecode of the watcher runs in between and the GIL is
# not given up (unless a garbage collection it triggers runs a Python finalizer midway: rare, and
# then the read is as before). A loop over ``f_back`` in Python would give the GIL back between its steps, and a
# frame the other thread popped meanwhile is read afterwards: on CPython 3.11 that crashed the
# process (SIGSEGV in ``frame.f_code``, seen in CI; CPython issues 99110, 106092, 111363).
_ROW = operator.attrgetter("f_code", "f_lineno", "f_globals")
_NOT_NONE = functools.partial(operator.is_not, None)
_CURRENT = ((),)


def other_thread_stack(thread: int) -> list:
    """(code, line, module name) of each frame of ``thread``, innermost first; [] when it has
    none. Everything from ``sys._current_frames()`` to the last ``f_back`` runs in C."""
    top = map(operator.methodcaller("get", thread), itertools.starmap(sys._current_frames, _CURRENT))
    frames = itertools.takewhile(_NOT_NONE, itertools.accumulate(
        itertools.chain(top, itertools.repeat("f_back")), getattr))
    return [(code, line, g.get("__name__", "?")) for code, line, g in list(map(_ROW, frames))]
