"""Output formats for ``jaxlint check``: flake8-style text, JSON, SARIF 2.1.0 for code-scanning
services, and GitHub Actions workflow commands (annotations on the pull request)."""

from __future__ import annotations

import json
import os
import textwrap
from collections import Counter
from typing import Sequence

from .rule import Finding


def location(f: Finding) -> str:
    """``path:line:col`` exactly as flake8 (1-based column); in a notebook
    ``path:cell N:line L:col C`` (cell among all cells, line and column in that cell)."""
    if f.cell is not None:
        return f"{f.path}:cell {f.cell}:line {f.cell_line}:col {f.col + 1}"
    return f"{f.path}:{f.line}:{f.col + 1}"


def text(findings: Sequence[Finding]) -> str:
    # ``[*]``: ``jaxlint check --fix`` fixes it (as ruff marks its fixable findings)
    return "".join(f"{location(f)}: {f.code} {'[*] ' if f.fix is not None else ''}{f.message}\n" for f in findings)


def as_json(findings: Sequence[Finding]) -> str:
    rows = [{"path": f.path, "line": f.line, "col": f.col + 1, "code": f.code, "name": f.name,
             "message": f.message, "fixable": f.fix is not None} for f in findings]
    for row, f in zip(rows, findings):
        if f.opt_in is not None:  # reported because the user asked for opt-in findings (--pedantic)
            row["opt_in"] = f.opt_in
    for row, f in zip(rows, findings):
        if f.evidence:  # the facts and conventions the decision rests on
            row["evidence"] = list(f.evidence)
        if f.facts:  # the rule's proof obligation, each fact proven or unknown (jaxlint/model/proof.py)
            row["facts"] = [{"fact": name, "status": status, "why": why} for name, status, why in f.facts]
    for row, f in zip(rows, findings):
        if f.cell is not None:  # notebooks: the cell (1-based among all cells) and the line in it
            row.update(cell=f.cell, cell_line=f.cell_line)
    return json.dumps(rows, indent=2) + "\n"


def statistics(findings: Sequence[Finding]) -> str:
    counts = Counter(f.code for f in findings)
    first = {}
    for f in findings:
        first.setdefault(f.code, f.message)
    return "".join(f"{counts[c]:<5} {c} {first[c]}\n" for c in sorted(counts))


def repo_root(start: str = ".") -> str:
    """The folder SARIF paths are relative to: the enclosing git checkout, else the project root
    (nearest pyproject.toml), else ``start``."""
    path = os.path.abspath(start)
    probe = path
    while True:
        if os.path.exists(os.path.join(probe, ".git")):
            return probe
        parent = os.path.dirname(probe)
        if parent == probe:
            break
        probe = parent
    from .cache import project_root

    return project_root(path)


def _findings_root(findings: Sequence[Finding]) -> str:
    """The repository the paths are made relative to: the checked files' own (that of the first
    finding's file), not the working folder's, so a run from outside the checkout still gives
    paths GitHub can attach; the working folder's when there is no finding."""
    for f in findings:
        if f.path:
            return repo_root(os.path.dirname(os.path.abspath(f.path)))
    return repo_root()


def _uri(path: str, root: str) -> str:
    rel = os.path.relpath(os.path.abspath(path), root)
    if rel.startswith(".."):
        return "file://" + os.path.abspath(path).replace(os.sep, "/")
    return rel.replace(os.sep, "/")


def _sarif_rule(cls) -> dict:
    bad = textwrap.dedent(cls.bad).strip("\n")
    good = textwrap.dedent(cls.good).strip("\n")
    help_text = f"{cls.summary}\n\n{cls.rationale}\n\nExample:\n{bad}\n\nUse instead:\n{good}\n"
    help_md = (f"{cls.summary}\n\n{cls.rationale}\n\n**Example**\n```python\n{bad}\n```\n\n"
               f"**Use instead**\n```python\n{good}\n```\n\nSuppress one line with `# noqa: {cls.code}`.\n")
    return {
        "id": cls.code,
        "name": cls.name,
        "shortDescription": {"text": cls.short},
        "fullDescription": {"text": f"{cls.summary} {cls.rationale}"},
        "help": {"text": help_text, "markdown": help_md},
        "defaultConfiguration": {"level": cls.level()},
    }


def _levels() -> dict:
    """code -> "error" or "warning", as each rule class declares it (``Rule.level``): "error" for
    JAX000 and for the rules whose findings fail at run time (``fails_at_runtime``)."""
    from .registry import CATALOG

    return {cls.code: cls.level() for cls in CATALOG}


def sarif(findings: Sequence[Finding], root: str = None) -> str:
    """SARIF 2.1.0: every rule in ``tool.driver.rules``, one result per finding, paths relative to
    the repository root (``%SRCROOT%``)."""
    from . import __version__
    from .registry import CATALOG

    root = root or _findings_root(findings)
    catalog = CATALOG
    index = {cls.code: i for i, cls in enumerate(catalog)}
    levels = _levels()
    results = []
    for f in findings:
        location = {"artifactLocation": {"uri": _uri(f.path, root), "uriBaseId": "%SRCROOT%"}}
        result = {
            "ruleId": f.code,
            "ruleIndex": index.get(f.code, 0),
            "level": levels.get(f.code, "warning"),
            "message": {"text": f.message},
        }
        if f.cell is None:
            location["region"] = {"startLine": max(1, f.line), "startColumn": f.col + 1}
        else:  # a notebook: lines of the .ipynb JSON mean nothing; the cell and its line do
            result["message"] = {"text": f"cell {f.cell}, line {f.cell_line}: {f.message}"}
            result["properties"] = {"cell": f.cell, "cellLine": f.cell_line, "column": f.col + 1}
        result["locations"] = [{"physicalLocation": location}]
        results.append(result)
    doc = {
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {
                "name": "jaxlint", "version": __version__, "semanticVersion": __version__,
                # no informationUri: the project has no public home yet (the PyPI page does not
                # exist until it is published); the field is optional in SARIF 2.1.0
                "rules": [_sarif_rule(cls) for cls in catalog],
            }},
            "originalUriBaseIds": {"%SRCROOT%": {"uri": "file://" + root.replace(os.sep, "/").rstrip("/") + "/"}},
            "columnKind": "unicodeCodePoints",
            "results": results,
        }],
    }
    return json.dumps(doc, indent=2) + "\n"


def _escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def github(findings: Sequence[Finding], root: str = None) -> str:
    """GitHub Actions workflow commands: each finding becomes an annotation on its line. GitHub
    attaches ``file=`` to the repository's files only when it is relative to the repository root
    (the same root as SARIF's paths), wherever in the checkout jaxlint runs."""
    root = root or _findings_root(findings)
    levels = _levels() if findings else {}
    out = []
    for f in findings:
        path = os.path.relpath(os.path.abspath(f.path), root)
        if path.startswith(".."):  # outside the repository: no annotation can attach; keep it whole
            path = os.path.abspath(f.path)
        path = path.replace(os.sep, "/")
        kind = levels.get(f.code, "warning")
        if f.cell is None:
            where, message = f"line={f.line},col={f.col + 1},", f"{f.code} {f.message}"
        else:  # a notebook: the annotation goes on the file, the cell and line into the message
            where, message = "", f"{f.code} cell {f.cell}, line {f.cell_line}: {f.message}"
        out.append(f"::{kind} file={_escape_property(path)},{where}title={_escape_property(f.code)}"
                   f"::{_escape_data(message)}\n")
    return "".join(out)


FORMATS = {"text": text, "json": as_json, "sarif": sarif, "github": github}


def closing_line(findings: Sequence[Finding], checked: int) -> str:
    """The line that ends a text report, on stderr: how many findings in how many files, how
    many ``--fix`` can fix (the ``[*]`` ones), and where to read more."""
    def n(count: int, word: str) -> str:
        return f"{count:,} {word}{'' if count == 1 else 's'}"

    if not findings:
        return f"jaxlint: no findings in {n(checked, 'file')} checked.\n"
    files = len({f.path for f in findings})
    fixable = sum(1 for f in findings if f.fix is not None)
    fix = f", {fixable:,} fixable with --fix (marked [*])" if fixable else ""
    return (f"jaxlint: {n(len(findings), 'finding')} in {n(files, 'file')} of {checked:,} checked{fix}; "
            f"`jaxlint explain CODE` explains a rule.\n")
