"""``jaxlint.trace.inspect(fn, *args)``: audit one function's jaxpr without running it.

The function is traced with ``jax.make_jaxpr`` on abstract arguments (``jax.ShapeDtypeStruct``
or real values): its Python code runs once per argument set, as tracing runs it, but nothing runs
on the device and nothing is compiled. The result holds the jaxpr facts the run report has (host
callbacks, captured constants, float64 operations) with the source line of each, the equations
per source line, the weakly typed inputs, and, for several argument sets, how many distinct
compilations ``jax.jit`` would make of them and why (the run report's signature comparison:
``signature.signature`` and ``collector.Record``).

Also ``jaxlint trace --inspect module:function --arg 'f32[32,784]' ...`` (:mod:`.inspect_cli`;
the argument specs: :mod:`.inspect_specs`). This
module imports JAX only when a function is inspected (``jaxlint trace --help`` needs none).
"""

from __future__ import annotations

import functools
import os
import sys
from typing import Any, Optional

from .inspect_specs import (ArraySpec, SpecError, materialize, parse_argset, parse_item, parse_spec,
                            split_items)

# the spec readers are offered here too, as this module always did
__all__ = ["inspect", "Inspection", "Args", "render", "ArraySpec", "SpecError", "materialize", "parse_argset",
           "parse_item", "parse_spec", "split_items"]

TOP_LINES = 10
_WIDE = ("float64", "int64", "uint64", "complex128")

EXIT_OK, EXIT_RAISED, EXIT_USAGE, EXIT_GATE = 0, 1, 2, 3

class Args:
    """One argument set for :func:`inspect`'s ``argsets``: ``Args(x, y, n=3)``."""

    def __init__(self, *args, **kwargs):
        self.args = args
        self.kwargs = kwargs

    def __repr__(self) -> str:
        return f"Args({', '.join([repr(a) for a in self.args] + [f'{k}={v!r}' for k, v in self.kwargs.items()])})"


def _note_wide_leaves(sets: list, notes: list) -> None:
    import jax

    for a, k in sets:
        for leaf in jax.tree_util.tree_leaves((a, k)):
            dtype = getattr(leaf, "dtype", None)
            if dtype is not None and not isinstance(leaf, (int, float, complex, bool)):
                _note_wide(str(dtype), notes)


def _note_wide(dtype: str, notes: list) -> None:
    if str(dtype) not in _WIDE:
        return
    import jax

    if not jax.config.jax_enable_x64:
        note = (f"{dtype} arguments are traced as their 32-bit type: jax_enable_x64 is off "
                "(--x64, or jax.config.update('jax_enable_x64', True))")
        if note not in notes:
            notes.append(note)


# -- the audit -------------------------------------------------------------------------------

def _static_sets(fn: Any, nums, names) -> tuple:
    """``(static_argnums, static_argnames)`` completed from each other through ``fn``'s
    signature, as ``jax.jit`` does."""
    import inspect as pyinspect

    nums = {nums} if isinstance(nums, int) else set(nums or ())
    names = {names} if isinstance(names, str) else set(names or ())
    try:
        params = [p for p in pyinspect.signature(fn).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        params = []
    for i, p in enumerate(params):
        if p.name in names and p.kind is not p.POSITIONAL_ONLY:
            nums.add(i)
        if i in nums and p.kind is not p.POSITIONAL_ONLY:
            names.add(p.name)
    return tuple(sorted(nums)), tuple(sorted(names))


def _outer_frames() -> frozenset:
    """(file, line) of every frame on the stack now: an equation made there (the ``jit``
    equation of an inspected jitted function) was made by the inspect call, not by the function."""
    out = set()
    f = sys._getframe(1)
    while f is not None:
        out.add((f.f_code.co_filename, f.f_lineno))
        f = f.f_back
    return frozenset(out)


def _trace_one(fn: Any, args: tuple, kwargs: dict, nums: tuple, names: tuple):
    """(closed jaxpr, signature) of one argument set."""
    import types

    import jax

    from .signature import signature

    static_kw = {k: v for k, v in kwargs.items() if k in names}
    traced_kw = {k: v for k, v in kwargs.items() if k not in names}
    target = functools.partial(fn, **static_kw) if static_kw else fn
    here = tuple(i for i in nums if i < len(args))
    closed = jax.make_jaxpr(target, static_argnums=here)(*args, **traced_kw)
    ji = types.SimpleNamespace(static_argnums=here, static_argnames=names, fun_signature=None)
    sig = signature(fn, ji, getattr(closed.jaxpr, "debug_info", None), closed.in_avals, args, kwargs)
    return closed, sig


def inspect(fn: Any, *args, static_argnums=(), static_argnames=(), argsets=None, top: int = TOP_LINES,
            large_constant_bytes: Optional[int] = None, user_roots=None, **kwargs) -> "Inspection":
    """Trace ``fn`` with ``jax.make_jaxpr`` (nothing runs on the device, nothing compiles) and
    audit its jaxpr.

    ``args``/``kwargs``: one argument set (``jax.ShapeDtypeStruct``, arrays or Python values);
    ``argsets``: more of them (tuples of positional arguments, or :class:`Args`), after that
    one; ``static_argnums``/``static_argnames`` as for ``jax.jit`` (the same ones when ``fn`` is
    already jitted). The facts are those of the first argument set; ``compilations`` counts the
    distinct signatures over all sets. Raises whatever ``fn`` raises while it is traced.
    """
    from . import jaxpr_facts as jf
    from .collector import Record
    from .attribution import code_of, describe
    from .userfiles import UserFiles

    sets = []
    if args or kwargs or not argsets:
        sets.append((tuple(args), dict(kwargs)))
    for s in argsets or ():
        if isinstance(s, Args):
            sets.append((tuple(s.args), dict(s.kwargs)))
        elif isinstance(s, (tuple, list)):
            sets.append((tuple(s), {}))
        else:
            raise TypeError(f"an argument set is a tuple of positional arguments or jaxlint.trace.Args(...), "
                            f"not {type(s).__name__}")
    nums, names = _static_sets(fn, static_argnums, static_argnames)
    notes: list = []
    _note_wide_leaves(sets, notes)
    code = code_of(fn)
    where = describe(code) if code is not None else (getattr(fn, "__name__", repr(fn)),) * 2 + (None, None)
    rec = Record(None, *where)
    outer = _outer_frames()
    user_files = UserFiles(user_roots)
    detail, rows = None, []
    distinct: list = []
    for i, (a, k) in enumerate(sets):
        c, sig = _trace_one(fn, a, k, nums, names)
        same = next((j for j, s in distinct if not sig.diff(s)), None)
        row = {"args": _show_args(sig), "equations": None, "compilation": None, "same_as": None, "reason": None}
        if same is None:
            rec.traced(None, sig)
            distinct.append((i + 1, sig))
            row["compilation"], row["reason"] = len(distinct), rec.last_reason
            row["equations"] = jf.jaxpr_facts(c, (), user_files)["equations"] if i else None
        else:
            row["same_as"] = same
        if i == 0:
            sig0 = sig
            files = _Files(user_files, outer, (where[2], where[3]) if where[2] else (None, None))
            detail = jf.jaxpr_detail(c, files,
                                     jf.LARGE_CONSTANT_BYTES if large_constant_bytes is None else large_constant_bytes)
            row["equations"] = detail["equations"]
        rows.append(row)
    if sets and rows[0]["equations"] is None:
        rows[0]["equations"] = detail["equations"]
    return Inspection(where, detail, sig0, rows, rec, max(1, int(top)), notes, code)


class _Files:
    """``user_files``, minus the frames of the inspect call itself (and jaxlint's, under it:
    ``jax.make_jaxpr`` calls the function from there before jax 0.7); an equation those frames
    made (the ``jit`` equation of a jitted function) counts at the function's definition."""

    def __init__(self, user_files, outer: frozenset, fallback: tuple):
        self.user_files, self.outer, self.fallback = user_files, outer, fallback

    def __call__(self, filename: str) -> bool:
        return self.user_files(filename)

    def excluded(self, file: str, line: int) -> bool:
        from .frames import own

        return (file, line) in self.outer or own(file)


def _show_args(sig) -> str:
    from .collector import show_aval

    parts = [f"{path}: {show_aval(leaf)}" for path, leaf in sig.leaves.items()]
    parts += [f"{name}={shown} (static)" for name, (shown, _) in sig.static.items()]
    return ", ".join(parts) or "(no arguments)"


class Inspection:
    """What :func:`inspect` found. Attributes (see ``as_dict`` for the same as JSON):

    ``equations`` (int: every equation, nested jaxprs included), ``equations_by_line``
    (``[(file, line, equations)]``, the ``top`` busiest lines), ``callbacks`` (``[(primitive,
    file, line)]``), ``large_constants`` (``[(bytes, file, line)]``, captured constants over
    1 MiB), ``constant_bytes`` (all captured constants), ``float64_ops`` (int),
    ``weak_inputs`` (``[(argument, aval)]``), ``compilations`` (distinct compilations over the
    argument sets), ``reasons`` (one line per compilation: ``first call``, then why each new
    one misses the cache), ``notes`` (what could not be determined on this JAX).
    """

    def __init__(self, where, detail, sig, rows, rec, top, notes, code):
        self.name, self.qualname, self.file, self.line = where
        self._detail = detail
        self._rows = rows
        self._rec = rec
        self.top = top
        self.notes = list(notes)
        self.equations = detail["equations"]
        self._by_line = sorted(((f, l, p) for (f, l), p in detail["by_line"].items()),
                               key=lambda t: (-sum(t[2].values()), str(t[0]), t[1] or 0))
        self.equations_by_line = [(f, l, sum(p.values())) for f, l, p in self._by_line[:top]]
        self.callbacks = [(c["primitive"], c["file"], c["line"]) for c in detail["callbacks"]]
        big = [c for c in detail["constants"] if c["bytes"] > detail["large"]]
        self._large = big
        self.large_constants = [(c["bytes"], c["file"], c["line"]) for c in big]
        self.constant_bytes = sum(c["bytes"] for c in detail["constants"])
        self.float64_ops = sum(detail["float64"].values())
        self.float64_lines = [(f, l, n) for (f, l), n in detail["float64"].most_common()]
        from .collector import show_aval

        self.weak_inputs = [(path, show_aval(leaf)) for path, leaf in sig.leaves.items() if leaf[2]]
        self.compilations = sum(1 for r in rows if r["compilation"])
        self.reasons = [r["reason"] for r in rows if r["compilation"]]
        if detail["equations"] and all(f is None for (f, _) in detail["by_line"]):
            self.notes.append("source lines unavailable on this JAX (equations have no user frame)")

    def line_equations(self, file: str, line: int) -> int:
        """Equations made on ``file:line`` (``file`` may be a suffix of the path)."""
        return sum(sum(p.values()) for f, l, p in self._by_line if l == line and f and f.endswith(file))

    def as_dict(self) -> dict:
        return {
            "function": {"name": self.name, "qualname": self.qualname, "file": self.file, "line": self.line},
            "argsets": [dict(r) for r in self._rows],
            "equations": self.equations,
            "equations_by_line": [
                {"file": f, "line": l, "equations": sum(p.values()), "primitives": dict(p.most_common(3))}
                for f, l, p in self._by_line[: self.top]],
            "lines": len(self._by_line),
            "callbacks": [{"primitive": p, "file": f, "line": l} for p, f, l in self.callbacks],
            "large_constants": [dict(c) for c in self._large],
            "constant_bytes": self.constant_bytes,
            "float64_ops": self.float64_ops,
            "float64_lines": [{"file": f, "line": l, "equations": n} for f, l, n in self.float64_lines],
            "weak_inputs": [{"argument": a, "aval": v} for a, v in self.weak_inputs],
            "compilations": self.compilations,
            "reasons": list(self.reasons),
            "miss_reasons": [{"reason": r, "argument": a, "before": b, "after": af, "count": n}
                             for (r, a, b, af), n in self._rec.miss_reasons.most_common()],
            "notes": list(self.notes),
        }

    def text(self) -> str:
        return render(self.as_dict())

    def __repr__(self) -> str:
        return (f"<Inspection of {self.qualname}: {self.equations} equations, "
                f"{self.compilations} compilation(s) for {len(self._rows)} argument set(s)>")


def _where(file, line) -> str:
    if file is None:
        return "(no user frame: JAX kept too few frames)"
    return f"{_rel(file)}:{line}"


def _rel(path: str) -> str:
    try:
        rel = os.path.relpath(path)
    except ValueError:
        return path
    return path if rel.startswith(".." + os.sep) else rel


def _n(n: int, what: str) -> str:
    return f"{n:,} {what}{'' if n == 1 else 's'}"


def _bytes(n: int) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} B"


def render(d: dict) -> str:
    """The text form of ``Inspection.as_dict()``."""
    f = d["function"]
    out = [f"jaxlint trace --inspect: {f['qualname']} at {_where(f['file'], f['line'])} "
           "(traced with jax.make_jaxpr: nothing executed, nothing compiled)"]
    for note in d["notes"]:
        out.append(f"  PARTIAL: {note}")
    out.append(f"  {d['equations']:,} equations on {d['lines']} source line{'s' if d['lines'] != 1 else ''}, {_n(len(d['callbacks']), 'host callback')}, "
               f"{_n(len(d['large_constants']), 'captured constant')} over 1 MiB ({_bytes(d['constant_bytes'])} "
               f"captured in all), {_n(d['float64_ops'], 'float64 operation')}")
    if d["equations_by_line"]:
        out.append("")
        out.append(f"Equations per source line (top {len(d['equations_by_line'])})")
        out.append("  equations  line")
        for r in d["equations_by_line"]:
            prims = ", ".join(f"{p} {n}" for p, n in r["primitives"].items())
            out.append(f"  {r['equations']:>9,}  {_where(r['file'], r['line'])}  ({prims})")
    if d["callbacks"]:
        out.append("")
        out.append("Host callbacks (each one stops the device and calls Python on every run)")
        for c in d["callbacks"]:
            out.append(f"  {c['primitive']:<15} {_where(c['file'], c['line'])}")
    if d["large_constants"]:
        out.append("")
        out.append("Captured constants over 1 MiB (baked into the program: pass them as arguments)")
        for c in d["large_constants"]:
            shape = ",".join(str(s) for s in c["shape"])
            out.append(f"  {_bytes(c['bytes']):>9}  {c['dtype']}[{shape}]  captured at {_where(c['file'], c['line'])}")
    if d["float64_lines"]:
        out.append("")
        out.append("float64 operations (slow on GPU/TPU: check the inputs' dtypes)")
        for r in d["float64_lines"][:10]:
            out.append(f"  {r['equations']:>9,}  {_where(r['file'], r['line'])}")
    if d["weak_inputs"]:
        out.append("")
        out.append("Weakly typed inputs (Python scalars: a jnp array in their place is a different signature, "
                   "and compiles again)")
        for w in d["weak_inputs"]:
            out.append(f"  {w['argument']}: {w['aval']}")
    sets = d["argsets"]
    out.append("")
    out.append(f"Compilations: {d['compilations']} for {len(sets)} argument set{'s' if len(sets) != 1 else ''}")
    for i, r in enumerate(sets, 1):
        if r["compilation"]:
            what = f"compilation {r['compilation']}: {r['reason']}"
        else:
            what = f"same signature as set {r['same_as']}: no new compilation"
        out.append(f"  set {i}  {r['args']}")
        out.append(f"         {what}")
    return "\n".join(out) + "\n"
