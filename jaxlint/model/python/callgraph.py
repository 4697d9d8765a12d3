"""The project's call graph, file by file: the calls each file of the project makes inside loops,
found in one walk of its syntax, for :meth:`jaxlint.project.ProjectResolver.loop_caller` (is a
function of one module called again and again from another?). Python semantics only.
"""

from __future__ import annotations

import ast
import re
from typing import Optional

from . import limits as L
from .records import _is_steplike


_LOOPS = (ast.For, ast.AsyncFor, ast.While, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)


def _literal_loop(node: ast.AST) -> bool:
    """A loop over a literal tuple, list or set: a few known iterations."""
    it = getattr(node, "iter", None)
    if isinstance(node, (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
        it = node.generators[0].iter
    return isinstance(it, (ast.Tuple, ast.List, ast.Set))


class LoopCalls:
    """What one project file offers :meth:`ProjectResolver.loop_caller`, from one walk of it: its
    imports, the names and ``self`` attributes it binds to calls (``ev = mod.Cls(...)``), and the
    calls it makes inside loops (not over a literal collection, not in a function defined in the
    loop), each with its line and whether the innermost loop runs steps (``while``, ``range``,
    ``count``, ``enumerate(range(...))``). Built once per file and process, asked for many names."""

    __slots__ = ("path", "imports", "made", "calls", "self_calls", "classes")

    def __init__(self, path: str):
        self.path = path
        self.imports: list = []  # (module, level, imported name or None for ``import m as a``, local name)
        self.made: list = []  # (callee spelling, ("name", v) or ("self", attr))
        self.calls: dict = {}  # last name of the callee -> [(spelling, line, ranged)]
        self.self_calls: dict = {}  # method name -> [(top-level class, its method the call is in, line, ranged)]
        self.classes: dict = {}  # top-level class -> (spellings of its bases, names of its methods)

    @classmethod
    def of(cls, path: str, text: str) -> Optional["LoopCalls"]:
        try:
            tree = ast.parse(text, filename=path)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return None
        out = cls(path)
        todo: list = [(tree, None, None)]  # (node, innermost loop, (class, method) of a top-level class)
        while todo:
            node, loop, where = todo.pop()
            if isinstance(node, ast.ImportFrom):
                out.imports.extend((node.module, node.level, a.name, a.asname or a.name) for a in node.names
                                   if a.name != "*")
            elif isinstance(node, ast.Import):
                out.imports.extend((a.name, 0, None, a.asname) for a in node.names if a.asname)
            elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
                made = _spelling(node.value.func)
                if made is not None:
                    for t in node.targets:
                        if isinstance(t, ast.Name):
                            out.made.append((made, ("name", t.id)))
                        elif isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self":
                            out.made.append((made, ("self", t.attr)))
            if isinstance(node, ast.Call) and loop is not None:
                spelled = _spelling(node.func)
                if spelled is not None:
                    ranged = isinstance(loop, ast.While) or (
                        isinstance(loop, (ast.For, ast.AsyncFor)) and _is_steplike(loop.iter))
                    out.calls.setdefault(spelled[-1], []).append((spelled, node.lineno, ranged))
                    if where is not None and spelled[:2] == ("attr", "self"):
                        out.self_calls.setdefault(spelled[-1], []).append((*where, node.lineno, ranged))
            inner = node if isinstance(node, _LOOPS) and not _literal_loop(node) else loop
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
                inner = None  # a function defined in a loop runs when called, not per iteration
            if isinstance(node, ast.ClassDef):
                where = (node.name, None) if node in tree.body else None
                if where is not None:
                    out.classes[node.name] = ([b for b in map(_spelling, node.bases) if b is not None], frozenset(
                        s.name for s in node.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))))
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and where is not None and where[1] is None:
                where = (where[0], node.name)  # a method of the top-level class (nested code stays in it)
            todo.extend((child, inner, where) for child in ast.iter_child_nodes(node))
        for calls in out.calls.values():
            calls.sort(key=lambda c: c[1])
        return out

    def find(self, target: str, name: str, resolver, cls: Optional[str] = None) -> Optional[tuple]:
        """``(line, ranged)`` of the first call in a loop of ``target``'s top-level ``name``
        through this file's imports of that module or name; with ``cls``, of the method ``name``
        on an instance of ``target``'s class ``cls`` bound to a name or a ``self`` attribute
        anywhere in the file (``v = mod.Cls(...)``; ``v.name(...)``)."""
        calls = self.calls.get(name)
        if not calls:
            return None
        top = cls or name  # what the file imports: the function, or the method's class
        direct: set = set()  # local names bound to it
        modules: set = set()  # local names bound to its module
        for module, level, imported, local in self.imports:
            if imported is None:
                if resolver.locate(self.path, module, 0) == target:
                    modules.add(local)
            elif imported == top and resolver.locate(self.path, module, level) == target:
                direct.add(local)
            else:
                sub = f"{module}.{imported}" if module else imported
                if resolver.locate(self.path, sub, level) == target:
                    modules.add(local)
        if not direct and not modules:
            return None
        tops = {("name", d) for d in direct} | {("attr", m, top) for m in modules}
        if cls is None:
            wanted = {s for s in tops if s[-1] == name}
        else:
            instances = {where for made, where in self.made if made in tops}
            wanted = {("attr", v, name) for kind, v in instances if kind == "name"} | {
                ("selfattr", a, name) for kind, a in instances if kind == "self"}
        for spelled, line, ranged in calls:
            if spelled in wanted:
                return line, ranged
        return None


    def subclasses_of(self, target: str, cls: str, resolver) -> list:
        """``(name, method names)`` of this file's top-level classes with the class ``cls`` of the
        project file ``target`` among their bases (``class B(A)`` with ``from mod import A``,
        ``class B(mod.A)`` with ``import pkg.mod as mod``, or ``A`` defined in this file)."""
        direct: set = {cls} if target == self.path else set()
        modules: set = set()
        for module, level, imported, local in self.imports:
            if imported is None:
                if resolver.locate(self.path, module, 0) == target:
                    modules.add(local)
            elif imported == cls and resolver.locate(self.path, module, level) == target:
                direct.add(local)
            elif resolver.locate(self.path, f"{module}.{imported}" if module else imported, level) == target:
                modules.add(local)
        wanted = {("name", d) for d in direct} | {("attr", v, cls) for v in modules}
        return [(name, methods) for name, (bases, methods) in self.classes.items() if wanted.intersection(bases)]

    def inherited(self, cls: str, name: str, overridden: frozenset) -> Optional[tuple]:
        """``(line, ranged)`` of the first ``self.name(...)`` call inside a loop of a method of this
        file's top-level class ``cls`` that the subclass asking does not override (``overridden``,
        the subclass's own method names): on an instance of the subclass, that call runs the
        subclass's ``name`` at every iteration (the base class's loop, the subclass's step)."""
        for owner, method, line, ranged in self.self_calls.get(name, ()):
            if owner == cls and method is not None and method not in overridden:
                return line, ranged
        return None


def _spelling(func: ast.AST) -> Optional[tuple]:
    """How a callee is spelled, when it is one a file of the project can be matched on:
    ``("name", f)``, ``("attr", v, f)`` for ``v.f``, ``("selfattr", a, f)`` for ``self.a.f``."""
    if isinstance(func, ast.Name):
        return ("name", func.id)
    if isinstance(func, ast.Attribute):
        recv = func.value
        if isinstance(recv, ast.Name):
            return ("attr", recv.id, func.attr)
        if isinstance(recv, ast.Attribute) and isinstance(recv.value, ast.Name) and recv.value.id == "self":
            return ("selfattr", recv.attr, func.attr)
    return None


def subclasses(resolver, path: str, cls: str, name: str, root: str, note) -> list:
    """``(file, class)`` of the project's classes that inherit ``name`` from the top-level class
    ``cls`` of the file ``path``, through up to L.SUBCLASS_DEPTH levels of subclassing, none of
    them overriding ``name`` (an instance of any of them runs ``cls``'s method). ``note(file, bytes)``
    is told each file that defines one (for the result cache's record). The tree of subclasses is
    found once per base class and process, whatever the method asked."""
    key = ("subclasses", path, cls, root)  # kept with the per-file indexes, forgotten with them
    tree = resolver._loop_indexes.get(key)
    if tree is None:
        tree = resolver._loop_indexes[key] = _subclass_tree(resolver, path, cls, root)
    out: list = []
    cut: set = set()  # the nodes that override ``name``, and those below them
    for other, data, sub, methods, parent in tree:
        note(other, data)
        if parent in cut or name in methods:
            cut.add((other, sub))
        else:
            out.append((other, sub))
    return out


def _subclass_tree(resolver, path: str, cls: str, root: str) -> list:
    """``(file, bytes, class, its method names, (file, class) of its base)`` for each subclass of
    ``cls``, breadth first (a base before its subclasses)."""
    tree: list = []
    seen = {(path, cls)}
    level = [(path, cls)]
    for _ in range(L.SUBCLASS_DEPTH):
        below = []
        for where, base in level:
            # a file that subclasses ``base`` has a class statement naming it among its bases
            # (``class B(A)``, ``class B(mod.A, Mixin)``): only those files are parsed
            spelled = re.compile(rb"class\s+\w+\s*\([^)]*\b" + re.escape(base.encode()) + rb"\b")
            for other, data in resolver._project_texts(root):
                if base.encode() not in data or not spelled.search(data):
                    continue
                index = resolver.index(other, data)
                for sub, methods in index.subclasses_of(where, base, resolver) if index is not None else ():
                    if (other, sub) not in seen:
                        seen.add((other, sub))
                        tree.append((other, data, sub, methods, (where, base)))
                        below.append((other, sub))
        level = below
    return tree
