"""Module-level imports of the project's own modules that are certain to fail: the module imported
is not valid Python (``SyntaxError``), or it binds no name the ``from ... import`` asks for and has
no submodule of that name (``ImportError``). Python then stops importing (or running) the module at
that line, so none of its code after it runs: a finding there is about dead code (``POLICY.md``:
"the code is dead"; fresh sets L and M: a script importing functions its package no longer defines,
a test module importing a file with an unterminated docstring).

Proven only for an unconditional import at the module's top level (not inside ``try``, ``if`` or a
function) of a file the project resolver finds in the project, whose names are all visible to a
parse: a module with ``from m import *``, a module-level ``__getattr__``, or one that writes its
namespace (``globals()``, ``vars()``, ``setattr``, ``exec``) may bind any name, and is not judged.
A notebook's cells run on after a failing cell, and are not asked. Python semantics only.
"""

from __future__ import annotations

import ast
import os
import re
import sys
from typing import Optional

from .grammar import newer_syntax


_STDLIB = frozenset(getattr(sys, "stdlib_module_names", ()))  # Python 3.10+
_DYNAMIC = re.compile(rb"\b(?:globals|vars|setattr|exec)\s*\(|\bdef\s+__getattr__\b|\bimport\s+\*")


def failing_import(m) -> Optional[tuple]:
    """``(line, why)`` of the first top-level import of ``m`` that certainly fails (module
    docstring), or None. Needs the project resolver (``m.project``) and the module's path."""
    project, path = getattr(m, "project", None), getattr(m, "path", None)
    if project is None or path is None or getattr(m, "notebook", False):
        return None
    for stmt in m.tree.body:
        if isinstance(stmt, ast.ImportFrom):
            why = _from_import(project, path, stmt)
        elif isinstance(stmt, ast.Import):
            why = next((w for w in (_unparsable(project, _certain(project, path, a.name, 0)) for a in stmt.names)
                        if w is not None), None)
        else:
            continue
        if why is not None:
            return stmt.lineno, f"`{ast.unparse(stmt)[:60]}` on line {stmt.lineno} fails ({why}): none of the " \
                                "module's code after it runs"
    return None


def _certain(project, path: str, module: Optional[str], level: int) -> Optional[str]:
    """The project file an import names, when Python imports that file however the module is run:
    a relative import; an absolute one that a module inside a package resolves the same from the
    folder above its top package as from its own folder (a sibling ``typing.py`` is not what ``from
    typing import ...`` in a package imports), and that names no module of the standard library."""
    target = project.locate(path, module, level)
    if target is None or level > 0:
        return target
    if not module or module.split(".")[0] in _STDLIB:
        return None
    here = os.path.dirname(os.path.abspath(path))
    if not os.path.isfile(os.path.join(here, "__init__.py")):
        return target  # a script: its own folder is on sys.path
    top = here
    while os.path.isfile(os.path.join(top, "__init__.py")):
        top = os.path.dirname(top)
    # from the folder above its top package, the module's own first part must be there (not a layout guessed)
    anchored = os.path.join(top, module.split(".")[0])
    return target if target.startswith(anchored + os.sep) or target == anchored + ".py" else None


def _from_import(project, path: str, stmt: ast.ImportFrom) -> Optional[str]:
    target = _certain(project, path, stmt.module, stmt.level)
    if target is None:
        return None
    why = _unparsable(project, target)
    if why is not None:
        return why
    names = None
    for alias in stmt.names:
        name = alias.name
        sub = f"{stmt.module}.{name}" if stmt.module else name
        found = _certain(project, path, sub, stmt.level) if name != "*" else None
        if found is not None and found != target:
            why = _unparsable(project, found)  # a submodule of the package: imported, so parsed
            if why is not None:
                return why
            continue
        if name == "*" or os.path.basename(target) == "__init__.py" and os.path.isdir(
                os.path.join(os.path.dirname(target), name)):
            continue  # a subpackage (with or without __init__.py)
        if names is None:
            names = _bound_names(project, target)
            if names is None:
                return None
        if name not in names:
            rel = os.path.relpath(target, os.path.dirname(os.path.abspath(path)))
            return f"`{rel}` defines no `{name}`: ImportError"
    return None


def _unparsable(project, target: Optional[str]) -> Optional[str]:
    """Why importing the project file ``target`` raises ``SyntaxError``, or None (it parses, is not
    known not to, or is not one). Only a file the resolver could not summarize is parsed here, once per
    process and content: a module summarized from its text alone is not parsed again for this."""
    if target is None or not target.endswith(".py") or project.model(target) is not None:
        return None  # summarized (from its tree, or from its text without a parse): not known not to parse
    data = project.read(target)
    if data is None:
        return None
    key = (target, hash(data))
    if key not in _PARSED:
        if len(_PARSED) > 10_000:
            _PARSED.clear()
        try:
            ast.parse(data, filename=target)
            _PARSED[key] = None
        except SyntaxError as e:
            decl = project.declaration(target) if hasattr(project, "declaration") else None
            if decl is not None and decl.newer_python() is not None and newer_syntax(
                    e.lineno or 0, str(e.msg), data.decode("utf-8", "replace")) is not None:
                _PARSED[key] = None  # valid, perhaps, on the newer Python its project requires: not known to fail
            else:
                _PARSED[key] = f"`{os.path.basename(target)}` is not valid Python (line {e.lineno}): SyntaxError"
        except (ValueError, UnicodeError, LookupError, RecursionError, MemoryError):
            _PARSED[key] = None
    return _PARSED[key]


_PARSED: dict = {}  # (file, hash of its bytes) -> why importing it raises SyntaxError, or None (this process's)


class _Words:
    """The names a module's text spells as words: a module not summarized from its tree is not
    parsed again; a name it never spells is one it cannot bind (a mention is taken as a binding)."""

    def __init__(self, data: bytes):
        self.data = data

    def __contains__(self, name: str) -> bool:
        return re.search(rb"(?<![A-Za-z0-9_])" + re.escape(name.encode()) + rb"(?![A-Za-z0-9_])", self.data) is not None


def _bound_names(project, target: str):
    """The names the module ``target`` binds at module level (its summary's, or the words of its
    text), or None when it may bind others at run time."""
    summary = project.model(target)
    names = getattr(summary, "names", None)
    if names is not None:
        return names
    data = project.read(target)
    if data is None or _DYNAMIC.search(data):
        return None
    return _Words(data)
