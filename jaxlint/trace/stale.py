"""JAX603's runtime evidence: the globals, closure variables and ``self`` attributes a traced user
function read, and whether a later call of its jitted wrapper ran from JAX's cache after one of them
was rebound (the compiled program then still uses the value of a trace).

At each trace of a user function (:mod:`.tracing`), :func:`watch` records what each name the
function's code reads held then: the names it loads as globals (``LOAD_GLOBAL``, in its code, the
code nested in it, and the user functions it reaches through globals, ``DEPTH`` deep), its closure
cells, and, for a bound method, the instance attributes it reads from ``self``. A small scalar or a
short string is kept by value, anything else by weak reference, else by id and type: nothing large
is kept alive. After each later call of the jitted wrapper (:class:`.hooks.Counted`),
:meth:`Watch.check` asks whether a name now holds something no trace of the function saw: the call
did not retrace (a trace would have recorded the new value), so it ran a program compiled with an
earlier value. The check reads a dict entry or a cell per name; no user code runs in it.

Nothing here imports jax.
"""

from __future__ import annotations

import dis
import functools
import sys
import types
import weakref
from typing import Any, Callable, Optional

from .forwarding import Forwarding

MAX_TEXT = 256  # strings and bytes up to this long are kept by value
MAX_SEEN = 8  # distinct trace-time values per name; a name seen with more is no longer checked
MAX_SLOTS = 64  # names watched per function
DEPTH = 2  # user functions reached through globals, followed this deep
_SCALARS = frozenset({int, float, complex, bool, str, bytes, type(None)})
_MISSING = object()
GLOBAL, CELL, ATTR = "global", "closure", "attribute"


def _small(obj: Any, depth: int = 0) -> bool:
    t = type(obj)
    if t in _SCALARS:
        return t not in (str, bytes) or len(obj) <= MAX_TEXT
    if t is tuple:  # a shape, a tuple of settings: compared by value, as JAX's constants are
        return len(obj) <= 16 and depth < 2 and all(_small(x, depth + 1) for x in obj)
    np = sys.modules.get("numpy")
    return np is not None and isinstance(obj, np.generic) and t.__module__ == "numpy"


def _token(obj: Any) -> tuple:
    """What identifies ``obj`` later without keeping it alive (a small scalar is kept)."""
    if _small(obj):
        return (0, obj)
    try:
        return (1, weakref.ref(obj), type(obj))
    except TypeError:
        return (2, id(obj), type(obj))


def _same(token: tuple, obj: Any) -> bool:
    kind = token[0]
    if kind == 0:
        v = token[1]
        if obj is v:
            return True
        if type(obj) is not type(v):
            return False
        try:
            return bool(obj == v) or (v != v and obj != obj)  # nan stays nan
        except Exception:
            return False
    if kind == 1:
        return token[1]() is obj
    return id(obj) == token[1] and type(obj) is token[2]


def shown(token: tuple) -> str:
    """A trace-time value as the report shows it."""
    if token[0] == 0:
        text = repr(token[1])
        return text if len(text) <= 40 else text[:39] + "…"
    return f"a `{token[2].__name__}`"


def shown_now(obj: Any) -> str:
    return shown(_token(obj)) if obj is not _MISSING else "(deleted)"


class Slot:
    """One name a traced function read: where it lives, the values its traces saw, and which code
    objects read it (the report matches a finding's line against them)."""

    __slots__ = ("name", "kind", "where", "key", "seen", "readers", "off", "held", "ref")

    def __init__(self, name: str, kind: str, where: Any, key: Any):
        self.name, self.kind, self.where, self.key = name, kind, where, key
        self.seen: list = []
        self.readers: set = set()
        self.off = False  # seen with more than MAX_SEEN values: not checked any more
        # the fast path of a check: the small scalar last found equal to a traced one (kept), or the
        # weak reference to the traced object last found there
        self.held: Any = _MISSING
        self.ref: Optional[weakref.ref] = None

    def current(self) -> Any:
        if self.kind == GLOBAL:
            return self.where.get(self.key, _MISSING)
        owner = self.where()
        if owner is None:
            return _MISSING
        if self.kind == ATTR:
            d = getattr(owner, "__dict__", None)
            return d.get(self.key, _MISSING) if isinstance(d, dict) else _MISSING
        cells = owner.__closure__
        try:
            return cells[self.key].cell_contents
        except (ValueError, IndexError, TypeError):
            return _MISSING

    def saw(self, obj: Any) -> None:
        for t in self.seen:
            if _same(t, obj):
                self._fast(t, obj)
                return
        t = _token(obj)
        self.seen.append(t)
        self._fast(t, obj)
        if len(self.seen) > MAX_SEEN:
            self.off, self.seen, self.held, self.ref = True, [], _MISSING, None

    def _fast(self, token: tuple, obj: Any) -> None:
        self.held = obj if token[0] == 0 else _MISSING
        self.ref = token[1] if token[0] == 1 else None


class Watch:
    """The names one user function's traces read (one per code object, like a report row)."""

    __slots__ = ("slots", "by_place")

    def __init__(self):
        self.slots: list = []
        self.by_place: dict = {}  # (kind, id of the dict/function/instance, key) -> Slot

    def check(self, stale: Callable, *args) -> None:
        """After a call: ``stale(*args, slot, now)`` for each name holding a value no trace saw."""
        for slot in self.slots:
            now = slot.where.get(slot.key, _MISSING) if slot.kind is GLOBAL else slot.current()
            if now is slot.held:
                continue
            ref = slot.ref
            if ref is not None and ref() is now:
                continue
            if slot.off:
                continue
            for t in slot.seen:
                if _same(t, now):
                    slot._fast(t, now)  # an equal scalar, or another traced object: the next check is fast
                    break
            else:
                if now is not _MISSING and slot.seen:
                    stale(*args, slot, now)


def _function(fun: Any) -> tuple:
    """The Python function a traced callable runs, and the instance it is bound to (or None)."""
    owner = None
    for _ in range(16):
        if isinstance(fun, Forwarding):
            fun = fun._jaxlint_real
        elif type(fun) is types.MethodType:
            owner, fun = fun.__self__, fun.__func__
        elif type(fun) is types.FunctionType:
            return fun, owner
        elif isinstance(fun, functools.partial):
            fun = fun.func
        elif getattr(fun, "__wrapped__", None) is not None and fun.__wrapped__ is not fun:
            fun = fun.__wrapped__
        else:
            return None, None
    return None, None


def _loads(code) -> tuple:
    """(global names loaded, global names stored, attributes read from the first argument) by
    ``code`` and the code nested in it, each with the code object that reads it."""
    loads, stores, attrs = [], set(), []
    stack = [(code, True)]
    while stack:
        c, top = stack.pop()
        first = c.co_varnames[0] if top and c.co_argcount else None
        prev = None
        for ins in dis.get_instructions(c):
            op = ins.opname
            if op in ("LOAD_GLOBAL", "LOAD_NAME"):
                loads.append((ins.argval, c))
            elif op in ("STORE_GLOBAL", "DELETE_GLOBAL"):
                stores.add(ins.argval)
            elif op == "LOAD_ATTR" and first is not None and prev is not None and prev.opname == "LOAD_FAST" \
                    and prev.argval == first:
                attrs.append((ins.argval, c))
            prev = ins
        stack.extend((k, False) for k in c.co_consts if isinstance(k, types.CodeType))
    return loads, stores, attrs


def watch(watches: dict, key: Any, fun: Any, user_file: Callable) -> None:
    """Record, for the trace of ``fun`` (row ``key``) that has just run, what each name it read held."""
    func, owner = _function(fun)
    if func is None:
        return
    w = watches.get(key)
    if w is None:
        w = watches[key] = Watch()
    todo, done = [(func, owner, 0)], set()
    while todo:
        f, self_obj, depth = todo.pop()
        if id(f) in done:
            continue
        done.add(id(f))
        code = f.__code__
        loads, stores, attrs = _loads(code)
        g = f.__globals__
        for name, reader in loads:
            if name in stores:
                continue  # the function rebinds it itself (JAX601's subject)
            obj = g.get(name, _MISSING)
            if obj is _MISSING or isinstance(obj, types.ModuleType):
                continue
            _note(w, GLOBAL, g, name, name, obj, reader)
            if depth < DEPTH and type(obj) is types.FunctionType and user_file(obj.__code__.co_filename):
                todo.append((obj, None, depth + 1))
        if f.__closure__:
            ref = _ref(f)
            for i, (name, cell) in enumerate(zip(code.co_freevars, f.__closure__)):
                if name == "__class__" or ref is None:
                    continue
                try:
                    obj = cell.cell_contents
                except ValueError:
                    continue
                if not isinstance(obj, types.ModuleType):
                    _note(w, CELL, ref, i, name, obj, code, place=id(code))
        if self_obj is not None and attrs:
            d = getattr(self_obj, "__dict__", None)
            ref = _ref(self_obj)
            if isinstance(d, dict) and ref is not None:
                for name, reader in attrs:
                    obj = d.get(name, _MISSING)
                    if obj is not _MISSING and not isinstance(obj, types.ModuleType):
                        _note(w, ATTR, ref, name, f"self.{name}", obj, reader, place="self")


def _note(w: Watch, kind: str, where: Any, key: Any, name: str, obj: Any, reader, place: Any = None) -> None:
    at = (kind, id(where) if place is None else place, key)
    slot = w.by_place.get(at)
    if slot is None:
        if len(w.slots) >= MAX_SLOTS:
            return
        slot = w.by_place[at] = Slot(name, kind, where, key)
        w.slots.append(slot)
    elif kind != GLOBAL and slot.where() is not where():
        # another function object of this code (a closure made again) or another instance: its
        # cells or attributes are checked from now on, against what its own traces saw
        slot.where, slot.seen, slot.off, slot.held, slot.ref = where, [], False, _MISSING, None
    slot.readers.add(reader)
    if not slot.off:
        slot.saw(obj)


def _ref(obj: Any) -> Optional[weakref.ref]:
    try:
        return weakref.ref(obj)
    except TypeError:
        return None


# -- the report (no jax) ------------------------------------------------------------------


def rows(rec) -> list:
    """A function row's ``stale_reads``: each name rebound while calls ran from the cache."""
    return [{"name": name, "calls": n, "traced_value": traced, "value": now, "traced_values": seen}
            for name, (n, traced, now, seen) in sorted(rec.stale.items())]


def text_lines(row: dict) -> list:
    out = []
    for s in row.get("stale_reads", ()):
        traced = (f"its trace's value {s['traced_value']}" if s.get("traced_values", 1) == 1 else
                  f"one of its {s['traced_values']} traces' values (the last {s['traced_value']})")
        out.append(f"`{s['name']}` rebound after the trace: {s['calls']} call{'s' if s['calls'] != 1 else ''} "
                   f"ran from the cache with {traced}; `{s['name']}` held {s['value']} at the last")
    return out


def evidence(recs: list, message: str, file: str, line: int, real: Callable, span: Callable) -> tuple:
    """(confirmed, evidence) for a JAX603 finding at ``file:line`` about the name its message
    names first (`` `lr` is the module-level variable ...``, `` `self.lr` is read ...``)."""
    parts = message.split("`")
    name = parts[1] if len(parts) > 2 else ""
    matched = []
    for rec in recs:
        w = getattr(rec, "watch", None)
        if w is None:
            continue
        for slot in w.slots:
            if slot.name != name:
                continue
            for code in slot.readers:
                lo, hi = span(code)
                if real(code.co_filename) == file and lo <= line <= hi:
                    matched.append((rec, slot))
                    break
    if not matched:
        return False, f"not observed: no traced function read `{name}` on this line"
    stale = [(rec, rec.stale[name]) for rec, _ in matched if name in rec.stale]
    if stale:
        rec, (n, traced, now, seen) = max(stale, key=lambda rs: rs[1][0])
        q = rec.qualname
        value = (f"the value of its trace ({traced})" if seen == 1 else
                 f"a value one of its {seen} traces read (the last: {traced})")
        return True, (f"`{name}` was rebound after `{q}` was traced; `{q}` then ran {n} more "
                      f"time{'s' if n != 1 else ''} from its cache with {value}; `{name}` held {now} "
                      "at the last of those calls")
    rec, slot = matched[0]
    if slot.off:
        return False, (f"not observed: `{name}` held more than {MAX_SEEN} values at the traces of "
                       f"`{rec.qualname}`; it was not followed further")
    calls = "its calls were not counted" if rec.calls is None else (
        f"none of its {rec.calls} call{'s' if rec.calls != 1 else ''} ran from its cache after `{name}` was "
        "rebound")
    return False, (f"not observed: `{rec.qualname}` read `{name}` at its trace{'s' if rec.traces != 1 else ''}, "
                   f"and {calls}")
