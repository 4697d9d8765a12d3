"""Facts about one traced program, read from its closed jaxpr (no retracing).

The jaxpr is the one JAX built on the function's first trace, so the facts are
those of the avals of its first call, and the user's Python code does not run
again (a second ``jax.make_jaxpr`` would repeat its side effects).

``jaxpr_facts`` gives the run report's facts; ``jaxpr_detail`` adds, for
``jaxlint.trace.inspect``, where each equation and captured constant came from.
Both walk the program in the same order: every equation, nested jaxprs (jit,
cond branches, scan/while bodies, custom_jvp/vjp) included, a nested jaxpr that
several equations share counted once.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

LARGE_CONSTANT_BYTES = 1 << 20  # 1 MiB
CALLBACKS = ("pure_callback", "io_callback", "debug_callback", "debug_print")
MAX_DEPTH = 200  # nested jaxprs followed at most this deep (guards against a cyclic or hostile object)


def _subjaxprs(eqn) -> list:
    """Jaxprs nested in an equation's parameters (jit, cond branches, scan/while bodies)."""
    out = []
    stack = list(eqn.params.values())
    while stack:
        v = stack.pop()
        if isinstance(v, (tuple, list)):
            stack.extend(v)
        elif hasattr(v, "eqns") and hasattr(v, "invars"):
            out.append((v, ()))
        elif hasattr(v, "jaxpr") and hasattr(v, "consts") and hasattr(v.jaxpr, "eqns"):
            out.append((v.jaxpr, v.consts))
    return out


def walk(closed_jaxpr: Any):
    """The program in order: ``("jaxpr", jaxpr, consts)`` on entering each jaxpr (the
    outermost first), then ``("eqn", eqn, parent)`` for each of its equations (``parent``: the
    equation whose parameters hold that jaxpr, None in the outermost one), an equation's nested
    jaxprs walked right after it. Each jaxpr object is walked once."""
    seen = {id(closed_jaxpr.jaxpr)}
    yield ("jaxpr", closed_jaxpr.jaxpr, closed_jaxpr.consts)
    stack = [(iter(closed_jaxpr.jaxpr.eqns), None)]
    while stack:
        eqns, parent = stack[-1]
        eqn = next(eqns, None)
        if eqn is None:
            stack.pop()
            continue
        yield ("eqn", eqn, parent)
        if len(stack) >= MAX_DEPTH:
            continue
        for jaxpr, consts in reversed(_subjaxprs(eqn)):
            if id(jaxpr) in seen:
                continue
            seen.add(id(jaxpr))
            yield ("jaxpr", jaxpr, consts)
            stack.append((iter(jaxpr.eqns), eqn))


def _site(eqn, user_files) -> tuple:
    from .adapters.base import eqn_site

    return eqn_site(eqn)


def _constant(value: Any, threshold: int = LARGE_CONSTANT_BYTES):
    nbytes = getattr(value, "nbytes", None)
    if nbytes is None:  # jax 0.8's TypedNdArray (a NumPy array JAX holds while tracing) has no nbytes
        size, itemsize = getattr(value, "size", None), getattr(getattr(value, "dtype", None), "itemsize", None)
        if isinstance(size, int) and isinstance(itemsize, int):
            nbytes = size * itemsize
    if not isinstance(nbytes, int) or nbytes <= threshold:
        return None
    return {"bytes": nbytes, "shape": list(getattr(value, "shape", ())), "dtype": str(getattr(value, "dtype", "?"))}


def _is_float64(eqn) -> bool:
    return any(str(getattr(getattr(v, "aval", None), "dtype", "")) == "float64" for v in eqn.outvars)


def jaxpr_facts(closed_jaxpr: Any, extra_consts: Any, user_files) -> dict:
    """Equations (nested ones included), host callbacks, large constants, float64 ops."""
    equations = 0
    float64 = 0
    callbacks = []
    constants = []
    seen_consts: set = set()

    def consts(values):
        for c in values or ():
            if id(c) in seen_consts:
                continue
            seen_consts.add(id(c))
            fact = _constant(c)
            if fact is not None:
                constants.append(fact)

    consts(extra_consts)
    for kind, item, jconsts in walk(closed_jaxpr):
        if kind == "jaxpr":
            consts(jconsts)
            continue
        eqn = item
        equations += 1
        name = eqn.primitive.name
        if name in CALLBACKS:
            file, line = _site(eqn, user_files)
            callbacks.append({"primitive": name, "file": file, "line": line})
        if _is_float64(eqn):
            float64 += 1
        for literal in eqn.invars:
            fact = _constant(getattr(literal, "val", None))
            if fact is not None and id(literal) not in seen_consts:
                seen_consts.add(id(literal))
                constants.append(fact)
    constants.sort(key=lambda c: -c["bytes"])
    return {"equations": equations, "callbacks": callbacks, "large_constants": constants, "float64_ops": float64}


def user_site(eqn, user_files) -> tuple:
    """(file, line) of the innermost frame in the user's files that made ``eqn``; else the
    innermost frame outside JAX (a library's); else (None, None). Frames for which
    ``user_files.excluded(file, line)`` (when it has one) is true are skipped; an equation
    made by those frames only is at ``user_files.fallback``."""
    from .adapters.base import eqn_frames

    excluded = getattr(user_files, "excluded", None)
    every = eqn_frames(eqn)
    frames = [f for f in every if excluded is None or not excluded(f[0], f[1])]
    for file, line, _ in frames:
        if user_files(file):
            return file, line
    if frames:
        return frames[0][0], frames[0][1]
    if every:  # made only by excluded frames (the caller's)
        return getattr(user_files, "fallback", (None, None))
    return None, None


def jaxpr_detail(closed_jaxpr: Any, user_files, large: int = LARGE_CONSTANT_BYTES) -> dict:
    """``jaxpr_facts``' facts (the same counts), each with where it came from.

    ``by_line``: ``{(file, line): Counter of primitive names}`` over every equation;
    ``callbacks``: ``[{primitive, file, line}]``; ``constants``: every captured constant
    (a constant of the closed jaxpr or of a nested one, or a literal) as ``{bytes, shape,
    dtype, file, line}``, the line the first equation reading it was made on (None: no
    equation reads it); ``float64``: ``{(file, line): equations}`` with a float64 result.
    Lines are the innermost frame in ``user_files`` (see ``user_site``); an equation with no
    frame outside JAX (JAX's traceback of an equation made inside a ``jit`` boundary can stop
    there) is at its enclosing equation's line, in the outermost jaxpr at
    ``user_files.fallback`` when there is one.
    """
    by_line: dict = {}
    callbacks = []
    float64: Counter = Counter()
    constants = []
    pending: dict = {}  # id(constvar) -> its entry in constants, until an equation reads it
    seen_values: set = set()
    equations = 0

    def constant(value, site=None):
        if id(value) in seen_values:
            return None
        seen_values.add(id(value))
        nbytes = getattr(value, "nbytes", None)
        if not isinstance(nbytes, int):
            return None
        entry = {"bytes": nbytes, "shape": list(getattr(value, "shape", ())),
                 "dtype": str(getattr(value, "dtype", "?")), "file": None, "line": None}
        if site is not None:
            entry["file"], entry["line"] = site
        constants.append(entry)
        return entry

    parents: dict = {}  # id(eqn) -> its site (the eqns stay alive in the jaxpr)
    for kind, item, extra in walk(closed_jaxpr):
        if kind == "jaxpr":
            jconsts = extra
            for var, value in zip(getattr(item, "constvars", ()), jconsts or ()):
                entry = constant(value)
                if entry is not None:
                    pending[id(var)] = entry
            continue
        eqn = item
        equations += 1
        site = user_site(eqn, user_files)
        if site == (None, None):  # no frame outside JAX (a traceback cut at a jit boundary)
            site = parents.get(id(extra)) if extra is not None else None
            site = site or getattr(user_files, "fallback", (None, None))
        parents[id(eqn)] = site
        name = eqn.primitive.name
        by_line.setdefault(site, Counter())[name] += 1
        if name in CALLBACKS:
            callbacks.append({"primitive": name, "file": site[0], "line": site[1]})
        if _is_float64(eqn):
            float64[site] += 1
        for v in eqn.invars:
            entry = pending.pop(id(v), None)
            if entry is not None:
                entry["file"], entry["line"] = site
            elif hasattr(v, "val") and getattr(getattr(v, "val", None), "nbytes", 0) > large:
                constant(v.val, site)
    constants.sort(key=lambda c: -c["bytes"])
    return {"equations": equations, "by_line": by_line, "callbacks": callbacks, "constants": constants,
            "float64": float64, "large": large}
