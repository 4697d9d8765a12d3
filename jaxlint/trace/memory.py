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


def before_call(memory: Memory, key: Any, fun: Any, args: tuple, kwargs: dict, maker: str = "jit") -> Optional[tuple]:
    """Look at a call's array arguments (the first :data:`OBSERVED_CALLS` calls of ``key``); the
    state to hand to :func:`after_call`, or None once enough calls were seen."""
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
        held = _watcher_held()
        for p, leaves in positions.items():
            # alive for the program: the device watcher's own references (steps.py) do not count
            old_alive = any(x is not None and id(x) not in held for x in (r() for r in calls.prev_in.get(p, ())))
            if not old_alive and all(last.get(id(leaf)) is leaf for leaf in leaves):
                calls.fed[p] = calls.fed.get(p, 0) + 1
    if not calls.names:
        calls.names = dict(enumerate(positional_params(fun)[0]))
    return calls, positions


def _watcher_held() -> set:
    from .hooks import INSTRUMENTATION

    return INSTRUMENTATION.watcher.held


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


def device_figures(steps, key) -> dict:
    """What the device showed of one function's calls (``steps``: the collector's
    :class:`.steploops.StepLog`): ``in_flight`` (the most earlier calls of it still computing at
    one of its dispatches), ``device_memory`` (whether the device reports memory statistics) and
    ``device_peak_rise`` (how much its ``peak_bytes_in_use`` rose from before the function's first
    call to after its first :data:`.steps.PEAK_CALLS` calls; None where not measured)."""
    if steps is None:
        return {"in_flight": None, "device_memory": None, "device_peak_rise": None, "in_use_during_calls": None,
                "device_peak": None}
    before, after = steps.peak_before.get(key), steps.peak_after.get(key)
    rise = after - before if before is not None and after is not None else None
    on = bool(steps.device_memory)
    return {"in_flight": steps.in_flight.get(key), "device_memory": steps.device_memory,
            "device_peak_rise": rise if on else None,
            "in_use_during_calls": steps.in_use_after.get(key) if on else None,
            "device_peak": steps.peak_end if on else None}


def function_keys(memory: Memory, rec, threshold: int = DEFAULT_DONATION_THRESHOLD, steps=None) -> dict:
    """A function row's ``memory`` (one entry per compile, XLA's figures; and what the device
    showed: :func:`device_figures`) and ``donation``."""
    compiles = []
    for m in memory.programs.get(rec.key, ()):
        total, exact = footprint(m)
        compiles.append({**m, "footprint": total, "footprint_exact": exact})
    largest = max(compiles, key=lambda m: m["footprint"]) if compiles else None
    device = device_figures(steps, rec.key)
    donation = donation_candidates(memory, rec.key)
    if donation is not None:
        donation.update(device)
        donation["compiled_saving"] = donation["bytes"]
        depth = device["in_flight"]
        donation["device_saving"] = ((depth + 1) * donation["bytes"]
                                     if device["device_memory"] and depth is not None else None)
        donation["figure"] = "device" if donation["device_saving"] is not None else "compiled"
        donation["peak_in_calls"], donation["device_peak_saving"] = _peak_saving(donation, device, largest)
        headline = donation["device_saving"] if donation["figure"] == "device" else donation["bytes"]
        donation["shown"] = headline >= threshold
        donation["fix"] = donation_fix(rec.name, donation)
    mem = {"compiles": compiles, "largest": largest, **device} if compiles else None
    return {"memory": mem, "donation": donation}


def _peak_saving(d: dict, device: dict, largest: Optional[dict]) -> tuple:
    """(whether the device's peak was reached while the function's calls ran, how much donating
    would lower it). The peak is the run's ``peak_bytes_in_use``; while the calls ran, the device
    held at most the bytes read right after one of its dispatches plus that call's temporaries
    (XLA's figure). When that is less than the peak, the peak came from elsewhere in the run, and
    donating frees memory while the calls run without lowering it: 0."""
    saving, peak, during = d["device_saving"], device.get("device_peak"), device.get("in_use_during_calls")
    if saving is None or peak is None or during is None:
        return None, saving
    reach = during + (largest["temp"] if largest else 0)
    if reach < peak:
        return False, 0
    return True, saving


def donation_fix(name: str, d: dict) -> str:
    """The advice: the figure the device measured where it reports memory (the in-flight depth x
    the bytes not donated), with XLA's compiled figure beside it, each labelled; elsewhere XLA's
    compiled figure, labelled."""
    from .sizes import format_size

    opts = []
    if d["argnums"]:
        opts.append(f"donate_argnums={tuple(d['argnums'])!r}")
    if d["argnames"]:
        opts.append(f"donate_argnames={tuple(d['argnames'])!r}")
    what = ", ".join(f"`{n}`" for n in d["names"])
    one = len(d["names"]) == 1
    head = (f"`{d['wrapper']}({name}, {', '.join(opts)})`: {what} come{'s' if one else ''} back as "
            f"{'its result' if one else 'its results'} on every call and {'is' if one else 'are'} not donated; ")
    size = format_size(d["bytes"])
    if d.get("device_saving") is not None:
        depth = d["in_flight"]
        copies = f"{depth + 1} × {size}"
        flight = (f"up to {depth} earlier call{'s' if depth != 1 else ''} were still computing at a dispatch, each "
                  "holding its own copy, so " if depth else "")
        rise = d.get("device_peak_rise")
        seen = (f"; the device's peak_bytes_in_use rose {format_size(rise)} over its first calls, measured"
                if rise is not None else "")
        if d.get("peak_in_calls") is False:
            return (head + f"on the device {flight}donating would free about {copies} = "
                    f"{format_size(d['device_saving'])} while its calls run (estimated from the measured in-flight "
                    f"depth{seen}), but not lower this run's peak: the device's peak, {format_size(d['device_peak'])}, "
                    f"was reached outside its calls (at most {format_size(d['in_use_during_calls'])} in use right "
                    f"after its dispatches, measured); XLA's compiled peak of one call drops {size} (XLA's figure). "
                    "Read nothing donated after the call")
        return (head + f"on the device {flight}donating would lower the device's peak by about {copies} = "
                f"{format_size(d['device_saving'])} (estimated from the measured in-flight depth{seen}); XLA's "
                f"compiled peak of one call drops {size} (XLA's figure). Read nothing donated after the call")
    why = ("this device reports no memory statistics, so the device's peak was not measured"
           if d.get("device_memory") is False else "the device's peak was not measured")
    return (head + f"donating lets XLA write the results into {'its' if one else 'their'} buffers: XLA's compiled "
            f"peak of one call drops {size} (XLA's figure; {why}). Read nothing donated after the call")


def section(collector, functions: list, threshold: int = DEFAULT_DONATION_THRESHOLD) -> dict:
    """The report's ``memory`` object; ``functions`` are the report's function rows (with the
    keys of :func:`function_keys`)."""
    m = collector.memory
    programs = []
    for f in functions:
        largest = (f.get("memory") or {}).get("largest")
        if largest is None:
            continue
        programs.append({"function": f["qualname"], "file": f["file"], "line": f["line"],
                         "compiles": len(f["memory"]["compiles"]), **{k: largest[k] for k in (*FIELDS, "peak")},
                         "footprint": largest["footprint"], "footprint_exact": largest["footprint_exact"],
                         "in_flight": f["memory"].get("in_flight"),
                         "device_peak_rise": f["memory"].get("device_peak_rise")})
    programs.sort(key=lambda p: (-p["temp"], -p["footprint"], p["function"]))
    donation = [{"function": f["qualname"], "file": f["file"], "line": f["line"], **f["donation"]}
                for f in functions if f.get("donation")]
    donation.sort(key=lambda d: -(d.get("device_saving") or d["bytes"]))
    names = {r.key: (r.qualname, r.file, r.line) for r in collector.records.values()}
    unusable = []
    for (key, file, line), (n, text) in sorted(m.unusable.items(), key=lambda kv: -kv[1][0]):
        q, f, l = names.get(key, (None, None, None))
        unusable.append({"function": q, "function_file": f, "function_line": l, "file": file, "line": line,
                         "count": n, "arguments": text})
    return {"programs": programs, "donation": donation, "donation_threshold": threshold,
            "donation_unusable": unusable, "settings": list(m.settings),
            "distributed_initialize": list(m.initialize), "jax_imported_at": _at(m.jax_imported_at),
            "backend_started_at": _at(m.backend_started_at), "device": device_memory()}


def text_lines(report: dict, where, max_rows: int = 20) -> list:
    """The text report's memory sections (an empty list when the run had nothing to say)."""
    from .sizes import format_size as b

    mem = report.get("memory")
    if not mem:
        return []
    lines = ["", "Memory of each compiled program (largest temporaries first; XLA's figures, per function: "
                 "its largest compile)"]
    if not mem["programs"]:
        lines.append("  none recorded")
    else:
        device = any(p.get("device_peak_rise") is not None for p in mem["programs"])
        lines.append(f"  {'temp':>9} {'arguments':>9} {'outputs':>9} {'aliased':>9} {'peak':>10}"
                     + (f" {'device':>10}" if device else "") + "  function")
        for p in mem["programs"][:max_rows]:
            peak = b(p["footprint"]) if p["footprint_exact"] else "≤" + b(p["footprint"])
            rise = p.get("device_peak_rise")
            dev = (f" {b(rise) if rise is not None else '-':>10}" if device else "")
            lines.append(f"  {b(p['temp']):>9} {b(p['argument']):>9} {b(p['output']):>9} {b(p['alias']):>9} "
                         f"{peak:>10}{dev}  {p['function']} at {where(p['file'], p['line'])}"
                         + (f" ({p['compiles']} compiles)" if p["compiles"] > 1 else ""))
        if any(not p["footprint_exact"] for p in mem["programs"]):
            lines.append("  ≤: this jaxlib reports no peak; arguments + outputs + temporaries − aliased, an upper bound")
        if device:
            lines.append("  device: how much the device's own peak (peak_bytes_in_use, measured) rose over the "
                         "function's first calls, with every call it had in flight")
        if len(mem["programs"]) > max_rows:
            lines.append(f"  … {len(mem['programs']) - max_rows} more functions (see --format json)")
    shown = [d for d in mem["donation"] if d["shown"]]
    if shown or mem["donation_unusable"]:
        lines.append("")
        lines.append("Donation")
        for d in shown[:max_rows]:
            if d.get("device_saving") is not None:
                what = (f"{b(d['bytes'])} not donated, about {b(d['device_saving'])} at the device's peak "
                        f"({d['in_flight'] + 1} copies)")
            else:
                what = f"{b(d['bytes'])} not donated (XLA's compiled figure)"
            lines.append(f"  {d['function']} at {where(d['file'], d['line'])}: {what}")
            lines.append(f"      fix: {d['fix']}")
        for u in mem["donation_unusable"][:max_rows]:
            fn = f"{u['function']} " if u["function"] else ""
            lines.append(f"  donated but not usable ({u['count']}×), {fn}called at {where(u['file'], u['line'])}: "
                         f"{u['arguments']} (no output of the same shape and dtype to write into: nothing saved)")
    hidden = len(mem["donation"]) - len(shown)
    if hidden:
        lines.append(f"  {hidden} smaller donation candidate(s) under {b(mem['donation_threshold'])} "
                     "(see --format json)")
    order = [s for s in mem["settings"]] + [dict(i, name="jax.distributed.initialize()") for i in
                                             mem["distributed_initialize"]]
    if order:
        lines.append("")
        lines.append("Set-up order")
        for s in order:
            at = where(s["file"], s["line"])
            if "read" not in s:
                if s["late"]:
                    start = s.get("backend_started_at")
                    lines.append(f"  {s['name']} at {at} came after the backend started"
                                 + (f" at {where(start['file'], start['line'])}" if start else ""))
                else:
                    lines.append(f"  {s['name']} at {at}: in time (before the backend started)")
            elif s["effective"]:
                lines.append(f"  {s['name']} set at {at}: in time (the backend had not started)")
            else:
                read = s.get("read_at")
                when = ("JAX read it at `import jax`" if s["read"] == "import" else "the backend had started")
                if read:
                    when += f" ({where(read['file'], read['line'])})"
                lines.append(f"  {s['name']} set at {at} had no effect: {when}")
    dev = mem.get("device") or {}
    if dev.get("available"):
        lines.append("")
        lines.append("Device memory")
        for d in dev["devices"]:
            parts = [f"{k.replace('_', ' ')} {b(d[k])}" for k in ("peak_bytes_in_use", "bytes_limit") if d.get(k) is not None]
            lines.append(f"  {d['device']}: " + ", ".join(parts))
    elif dev:
        lines.append(f"Device memory: not available ({dev.get('why')})")
    return lines


def confirm_setup(memory: Memory, file: str, line: int, real, where) -> tuple:
    """(confirmed, evidence) for a JAX801/JAX802 finding on ``file:line`` (real paths)."""
    for s in memory.settings:
        if real(s["file"]) == file and s["line"] == line:
            if s["effective"]:
                return False, f"{s['name']} was set here before JAX read it (in time on this run)"
            read = s.get("read_at")
            at = f" ({where(read['file'], read['line'])})" if read else ""
            return True, (f"{s['name']} was set here after JAX read it"
                          + (f" at `import jax`{at}" if s["read"] == "import" else f": the backend started first{at}"))
    for i in memory.initialize:
        if real(i["file"]) == file and i["line"] == line:
            if not i["late"]:
                return False, "jax.distributed.initialize ran here before the backend started (in time on this run)"
            at = i.get("backend_started_at")
            return True, ("jax.distributed.initialize ran here after the backend started"
                          + (f" at {where(at['file'], at['line'])}" if at else ""))
    return False, "not observed: this line did not run while jax was imported"
