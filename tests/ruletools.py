"""Helpers shared by the rule tests: run every rule on a snippet and compare with its marks."""

from __future__ import annotations

import contextlib
import re
import textwrap
from pathlib import Path

import jaxlint_rules
from jaxlint.engine import check_path, check_source

_EXPECT = re.compile(r"#\s*expect:\s*([A-Z0-9, ]+)")


# Rules that fire on ordinary code every other rule's tests contain: JAX803 (missing-donation) reports
# every step loop whose jitted step rebinds undonated arguments (by default where the step applies an
# optimizer update, else with --pedantic). The helpers leave them out unless a test asks for that code
# (``findings(src, "JAX803")``, an expect mark).
EVERYWHERE_OPT_IN = frozenset({"JAX803"})


def _check(src: str):
    result = check_source(textwrap.dedent(src), "t.py", [r() for r in jaxlint_rules.ALL_RULES])
    assert not result.internal_errors, result.internal_errors
    return result.findings


def findings(src: str, code: str | None = None) -> list[tuple[int, str]]:
    """Sorted (line, code) of every finding of every rule in ``src`` (dedented), or of one code."""
    return sorted((f.line, f.code) for f in _check(src)
                  if f.code == code or (code is None and f.code not in EVERYWHERE_OPT_IN))


def default_findings(src: str, code: str | None = None) -> list[tuple[int, str]]:
    """Like :func:`findings`, without the opt-in ones (reported only with ``--pedantic``)."""
    return sorted((f.line, f.code) for f in _check(src) if (code is None or f.code == code) and f.opt_in is None)


def opt_in_findings(src: str, code: str | None = None) -> list[tuple[int, str, str]]:
    """(line, code, reason) of the opt-in findings in ``src``: reported only with ``--pedantic``."""
    return sorted((f.line, f.code, f.opt_in) for f in _check(src) if f.opt_in is not None
                  and (f.code == code or (code is None and f.code not in EVERYWHERE_OPT_IN)))


def messages(src: str, code: str) -> list[str]:
    return [f.message for f in _check(src) if f.code == code]


def expected(src: str) -> list[tuple[int, str]]:
    """(line, code) for every ``# expect: CODE[, CODE] [(opt-in)]`` comment in ``src`` (dedented)."""
    return sorted((line, code) for line, code, _ in _marks(src))


def _marks(src: str) -> list[tuple[int, str, bool]]:
    out = []
    for lineno, line in enumerate(textwrap.dedent(src).splitlines(), start=1):
        m = _EXPECT.search(line)
        if m:
            opt = "(opt-in)" in line[m.end():]
            out.extend((lineno, c.strip(), opt) for c in m.group(1).split(",") if c.strip())
    return sorted(out)


def assert_marked(src: str) -> None:
    """All rules' findings on ``src`` are exactly its expect marks (so another rule firing fails too),
    and a finding is opt-in exactly where its mark says ``(opt-in)``."""
    want = _marks(src)
    assert want, "a positive case needs at least one expect mark"
    asked = {code for _, code, _ in want}
    got = sorted((f.line, f.code, f.opt_in is not None) for f in _check(src)
                 if f.code not in EVERYWHERE_OPT_IN or f.code in asked)
    assert got == want


def line_of(src: str, marker: str) -> int:
    """The 1-based line of the dedented source that contains ``marker`` (exactly one must)."""
    lines = [i for i, text in enumerate(textwrap.dedent(src).splitlines(), 1) if marker in text]
    assert len(lines) == 1, f"marker {marker!r} found on lines {lines}"
    return lines[0]


def make_project(tmp_path: Path, files: dict) -> Path:
    """Write ``{relative path: source}`` (dedented) under ``tmp_path``: a small project tree."""
    for name, text in files.items():
        p = tmp_path / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(textwrap.dedent(text))
    return tmp_path


def path_default_codes(path: Path) -> list:
    """Sorted (line, code) of the default findings (not opt-in) on one file of a project."""
    res = check_path(str(path), [r() for r in jaxlint_rules.ALL_RULES])
    assert res.internal_errors == []
    return sorted((f.line, f.code) for f in res.findings if f.opt_in is None)


def path_codes(path: Path) -> list:
    """Sorted (line, code) of every rule's findings on one file of a project (its imports resolved)."""
    res = check_path(str(path), [r() for r in jaxlint_rules.ALL_RULES])
    assert res.internal_errors == []
    return sorted((f.line, f.code) for f in res.findings)


# The line that ends `jaxlint check`'s text output on stderr (reporters.closing_line).
CLOSING_LINE = re.compile(r"jaxlint: (?:no findings in [\d,]+ files? checked\.|[\d,]+ findings? in [\d,]+ files? of "
                          r"[\d,]+ checked(?:, [\d,]+ fixable with --fix \(marked \[\*\]\))?; `jaxlint explain CODE` "
                          r"explains a rule\.)\n\Z")


def without_closing_line(err: str) -> str:
    """stderr of a text-format check without its closing summary line, which must be its last
    line when present (tests that check what else goes to stderr use this)."""
    m = CLOSING_LINE.search(err)
    return err[:m.start()] if m and (m.start() == 0 or err[m.start() - 1] == "\n") else err


@contextlib.contextmanager
def compile_counter(jax):
    """A one-element list counting the XLA compiles JAX reports (its ``backend_compile`` events) while
    the block runs: the runtime tests' evidence that a call compiled again, or did not."""
    compiles = [0]

    def listen(event, _secs, **_kw):
        if "backend_compile" in event:
            compiles[0] += 1

    jax.monitoring.register_event_duration_secs_listener(listen)
    try:
        yield compiles
    finally:
        getattr(jax.monitoring, "unregister_event_duration_listener", lambda cb: None)(listen)
