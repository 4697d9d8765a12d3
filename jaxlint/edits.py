"""Source edits: the library fixes are made of and applied with. It knows Python source text and
syntax positions, and nothing about the model or the rules (it imports only the standard library).

A :class:`Fix` is a few :class:`Edit` s at exact source positions (ast line and UTF-8 byte column);
a replacement is made of strings and :class:`Span` copies of the original text, so untouched code,
comments and formatting are kept byte for byte and every subexpression keeps its spelling.
:func:`apply_fixes` applies the fixes that fit a text and conflict with no other; :func:`fixable`
says whether one fits. Also here: reading a file's encoding and BOM, unified diffs, and dropping
imported names nothing uses any more (:func:`drop_unused_from_imports`).
"""

from __future__ import annotations

import ast
import difflib
import io
import os
import re
import tokenize
from dataclasses import dataclass
from typing import Iterable, Optional, Sequence

Pos = tuple  # (1-based line, 0-based UTF-8 byte column), as ast reports positions


@dataclass(frozen=True)
class Span:
    """A part of a replacement that copies the source text between two positions; with
    ``after``, only the text after the first ``after`` in it (none: nothing), with ``before``,
    only the text before the last ``before`` in it (none: nothing)."""

    start: Pos
    end: Pos
    after: str = ""
    before: str = ""

    def pick(self, text: str) -> str:
        if self.after:
            i = text.find(self.after)
            text = "" if i < 0 else text[i + len(self.after):]
        if self.before:
            i = text.rfind(self.before)
            text = "" if i < 0 else text[:i]
        return text


@dataclass(frozen=True)
class Edit:
    """Replace the source from ``start`` to ``end`` (equal: insert) with ``parts`` (strings and
    :class:`Span` copies of the original source)."""

    start: Pos
    end: Pos
    parts: tuple = ()


@dataclass(frozen=True)
class Fix:
    edits: tuple


def start_of(node: ast.AST) -> Pos:
    return (node.lineno, node.col_offset)


def end_of(node: ast.AST) -> Pos:
    return (node.end_lineno, node.end_col_offset)


# --------------------------------------------------------------------------- positions and text

_NEWLINE = re.compile(r"\r\n|\r|\n")


class Lines:
    """Maps ast positions (line, UTF-8 byte column) to offsets in the text."""

    def __init__(self, text: str):
        self.text = text
        self.starts = [0] + [m.end() for m in _NEWLINE.finditer(text)]

    def offset(self, pos: Pos) -> Optional[int]:
        line, col = pos
        if not 1 <= line <= len(self.starts) or col < 0:
            return None
        start = self.starts[line - 1]
        end = self.starts[line] if line < len(self.starts) else len(self.text)
        chunk = self.text[start:end]
        if chunk.isascii():
            return start + col if col <= len(chunk) else None
        raw = chunk.encode("utf-8", "surrogatepass")
        if col > len(raw):
            return None
        try:
            return start + len(raw[:col].decode("utf-8"))
        except UnicodeDecodeError:  # not at a character boundary
            return None


def parses(text: str) -> bool:
    try:
        ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    return True


def _splice(text: str, edits: Iterable) -> str:
    for s, e, rep in sorted(edits, key=lambda r: (r[0], r[1]), reverse=True):
        text = text[:s] + rep + text[e:]
    return text


# --------------------------------------------------------------------------- applying fixes


def _resolve(fix: Fix, lines: Lines) -> Optional[list]:
    """The fix's edits as sorted (start, end, replacement) text offsets, or None when they do not
    fit this text: out of range, overlapping, or deleting a comment."""
    out = []
    for edit in fix.edits:
        s, e = lines.offset(edit.start), lines.offset(edit.end)
        if s is None or e is None or e < s:
            return None
        pieces = []
        for part in edit.parts:
            if isinstance(part, Span):
                a, b = lines.offset(part.start), lines.offset(part.end)
                if a is None or b is None or b < a:
                    return None
                pieces.append(part.pick(lines.text[a:b]))
            else:
                pieces.append(part)
        rep = "".join(pieces)
        if lines.text[s:e].count("#") > rep.count("#"):
            return None  # between tokens a ``#`` starts a comment: never drop one
        out.append((s, e, rep))
    out.sort(key=lambda r: (r[0], r[1]))
    for (s1, e1, _), (s2, e2, _) in zip(out, out[1:]):
        if s2 < e1 or (s2 == e1 and (s1 == e1 or s2 == e2)):
            return None  # overlapping, or an insertion whose order against its neighbour is unclear
    return out


def _conflict(a: list, b: list) -> bool:
    for s1, e1, _ in a:
        for s2, e2, _ in b:
            if s1 < e2 and s2 < e1:
                return True
            if (e1 == s2 or e2 == s1) and (s1 == e1 or s2 == e2):
                return True  # touching, and one is an insertion: which goes first is unclear
            if s1 == e1 == s2 == e2:
                return True
    return False


def apply_fixes(text: str, fixes: Sequence[Fix]) -> tuple[str, list]:
    """Apply every fix that fits ``text`` and conflicts with no earlier one (conflicting fixes
    wait for the next round). Returns the new text and the fixes applied; the text always
    parses when the input did."""
    lines = Lines(text)
    chosen: list = []
    for fix in fixes:
        edits = _resolve(fix, lines)
        if edits and not any(_conflict(edits, other) for _, other in chosen):
            chosen.append((fix, edits))
    chosen.sort(key=lambda c: c[1][0][:2])
    if not chosen:
        return text, []
    new = _splice(text, [e for _, edits in chosen for e in edits])
    if parses(new):
        return new, [fix for fix, _ in chosen]
    applied = []  # a fix broke the syntax: keep only the fixes that parse one by one, last first
    new = text
    for fix, edits in reversed(chosen):
        candidate = _splice(new, edits)
        if parses(candidate):
            new = candidate
            applied.append(fix)
    return new, applied[::-1]


def fixable(text: str, fix: Optional[Fix]) -> bool:
    """Whether ``fix`` applies to ``text`` (its edits fit and delete no comment)."""
    return fix is not None and bool(_resolve(fix, Lines(text)))


# --------------------------------------------------------------------------- imports left unused


def drop_unused_from_imports(text: str, module: str, names) -> str:
    """Drop from the module-level ``from MODULE import ...`` lines (absolute imports) the ``names``
    that nothing in ``text`` uses: the whole line when nothing else is left, the names alone from
    a one-line import. A name also spelled as a string (``__all__``) counts as used; an import
    sharing its line with other code is left alone; ``text`` comes back unchanged when it does
    not parse or would not parse after the cut."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return text
    candidates = [s for s in tree.body if isinstance(s, ast.ImportFrom) and s.module == module and not s.level
                  and any(a.name in names for a in s.names)]
    if not candidates:
        return text
    used = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            used.add(node.id)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            used.add(node.value)  # __all__ entries and other spellings by name: keep the import
    lines = Lines(text)
    cut = []
    for stmt in candidates:
        keep = [a for a in stmt.names if a.name not in names or (a.asname or a.name) in used]
        if len(keep) == len(stmt.names):
            continue
        s, e = lines.offset(start_of(stmt)), lines.offset(end_of(stmt))
        if s is None or e is None:
            continue
        line_start = lines.starts[stmt.lineno - 1]
        nxt = lines.starts[stmt.end_lineno] if stmt.end_lineno < len(lines.starts) else len(text)
        before, after = text[line_start:s], text[e:nxt]
        if before.strip() or after.strip() and not after.strip().startswith("#"):
            continue  # shares its line with other code (``;``)
        if not keep:
            cut.append((line_start, nxt, ""))
        elif stmt.lineno == stmt.end_lineno and "#" not in text[s:e]:
            kept = ", ".join(a.name + (f" as {a.asname}" if a.asname else "") for a in keep)
            cut.append((s, e, f"from {module} import {kept}"))
    if not cut:
        return text
    new = _splice(text, cut)
    return new if parses(new) else text


# --------------------------------------------------------------------------- files and diffs


def source_encoding(data: bytes) -> tuple[str, bytes]:
    """(codec, BOM) of a source file, as the interpreter reads it."""
    enc, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    if enc == "utf-8-sig":
        return "utf-8", (b"\xef\xbb\xbf" if data.startswith(b"\xef\xbb\xbf") else b"")
    return enc, b""


def _lines_keepends(text: str) -> list:
    out, pos = [], 0
    for m in _NEWLINE.finditer(text):
        out.append(text[pos:m.end()])
        pos = m.end()
    if pos < len(text):
        out.append(text[pos:])
    return out


def unified_diff(path: str, old: str, new: str) -> str:
    """A unified diff with 3 lines of context, empty when nothing changed. A file under the current
    folder is named ``a/PATH`` and ``b/PATH`` relative to it (``git apply`` and ``patch -p1``
    accept it), any other by its absolute path on both lines."""
    if old == new:
        return ""
    try:
        rel = os.path.relpath(path)
    except ValueError:  # another drive
        rel = os.path.abspath(path)
    if rel == os.pardir or rel.startswith(os.pardir + os.sep) or os.path.isabs(rel):
        before = after = os.path.abspath(path)
    else:
        before, after = os.path.join("a", rel), os.path.join("b", rel)
    out = []
    for line in difflib.unified_diff(_lines_keepends(old), _lines_keepends(new),
                                     before.replace(os.sep, "/"), after.replace(os.sep, "/")):
        if line.endswith(("\n", "\r")):
            out.append(line)
        else:
            out.append(line + "\n\\ No newline at end of file\n")
    return "".join(out)
