"""Memory and device set-up, as a run shows them (issue 30; confirms JAX801, JAX802, JAX804).

- **Each compiled program's memory**: the executable every compile returns reports its buffer
  sizes (``get_compiled_memory_stats()``, what ``jax.jit(f).lower(...).compile().memory_analysis()``
  returns): arguments, outputs, temporaries, aliased (donated) and generated-code bytes, and on
  newer jaxlib XLA's own peak. Recorded per function and per compile.
- **Donation**: for the first calls of each ``jax.jit`` function, which array arguments come back
  as its results (the next call is given exactly the arrays the last one returned, and the old
  ones are gone by then: ``state = step(state, batch)``) while JAX did not delete them (not
  donated). Those are what ``donate_argnums`` would let XLA write over. And JAX's "Some donated
  buffers were not usable" warning, counted per call site (JAX prints it once).
- **Set-up order**: every ``os.environ``/``os.putenv`` write of a setting JAX reads once (names in
  ``jaxlint.names``), with whether JAX had already read it: at ``import jax`` (where the program
  imported it) or when the backend started (where: the first device use), and
  ``jax.distributed.initialize`` calls made after the backend started.
- **Device memory** at the end of the run, where the backend reports it (not on CPU).

Nothing here starts JAX's backend or changes what the program sees: warnings are still issued by
JAX's own call, ``os.putenv`` still sets the variable.
"""

from __future__ import annotations

import functools
import os
import sys
import weakref
from typing import Any, Optional

from .. import names as N
from .adapters.base import positional_params

FIELDS = ("argument", "output", "temp", "alias", "generated_code")
OBSERVED_CALLS = 4  # calls of each jitted function looked at for donation (3 call-to-call links)
DEFAULT_DONATION_THRESHOLD = 1 << 20  # bytes: smaller donation advice stays in the JSON only
_UNUSABLE = "Some donated buffers were not usable"


class Memory:
    """What one run (one collector) saw; see the module docstring."""

    def __init__(self):
        self.programs: dict = {}  # record key -> [dict per compile]
        self.unusable: dict = {}  # (key, file, line) -> [count, text of the avals]
        self.calls: dict = {}  # record key -> _Calls
        self.settings: list = []  # dict per setting written while JAX listened
        self.initialize: list = []  # dict per jax.distributed.initialize call
        self.jax_imported_at: Optional[tuple] = None  # (file, line) of the program's first import of jax
        self.backend_started_at: Optional[tuple] = None  # (file, line) of the first device use

    def compiled(self, key: Any, stats: Any, reason: str) -> None:
        m = program_memory(stats)
        if m is not None:
            m["reason"] = reason
            self.programs.setdefault(key, []).append(m)


def program_memory(stats: Any) -> Optional[dict]:
    """Bytes from a ``CompiledMemoryStats`` (None when it has none); ``peak`` is XLA's own figure
    where this jaxlib reports one (``peak_memory_in_bytes``), else None."""
    try:
        m = {f: int(getattr(stats, f"{f}_size_in_bytes")) for f in FIELDS}
    except (AttributeError, TypeError, ValueError):
        return None
    peak = getattr(stats, "peak_memory_in_bytes", None)
    m["peak"] = int(peak) if isinstance(peak, int) and peak > 0 else None
    return m


def footprint(m: dict) -> tuple:
    """(bytes, exact): XLA's peak where reported; else arguments + outputs + temporaries − aliased,
    every buffer of the program alive at once, an upper bound of the peak."""
    if m.get("peak") is not None:
        return m["peak"], True
    return m["argument"] + m["output"] + m["temp"] - m["alias"], False


# -- donation: which arguments come back as results --------------------------------------
class _Calls:
    __slots__ = ("seen", "prev_out", "prev_in", "links", "fed", "deleted", "bytes", "names", "maker")

    def __init__(self):
        self.seen = 0
        self.prev_out: list = []  # weak references to the last call's result arrays
        self.prev_in: dict = {}  # position -> weak references to the last call's argument arrays
        self.links = 0  # calls after a first one
        self.fed: dict = {}  # position -> calls given exactly the last call's results (old ones dead)
        self.deleted: dict = {}  # position -> calls after which JAX had deleted the argument (donated)
        self.bytes: dict = {}  # position -> bytes of its arrays at the last call
        self.names: dict = {}  # position -> the parameter's name
        self.maker = "jit"  # jax.jit or jax.pmap made the function


def _arrays(value: Any, array_type: type) -> list:
    import jax

    return [leaf for leaf in jax.tree_util.tree_leaves(value) if isinstance(leaf, array_type)]


def before_call(memory: Memory, key: Any, fun: Any, args: tuple, kwargs: dict, maker: str = "jit",
                held: Any = ()) -> Optional[tuple]:
    """Look at a call's array arguments (the first :data:`OBSERVED_CALLS` calls of ``key``); the
    state to hand to :func:`after_call`, or None once enough calls were seen. ``held``: id() of
    the arrays the device watcher holds (steps.py), which are not the program's references."""
    calls = memory.calls.get(key)
    if calls is None:
        calls = memory.calls[key] = _Calls()
        calls.maker = maker
    if calls.seen >= OBSERVED_CALLS:
        return None
    import jax

    array_type = jax.Array
    positions = {i: _arrays(a, array_type) for i, a in enumerate(args)}
    positions.update({k: _arrays(v, array_type) for k, v in kwargs.items()})
    positions = {p: leaves for p, leaves in positions.items() if leaves}
    if calls.seen:
        calls.links += 1
        last = {id(a): a for a in (r() for r in calls.prev_out) if a is not None}
        for p, leaves in positions.items():
            # alive for the program: the device watcher's own references (steps.py) do not count
            old_alive = any(x is not None and id(x) not in held for x in (r() for r in calls.prev_in.get(p, ())))
            if not old_alive and all(last.get(id(leaf)) is leaf for leaf in leaves):
                calls.fed[p] = calls.fed.get(p, 0) + 1
    if not calls.names:
        calls.names = dict(enumerate(positional_params(fun)[0]))
    return calls, positions


def after_call(state: tuple, out: Any) -> None:
    import jax

    calls, positions = state
    calls.seen += 1
    calls.prev_out = [weakref.ref(a) for a in _arrays(out, jax.Array)]
    calls.prev_in = {}
    for p, leaves in positions.items():
        calls.prev_in[p] = [weakref.ref(a) for a in leaves]
        calls.bytes[p] = sum(int(getattr(a, "nbytes", 0) or 0) for a in leaves)
        if all(_deleted(a) for a in leaves):
            calls.deleted[p] = calls.deleted.get(p, 0) + 1


def _deleted(a: Any) -> bool:
    try:
        return bool(a.is_deleted())
    except Exception:
        return False


def donation_candidates(memory: Memory, key: Any) -> Optional[dict]:
    """The arguments of ``key`` that every observed call got back as results and JAX never
    deleted, with their bytes; None when there are none (or only one call was seen)."""
    calls = memory.calls.get(key)
    if calls is None or not calls.links:
        return None
    pos = [p for p, n in calls.fed.items() if n == calls.links and not calls.deleted.get(p)]
    numbers = sorted(p for p in pos if isinstance(p, int))
    names = sorted(p for p in pos if isinstance(p, str))
    pos = numbers + names
    if not pos:
        return None
    return {"argnums": numbers, "argnames": names,
            "names": [calls.names.get(p, f"argument {p}") if isinstance(p, int) else p for p in pos],
            "bytes": sum(calls.bytes.get(p, 0) for p in pos), "calls_observed": calls.seen,
            "wrapper": f"jax.{calls.maker}"}


# -- hooks ----------------------------------------------------------------------------
def install(inst, patch, target_of) -> list:
    """Install the memory and set-up hooks on ``inst`` (the :class:`Instrumentation`); return
    the notes on what could not be hooked on this JAX. ``target_of()`` is the record key of the
    function whose jit call is compiling on this thread (None: unknown)."""
    notes = []
    for name, hook in (("compile memory", _hook_compiles), ("donation warnings", _hook_donation_warning),
                       ("settings", _hook_settings), ("backend start", _hook_backend_start),
                       ("distributed.initialize", _hook_initialize)):
        try:
            why = hook(inst, patch, target_of)
        except Exception as e:
            why = repr(e)
        if why:
            notes.append(f"{name} not recorded ({why})")
    return notes


def _each(inst):
    for c in inst.collectors:
        yield c, c.memory


def _hook_compiles(inst, patch, target_of) -> Optional[str]:
    from jax._src import compiler

    original = getattr(compiler, "compile_or_get_cached", None)
    if original is None:
        return "jax._src.compiler has no compile_or_get_cached"
    token = inst._token

    @functools.wraps(original)
    def compile_or_get_cached(*args, **kwargs):
        executable = original(*args, **kwargs)
        if not inst.collectors or inst._token is not token:
            return executable
        try:
            key = target_of()
            if key is None:  # an ahead-of-time compile: the module's name (jit_step) tells whose
                computation = args[1] if len(args) > 1 else kwargs.get("computation")
                key = inst.compiled_by_name(_module_name(computation))
            if key:
                stats = executable.get_compiled_memory_stats()
                for c, m in _each(inst):
                    rec = c.records.get(key)
                    if rec is not None:
                        m.compiled(key, stats, rec.last_reason)
        except Exception as e:  # never break a compile for a figure
            inst._error(e)
        return executable

    patch(compiler, "compile_or_get_cached", compile_or_get_cached)
    return None


def _module_name(computation: Any) -> str:
    try:
        from jax._src.lib.mlir import ir

        return ir.StringAttr(computation.operation.attributes["sym_name"]).value
    except Exception:
        return ""


def _hook_donation_warning(inst, patch, target_of) -> Optional[str]:
    """JAX warns "Some donated buffers were not usable" from ``mlir`` while lowering, through its
    module's ``warnings``: that name is given a stand-in whose ``warn`` counts the warning at the
    user's call site and then warns exactly as JAX did (same text, category and location, so
    Python's filters and once-per-location registry decide what is shown, as before)."""
    from jax._src.interpreters import mlir

    real = getattr(mlir, "warnings", None)
    if real is None:
        return "jax._src.interpreters.mlir does not use warnings"

    class _Warnings:
        def __getattr__(self, name):
            return getattr(real, name)

        def warn(self, message, category=None, stacklevel=1, *args, **kwargs):
            if inst.collectors and str(message).startswith(_UNUSABLE):
                try:
                    caller = sys._getframe(1)
                    key = target_of()
                    text = str(message)[len(_UNUSABLE):].lstrip(":").split("\n", 1)[0].strip().rstrip(".")
                    for c, m in _each(inst):
                        site = c.user_files.site(caller)
                        entry = m.unusable.setdefault((key, *site), [0, text])
                        entry[0] += 1
                except Exception as e:
                    inst._error(e)
            return real.warn(message, category, stacklevel + 1, *args, **kwargs)

    patch(mlir, "warnings", _Warnings())
    return None


def setting_kind(name: str) -> Optional[str]:
    """"import" for a JAX flag read at ``import jax``, "backend" for a setting read when the
    backend starts, None for any other variable."""
    if name in N.IMPORT_TIME_SETTINGS:
        return "import"
    if name in N.BACKEND_START_SETTINGS or name.startswith(N.BACKEND_START_PREFIXES):
        return "backend"
    return None


def _backend_started() -> bool:
    from jax._src import xla_bridge

    try:
        return bool(xla_bridge.backends_are_initialized())
    except Exception:
        return bool(getattr(xla_bridge, "_backends", None))


def _observe(inst, patch, owner: Any, name: str, observe, after: bool = False) -> Optional[str]:
    """Put a wrapper in place of ``owner.name`` that, while jaxlint listens, calls
    ``observe(caller frame, *args)`` before the original runs (``after``: once it returned), and
    never lets an error of its own reach the program. None, or why it cannot be done."""
    original = getattr(owner, name, None)
    if original is None:
        return f"{getattr(owner, '__name__', owner)} has no {name}"
    token = inst._token

    def seen(caller, args) -> None:
        if inst.collectors and inst._token is token:
            try:
                observe(caller, *args)
            except Exception as e:
                inst._error(e)

    @functools.wraps(original)
    def wrapper(*args, **kwargs):
        if not after:
            seen(sys._getframe(1), args)
        out = original(*args, **kwargs)
        if after:
            seen(sys._getframe(1), args)
        return out

    patch(owner, name, wrapper)
    return None


def _hook_settings(inst, patch, target_of) -> Optional[str]:
    """``os.putenv`` is what ``os.environ[k] = v``, ``update`` and ``setdefault`` call (and what a
    program may call itself): each write of a setting JAX reads once is recorded."""

    def observe(caller, key, *_) -> None:
        name = os.fsdecode(key)
        kind = setting_kind(name)
        if kind is None:
            return
        started = _backend_started()
        for c, m in _each(inst):
            file, line = c.user_files.site(caller)
            if kind == "import":
                effective, read_at = False, m.jax_imported_at
            else:
                effective, read_at = not started, m.backend_started_at if started else None
            m.settings.append({"name": name, "file": file, "line": line, "read": kind, "effective": effective,
                               "read_at": _at(read_at)})

    return _observe(inst, patch, os, "putenv", observe, after=True)  # only a write that happened


def _hook_backend_start(inst, patch, target_of) -> Optional[str]:
    """Where the backend started: the user line whose call first initialised a platform."""
    from jax._src import xla_bridge

    def observe(caller, *_) -> None:
        for c, m in _each(inst):
            if m.backend_started_at is None:
                m.backend_started_at = c.user_files.site(caller)

    return _observe(inst, patch, xla_bridge, "_init_backend", observe)


def _hook_initialize(inst, patch, target_of) -> Optional[str]:
    import jax.distributed

    def observe(caller, *_) -> None:
        started = _backend_started()
        for c, m in _each(inst):
            file, line = c.user_files.site(caller)
            m.initialize.append({"file": file, "line": line, "late": started,
                                 "backend_started_at": _at(m.backend_started_at if started else None)})

    return _observe(inst, patch, jax.distributed, "initialize", observe)  # before: it raises when late


def device_memory() -> dict:
    """``memory_stats()`` of each local device where the backend started and reports them; else
    why there are none (never starts the backend to ask)."""
    if "jax" not in sys.modules:
        return {"available": False, "why": "the program did not import jax"}
    try:
        if not _backend_started():
            return {"available": False, "why": "the backend never started"}
        import jax

        rows = []
        for d in jax.local_devices():
            stats = d.memory_stats()
            if not stats:
                return {"available": False, "why": f"the {d.platform} backend reports no device memory statistics"}
            rows.append({"device": str(d), "peak_bytes_in_use": stats.get("peak_bytes_in_use"),
                         "bytes_in_use": stats.get("bytes_in_use"), "bytes_limit": stats.get("bytes_limit")})
        return {"available": True, "devices": rows}
    except Exception as e:
        return {"available": False, "why": f"{type(e).__name__}: {e}"}


# -- the report ----------------------------------------------------------------------------
def _at(site: Optional[tuple]) -> Optional[dict]:
    return None if site is None else {"file": site[0], "line": site[1]}
