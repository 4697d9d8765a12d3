"""Safe automatic fixes for ``jaxlint check --fix`` and ``--diff``.

Only mechanical rewrites whose meaning is certain are offered:

* JAX401 ``x[i] = v`` -> ``x = x.at[i].set(v)``; ``x[i] += v`` -> ``x = x.at[i].add(v)`` (``-=``
  ``.subtract``, ``*=`` ``.multiply``, ``/=`` ``.divide``, ``**=`` ``.power``);
* JAX402 ``jax.ops.index_update(x, idx, v)`` -> ``x.at[idx].set(v)`` (``index_add`` ``.add``,
  ``index_mul`` ``.multiply``, ``index_min``/``index_max`` ``.min``/``.max``), with
  ``jax.ops.index[...]`` unwrapped; removed names that nothing uses any more are dropped from
  module-level ``from jax.ops import ...`` lines;
* JAX403 ``x.at[i].set(v)`` as a statement -> ``x = x.at[i].set(v)``.

The rule decides *whether* a statement is a finding (the model's judgement that ``x`` is an
array); :class:`FixBuilder`, called by the rule for that finding, decides from the syntax whether
the rewrite is certain, and attaches a :class:`Fix` to the :class:`~jaxlint.rule.Finding`. For
JAX401/JAX403 ``x`` must be a plain name already local to the statement's scope (not global,
nonlocal or a closure variable) and read again afterwards; one target, no walrus, no tuple value,
and for ``x[f()] = g()`` not two calls whose order would swap.
A fix is a few edits at exact source positions (ast line and UTF-8 byte column): untouched code,
comments and formatting are kept byte for byte, and the original spelling of every
subexpression is reused. Fixes are applied in rounds (findings are recomputed on the fixed text
until nothing changes), so a second run changes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable, Optional, Sequence

from .edits import Edit, Fix, Pos, Span, apply_fixes, drop_unused_from_imports, fixable, parses, source_encoding
from .edits import unified_diff

__all__ = ["Edit", "Fix", "Pos", "Span", "apply_fixes", "fixable", "unified_diff"]  # re-exported from edits

FIXABLE_CODES = frozenset({"JAX401", "JAX402", "JAX403"})
MAX_ROUNDS = 10


def can_fix_path(path: str) -> bool:
    """Only plain Python sources are rewritten (never notebooks)."""
    return not path.lower().endswith(".ipynb")


# --------------------------------------------------------------------------- removed jax.ops imports

_REMOVED_NAMES = frozenset({"index_update", "index_add", "index_mul", "index_min", "index_max", "index"})


def _drop_dead_ops_imports(text: str) -> str:
    """Once the calls are rewritten, a module-level ``from jax.ops import index_update, ...`` is
    the only thing left that fails on current JAX: drop the removed names nothing uses any more
    from it (the whole line when nothing else is left; a one-line import keeps its other names)."""
    return drop_unused_from_imports(text, "jax.ops", _REMOVED_NAMES)


# --------------------------------------------------------------------------- files


@dataclass
class FileFix:
    """The outcome of fixing one file: old and new contents, and how many findings were fixed."""

    path: str
    old_bytes: bytes
    new_bytes: bytes
    old_text: str
    new_text: str
    fixed: int

    def diff(self) -> str:
        return unified_diff(self.path, self.old_text, self.new_text)

    def write(self) -> None:
        """Rewrite the file in place (keeping its mode, links and encoding), unless it changed
        since it was read."""
        with open(self.path, "rb") as fh:
            if fh.read() != self.old_bytes:
                raise OSError(f"{self.path} changed while it was being fixed; not written")
        with open(self.path, "wb") as fh:
            fh.write(self.new_bytes)


def fix_source(data: bytes, path: str, rules: Sequence, keep: Optional[Callable] = None) -> Optional[FileFix]:
    """Fix one file's contents in memory: check, apply the fixes of the findings ``keep`` accepts
    (all by default), check again, until nothing changes. None when nothing was fixed."""
    from .engine import check_source

    if not can_fix_path(path):
        return None
    try:
        codec, bom = source_encoding(data)
        text = data[len(bom):].decode(codec)
    except (SyntaxError, LookupError, UnicodeDecodeError):
        return None
    if not parses(text):
        return None
    new, fixed, ops_fixed = text, 0, False
    for _ in range(MAX_ROUNDS):
        result = check_source(new, path, rules)
        fixes = [f.fix for f in result.findings if f.fix is not None and f.code in FIXABLE_CODES
                 and (keep is None or keep(f))]
        if not fixes:
            break
        codes = {id(f.fix): f.code for f in result.findings if f.fix is not None}
        new, applied = apply_fixes(new, fixes)
        if not applied:
            break
        fixed += len(applied)
        ops_fixed = ops_fixed or any(codes.get(id(fx)) == "JAX402" for fx in applied)
    if ops_fixed:
        new = _drop_dead_ops_imports(new)
    if new == text:
        return None
    try:
        new_bytes = bom + new.encode(codec)
    except (UnicodeEncodeError, LookupError):
        return None
    return FileFix(path, data, new_bytes, text, new, fixed)


def _rules(codes: Sequence[str]) -> list:
    from jaxlint_rules import RULES_BY_CODE

    return [RULES_BY_CODE[c]() for c in codes if c in RULES_BY_CODE]


def fix_files(paths: Sequence[str], codes: Sequence[str], keep: Optional[Callable] = None) -> tuple[list, list]:
    """Fix each file in memory with the selected rules; ``keep(path, finding)`` says which
    findings may be fixed (per-file ignores). Returns ([FileFix], [error messages])."""
    rules = _rules(codes)
    changes, errors = [], []
    for path in paths:
        try:
            with open(path, "rb") as fh:
                data = fh.read()
        except OSError as e:
            errors.append(f"{path}: could not read: {e.strerror or e}")
            continue
        change = fix_source(data, path, rules, None if keep is None else (lambda f, p=path: keep(p, f)))
        if change is not None:
            changes.append(change)
    return changes, errors


def mark_fixable(findings: Sequence, codes: Sequence[str]) -> list:
    """``findings`` with a verified :class:`Fix` on those ``--fix`` would fix and none on the others
    (results read from the cache carry none, so their files are checked again here)."""
    by_path: dict = {}
    for f in findings:
        if f.code in FIXABLE_CODES and can_fix_path(f.path):
            by_path.setdefault(f.path, []).append(f)
    fixes: dict = {}
    if by_path:
        from .engine import check_source

        rules = _rules(codes)
        for path in by_path:
            try:
                with open(path, "rb") as fh:
                    data = fh.read()
                codec, bom = source_encoding(data)
                text = data[len(bom):].decode(codec)
            except (OSError, SyntaxError, LookupError, UnicodeDecodeError):
                continue
            for f in check_source(data, path, rules).findings:
                if f.fix is not None and fixable(text, f.fix):
                    fixes[(path, f.line, f.col, f.code, f.message)] = f.fix
    out = []
    for f in findings:
        fix = fixes.get((f.path, f.line, f.col, f.code, f.message))
        out.append(f if f.fix is fix else replace(f, fix=fix))
    return out


def fix_results(results: Sequence, codes: Sequence[str], ignored_for: Callable, write: bool) -> tuple[list, list]:
    """``jaxlint check --fix/--diff``: fix the files whose findings include a fixable code (not
    silenced by a per-file ignore), and write them when ``write``. Returns ([FileFix], [errors])."""
    def keep(path: str, f) -> bool:
        return not any(f.code.startswith(p) for p in ignored_for(path))

    todo = [r.path for r in results if can_fix_path(r.path)
            and any(f.code in FIXABLE_CODES and keep(r.path, f) for f in r.findings)]
    changes, errors = fix_files(todo, codes, keep)
    if write:
        written = []
        for change in changes:
            try:
                change.write()
                written.append(change)
            except OSError as e:
                errors.append(f"{change.path}: could not write: {e.strerror or e}")
        changes = written
    return changes, errors


def summary(changes: Sequence[FileFix], errors: Sequence[str], write: bool) -> str:
    """The line ``--fix``/``--diff`` print on stderr."""
    out = "".join(f"jaxlint: could not fix {msg}\n" for msg in errors)
    if changes:
        n = sum(c.fixed for c in changes)
        verb = "fixed" if write else "would fix"
        out += (f"jaxlint: {verb} {n} finding{'s' if n != 1 else ''} in {len(changes)} "
                f"file{'s' if len(changes) != 1 else ''}\n")
    return out
