"""Model tests of the declared JAX range (jaxlint/model/facts/jaxrange.py): the specifier reader
(PEP 440, poetry, conda), the union of a declaration's requirements with jaxlib as a stand-in,
and the **reaches** fact, with the near misses around a removal in 0.6.0."""

from __future__ import annotations

import pytest

from jaxlint.declaration import Declaration, Requirement
from jaxlint.model.facts import jaxrange
from jaxlint.model.facts.jaxrange import Range, SpecError, spec

REMOVED = (0, 6, 0)


def reaches(text: str, style: str = "pep440") -> bool:
    return spec(text, style).includes_from(REMOVED)


@pytest.mark.parametrize("text, expected", [
    # PEP 440
    ("==0.4.8", False), ("==0.6.0", True), ("==0.6", True), ("===0.5.3", False),
    ("<0.6", False), ("<0.6.0", False), ("<0.6.1", True), ("<=0.5.3", False), ("<=0.6.0", True),
    (">=0.4.8", True), (">0.4.8", True), (">=0.4.8,<0.5", False), (">= 0.8.0, < 0.9.0", True),
    ("~=0.5.0", False), ("~=0.5", True), ("~=0.4.8", False),
    ("==0.5.*", False), ("==0.6.*", True), ("!=0.6.0", True), (">=0.4,!=0.6.*,<0.7", False),
    ("", True), ("(>=0.4.8,<0.5)", False),
    ("<0.6.0rc1", False), ("==0.6.0rc1", True), ("==0.3.2+cuda11.cudnn82", False), ("<=0.5.3.post1", False),
])
def test_pep440_specifiers(text, expected):
    assert reaches(text) is expected


@pytest.mark.parametrize("text, low, high", [
    # poetry's documented table (python-poetry.org, "Dependency specification")
    ("^1.2.3", (1, 2, 3), (2,)), ("^1.2", (1, 2), (2,)), ("^1", (1,), (2,)), ("^0.2.3", (0, 2, 3), (0, 3)),
    ("^0.0.3", (0, 0, 3), (0, 0, 4)), ("^0.0", (), (0, 1)), ("^0", (), (1,)),
    ("~1.2.3", (1, 2, 3), (1, 3)), ("~1.2", (1, 2), (1, 3)), ("~1", (1,), (2,)), ("~0.4.8", (0, 4, 8), (0, 5)),
])
def test_poetry_caret_and_tilde(text, low, high):
    assert spec(text, "poetry") == Range(((low, True, high, False),))


def test_poetry_bare_wildcard_alternatives_and_pep440_operators():
    assert spec("0.1.5", "poetry") == Range((((0, 1, 5), True, (0, 1, 5), True),))
    assert spec("*", "poetry").unbounded and spec("0.4.*", "poetry") == Range((((0, 4), True, (0, 5), False),))
    assert not reaches("^0.4.8", "poetry") and reaches("^0.4.8 || ^0.6", "poetry")
    assert not reaches(">=0.4.8 <0.5", "poetry") and not reaches(">=0.4.8, <0.6", "poetry")
    assert reaches(">=0.4.8", "poetry") and not reaches("~=0.5.0", "poetry")


def test_conda_match_specs():
    assert spec("=0.4.8", "conda") == Range((((0, 4, 8), True, (0, 4, 9), False),))  # conda's = is a prefix
    assert spec("==0.4.8", "conda") == Range((((0, 4, 8), True, (0, 4, 8), True),))
    assert not reaches("0.5.3", "conda") and reaches(">=0.4,<0.7", "conda") and reaches("0.4.*|0.6.*", "conda")
    assert not reaches("<0.6", "conda")


@pytest.mark.parametrize("text, style", [
    ("0.4.8", "pep440"), (">=version", "pep440"), (">=0.4.*", "pep440"), ("~=1", "pep440"), ("^0.4", "pep440"),
    ("=0.4", "pep440"), (">=0.4,", "pep440"), ("latest", "poetry"), ("^0.4.x", "poetry"),
])
def test_unreadable_specifiers_raise(text, style):
    with pytest.raises(SpecError):
        spec(text, style)


def test_range_operations():
    r = spec(">=0.4.8,<0.5") | spec("==0.3.*")
    assert r.oldest() == (0, 3, 0) and not r.includes_from(REMOVED)
    assert spec(">=0.5,<0.4").empty and spec("<0.5").oldest() is None
    assert spec(">0.4.24").oldest() == (0, 4, 24)  # the bound: a fix needing 0.4.25 stays unoffered


def _decl(*reqs, problems=()):
    d = Declaration("/p/proj")
    d.files = sorted({r[3] for r in reqs}) or ["pyproject.toml"]
    d.requirements = [Requirement(*r) for r in reqs]
    d.problems = list(problems)
    return d


def test_declared_is_the_union_of_every_requirement_on_jax():
    got = jaxrange.declared(_decl(("jax", "==0.4.8", "pep440", "proj/requirements.txt"),
                                  ("jax", "^0.4.8", "poetry", "proj/pyproject.toml")))
    assert not got.range.includes_from(REMOVED)
    assert got.where == "proj/requirements.txt requires jax ==0.4.8; proj/pyproject.toml requires jax ^0.4.8"
    got = jaxrange.declared(_decl(("jax", "==0.4.8", "pep440", "a"), ("jax", ">=0.4.8", "pep440", "b")))
    assert got.range.includes_from(REMOVED)  # one way of installing reaches it: the finding stays


def test_jaxlib_stands_in_only_where_jax_is_unconstrained():
    got = jaxrange.declared(_decl(("jax", "", "pep440", "r.txt"), ("jaxlib", "==0.4.7", "pep440", "r.txt")))
    assert got.range == spec("==0.4.7") and "jaxlib ==0.4.7" in got.where
    got = jaxrange.declared(_decl(("jax", ">=0.6", "pep440", "r.txt"), ("jaxlib", "==0.4.7", "pep440", "r.txt")))
    assert got.range == spec(">=0.6")
    got = jaxrange.declared(_decl(("jax", "", "pep440", "r.txt")))
    assert got.range is None and "constrains no JAX version" in got.why


def test_unknown_declarations_say_why():
    assert "no packaging file" in jaxrange.declared(None).why
    got = jaxrange.declared(_decl(("jax", "==0.4.8", "pep440", "r.txt"), problems=[("proj/setup.py", "computed")]))
    assert got.range is None and got.why == "proj/setup.py cannot be read for JAX's version (computed)"
    got = jaxrange.declared(_decl(("jax", ">=version", "pep440", "proj/r.txt")))
    assert got.range is None and "`>=version`, which cannot be read" in got.why
    got = jaxrange.declared(_decl(("jax", ">=0.5,<0.4", "pep440", "proj/r.txt")))
    assert got.range is None and "allows no version" in got.why


def test_the_reaches_fact():
    old = jaxrange.declared(_decl(("jax", "^0.4.8", "poetry", "cleanba/pyproject.toml")))
    fact = jaxrange.reaches(old, REMOVED, None)
    assert fact.disproven and fact.why.startswith("cleanba/pyproject.toml requires jax ^0.4.8: the removal in 0.6.0")
    assert jaxrange.reaches(old, (0, 4, 9), None).proven  # a removal inside the range
    assert jaxrange.reaches(old, REMOVED, (0, 6, 0)).proven  # the configured oldest JAX is the user's word
    assert jaxrange.reaches(old, REMOVED, (0, 4, 30)).disproven  # ... and says nothing of the newest
    unknown = jaxrange.reaches(jaxrange.declared(None), REMOVED, None)
    assert unknown.proven and "current JAX assumed" in unknown.why


# -- the declared Python caps JAX: the newest release that installs on it (jax's python_requires)


@pytest.mark.parametrize("python, style, newest", [
    ("=3.7", "conda", (0, 3, 25)),  # conda's 3.7.*
    ("=3.8.10", "conda", (0, 4, 13)),
    ("<3.10", "pep440", (0, 4, 30)),  # 3.9 at the newest
    ("<=3.10", "pep440", (0, 6, 2)),
    ("==3.11.*", "pep440", (0, 10, 2)),
    ("~=3.9.0", "pep440", (0, 4, 30)),
    (">=3.6,<3.8", "pep440", (0, 3, 25)),
    ("==3.6", "pep440", (0, 3, 25)),  # older than 3.7: at most what 3.7 had
])
def test_an_old_python_caps_the_declared_jax(python, style, newest):
    got = jaxrange.declared(_decl(("python", python, style, "proj/environment.yml")))
    assert got.range == Range(((None, False, jaxrange._norm(newest), True),)), got.range
    assert f"JAX {jaxrange.text(newest)} is the newest release for it" in got.where
    assert got.range.includes_from(newest) and not got.range.includes_from(newest[:2] + (newest[2] + 1,))


@pytest.mark.parametrize("pythons", [
    [(">=3.8", "pep440")],  # no upper bound
    [("==3.12", "conda")],  # current JAX installs there
    [("=3.8", "conda"), (">=3.9", "pep440")],  # one declared way reaches current JAX
    [("<4", "pep440")],
    [("3.x", "pep440")],  # unreadable: no cap
])
def test_no_cap_where_a_declared_python_runs_current_jax(pythons):
    got = jaxrange.declared(_decl(*[("python", p, s, "proj/f") for p, s in pythons]))
    assert got.range is None


def test_the_python_cap_narrows_a_declared_jax_range():
    got = jaxrange.declared(_decl(("jax", ">=0.4.1", "pep440", "proj/requirements.txt"),
                                  ("python", "=3.9", "conda", "proj/environment.yml")))
    assert got.range == spec(">=0.4.1,<=0.4.30")
    assert got.where.startswith("proj/requirements.txt requires jax >=0.4.1; proj/environment.yml requires python")
    assert not got.range.includes_from(REMOVED)
    # the cap never widens: a pin older than the cap stays the pin
    got = jaxrange.declared(_decl(("jax", "==0.3.14", "pep440", "r"), ("python", "=3.10", "conda", "e")))
    assert got.range == spec("==0.3.14")
