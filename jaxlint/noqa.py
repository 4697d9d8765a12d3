"""``# noqa`` handling for ``jaxlint check`` (flake8 does its own for the plugin).

Same semantics as flake8: a bare ``# noqa`` silences the line, ``# noqa: JAX101,JAX2``
silences codes starting with those prefixes, and a comment anywhere on a statement that
spans several lines covers all of its lines.
"""

from __future__ import annotations

import io
import re
import tokenize

# The same pattern flake8 uses, so a comment means the same thing to both front ends.
NOQA_RE = re.compile(r"# noqa(?::[\s]?(?P<codes>([A-Z]+[0-9]+(?:[,\s]+)?)+))?", re.IGNORECASE)
ALL = None


class NoqaMap:
    def __init__(self, text: str):
        self._by_line: dict[int, object] = {}
        comments: dict[int, object] = {}
        spans: list[tuple[int, int]] = []
        try:
            tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
        except (tokenize.TokenError, SyntaxError, IndentationError):
            tokens = []
        start = None
        for tok in tokens:
            if tok.type == tokenize.COMMENT:
                m = NOQA_RE.search(tok.string)
                if m:
                    codes = m.group("codes")
                    parsed = ALL if not codes else {c.upper() for c in re.split(r"[,\s]+", codes) if c}
                    comments[tok.start[0]] = _merge(comments.get(tok.start[0], set()), parsed)
            if tok.type in (tokenize.NL, tokenize.COMMENT, tokenize.INDENT, tokenize.DEDENT):
                continue
            if start is None:
                start = tok.start[0]
            if tok.type in (tokenize.NEWLINE, tokenize.ENDMARKER):
                spans.append((start, tok.end[0]))
                start = None
        for a, b in spans:
            merged: object = set()
            for line in range(a, b + 1):
                if line in comments:
                    merged = _merge(merged, comments[line])
            if merged != set():
                for line in range(a, b + 1):
                    self._by_line[line] = merged
        for line, codes in comments.items():
            self._by_line.setdefault(line, codes)

    def suppresses(self, line: int, code: str) -> bool:
        if line not in self._by_line:
            return False
        codes = self._by_line[line]
        return codes is ALL or any(code.startswith(c) for c in codes)  # type: ignore[union-attr]


def _merge(a, b):
    if a is ALL or b is ALL:
        return ALL
    return set(a) | set(b)
