"""The value records of the static path (plain classes since issue 16, so that an editor's flake8
does not pay for ``dataclasses``): what they compare, order and hash by."""

from __future__ import annotations

import pytest

from jaxlint.model.facts.jaxrecords import TraceCause, TracedFunction
from jaxlint.model.python.widths import ShapeSource
from jaxlint.rule import Finding, Line
from jaxlint.source import FileResult


def test_findings_compare_and_hash_by_place_code_message_name_and_path_only():
    a = Finding(3, 4, "JAX201", "msg", "host-transfer-in-loop", "a.py")
    same = Finding(3, 4, "JAX201", "msg", "host-transfer-in-loop", "a.py", cell=2, cell_line=1,
                   fix=object(), cites=((0, 3),), opt_in="test code")
    assert a == same and hash(a) == hash(same) and len({a, same}) == 1
    assert a != a.replace(path="b.py") and a != a.replace(message="other")
    assert (a == "JAX201") is False and a != 3


def test_findings_sort_by_line_col_code_message_name_path():
    f = [Finding(2, 0, "JAX101", "m"), Finding(1, 5, "JAX201", "m"), Finding(1, 5, "JAX102", "z"),
         Finding(1, 5, "JAX102", "a"), Finding(1, 0, "JAX999", "m", path="b"), Finding(1, 0, "JAX999", "m", path="a")]
    assert [(x.line, x.col, x.code, x.message, x.path) for x in sorted(f)] == [
        (1, 0, "JAX999", "m", "a"), (1, 0, "JAX999", "m", "b"), (1, 5, "JAX102", "a", ""),
        (1, 5, "JAX102", "z", ""), (1, 5, "JAX201", "m", ""), (2, 0, "JAX101", "m", "")]
    assert Finding(1, 0, "A", "m") < Finding(1, 1, "A", "m") <= Finding(1, 1, "A", "m")
    assert Finding(2, 0, "A", "m") > Finding(1, 9, "Z", "z") >= Finding(1, 9, "Z", "z")
    with pytest.raises(TypeError):
        Finding(1, 0, "A", "m") < (1, 0)


def test_finding_replace_copies_every_field_and_refuses_unknown_ones():
    fix = object()
    a = Finding(3, 4, "JAX401", "msg", "n", "a.py", cell=2, cell_line=7, fix=fix, cites=((1, 3),), opt_in="why")
    b = a.replace(line=9)
    assert (b.line, b.col, b.code, b.message, b.name, b.path, b.cell, b.cell_line, b.fix, b.cites, b.opt_in) == \
        (9, 4, "JAX401", "msg", "n", "a.py", 2, 7, fix, ((1, 3),), "why")
    assert a.line == 3  # a copy, the original unchanged
    assert a.with_path("c.py").path == "c.py" and a.with_path("c.py").fix is fix
    with pytest.raises(AttributeError):
        a.replace(colour=1)


def test_line_citations_are_values():
    assert Line(20) == Line(20) and Line(20) != Line(21) and len({Line(20), Line(20)}) == 1
    assert str(Line(20)) == "line 20"


def test_file_results_compare_by_content():
    a = FileResult("a.py", [Finding(1, 0, "JAX201", "m")], content_hash="h")
    assert a == FileResult("a.py", [Finding(1, 0, "JAX201", "m")], content_hash="h")
    assert a != FileResult("a.py", [], content_hash="h") and a != FileResult("b.py", a.findings, content_hash="h")
    assert FileResult("x").findings == [] and FileResult("x").findings is not FileResult("x").findings
    with pytest.raises(TypeError):
        hash(a)  # mutable: not hashable, as the dataclass it replaced


def test_trace_causes_are_values_with_the_caller_compared_by_identity():
    import ast

    node = ast.parse("def f(): pass").body[0]
    f = TracedFunction(node, "f", "f", None, None, None, [], [])
    g = TracedFunction(node, "f", "f", None, None, None, [], [])
    assert TraceCause("caller", "f", caller=f) == TraceCause("caller", "f", caller=f)
    assert TraceCause("caller", "f", caller=f) != TraceCause("caller", "f", caller=g)  # another function
    assert TraceCause("jit", "jax.jit") != TraceCause("jit", "jax.jit", decorator=True)
    causes = [TraceCause("jit", "jax.jit")]
    assert TraceCause("jit", "jax.jit") in causes  # how _TraceAnalysis avoids recording a cause twice
    assert f.decorators == [] and f.decorators is not g.decorators and f.trace_causes is not g.trace_causes


def test_shape_sources_are_values():
    a = ShapeSource("built", "is built by `jnp.ones`", True, "width", sizes=(1, 2))
    assert a == ShapeSource("built", "is built by `jnp.ones`", True, "width", sizes=(1, 2))
    assert a != ShapeSource("built", "is built by `jnp.ones`", True, "width", sizes=(1, 3))
    assert len({a, ShapeSource("built", "is built by `jnp.ones`", True, "width", sizes=(1, 2))}) == 1
