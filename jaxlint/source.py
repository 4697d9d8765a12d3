"""Source text, shared by ``.py`` files and notebooks: decoding bytes, parsing, the JAX000 finding
for what cannot be read or parsed, and the content hash that keys cached results.

This module is a leaf of the engine: it imports only the ``Finding`` record, so the engine, the
notebook adapter and the project resolver can all use it without importing one another.
"""

from __future__ import annotations

import ast
import hashlib
import io
import sys
import tokenize
from dataclasses import dataclass, field
from typing import Optional

from .rule import Finding, Rule

_PYTHON = "%d.%d" % sys.version_info[:2]

PARSE_ERROR = "JAX000"
# ``parse_source(..., flags=TOP_LEVEL_AWAIT)``: a notebook cell may ``await`` at the top level.
TOP_LEVEL_AWAIT = getattr(ast, "PyCF_ALLOW_TOP_LEVEL_AWAIT", 0)


@dataclass
class FileResult:
    """One file's result (the engine makes it; the result cache stores and restores it)."""

    path: str
    findings: list = field(default_factory=list)
    internal_errors: list = field(default_factory=list)  # "CODE: ExcType: message" strings
    content_hash: Optional[str] = None  # of the bytes checked, for the result cache
    deps: tuple = ()  # what cross-module lookups consulted (ProjectResolver.recording)
    cached: bool = False  # read from the result cache: its findings carry no fixes


def decode_source(data: bytes) -> str:
    """Decode like the interpreter would: BOM and PEP 263 coding cookies honoured."""
    encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    if encoding == "utf-8-sig":
        encoding = "utf-8"
        if data.startswith(b"\xef\xbb\xbf"):
            data = data[3:]
    return data.decode(encoding)


def _parse_error(line: int, col: int, why: str) -> Finding:
    return Finding(max(line, 1), max(col, 0), PARSE_ERROR, f"could not parse: {why}", "parse-error")


def parse_source(text: str, path: str = "<unknown>", flags: int = 0) -> tuple[Optional[ast.Module], Optional[Finding]]:
    """(tree, None), or (None, the JAX000 finding). ``flags``: extra compile flags
    (``TOP_LEVEL_AWAIT`` for notebook cells)."""
    try:
        if flags:
            return compile(text, path, "exec", ast.PyCF_ONLY_AST | flags), None
        return ast.parse(text, filename=path), None
    except SyntaxError as e:
        col = (e.offset or 1) - 1
        msg = e.msg if e.msg else "invalid syntax"
        # Which grammar judged it: syntax newer than the running Python (``type X = ...`` on 3.11)
        # is valid code, and the fix is to run jaxlint on a newer Python.
        return None, _parse_error(e.lineno or 1, col, f"{msg} (Python {_PYTHON} grammar)")
    except ValueError as e:  # null bytes on Python < 3.12
        return None, _parse_error(1, 0, str(e))
    except (RecursionError, MemoryError):
        return None, _parse_error(1, 0, "too deeply nested for the Python parser")


def content_hash(data: bytes) -> str:
    """The hash that keys cached results to a file's exact bytes."""
    return hashlib.blake2b(data, digest_size=16).hexdigest()


class ParseError(Rule):
    """JAX000: reported by the engine itself, not a rule that runs; described like one for SARIF's
    rule list and ``jaxlint explain``."""

    code, name = "JAX000", "parse-error"
    summary = ("A file that cannot be read or parsed, or is too large to analyze (over 1,000,000 characters); "
               "the other files are still checked.")
    rationale = "jaxlint cannot check a file it cannot parse."
    bad = "def broken(:\n    pass\n"
    good = "def fixed():\n    pass\n"

    @classmethod
    def explain(cls) -> str:  # ``# noqa`` cannot apply to a file that does not parse
        text = super().explain()
        return text[:text.rindex("Suppress one line")] + (
            "A `# noqa` comment cannot silence it; `--extend-ignore JAX000` (or `ignore = [\"JAX000\"]`) does.\n")
