"""``jaxlint check --fix`` and ``--diff``: apply the rules' safe fixes to files.

A rule that offers fixes says so (``fixable = True``) and attaches a :class:`~jaxlint.edits.Fix`
to each finding whose rewrite is certain (jaxlint_rules/mutation.py); a rule whose fixes can leave
something behind to tidy (an import of a name the rewrites removed) also has
``after_fixes(text) -> text``, called once on the fixed text when any of its fixes was applied.
Fixes are applied in rounds (findings are recomputed on the fixed text until nothing changes),
so a second run changes nothing. What a fix is, and how it is applied to text, is
jaxlint/edits.py.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Collection, Optional, Sequence

from .edits import apply_fixes, fixable, parses, source_encoding, unified_diff

MAX_ROUNDS = 10


def can_fix_path(path: str) -> bool:
    """Only plain Python sources are rewritten (never notebooks)."""
    return not path.lower().endswith(".ipynb")


def _fix_rules(codes: Optional[Sequence[str]] = None) -> list:
    """The rule classes ``--fix`` runs for the selected ``codes`` (None: every rule): all of them,
    so that the fixable ones see the same findings and model as ``jaxlint check``."""
    from .registry import ALL_RULES, RULES_BY_CODE

    if codes is None:
        return list(ALL_RULES)
    return [RULES_BY_CODE[c] for c in codes if c in RULES_BY_CODE]


def fixable_codes(rules: Sequence) -> frozenset:
    """The codes of the rules (classes or instances) that declare ``fixable = True``."""
    return frozenset(r.code for r in rules if getattr(r, "fixable", False))


def __getattr__(name: str):
    if name == "FIXABLE_CODES":  # every rule's, computed on first use (importing fix loads no rules)
        return fixable_codes(_fix_rules())
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


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
    fixing = fixable_codes(rules)
    by_code = {r.code: r for r in rules}
    new, fixed, tidy = text, 0, []  # tidy: the rules with an after_fixes whose fixes were applied
    for _ in range(MAX_ROUNDS):
        result = check_source(new, path, rules)
        fixes = [f.fix for f in result.findings if f.fix is not None and f.code in fixing
                 and (keep is None or keep(f))]
        if not fixes:
            break
        codes = {id(f.fix): f.code for f in result.findings if f.fix is not None}
        new, applied = apply_fixes(new, fixes)
        if not applied:
            break
        fixed += len(applied)
        for fx in applied:
            rule = by_code.get(codes.get(id(fx)))
            if rule is not None and hasattr(rule, "after_fixes") and rule not in tidy:
                tidy.append(rule)
    for rule in tidy:
        new = rule.after_fixes(new)
    if new == text:
        return None
    try:
        new_bytes = bom + new.encode(codec)
    except (UnicodeEncodeError, LookupError):
        return None
    return FileFix(path, data, new_bytes, text, new, fixed)


def fix_files(paths: Sequence[str], codes: Sequence[str], keep: Optional[Callable] = None) -> tuple[list, list]:
    """Fix each file in memory with the selected rules; ``keep(path, finding)`` says which
    findings may be fixed (per-file ignores). Returns ([FileFix], [error messages])."""
    rules = [cls() for cls in _fix_rules(codes)]
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


def mark_fixable(findings: Sequence, codes: Sequence[str], cached: Collection[str] = ()) -> list:
    """``findings`` with a verified :class:`~jaxlint.edits.Fix` on those ``--fix`` would fix and
    none on the others. A finding computed in this run carries its rule's fix, verified here
    against the file's text; the files in ``cached`` (results read from the cache, whose findings
    carry none) are checked again."""
    fixing = fixable_codes(_fix_rules(codes))
    by_path: dict = {}
    for f in findings:
        if f.code in fixing and can_fix_path(f.path):
            by_path.setdefault(f.path, []).append(f)
    fixes: dict = {}
    rules: Optional[list] = None
    for path, found in by_path.items():
        try:
            with open(path, "rb") as fh:
                data = fh.read()
            codec, bom = source_encoding(data)
            text = data[len(bom):].decode(codec)
        except (OSError, SyntaxError, LookupError, UnicodeDecodeError):
            continue
        if path in cached:
            from .engine import check_source

            if rules is None:
                rules = [cls() for cls in _fix_rules(codes)]
            found = check_source(data, path, rules).findings
        for f in found:
            if f.fix is not None and fixable(text, f.fix):
                fixes[(path, f.line, f.col, f.code, f.message)] = f.fix
    out = []
    for f in findings:
        fix = fixes.get((f.path, f.line, f.col, f.code, f.message))
        out.append(f if f.fix is fix else f.replace(fix=fix))
    return out


def fix_results(results: Sequence, codes: Sequence[str], keep: Callable, write: bool) -> tuple[list, list]:
    """``jaxlint check --fix/--diff``: fix the files whose findings include a fixable code that
    ``keep(path, finding)`` accepts (per-file ignores: ``Config.keeps``), and write them when
    ``write``. Returns ([FileFix], [errors])."""
    fixing = fixable_codes(_fix_rules(codes))
    todo = [r.path for r in results if can_fix_path(r.path)
            and any(f.code in fixing and keep(r.path, f) for f in r.findings)]
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
