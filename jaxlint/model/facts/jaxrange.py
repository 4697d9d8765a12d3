"""The JAX releases a project declares it runs on, and the **reaches** fact: a JAX release at or
after a removal is among them.

The declaration is read from the project's packaging files by :mod:`jaxlint.declaration` (the
nearest folder above the checked file holding pyproject.toml, setup.cfg, setup.py, requirements
files or environment*.yml, and conda environment files one folder down), as requirement texts; this module reads their version specifiers:

* PEP 440 (``==``, ``!=`` with ``.*`` wildcards, ``<``, ``<=``, ``>``, ``>=``, ``~=``, ``===``),
  comma-separated specifiers all holding;
* poetry (``^0.4.8`` is ``>=0.4.8,<0.5.0``, ``~0.4.8`` is ``>=0.4.8,<0.5.0``, ``~1`` is
  ``>=1,<2``, a bare ``0.4.8`` is ``==0.4.8``, ``*``, ``||`` between alternatives), as poetry's
  "Dependency specification" page documents them;
* conda (``jax=0.4.8`` is ``0.4.8.*``, ``jax==0.4.8``, ``jax 0.4.8`` read as ``0.4.8.*``, ``|``
  between alternatives).

Versions are compared by their release numbers (``0.4.8`` = ``0.4.8.0``); a pre-, post-, dev- or
local part (``0.6.0rc1``, ``0.3.2+cuda11``) is read as its release, which can only widen the range
toward the removal, never narrow it. Every requirement for ``jax`` in the declaration is taken
(the project's dependencies, its extras, its dependency groups and requirement files, whatever
markers select them): the declared range is their union, so a finding is left out only when
*every* declared way of installing JAX is older than the removal. ``jaxlib`` stands in when no
requirement constrains ``jax`` itself (JAX and jaxlib are released in lockstep).
"""

from __future__ import annotations

import re
from typing import Optional

from . import proof

INF = None  # an open end of an interval


class Range:
    """A union of version intervals: ``(low, low_included, high, high_included)``, an end None
    when open; versions are release tuples without trailing zeros (``(0, 4, 8)``, ``(0, 5)``)."""

    __slots__ = ("parts",)

    def __init__(self, parts=()):
        self.parts = tuple(p for p in parts if not _empty(p))

    @classmethod
    def every(cls) -> "Range":
        return cls(((INF, False, INF, False),))

    def __eq__(self, other):
        return isinstance(other, Range) and sorted(map(_key, self.parts)) == sorted(map(_key, other.parts))

    def __repr__(self) -> str:
        return f"Range({self.parts!r})"

    @property
    def empty(self) -> bool:
        return not self.parts

    @property
    def unbounded(self) -> bool:
        """No constraint at all: every version."""
        return any(lo is INF and hi is INF for lo, _, hi, _ in self.parts)

    def __and__(self, other: "Range") -> "Range":
        out = []
        for a in self.parts:
            for b in other.parts:
                lo, lo_in = _max_low(a[0], a[1], b[0], b[1])
                hi, hi_in = _min_high(a[2], a[3], b[2], b[3])
                out.append((lo, lo_in, hi, hi_in))
        return Range(out)

    def __or__(self, other: "Range") -> "Range":
        return Range(self.parts + other.parts)

    def includes_from(self, version: tuple) -> bool:
        """Whether a version at or after ``version`` is in the range."""
        v = _norm(version)
        return any(hi is INF or hi > v or (hi == v and hi_in) for _, _, hi, hi_in in self.parts)

    def oldest(self) -> Optional[tuple]:
        """The lowest version the range allows (its lowest bound, as three numbers or more), None
        when unbounded below."""
        lows = [lo for lo, _, _, _ in self.parts]
        if not lows or any(lo is INF for lo in lows):
            return None
        low = min(lows)
        return low + (0,) * (3 - len(low))


def _key(p):
    return tuple((0, ()) if x is None else (1, x) if isinstance(x, tuple) else (2, x) for x in p)


def _empty(p) -> bool:
    lo, lo_in, hi, hi_in = p
    if lo is INF or hi is INF:
        return False
    return lo > hi or (lo == hi and not (lo_in and hi_in))


def _max_low(a, a_in, b, b_in):
    if a is INF:
        return b, b_in
    if b is INF or a > b:
        return a, a_in
    return (b, b_in) if b > a else (a, a_in and b_in)


def _min_high(a, a_in, b, b_in):
    if a is INF:
        return b, b_in
    if b is INF or a < b:
        return a, a_in
    return (b, b_in) if b < a else (a, a_in and b_in)


def _norm(v: tuple) -> tuple:
    v = tuple(v)
    while v and v[-1] == 0:
        v = v[:-1]
    return v


class SpecError(ValueError):
    """A specifier this reader does not understand."""


_VERSION = re.compile(r"v?(\d+(?:\.\d+)*)(\.\*)?((?:[-_.]?(?:a|b|c|rc|alpha|beta|pre|preview|post|rev|r|dev)"
                      r"[-_.]?\d*)*)(\+[A-Za-z0-9._]+)?", re.I)


def version(text: str, wildcard: bool = False) -> tuple:
    """``"0.4.8"`` -> ``(0, 4, 8)`` (the release part), with ``wildcard`` ``"0.4.*"`` -> ``(0, 4)``
    and True; raises SpecError on anything else."""
    m = _VERSION.fullmatch(text.strip())
    if m is None or (m.group(2) and not wildcard):
        raise SpecError(f"not a version: {text.strip()!r}")
    release = tuple(int(p) for p in m.group(1).split("."))
    return (release, bool(m.group(2))) if wildcard else release


def _next(release: tuple) -> tuple:
    """The first release after every ``release.*`` one: ``(0, 4)`` -> ``(0, 5)``."""
    return release[:-1] + (release[-1] + 1,)


def _point(v: tuple) -> Range:
    v = _norm(v)
    return Range(((v, True, v, True),))


def _prefix(release: tuple) -> Range:
    return Range(((_norm(release), True, _norm(_next(release)), False),))


_OP = re.compile(r"\s*(===|==|!=|~=|<=|>=|<|>|\^|~|=)?\s*([^\s,<>=!~^|]+)\s*")


def clause(op: str, text: str, style: str) -> Range:
    """One comparison: ``op`` (``""`` for a bare version) and its version, in ``style``
    ("pep440", "poetry" or "conda")."""
    if text == "*" and op in ("", "==", "="):
        return Range.every()
    release, wild = version(text, wildcard=True)
    v = _norm(release)
    if op == "" and style == "pep440":
        raise SpecError(f"a version without an operator: {text!r}")
    if wild or (op in ("=", "") and style == "conda"):  # conda's jax=0.4.8 and jax 0.4.8: 0.4.8.*
        if op == "!=":
            return Range(((INF, False, _norm(release), False), (_norm(_next(release)), True, INF, False)))
        if op in ("", "==", "="):
            return _prefix(release)
        raise SpecError(f"a wildcard after {op!r}: {text!r}")
    if op in ("==", "===", "") or (op == "=" and style == "poetry"):
        return _point(v)
    if op == "!=":
        return Range(((INF, False, v, False), (v, False, INF, False)))
    if op == "<":
        return Range(((INF, False, v, False),))
    if op == "<=":
        return Range(((INF, False, v, True),))
    if op == ">":
        return Range(((v, False, INF, False),))
    if op == ">=":
        return Range(((v, True, INF, False),))
    if op == "~=":
        if len(release) < 2:
            raise SpecError(f"`~=` needs two or more release numbers: {text!r}")
        return Range(((v, True, _norm(_next(release[:-1])), False),))
    if op == "^" and style == "poetry":  # the left-most non-zero number stays (poetry's caret)
        first = next((i for i, p in enumerate(release) if p != 0), len(release) - 1)
        return Range(((v, True, _norm(_next(release[:first + 1])), False),))
    if op == "~" and style == "poetry":  # ~1.2.3 and ~1.2: patch updates; ~1: minor updates too
        keep = release[:2] if len(release) >= 2 else release[:1]
        return Range(((v, True, _norm(_next(keep)), False),))
    raise SpecError(f"operator {op!r} in a {style} requirement")


def spec(text: str, style: str = "pep440") -> Range:
    """The versions a specifier allows: ``">=0.4.8,<0.5"``, ``"^0.4.8"`` (poetry), ``"0.4.8"``
    (poetry, conda); an empty text allows every version. Raises SpecError when unreadable."""
    text = text.strip()
    if text.startswith("(") and text.endswith(")"):  # PEP 508's ``jax (>=0.4)``
        text = text[1:-1].strip()
    if not text:
        return Range.every()
    alternatives = re.split(r"\|\|" if style == "poetry" else r"\|", text) if style != "pep440" else [text]
    out = Range()
    for alt in alternatives:
        alt = alt.strip()
        clauses = alt.split(",") if style != "poetry" else re.split(r"\s*,\s*|\s+(?=[<>=!~^])", alt)
        got = Range.every()
        for c in clauses:
            if not c.strip():
                raise SpecError(f"an empty clause in {text!r}")
            m = _OP.fullmatch(c)
            if m is None:
                raise SpecError(f"not a version specifier: {c.strip()!r}")
            got = got & clause(m.group(1) or "", m.group(2), style)
        out = out | got
    return out


class Declared:
    """What a declaration says of JAX: ``range`` (a :class:`Range`, None when it constrains JAX
    nowhere or cannot be read), ``where`` (the requirements it was read from, for evidence:
    ``pyproject.toml requires jax ^0.4.8``) and ``why`` (the sentence when ``range`` is None)."""

    __slots__ = ("range", "where", "why")

    def __init__(self, range_: Optional[Range], where: str = "", why: str = ""):
        self.range = range_
        self.where = where
        self.why = why


# The newest JAX release that installs on each Python (``python_requires`` of jax's setup.py at the
# release tags: 0.4.0 needs 3.8, 0.4.14 needs 3.9, 0.4.31 needs 3.10, 0.7.0 needs 3.11, 0.11.0 needs 3.12).
NEWEST_JAX_FOR_PYTHON = {(3, 7): (0, 3, 25), (3, 8): (0, 4, 13), (3, 9): (0, 4, 30), (3, 10): (0, 6, 2),
                         (3, 11): (0, 10, 2)}


def declared(declaration) -> Declared:
    """The JAX range of a declaration (:class:`jaxlint.declaration.Declaration`, or None when no
    folder above the file has packaging files), capped by the newest JAX for the newest Python it
    declares, where every declared Python has an upper bound (``python=3.7``, ``<3.10``)."""
    found = _declared_jax(declaration)
    if declaration is None or declaration.problems:
        return found
    cap = _python_cap(declaration)
    if cap is None:
        return found
    newest, said = cap
    capped = Range(((INF, False, _norm(newest), True),))
    why = f"{said}, and JAX {text(newest)} is the newest release for it"
    if found.range is None:
        return Declared(capped, where=why)
    return Declared(found.range & capped, where=f"{found.where}; {why}")


def _python_cap(declaration) -> Optional[tuple]:
    """(newest JAX, how the Python was declared) when the declared Pythons all end below 3.12."""
    reqs = [r for r in declaration.requirements if r.name == "python"]
    if not reqs:
        return None
    union = Range()
    for r in reqs:
        try:
            union = union | spec(r.spec, r.style)
        except SpecError:
            return None
    if union.empty or any(hi is INF for _, _, hi, _ in union.parts):
        return None
    hi, hi_in = max(((hi, hi_in) for _, _, hi, hi_in in union.parts), key=lambda p: (p[0], p[1]))
    if hi_in or len(hi) > 2:
        newest = hi[:2] if len(hi) >= 2 else (hi[0], 0)
    elif len(hi) == 2 and hi[1] > 0:
        newest = (hi[0], hi[1] - 1)  # ``<3.10``: 3.9 at most
    else:
        return None
    if newest >= (3, 12):
        return None
    jax = NEWEST_JAX_FOR_PYTHON.get(newest, NEWEST_JAX_FOR_PYTHON[(3, 7)] if newest < (3, 7) else None)
    if jax is None:
        return None
    return jax, f"{_said(declaration, reqs)} (Python {newest[0]}.{newest[1]} at the newest)"


def _declared_jax(declaration) -> Declared:
    if declaration is None:
        return Declared(None, why="no packaging file (pyproject.toml, setup.cfg, setup.py, requirements*.txt, "
                                  "environment*.yml) in the file's folder or above it")
    if declaration.problems:
        file, what = declaration.problems[0]
        return Declared(None, why=f"{file} cannot be read for JAX's version ({what})")
    for name in ("jax", "jaxlib"):
        reqs = [r for r in declaration.requirements if r.name == name]
        if not reqs:
            continue
        union = Range()
        for r in reqs:
            try:
                union = union | spec(r.spec, r.style)
            except SpecError as e:
                return Declared(None, why=f"{r.file} names {name} `{r.spec}`, which cannot be "
                                          f"read ({e})")
        if union.unbounded:
            continue  # jax without a version: jaxlib may still pin it
        if union.empty:
            return Declared(None, why=f"{_said(declaration, reqs)} allows no version at all")
        return Declared(union, where=_said(declaration, reqs))
    files = ", ".join(declaration.files)
    return Declared(None, why=f"{files} constrain{'s' if len(declaration.files) == 1 else ''} no JAX version")


def of_model(model) -> Declared:
    """What the packaging files of the model's project declare of JAX (read once per folder and
    run by the project resolver, which records them for the result cache); asked only where a
    rule needs it, so a module with no reference to a removed name reads no packaging file."""
    memo = model.facts.declared_jax
    if memo is None:
        project, path = getattr(model, "project", None), getattr(model, "path", None)
        if project is None or path is None:
            memo = Declared(None, why="the source has no file path to find its project's packaging files from")
        else:
            memo = declared(project.declaration(path))
        model.facts.declared_jax = memo
    return memo


def _said(declaration, reqs) -> str:
    """``pyproject.toml requires jax ^0.4.8`` (the first few requirements, by file)."""
    seen = list(dict.fromkeys(f"{r.file} requires {r.name} {r.spec.strip() or '(any version)'}" for r in reqs))
    more = f" (and {len(seen) - 3} more)" if len(seen) > 3 else ""
    return "; ".join(seen[:3]) + more


def text(v: tuple) -> str:
    v = tuple(v)
    return ".".join(map(str, v + (0,) * (3 - len(v)) if len(v) < 3 else v))


def reaches(found: Declared, removed: tuple, configured: Optional[tuple]) -> proof.Fact:
    """The **reaches** fact of a removal in JAX ``removed``: the project may run on a JAX release at or
    after it. ``configured``: ``jax-version`` from the user's configuration (the oldest JAX the project
    supports), which wins where it is the removal or later (the user's own word)."""
    when = text(removed)
    if configured is not None and tuple(configured) >= tuple(removed):
        return proof.proven("reaches", f"jax-version {text(configured)} (the oldest JAX the project supports, "
                                       f"configured) is at or after the removal in {when}")
    if found.range is None:
        return proof.proven("reaches", f"{found.why}: current JAX assumed, which has the removal in {when}")
    if found.range.includes_from(removed):
        return proof.proven("reaches", f"{found.where}: the declared range includes JAX {when} or later")
    return proof.disproven("reaches", f"{found.where}: the removal in {when} does not reach it (every declared "
                                      "version is older); it will when the pin is lifted")
