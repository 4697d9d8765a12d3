"""Every fixtures/<family>/bad.py reports exactly the findings its `# expect:` comments
name (`# expect: JAX201 (opt-in)`: reported only with --pedantic), and every good.py reports
nothing (no rule at all)."""

from __future__ import annotations

import re
import tokenize
from pathlib import Path

import pytest

import jaxlint_rules
from jaxlint.engine import check_path
from ruletools import EVERYWHERE_OPT_IN

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
# One folder per rule; fixtures/trace holds the dynamic mode's scripts (tests/test_trace.py).
FOLDERS = sorted(p for p in FIXTURES.iterdir() if p.is_dir() and re.match(r"JAX\d{3}_", p.name))
FILES = sorted(FIXTURES.glob("*/bad.py")) + sorted(FIXTURES.glob("*/good.py"))

# Rules checked on their own folder only (ruletools.EVERYWHERE_OPT_IN): JAX803 reports every step loop
# whose jitted step rebinds undonated arguments (opt-in where no optimizer update is shown), which the
# other families' fixtures contain on purpose (their train loops, whose steps now donate where JAX803
# would be default); marking each would say nothing about JAX803.
OWN_FOLDER_ONLY = EVERYWHERE_OPT_IN

_EXPECT = re.compile(r"#\s*expect:\s*([A-Z]+[0-9]+(?:\s*,\s*[A-Z]+[0-9]+)*)\s*(\(opt-in\))?\s*$")


def expected(path: Path) -> set[tuple[int, str, bool]]:
    """(line, code, opt-in) triples from `# expect: CODE[,CODE] [(opt-in)]` comments (real
    comments, not strings)."""
    out = set()
    with open(path, "rb") as fh:
        tokens = list(tokenize.tokenize(fh.readline))
    for tok in tokens:
        if tok.type != tokenize.COMMENT:
            continue
        m = _EXPECT.search(tok.string)
        if m:
            for code in m.group(1).split(","):
                out.add((tok.start[0], code.strip(), m.group(2) is not None))
        else:
            assert "expect:" not in tok.string, f"{path}:{tok.start[0]}: malformed expect comment {tok.string!r}"
    return out


def _id(p: Path) -> str:
    return f"{p.parent.name}/{p.name}"


def test_there_are_fixtures():
    assert FOLDERS, "no fixture folders found"
    assert any(p.name == "bad.py" for p in FILES)


@pytest.mark.parametrize("folder", FOLDERS, ids=lambda p: p.name)
def test_fixture_folder_has_bad_and_good(folder: Path):
    assert (folder / "bad.py").is_file(), f"{folder.name} has no bad.py"
    assert (folder / "good.py").is_file(), f"{folder.name} has no good.py"


@pytest.mark.parametrize("path", FILES, ids=_id)
def test_fixture_findings_match_expect_comments(path: Path):
    want = expected(path)
    if path.name == "good.py":
        assert want == set(), "good.py must not carry expect comments"
    else:
        assert want, "bad.py must expect at least one finding"
        family = path.parent.name.split("_")[0]
        assert any(code == family and (not opt or family in OWN_FOLDER_ONLY) for _, code, opt in want), \
            f"bad.py expects no default {family} finding"  # an opt-in-only rule: its opt-in ones
    result = check_path(str(path), [r() for r in jaxlint_rules.ALL_RULES])
    assert result.internal_errors == []
    got = {(f.line, f.code, f.opt_in is not None) for f in result.findings
           if f.code not in OWN_FOLDER_ONLY or path.parent.name.startswith(f.code)}
    assert got == want, f"missing: {sorted(want - got)}, unexpected: {sorted(got - want)}"
