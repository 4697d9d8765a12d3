"""Source text, shared by ``.py`` files and notebooks: decoding bytes, parsing, the JAX000 finding
for what cannot be read or parsed, and the content hash that keys cached results.

This module is a leaf of the engine: it imports only the ``Finding`` record, so the engine, the
notebook adapter and the project resolver can all use it without importing one another.
"""

from __future__ import annotations

import ast
import io
import sys
import tokenize
from typing import Optional

from .rule import Finding, Rule

_PYTHON = "%d.%d" % sys.version_info[:2]

PARSE_ERROR = "JAX000"
# ``parse_source(..., flags=TOP_LEVEL_AWAIT)``: a notebook cell may ``await`` at the top level.
TOP_LEVEL_AWAIT = getattr(ast, "PyCF_ALLOW_TOP_LEVEL_AWAIT", 0)


class FileResult:
    """One file's result (the engine makes it; the result cache stores and restores it)."""

    __slots__ = ("path", "findings", "internal_errors", "content_hash", "deps", "cached", "not_analyzed", "quiet")

    def __init__(self, path: str, findings: Optional[list] = None, internal_errors: Optional[list] = None,
                 content_hash: Optional[str] = None, deps: tuple = (), cached: bool = False,
                 not_analyzed: Optional[str] = None):
        self.path = path
        self.findings: list = [] if findings is None else findings
        self.internal_errors: list = [] if internal_errors is None else internal_errors  # "CODE: ExcType: message" strings
        self.content_hash = content_hash  # of the bytes checked, for the result cache
        self.deps = deps  # what cross-module lookups consulted (ProjectResolver.recording)
        self.cached = cached  # read from the result cache: its findings carry no fixes
        # why rules stayed quiet where they looked (Finding records whose message is the reason): a
        # list only when asked (``engine.check_path(..., why_not=True)``), else None; never cached or compared
        self.quiet: Optional[list] = None
        # Why the file was not analyzed (over the size limit: prefilter.too_large), else None. Not a
        # finding: the front ends say so, and report it as JAX000 only when asked to
        # (``fail-on-oversize``), so that generated code does not fail a CI run.
        self.not_analyzed = not_analyzed

    def _key(self) -> tuple:
        return (self.path, self.findings, self.internal_errors, self.content_hash, self.deps, self.cached,
                self.not_analyzed)

    def __eq__(self, other):
        return self._key() == other._key() if isinstance(other, FileResult) else NotImplemented

    __hash__ = None  # mutable

    def __repr__(self) -> str:
        return (f"FileResult(path={self.path!r}, findings={self.findings!r}, internal_errors={self.internal_errors!r}, "
                f"cached={self.cached!r}, not_analyzed={self.not_analyzed!r})")


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


try:  # blake2 itself, without the 4 ms of loading OpenSSL that ``import hashlib`` costs an editor's save
    from _blake2 import blake2b as _blake2b
except ImportError:  # an interpreter built without it: hashlib finds another implementation
    from hashlib import blake2b as _blake2b


def content_hash(data: bytes) -> str:
    """The hash that keys cached results to a file's exact bytes."""
    return _blake2b(data, digest_size=16).hexdigest()


class ParseError(Rule):
    """JAX000: reported by the engine itself, not a rule that runs; described like one for SARIF's
    rule list and ``jaxlint explain``."""

    code, name = "JAX000", "parse-error"

    short = "A file that cannot be read or parsed (or, with --fail-on-oversize, is too large to analyze)."
    summary = ("A file that cannot be read or parsed; the other files are still checked. A file too large to "
               "analyze (over 1,000,000 characters, such as generated code) is named on stderr and does not "
               "change the exit code; with `--fail-on-oversize` (`fail-on-oversize = true` in [tool.jaxlint]) "
               "it is a JAX000 finding too.")
    rationale = "jaxlint cannot check a file it cannot parse."
    bad = "def broken(:\n    pass\n"
    good = "def fixed():\n    pass\n"

    @classmethod
    def level(cls) -> str:  # whatever the reason, the file was not checked: an error, as it always was
        return "error"

    @classmethod
    def explain(cls) -> str:  # ``# noqa`` cannot apply to a file that does not parse
        text = super().explain()
        return text[:text.rindex("Suppress one line")] + (
            "A `# noqa` comment cannot silence it; `--extend-ignore JAX000` (or `ignore = [\"JAX000\"]`) does.\n")

