"""The files of the project whose loops call a function: :meth:`Callers.loop_caller` (a mixin of
:class:`~jaxlint.project.ProjectResolver`), searched across the repository around the function's file, notebooks'
code cells included, and how evidence cites the line it found (:meth:`Callers.cite`)."""

from __future__ import annotations

import os
import re
from typing import Optional

from .locate import _project_root, nearest_with
from .source import content_hash, decode_source

_CALLER_KINDS = (".py", ".ipynb")  # files whose loops may call a project's function (a notebook: its code cells)
_VCS = (".git", ".hg")


class Callers:
    """A mixin of :class:`~jaxlint.project.ProjectResolver`: it asks ``self._project_texts``, ``self._note`` and
    ``self.recording``, and keeps its memos in the resolver (``_loop_callers``, ``_loop_indexes``,
    ``_notebook_lines``, ``_notebook_modules``)."""

    def loop_caller(self, path: str, name: str, cls: Optional[str] = None, root: Optional[str] = None,
                    subclass: bool = False) -> Optional[tuple]:
        """``(file, line, ranged)`` of a call, in another file of the project (the repository around the file, or
        without one the folder above its top package; a notebook's code cells count), of the top-level function
        ``name`` of the project file ``path`` in a loop there (not over a literal collection), through ``from mod
        import name`` or ``import mod`` / ``m.name(...)``; None when the project shows none. The files that spell
        the call and the module's name are recorded for the result cache. With ``cls``, ``name`` is a method of the file's top-level class ``cls``, called on
        an instance the other module makes (``ev = mod.EvalManager(...)``, or stored on ``self``), or on one
        of a subclass not overriding it (``subclass``: for one, in the base's project ``root``)."""
        path = self._abspath(path)
        key = (path, name, cls, root)
        memo = self._loop_callers
        if key in memo:
            found, deps = memo[key]
            self._note(deps)
            return found
        root = root or _caller_root(path)  # a subclass is looked up in its base class's project
        deps: set = set()
        found = None
        stem = os.path.splitext(os.path.basename(path))[0]
        if stem == "__init__":
            stem = os.path.basename(os.path.dirname(path))
        # a file that calls it spells ``name(`` (a call), and one that imports it names the module in an import
        # statement (``import pkg.stem``, ``from .stem import f``, ``from pkg import (a,\n stem)``): tested on
        # the bytes before a file is parsed (in a notebook's JSON too)
        needles = [name.encode() + b"(", stem.encode()] + ([cls.encode()] if cls else [])
        imports = re.compile(rb"(?:from|import)[ \t][^\n()]*(?:\([^)]*)?(?<![A-Za-z0-9_])" + re.escape(stem.encode())
                             + rb"(?![A-Za-z0-9_])")
        for other, data in self._project_texts(root, every_kind=True):
            if other == path or not other.endswith(_CALLER_KINDS) or not all(n in data for n in needles):
                continue
            deps.add(("f", other, content_hash(data)))
            if not imports.search(data):
                continue
            index = self.index(other, data)
            hit = index.find(path, name, self, cls) if index is not None else None
            if hit is not None:
                found = (other, *hit)
                break
        if found is None and cls is not None and not subclass:  # on an instance of a subclass not overriding it
            from .model.python.callgraph import subclasses

            for sub_path, sub_cls in subclasses(self, path, cls, name, root,
                                                lambda o, d: deps.add(("f", o, content_hash(d)))):
                found = self.loop_caller(sub_path, name, sub_cls, root, subclass=True)
                deps |= memo[(sub_path, name, sub_cls, root)][1]
                if found is not None:
                    break
        memo[key] = (found, frozenset(deps))
        self._note(deps)
        return found

    def index(self, path: str, data: bytes):
        """A project file's :class:`~jaxlint.model.python.callgraph.LoopCalls`, once (None: it does not parse).
        A notebook's are those of its code cells as jaxlint reads them (its lines the joined cells')."""
        if path not in self._loop_indexes:
            from .model.python.callgraph import LoopCalls  # loaded with the first cross-module caller search

            text = None
            if path.endswith(".ipynb"):
                module = self._notebook_module(path, data)
                if module is not None:
                    self._notebook_lines[path] = module.lines
                    text = module.text
            else:
                try:
                    text = decode_source(data)
                except (SyntaxError, UnicodeError, LookupError):
                    text = None
            self._loop_indexes[path] = LoopCalls.of(path, text) if text is not None else None
        return self._loop_indexes[path]

    def _notebook_module(self, path: str, data: bytes):
        """A project notebook's code cells joined as jaxlint reads them (:class:`~jaxlint.notebook.Module`),
        once per process and content; None when it is not a notebook jaxlint can read."""
        key = (path, content_hash(data))
        if key not in self._notebook_modules:
            from .notebook import join, read_cells  # only for a notebook: flake8 never loads it

            try:
                self._notebook_modules[key] = join(read_cells(data))
            except Exception:  # not a notebook jaxlint can read: no code cells to search
                self._notebook_modules[key] = None
        return self._notebook_modules[key]

    def cite(self, path: str, line: int) -> str:
        """How evidence names line ``line`` of the project file ``path`` that :meth:`loop_caller` found:
        ``path:line``, or for a notebook the cell and the line in it (``path`` line 3 of cell 7)."""
        lines = self._notebook_lines.get(path)
        if lines and 1 <= line <= len(lines):
            cell, in_cell, _ = lines[line - 1]
            return f"{path}, line {in_cell} of cell {cell}"
        return f"{path}:{line}"

    def inherited_loop_caller(self, path: str, cls: str, name: str, overridden: frozenset) -> Optional[tuple]:
        """``(file, line, ranged)`` of a ``self.name(...)`` call in a loop of a method, not in
        ``overridden``, of the top-level class ``cls`` of the file ``path``: a base class's loop runs
        its subclass's ``name`` at every iteration. None when there is none."""
        path = self._abspath(path)
        key = ("inherited", path, cls, name, overridden)
        memo = self._loop_callers
        if key in memo:
            found, deps = memo[key]
            self._note(deps)
            return found
        deps: set = set()
        try:
            with open(path, "rb") as fh:
                data = fh.read()
            deps.add(("f", path, content_hash(data)))
            index = self.index(path, data)
        except OSError:
            index = None
        hit = index.inherited(cls, name, overridden) if index is not None else None
        found = (path, *hit) if hit is not None else None
        memo[key] = (found, frozenset(deps))
        self._note(deps)
        return found

def _caller_root(path: str) -> str:
    """Where :meth:`ProjectResolver.loop_caller` looks for the callers of a function of ``path``: the
    repository around it (a notebook or script beside a folder of modules without ``__init__.py``
    imports them as ``folder.module``), else the folder above its top package."""
    return _repository_root(path) or _project_root(path)


def _repository_root(path: str) -> Optional[str]:
    """The repository around ``path``: the nearest folder above it with ``.git`` or ``.hg``; None
    when there is none (then what else refers to a function is not known)."""
    return nearest_with(os.path.dirname(os.path.abspath(path)), _VCS)
