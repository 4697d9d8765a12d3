"""Syntax a newer Python accepts than the one running: where a parse error points at it, the file may be
valid where its project runs (``type X = ...`` on Python 3.11). Python semantics only (the grammar)."""

from __future__ import annotations

import re
import sys
from typing import Optional


_NEWER_SYNTAX = (  # (pattern on the failing line, the first Python that accepts it, what it is)
    (re.compile(r"\s*type\s+[A-Za-z_]\w*\s*(\[[^\]]*\])?\s*="), (3, 12), "a `type` alias statement"),
    (re.compile(r"\s*(async\s+)?def\s+[A-Za-z_]\w*\s*\["), (3, 12), "a generic function"),
    (re.compile(r"\s*class\s+[A-Za-z_]\w*\s*\["), (3, 12), "a generic class"),
)


def newer_syntax(line: int, message: str, text: Optional[str], running: tuple = sys.version_info[:2]) -> Optional[tuple]:
    """``("3.12", what)`` when line ``line`` of ``text``, where a parse error with ``message`` points,
    is syntax a newer Python than ``running`` accepts: a ``type`` alias, a generic ``def``/``class``
    (PEP 695), or an f-string error of Python 3.11's grammar (PEP 701 lets 3.12 nest quotes and
    backslashes in f-strings). None otherwise (and on 3.12 or later, whose own grammar failed)."""
    if text is None:
        return None
    lines = text.splitlines()
    at = lines[line - 1] if 0 < line <= len(lines) else ""
    for pattern, version, what in _NEWER_SYNTAX:
        if running < version and pattern.match(at):
            return ".".join(map(str, version)), what
    if running < (3, 12) and "f-string" in message:
        return "3.12", "an f-string PEP 701 allows"
    return None
