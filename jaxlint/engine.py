"""The one rule engine every front end shares: source -> tree -> model -> rules -> noqa.

A ``.py`` file and a notebook take the same path; a notebook's code cells are first joined into
one module by its source adapter (jaxlint/notebook.py), and the findings mapped back to cells.
"""

from __future__ import annotations

import ast
import contextlib
import gc
import os
import sys
from typing import Optional, Sequence

from .model import build_model
from .model.policy.evidence import traced_context
from .model.facts.model import imports_use_jax
from .prefilter import mentions_jax, too_large
from .project import ProjectResolver
from .rule import Finding, Rule
from .source import PARSE_ERROR, FileResult, _parse_error, content_hash, decode_source, parse_source  # noqa: F401
from .model.python.grammar import newer_syntax as source_newer_syntax

if sys.version_info >= (3, 11):
    # CPython 3.11+ runs Python-to-Python calls without C recursion, so a deep limit is safe and
    # lets the model walk 2,000 chained ``elif``s. 3.10 keeps its limit; RecursionError is caught.
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 20000))


def __getattr__(name: str):
    """``select_rules`` and ``is_selected`` live in jaxlint/registry.py; importable from here too,
    and loaded only when asked for (the flake8 plugin imports this module, not the registry)."""
    if name in ("select_rules", "is_selected"):
        from . import registry

        return getattr(registry, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# One per process: models of the project's modules that other modules import from.
PROJECT = ProjectResolver()


@contextlib.contextmanager
def _gc_paused():
    """Pause the cyclic GC: a syntax tree and its model are millions of small objects, and the
    GC scanning them again and again while they are built costs a third of the run. The model
    breaks its own cycles (``ModuleModel.dispose``), so reference counting frees it."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def run_rules(tree: ast.Module, rules: Sequence[Rule], result: Optional[FileResult] = None,
              path: Optional[str] = None, text: Optional[str] = None, digest: Optional[str] = None,
              timed: Optional[Sequence] = None, whole_notebook: bool = False) -> list[Finding]:
    """Build the model once and run every rule on it. A rule that crashes is recorded in
    ``result.internal_errors`` (when given) and the other rules still run. With the file's
    ``path``, names imported from the project's other modules are resolved there. With its
    source ``text``, a module that never mentions JAX gets no model unless one of its imports
    leads to JAX code of the project (no rule could fire on it otherwise). With its ``digest``
    too (the content hash of the file: ``jaxlint check``), a large module is summarized for the
    project's other modules from ``tree`` (:meth:`~jaxlint.project.ProjectResolver.offer`); not
    under flake8, which checks one file per editor save, and the files of a run in an order that
    imports rarely follow. ``timed`` (a notebook's only): the lines that ``%time``/``%timeit``
    time (``notebook.Module.timed``), for the timing facts. ``whole_notebook``: every cell of a
    notebook file is there, so a finding in a function no cell refers to is opt-in
    (:mod:`~jaxlint.model.python.unreferenced`); not for the IPython extension's cell, whose
    functions later cells may call. With ``path`` (a ``.py`` file of a repository), a finding in a
    top-level function nothing in the project refers to is opt-in too."""
    with _gc_paused():
        return _run_rules(tree, rules, result, path, text, digest, timed, whole_notebook)


def _run_rules(tree: ast.Module, rules: Sequence[Rule], result: Optional[FileResult],
               path: Optional[str], text: Optional[str] = None, digest: Optional[str] = None,
               timed: Optional[Sequence] = None, whole_notebook: bool = False) -> list[Finding]:
    project = PROJECT if path else None
    if project is not None and text is not None and digest is not None:
        project.offer(path, tree, text, digest)
    if text is not None and not mentions_jax(text):
        try:
            if not imports_use_jax(tree, project, path):
                return []  # what ``model.uses_jax()`` below would say, without the walk
        except RecursionError:  # statements nested too deep for this walk: the model decides
            pass
    try:
        model = build_model(tree, path=path, project=project)
    except RecursionError:
        return [_parse_error(1, 0, "too deeply nested to analyze")]
    model.timed_magics = list(timed or ())
    model.notebook = whole_notebook
    model.source_text = text  # for the unreferenced-function search's one pass over the text
    out: list[Finding] = []
    if result is not None and result.quiet is not None:
        model.facts.quiet = result.quiet  # "why not": the rules record where they looked and stayed quiet
    try:
        if not model.uses_jax():
            return []
        for rule in rules:
            try:
                found = list(rule.check(model))
                for i, f in enumerate(found):
                    if not f.evidence and f.code != PARSE_ERROR:
                        facts = traced_context(model, f.line)
                        if facts:
                            found[i] = f.replace(evidence=tuple(facts))
                if whole_notebook or path:
                    found = _never_running(model, _after_failing_import(model, _in_unreferenced_functions(model, found)))
                out.extend(found)
            except RecursionError:
                out.append(_parse_error(1, 0, "too deeply nested to analyze"))
            except Exception as e:  # a bug in a rule must not hide the other rules' findings
                if result is None:
                    raise
                result.internal_errors.append(f"{rule.code}: {type(e).__name__}: {e}")
    finally:
        model.dispose()
    out.sort()
    return out


def _in_unreferenced_functions(model, found: list) -> list:
    """The findings, those inside a top-level function nothing refers to made opt-in: in a notebook,
    no cell; in a ``.py`` module of a repository, no code of its module and no other file of the
    project (whether it runs is not shown: dead code, or a package's API no file of the project
    calls)."""
    from .model.python.unreferenced import (enclosing, enclosing_method, unimported_method, unreferenced,
                                            unreferenced_class, unreferenced_method)

    out = []
    for f in found:
        if f.opt_in is None and f.code != PARSE_ERROR:
            method = enclosing_method(model, f.line)
            why = unreferenced(model, enclosing(model, None, f.line)) \
                or unreferenced_method(model, method) or unimported_method(model, method) \
                or unreferenced_class(model, f.line)
            if why is not None:
                f = f.replace(opt_in=why)
        out.append(f)
    return out


def _after_failing_import(model, found: list) -> list:
    """The findings below a top-level import of the project's own code that certainly fails
    (:func:`~jaxlint.model.python.brokenimports.failing_import`) made opt-in: that code never runs."""
    if not any(f.opt_in is None and f.code != PARSE_ERROR for f in found):
        return found
    failing = getattr(model, "_failing_import", False)
    if failing is False:
        from .model.python.brokenimports import failing_import

        failing = model._failing_import = failing_import(model)
    if failing is None:
        return found
    line, why = failing
    return [f.replace(opt_in=why) if f.opt_in is None and f.code != PARSE_ERROR and f.line > line else f
            for f in found]


def _newer_python(error: Finding, path: str, text: Optional[str] = None) -> Finding:
    """A parse error in a file written for a newer Python than the one running jaxlint: its project
    declares one (``requires-python = ">=3.12"``), or the failing line is syntax a newer Python
    accepts (:func:`newer_syntax`: ``type X = ...``, ``def f[T](...)``, an f-string reusing its
    quotes). The message says so and how to check the file; where the line is such syntax the finding
    is opt-in (a declaration alone does not make a missing right-hand side valid): the code is not wrong (fresh AC's and AR's first looks: valid 3.12 modules reported as unparsable, judged
    FALSE); the CLI still says, on stderr, that the file was not checked."""
    decl = PROJECT.declaration(path) if os.path.isfile(path) else None
    r = decl.newer_python() if decl is not None else None
    newer = newer_syntax(error, text)
    if r is not None:  # opt-in only where the line is newer syntax: a plain error fails on every Python
        return error.replace(message=f"{error.message}; {r.file} requires Python {r.spec}: run jaxlint on "
                                     "that Python to check this file",
                             opt_in=None if newer is None else f"valid Python {newer[0]} syntax ({newer[1]}) in a "
                                                               f"project requiring Python {r.spec}")
    if newer is not None:
        version, what = newer
        return error.replace(message=f"{error.message}; the line is valid Python {version} ({what}): run jaxlint on "
                                     f"Python {version} or later to check this file",
                             opt_in=f"valid Python {version} syntax ({what}), which this Python cannot parse")
    return error


def newer_syntax(error: Finding, text: Optional[str], running: tuple = sys.version_info[:2]) -> Optional[tuple]:
    """:func:`~jaxlint.source.newer_syntax` of a JAX000 finding (its line and message)."""
    return source_newer_syntax(error.line, error.message, text, running)


def _never_running(model, found: list) -> list:
    """The findings on lines that never run, made opt-in: after a statement in their block that always
    raises or ends it (:func:`~jaxlint.model.python.certainraise.never_runs`)."""
    if not any(f.opt_in is None and f.code != PARSE_ERROR for f in found):
        return found
    from .model.python.certainraise import never_runs

    out = []
    for f in found:
        if f.opt_in is None and f.code != PARSE_ERROR:
            why = never_runs(model, f.line)
            if why is not None:
                f = f.replace(opt_in=why)
        out.append(f)
    return out


def check_source(data: bytes | str, path: str, rules: Sequence[Rule], noqa: bool = True,
                 why_not: bool = False) -> FileResult:
    """Check one file's contents. Never raises on bad input: it becomes a JAX000 finding.
    ``why_not``: also keep where rules looked and stayed quiet, and why (``FileResult.quiet``)."""
    digest = content_hash(data) if isinstance(data, bytes) else None
    with _gc_paused(), PROJECT.recording() as deps:
        result = _check_source(data, path, rules, noqa, digest, why_not)
    result.deps = tuple(sorted(deps, key=repr))
    if digest is not None:
        result.content_hash = digest
    return result


def _check_source(data: bytes | str, path: str, rules: Sequence[Rule], noqa: bool,
                  digest: Optional[str] = None, why_not: bool = False) -> FileResult:
    if path.lower().endswith(".ipynb"):  # code cells as one module, mapped back to cells
        return _check_notebook(data, path, rules, noqa, why_not)
    result = FileResult(path)
    if why_not:
        result.quiet = []
    if isinstance(data, bytes):
        try:
            text = decode_source(data)
        except (UnicodeError, LookupError, SyntaxError) as e:  # UnicodeError: punycode, idna cookies
            reason = e.reason if isinstance(e, UnicodeDecodeError) else str(e)
            result.findings.append(_parse_error(1, 0, f"not valid source text ({reason})").with_path(path))
            return result
    else:
        text = data
    big = too_large(text)
    if big is not None:  # refused before parsing: its tree alone would take hundreds of MB
        result.not_analyzed = big.message  # not a finding (FileResult.not_analyzed)
        return result
    tree, error = parse_source(text, path)
    if error is not None and "%" in text:
        tree, text, error = _percent_script(text, path, tree, error)
    if error is not None:
        result.findings.append(_newer_python(error, path, text).with_path(path))
        return result
    findings = _lint(tree, text, rules, noqa, result, path if os.path.isfile(path) else None, digest)
    result.findings = [f.with_path(path) for f in findings]
    return result


def _percent_script(text: str, path: str, tree, error) -> tuple:
    """A percent-format script (``# %%`` cells, run in IPython) whose cells use IPython syntax is
    read as a notebook's cells are: (tree, its text, None) when that parses, else what was given."""
    from . import notebook

    alt = notebook.percent_script(text)
    if alt is not None:
        alt_tree, alt_error = parse_source(alt, path)
        if alt_error is None:
            return alt_tree, alt, None
    return tree, text, error


def _lint(tree: ast.Module, text: str, rules: Sequence[Rule], noqa: bool, result: Optional[FileResult],
          project_path: Optional[str], digest: Optional[str] = None,
          timed: Optional[Sequence] = None, whole_notebook: bool = False) -> list[Finding]:
    """The rules' findings on a parsed module, less those its ``# noqa`` comments silence."""
    findings = run_rules(tree, rules, result, project_path, text, digest, timed, whole_notebook)
    if noqa and findings and "noqa" in text.lower():
        from .noqa import NoqaMap  # here: flake8 reads # noqa itself, and the plugin never loads this

        nmap = NoqaMap(text)
        findings = [f for f in findings if not nmap.suppresses(f.line, f.code)]
    return findings


def _check_notebook(data: bytes | str, path: str, rules: Sequence[Rule], noqa: bool,
                    why_not: bool = False) -> FileResult:
    """``check_source`` for an ``.ipynb`` file; never raises on bad input."""
    from . import notebook  # on the first notebook only: the flake8 plugin never reads one

    result = FileResult(path)
    if why_not:
        result.quiet = []
    try:
        cells = notebook.read_cells(data)
    except notebook.NotebookError as e:
        result.findings.append(_parse_error(e.line, e.col - 1, str(e)).with_path(path))
        return result
    mod = notebook.join(cells)
    big = too_large(mod.text)
    if big is not None:  # as for a .py file: not analyzed, not a finding
        result.not_analyzed = big.message
        return result
    result.findings = check_module(mod, path, rules, noqa, result, path if os.path.isfile(path) else None,
                                   whole=True)
    return result


def check_module(mod, path: str, rules: Sequence[Rule], noqa: bool = True,
                 result: Optional[FileResult] = None, project_path: Optional[str] = None,
                 whole: bool = False) -> list[Finding]:
    """Findings for a notebook's joined code cells (a ``notebook.Module``), located in their cells
    (``path`` set on each). A cell that does not parse is one JAX000 finding and is left out; the
    others are still checked. ``whole``: these are all the notebook's cells (a file, not the
    IPython extension's history), so what no cell calls is not run."""
    from .notebook import FLAGS

    errors: list = []
    big = too_large(mod.text)
    if big is not None:
        return [mod.locate(Finding(1, 0, big.code, big.message, big.name)).with_path(path)]
    tree, error = parse_source(mod.text, path, FLAGS)
    if error is not None:
        errors = mod.blank_broken_cells(path)
        if not errors:  # only the cells together fail (a cell continues into the next one)
            return [mod.locate(error).with_path(path)]
        tree, error = parse_source(mod.text, path, FLAGS)
        if error is not None:
            return [mod.locate(e).with_path(path) for e in errors]
    findings = _lint(tree, mod.text, rules, noqa, result, project_path, timed=mod.timed, whole_notebook=whole)
    if result is not None and result.quiet:
        result.quiet[:] = [mod.locate(q).with_path(path) for q in result.quiet]
    out = [mod.locate(f).with_path(path) for f in errors + findings]
    out.sort(key=lambda f: (f.line, f.col, f.code))
    return out


def check_path(path: str, rules: Sequence[Rule], noqa: bool = True, why_not: bool = False) -> FileResult:
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except OSError as e:
        res = FileResult(path)
        res.findings.append(Finding(1, 0, PARSE_ERROR, f"could not read: {e.strerror or e}", "parse-error", path))
        return res
    return check_source(data, path, rules, noqa, why_not)
