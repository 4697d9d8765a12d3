"""What one run (or one ``audit()`` block) observed: plain data, no JAX imports.

``hooks`` feeds events in; ``report`` turns a ``Collector`` into the report.
Functions are keyed by their definition site (the code object), so two
functions named ``step`` are two rows, and one lambda re-created every
iteration is one row with many compilations.
"""

from __future__ import annotations

import time
import weakref
from collections import Counter, namedtuple
from typing import Any, Optional

from . import stale
from .cost import Clock, Cost, spend
from .memory import Memory
from .steploops import StepLog

# Reasons for a retrace, as they appear in the JSON report.
SHAPE = "shape"
DTYPE = "dtype"
WEAK_TYPE = "weak type"
SHARDING = "sharding"
STRUCTURE = "pytree structure"
STATIC = "static value"
RECREATED = "function object re-created"
SAME = "same signature traced again (cache cleared or evicted, or a config/context change)"

FIRST_CALL = "first call"

_MAX_IDENTITIES = 16
_MAX_SIGNATURES = 64
# The event log (timeline, --html, --chrome-trace): traces, lowerings and compiles are rare, so
# each is logged with its time, up to MAX_EVENTS per run (the rest only counted in
# ``events_dropped``); JAX's own eager compiles at most MAX_INTERNAL_EVENTS of those. Host
# transfers are frequent: only the first MAX_TRANSFER_SAMPLES get a timestamp.
MAX_EVENTS = 10_000
MAX_INTERNAL_EVENTS = 2_000
MAX_TRANSFER_SAMPLES = 1_000

# t: seconds since the run started; kind: "trace", "lower" or "compile"; key: the record's key
# (None: JAX's own eager compiles); reason: why (a trace's miss reason; a compile's is the
# latest trace's of that function, or "first call").
Event = namedtuple("Event", "t seconds kind key reason")


class Signature:
    """What jit's cache key is made of, in a form that can be compared and shown.

    ``static``: parameter name -> (shown value, hash); ``trees``: parameter
    name -> pytree structure; ``leaves``: leaf path -> (shape, dtype, weak,
    sharding) in argument order.
    """

    __slots__ = ("static", "trees", "leaves", "partitioned")

    def __init__(self, static: dict, trees: dict, leaves: dict):
        self.static = static
        self.trees = trees
        self.leaves = leaves
        # the library wrapper that decided which arguments are static ("equinox.filter_jit":
        # every non-array leaf, Python numbers included), or None for jax.jit's static_argnums
        self.partitioned: Optional[str] = None

    def diff(self, before: "Signature") -> list:
        """(reason, argument, before, after) for everything that changed since ``before``."""
        out = []
        for name in list(before.static) + [n for n in self.static if n not in before.static]:
            b, a = before.static.get(name), self.static.get(name)
            if (b is None) != (a is None) or (b is not None and b != a):
                shown_b, shown_a = b[0] if b else "(not given)", a[0] if a else "(not given)"
                if shown_a == shown_b:
                    shown_a += " (not equal)"
                out.append((STATIC, name, shown_b, shown_a))
        changed_trees = set()
        for name in list(before.trees) + [n for n in self.trees if n not in before.trees]:
            b, a = before.trees.get(name), self.trees.get(name)
            if (b is None) != (a is None) or (b is not None and b != a):
                changed_trees.add(name)
                out.append((STRUCTURE, name, _short_tree(b), _short_tree(a)))
        for path, a in self.leaves.items():
            if _top(path) in changed_trees:
                continue
            b = before.leaves.get(path)
            if b is None or b == a:
                continue
            if b[0] != a[0]:
                out.append((SHAPE, path, show_aval(b), show_aval(a)))
            elif b[1] != a[1]:
                out.append((DTYPE, path, show_aval(b), show_aval(a)))
            elif b[2] != a[2]:
                out.append((WEAK_TYPE, path, show_aval(b), show_aval(a)))
            else:
                out.append((SHARDING, path, _short(str(b[3])), _short(str(a[3]))))
        if not out and before.leaves.keys() != self.leaves.keys():
            out.append((STRUCTURE, None, _short(", ".join(before.leaves)), _short(", ".join(self.leaves))))
        return out


def _top(path: str) -> str:
    for i, ch in enumerate(path):
        if ch in "[.":
            return path[:i]
    return path


def _short(text: str, width: int = 48) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def _short_tree(tree: Any) -> str:
    return "(not given)" if tree is None else _short(str(tree).replace("PyTreeDef", "", 1))


_DTYPE_SHORT = {
    "float16": "f16", "bfloat16": "bf16", "float32": "f32", "float64": "f64",
    "int8": "i8", "int16": "i16", "int32": "i32", "int64": "i64",
    "uint8": "u8", "uint16": "u16", "uint32": "u32", "uint64": "u64",
    "bool": "bool", "complex64": "c64", "complex128": "c128",
}


def show_aval(leaf: tuple) -> str:
    """``f32[32,784]``, with ``{weak}`` for weakly typed Python scalars."""
    shape, dtype, weak = leaf[0], leaf[1], leaf[2]
    text = f"{_DTYPE_SHORT.get(dtype, dtype)}[{','.join(str(d) for d in shape)}]"
    return text + "{weak}" if weak else text


class CallKey:
    """The call counter of one jitted function a library made (``partial(jax.jit, ...)`` on an
    environment's ``step``, the function inside ``eqx.filter_jit``): which row its calls belong to
    is known only at its first trace (:meth:`Collector.calls_belong_to`)."""

    __slots__ = ("__weakref__",)


class Record:
    """Everything seen for one function (one definition site)."""

    def __init__(self, key: Any, name: str, qualname: str, file: Optional[str], line: Optional[int]):
        self.key = key
        self.name = name
        self.qualname = qualname
        self.file = file
        self.line = line
        self.calls: Optional[int] = None  # None: never called through an instrumented wrapper
        self.traces = 0
        self.compiles = 0
        self.trace_seconds = 0.0
        self.lower_seconds = 0.0
        self.compile_seconds = 0.0
        self.miss_reasons: Counter = Counter()
        self.created_at: Counter = Counter()  # (file, line) of the jax.jit/jax.pmap call
        self.traced_from: Counter = Counter()  # (file, line) of the call that caused a trace
        self.via: Optional[str] = None  # library function that traced this one (nnx.jit, pmap ...)
        self.static_partition: Optional[str] = None  # Signature.partitioned of its traces
        self.jaxpr: Optional[dict] = None  # facts of the first trace
        # True when some of its traces or compiles were attributed by function name only (no
        # trace hook on this JAX, or an ahead-of-time compile): its counts are guesses
        self.by_name = False
        self.last_reason = FIRST_CALL  # why the latest trace missed the cache, as text
        self.last_keys: tuple = ()  # its miss_reasons keys (none for a first call or an unknown reason)
        self.cost = Cost()  # seconds per miss, reason and call site (cost.py)
        self.watch = None  # stale.Watch: the names its traces read (JAX603's evidence)
        self.stale: dict = {}  # name -> [calls from the cache after it was rebound, traced value, last value]
        self._history: list = []  # recent signatures of every trace, for traces of unknown objects
        self._identities: list = []  # [[weakref or None, recent signatures of that object]]

    def traced(self, fun: Any, sig: Optional[Signature]) -> None:
        """Count one trace of ``fun`` and work out why the cache missed.

        A retrace of the same function object is explained by its difference
        from the closest signature traced before (the cache entry it almost
        hit); a trace of a new object with the same code is a re-created
        function (jit in a loop, a fresh lambda or bound method).
        """
        first = self.traces == 0
        self.traces += 1
        self.last_keys = ()
        if sig is not None and sig.partitioned:
            self.static_partition = sig.partitioned
        if sig is None:
            self.last_reason = FIRST_CALL if first else "traced again (reason not recorded)"
            return
        entry = self._identity(fun)
        if first:
            self.last_reason = FIRST_CALL
        elif entry is not None:
            self.last_reason = reason_text(self._explain(sig, entry[1]))
        elif fun is not None:
            self.miss_reasons[(RECREATED, None, None, None)] += 1
            self.last_keys = ((RECREATED, None, None, None),)
            self.last_reason = RECREATED
        else:
            self.last_reason = reason_text(self._explain(sig, self._history))
        if fun is not None:
            if entry is None:
                entry = [_ref(fun), []]
                self._identities.append(entry)
                if len(self._identities) > _MAX_IDENTITIES:
                    self._identities = [e for e in self._identities if e[0] is not None and e[0]() is not None]
                    del self._identities[: max(0, len(self._identities) - _MAX_IDENTITIES)]
            _remember(entry[1], sig)
        _remember(self._history, sig)

    def _explain(self, sig: Signature, previous: list) -> list:
        best = None
        for before in reversed(previous):
            d = sig.diff(before)
            if best is None or len(d) < len(best):
                best = d
            if not d:
                break
        best = best or [(SAME, None, None, None)]
        for r in best:
            self.miss_reasons[r] += 1
        self.last_keys = tuple(best)
        return best

    def _identity(self, fun: Any):
        if fun is None:
            return None
        for entry in self._identities:
            ref = entry[0]
            if ref is not None and ref() is fun:
                return entry
        return None


def reason_text(reasons: list) -> str:
    """One trace's miss reasons ``[(reason, argument, before, after)]`` as one line."""
    out = []
    for reason, arg, before, after in reasons:
        if reason == RECREATED or arg is None:
            out.append(reason)
        else:
            out.append(f"{reason} of `{arg}` changed: {before} → {after}")
    return "; ".join(out)


def _remember(history: list, sig: Signature) -> None:
    history.append(sig)
    if len(history) > _MAX_SIGNATURES:
        del history[0]


def _ref(obj: Any):
    try:
        return weakref.ref(obj)
    except TypeError:
        return None


class EagerSlot:
    """Eager dispatches of one JAX operation at one instruction of a user's code (see
    ``Collector.eager_slot``)."""

    __slots__ = ("code", "line", "name", "n", "seconds")

    def __init__(self, code, line: int, name: str):
        self.code, self.line, self.name, self.n, self.seconds = code, line, name, 0, 0.0


class Collector:
    """Receives events from the hooks; one per ``jaxlint trace`` run or ``audit()`` block."""

    def __init__(self, user_files):
        self.user_files = user_files
        self.records: dict = {}
        self.transfers: Counter = Counter()  # (file, line, kind) -> count
        # (file, line, kind) -> Counter of the library frames (module, qualname, file, line) that made them
        self.transfer_via: dict = {}
        self.uploads: Counter = Counter()  # host-to-device: (file, line, kind) -> count
        self.upload_bytes: Counter = Counter()  # (file, line, kind) -> bytes copied
        self.clock_reads: Counter = Counter()  # (file, line) -> clock reads after a jitted call
        self.clock_reads_pending: Counter = Counter()  # (file, line) -> of those, with its result not ready
        self.callbacks: Counter = Counter()  # (file, line) -> host callbacks run, by the line that made them
        # eager dispatches, counted by the hook per (id(code), instruction, name): EagerSlot (see
        # eager_slot); eager_dispatched adds to the per-line dicts directly. Read them through
        # `eager`, `eager_seconds` and `eager_ops`, which add the two up.
        self.eager_slots: dict = {}
        self._eager: dict = {}
        self._eager_seconds: dict = {}
        self._eager_ops: dict = {}
        self.internal_compiles = 0
        self.internal_traces = 0
        self.call_rows: dict = {}  # CallKey of a library's jitted function -> the key of its row
        self.pending_calls: Counter = Counter()  # CallKey -> calls before its first trace
        self.names_only = False  # no trace hook for this JAX: all counts matched by function name
        self.compiles_by_name = 0  # compiles whose function was known only by name (user's or JAX's)
        self.internal_compile_seconds = 0.0
        self.clock = Clock()  # wall time covered by traces, lowerings and compiles (cost.py)
        self.partial: list = []  # what could not be measured, and why
        self.errors: Counter = Counter()  # instrumentation errors swallowed, by message
        self.t0 = time.perf_counter()  # the run's start: event times are seconds since then
        self.t_end: Optional[float] = None  # set when the hooks detach
        self.events: list = []  # [Event], at most MAX_EVENTS
        self.events_dropped = 0
        self._internal_events = 0
        self.transfer_samples: list = []  # [(t, file, line, kind)] of the first transfers
        self._samples_left = MAX_TRANSFER_SAMPLES
        self.memory = Memory()  # compiled programs' memory, donation, set-up order (memory.py)
        self.steps = StepLog()  # jitted calls' ready times, idle windows, in-flight depth (steps.py)

    # -- records ---------------------------------------------------------
    def record(self, key: Any, describe) -> Record:
        rec = self.records.get(key)
        if rec is None:
            rec = self.records[key] = Record(key, *describe(key))
        return rec

    def user_records(self) -> list:
        return [r for r in self.records.values() if r.traces or r.calls or r.compiles]

    # -- events -------------------------------------------------------------
    def called(self, key: Any) -> None:
        rec = self.records.get(self.call_rows.get(key, key))
        if rec is not None:
            rec.calls = (rec.calls or 0) + 1
        elif key in self.call_rows or not isinstance(key, CallKey):
            return
        else:  # a library's jitted function not traced yet: its row is known at its first trace
            self.pending_calls[key] += 1

    def stale_call(self, key: Any, slot, now: Any) -> None:
        """A call of ``key``'s jitted wrapper ran from the cache while ``slot``'s name held a value
        none of its traces read (:mod:`.stale`)."""
        rec = self.records.get(key)
        if rec is None:
            return
        entry = rec.stale.get(slot.name)
        if entry is None:
            entry = rec.stale[slot.name] = [0, "", "", 0]
        entry[0] += 1
        entry[1], entry[2], entry[3] = stale.shown(slot.seen[-1]), stale.shown_now(now), len(slot.seen)

    def calls_belong_to(self, call_key: Any, rec: "Record") -> None:
        """The calls of the wrapper ``call_key`` (a library's jitted function, :class:`CallKey`)
        are ``rec``'s: the row its trace was attributed to (its own, or the user's function an
        ``nnx.jit``/``eqx.filter_jit`` traced). The calls made before are added."""
        if not isinstance(call_key, CallKey) or call_key in self.call_rows:
            return
        self.call_rows[call_key] = rec.key
        rec.calls = (rec.calls or 0) + self.pending_calls.pop(call_key, 0)

    def log(self, kind: str, key: Any, start: float, seconds: float, reason: str) -> None:
        """Log one trace/lower/compile that began at ``start`` (``time.perf_counter()``)."""
        if len(self.events) >= MAX_EVENTS:
            self.events_dropped += 1
            return
        if key is None:
            if self._internal_events >= MAX_INTERNAL_EVENTS:
                self.events_dropped += 1
                return
            self._internal_events += 1
        self.events.append(Event(start - self.t0, seconds, kind, key, reason))

    def spent(self, rec: Optional[Record], start: float, seconds: float, site: Optional[tuple] = None,
              trace: bool = False, by_name: bool = False) -> None:
        """Account the seconds of one trace (``trace``: a cache miss called from ``site``), lowering
        or compile of ``rec`` (None: JAX's own) for time lost and wall time compiling."""
        spend(self, rec, start, seconds, site, trace, by_name)

    def compiled(self, key: Any, seconds: float, by_name: bool = False) -> None:
        """A compile of ``seconds`` that has just ended; ``by_name``: attributed by the compiled
        function's name only (a guess)."""
        rec = self.records.get(key) if key is not None else None
        start = time.perf_counter() - seconds
        if by_name:
            self.compiles_by_name += 1
            if rec is not None:
                rec.by_name = True
        if rec is None:
            self.internal_compiles += 1
            self.internal_compile_seconds += seconds
            self.spent(None, start, seconds)
            self.log("compile", None, start, seconds, "JAX internal (eager operation)")
        else:
            rec.compiles += 1
            rec.compile_seconds += seconds
            self.spent(rec, start, seconds, by_name=by_name)
            self.log("compile", key, start, seconds, rec.last_reason)

    def lowered(self, key: Any, seconds: float) -> None:
        rec = self.records.get(key) if key is not None else None
        start = time.perf_counter() - seconds
        self.spent(rec, start, seconds)
        if rec is not None:
            rec.lower_seconds += seconds
            self.log("lower", key, start, seconds, rec.last_reason)

    def eager_dispatched(self, file: str, line: int, name: str, seconds: float) -> None:
        """One JAX operation dispatched eagerly (outside any trace) from a user line."""
        key = (file, line)
        self._eager[key] = self._eager.get(key, 0) + 1
        self._eager_seconds[key] = self._eager_seconds.get(key, 0.0) + seconds
        ops = self._eager_ops.get(key)
        if ops is None:
            ops = self._eager_ops[key] = {}
        ops[name] = ops.get(name, 0) + 1

    def eager_slot(self, frame, name: str) -> "EagerSlot":
        """The counter of the eager dispatches named ``name`` made at ``frame``'s instruction (a user
        frame), which the hook adds to: one lookup per dispatch instead of a line number and three
        dictionaries (eager.py)."""
        code = frame.f_code
        key = (id(code), frame.f_lasti, name)
        slot = self.eager_slots.get(key)
        if slot is None or slot.code is not code:  # the slot holds the code: its id stays its own
            slot = self.eager_slots[key] = EagerSlot(code, self.user_files.line(frame), name)
        return slot

    def eager_totals(self) -> tuple:
        """(``eager``, ``eager_seconds``, ``eager_ops``) added up once."""
        counts, seconds = dict(self._eager), dict(self._eager_seconds)
        ops = {k: dict(v) for k, v in self._eager_ops.items()}
        for slot in list(self.eager_slots.values()):
            if not slot.n:
                continue
            key = (slot.code.co_filename, slot.line)
            counts[key] = counts.get(key, 0) + slot.n
            seconds[key] = seconds.get(key, 0.0) + slot.seconds
            named = ops.setdefault(key, {})
            named[slot.name] = named.get(slot.name, 0) + slot.n
        return counts, seconds, ops

    @property
    def eager(self) -> dict:
        """(file, line) -> eager dispatches made from that user line (a new dict at each read)."""
        return self.eager_totals()[0]

    @property
    def eager_seconds(self) -> dict:
        """(file, line) -> wall seconds inside those dispatches."""
        return self.eager_totals()[1]

    @property
    def eager_ops(self) -> dict:
        """(file, line) -> {primitive or JAX function name: dispatches}."""
        return self.eager_totals()[2]

    def callback_ran(self, site: tuple) -> None:
        """A host callback (``jax.debug.print``/``callback``, ``pure_callback``, ``io_callback``)
        made on the user line ``site`` ran on the host: once per execution, in a compiled loop once
        per iteration."""
        self.callbacks[site] += 1

    def uploaded(self, frame, kind: str, nbytes: int) -> None:
        """Host data copied to the device: ``jax.device_put``/``jnp.asarray``/``jnp.array`` of
        NumPy or Python data, or a NumPy array passed to a jitted function."""
        site = (*self.user_files.site(frame), kind)
        self.uploads[site] += 1
        self.upload_bytes[site] += nbytes

    def clock_read(self, frame, pending: bool) -> None:
        site = (frame.f_code.co_filename, frame.f_lineno)
        self.clock_reads[site] += 1
        if pending:
            self.clock_reads_pending[site] += 1

    def transferred(self, frame, kind: str) -> None:
        file, line = self.user_files.site(frame)
        self.transfers[(file, line, kind)] += 1
        if frame is not None and not self.user_files(frame.f_code.co_filename):
            # made by a library on behalf of that user line (numpyro's progress bar in mcmc.run):
            # remember which library frame, so that the report names the cause
            code = frame.f_code
            where = (str(frame.f_globals.get("__name__", "?")), getattr(code, "co_qualname", code.co_name),
                     code.co_filename, frame.f_lineno)
            self.transfer_via.setdefault((file, line, kind), Counter())[where] += 1
        if self._samples_left:
            self._samples_left -= 1
            self.transfer_samples.append((time.perf_counter() - self.t0, file, line, kind))
