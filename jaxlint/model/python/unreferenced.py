"""Top-level functions nothing in the project refers to: whether their code runs is not shown.

A finding about code that never runs is false (``POLICY.md``: "the code is dead"), and a finding
needs proof that its facts hold. A module-level ``def`` that no code refers to (no call, no use as
a value, no string naming it) in its own module, outside functions that are themselves in this
state, and whose name no other file of the project spells, may be dead code, vendored code the
project never reaches, or an API a user of the package calls: unknown. Rules that report code
because it runs (a removed JAX name fails only when its line runs) ask :func:`unreferenced` and
make such a finding opt-in, naming the unknown.

What keeps a function referenced (conservative: a mention is enough):

* a ``Name`` with its name, or a string equal to it (``getattr(mod, "f")``, ``__all__``), anywhere
  in its module outside the function itself and the module's other unreferenced functions (not an
  attribute: in its own module ``ds.prefetch(8)`` is a dataset's method, not this function; fresh
  Y's first look had a removed name in such a function judged FALSE);
* its name spelled anywhere in another file of the project (``.py`` and ``.ipynb`` files, and the
  packaging files that name entry points), comments included: asked of the project resolver;
* a decorator that may register it (a registry, a framework's hook, ``@app.command``; not a JAX
  transform such as ``@jax.jit``, which registers nothing), a function test runners collect
  (:func:`.records.runs_as_test`), a dunder (Python calls a module's ``__getattr__``); and a module
  in no repository (no ``.git``/``.hg`` above it) is not searched: nothing is known there.

A method is a candidate only where no framework can call it by protocol (``setup``, ``__call__``,
``train_step``): a non-dunder method of a module-level class whose bases are its module's own such
classes (or none), with no metaclass and no decorator but a dataclass's, and no decorator of its own
but ``staticmethod``/``classmethod``/``property``'s or a JAX transform's (:func:`unreferenced_method`).
Methods are reached by attribute, so the mentions that keep one referenced are an attribute or a
string with its name (``x.train``, ``getattr(x, "train")``) anywhere in the project outside comments
and outside the method itself, or its name in its class's body; a module that reads attributes by
computed names (``getattr(x, name)``), or a class another file subclasses, leaves it unknown
(measured 2026-12-06: 6 FALSE of a fresh set's first look, syncs in a ``train`` method whose only call
is commented out). A notebook (``m.notebook``) cannot be imported: its functions are referenced by its own cells or
not at all, so no other file is asked. The engine makes every finding in such a function opt-in, in
a notebook and in a ``.py`` module of a repository (measured 2026-12-06: 8 FALSE of a fresh set's
first look, syncs in a script's helpers nothing calls, became opt-in; on the 14 other review sets,
1 finding moved and no judged one). A package's public function no file of the project calls is
opt-in so too: that users call it is not shown. A module that no file of the repository imports (no
import statement reaches it through the repository's import graph, ``from .m import *`` included, and no
packaging file names it) and that runs nothing of its own as a script (only imports, definitions and
assignments at its top level) runs none of its functions, whatever other files spell their names
(:func:`.importgraph.unimported`, when another module of its folder is imported; measured 2026-12-06: 5 FALSE of fresh W's, X's and Y's first looks became
opt-in, with 3 other findings in such modules: two HARMLESS, and one judged TRUE in the file another
reviewer found orphaned; no other change on 27 sets).
Functions of the model (``m``) only; the project resolver answers for other files.
"""

from __future__ import annotations

import ast
import bisect
import os
import re
from typing import Optional

from ... import names as N
from . import importgraph
from .importgraph import _closure, _import_graph
from .certainraise import derives_from as _subclassed, never_runs
from .records import runs_as_test


def unreferenced(m, f) -> Optional[str]:
    """Why the top-level function ``f`` is referenced by nothing in the project (a sentence for a
    finding's evidence), or None when it is referenced, not known not to be (a module in no
    repository), or not a candidate (a method, a nested function, a decorated one)."""
    state = getattr(m, "_unreferenced_state", None)
    if state is None:
        state = m._unreferenced_state = _State(m)
    if f is None or state.candidates.get(f.name) is not f:
        return None
    if state.alive(f.name, frozenset()) is not False:
        return None
    if state.notebook:
        return (f"no cell of the notebook refers to `{f.name}` (no call or use outside functions in the same "
                "state): whether it runs is not shown")
    if f.name in state.by_module:
        return (f"nothing in the repository imports `{os.path.basename(m.path)}` (no import statement reaches it, "
                f"and it runs nothing of its own as a script), and nothing in it refers to `{f.name}`: whether "
                "it runs is not shown")
    return (f"nothing in the project refers to `{f.name}` (no call or use in its module outside functions in "
            "the same state, and no other file of the repository spells the name)")


class _State:
    """The module's candidates and where their names occur, found once; liveness asked lazily
    (other files of the repository are read only for the functions a rule asks about)."""

    def __init__(self, m):
        self.m = m
        # a notebook's functions can be called by its own cells only: no other file is asked
        self.notebook = bool(getattr(m, "notebook", False))
        ok = self.notebook or (getattr(m, "project", None) is not None and getattr(m, "path", None) is not None)
        self.candidates = {f.name: f for f in _candidates(m)} if ok else {}
        self.owners: dict = {}  # name -> the top-level functions (None: module level) its occurrences are in
        self.memo: dict = {}
        self.methods: dict = {}  # id of a method's node -> whether nothing refers to it (unreferenced_method)
        self.classes: dict = {}  # id of a class's node -> whether nothing names it (unreferenced_class)
        self._unimported: Optional[bool] = None
        self.by_module: set = set()  # names spelled elsewhere, dead only because nothing imports the module
        text = getattr(m, "source_text", None)
        # ``fast = jax.jit(f)`` at module level: a mention of ``f`` there keeps it only as ``fast`` is kept
        self.aliases: dict = _aliases(m, self.candidates) if self.candidates else {}
        if self.candidates and text is not None:
            self._owners_from_text(text)
        elif self.candidates:
            spelled = set(self.candidates) | {n for a in self.aliases.values() for n in a.names}
            for top in m.tree.body:
                holder = m.func_of_node.get(id(top)) if isinstance(top, (ast.FunctionDef, ast.AsyncFunctionDef)) \
                    else self.aliases.get(id(top))
                for node in ast.walk(top):
                    name = _mentioned(node)
                    if name in spelled and (name not in self.candidates or node is not self.candidates[name].node):
                        self.owners.setdefault(name, []).append(holder)

    def _owners_from_text(self, text: str) -> None:
        """``owners`` from one regular-expression pass over the module's text (much cheaper than a walk
        of its tree): each occurrence of a candidate's name as a word, strings included (a mention
        keeps a function referenced: the conservative side), is held by the top-level
        function whose lines hold it (None: module-level code). Comments and ``def`` names are skipped, as
        the walk of the tree skips them."""
        m = self.m
        starts, holders = [], []
        for top in m.tree.body:
            starts.append(getattr(top, "lineno", 1))
            # a string statement (a docstring, code parked in triple quotes) holds no reference: skipped
            parked = isinstance(top, ast.Expr) and isinstance(top.value, ast.Constant) and isinstance(top.value.value, str)
            holders.append((top.end_lineno or top.lineno, _PARKED if parked else m.func_of_node.get(id(top))
                            if isinstance(top, (ast.FunctionDef, ast.AsyncFunctionDef)) else self.aliases.get(id(top))))
        line_starts = [0] + [nl.end() for nl in re.finditer("\n", text)]
        spelled = set(self.candidates) | {n for a in self.aliases.values() for n in a.names}
        word = re.compile(r"(?<![A-Za-z0-9_])(" + "|".join(map(re.escape, spelled)) + r")(?![A-Za-z0-9_])")
        for hit in word.finditer(text):
            line = bisect.bisect_right(line_starts, hit.start())
            before = text[line_starts[line - 1]:hit.start()]
            if "#" in before or before.rstrip().endswith(("def", "class", ".")):
                # a comment, a definition's own name (a second ``def`` of it included), or an attribute
                # (``ds.prefetch(8)``: in its own module, ``x.f`` is some object's ``f``, not this function)
                continue
            i = bisect.bisect_right(starts, line) - 1
            holder = holders[i][1] if i >= 0 and line <= holders[i][0] else None
            if holder is not _PARKED:
                self.owners.setdefault(hit.group(1), []).append(holder)

    def unimported(self) -> bool:
        """:func:`.importgraph.unimported` of the module, asked once."""
        if self._unimported is None:
            self._unimported = importgraph.unimported(self.m)
        return self._unimported

    def alive(self, name: str, asking: frozenset) -> Optional[bool]:
        """True: code that may run refers to ``name``; False: nothing does; None: not known."""
        if name in self.memo:
            return self.memo[name]
        f = self.candidates.get(name)
        if f is None and not any(name in a.names for a in self.aliases.values()):
            return True  # not a candidate: a method, a decorated or nested function
        if name in asking:
            return False  # functions that only refer to each other
        found: Optional[bool] = False
        for holder in self.owners.get(name, ()):
            if holder is None:
                found = True  # module-level code refers to it
                break
            if holder is f or (isinstance(holder, _Alias) and name in holder.names):
                continue  # it calls itself; an alias's own binding
            if isinstance(holder, _Alias):  # ``fast = jax.jit(f)``: as alive as the names it binds
                subs = [self.alive(n, asking | {name}) for n in holder.names]
                sub = True if any(subs) else None if None in subs else False
            else:
                sub = self.alive(holder.name, asking | {name})
            if sub:
                found = True
                break
            if sub is None:
                found = None
        if found is False and not self.notebook:
            elsewhere = self.m.project.mentioned_elsewhere(self.m.path, name)
            # spelled elsewhere, yet in a module nothing imports: still not run (the import graph is read
            # only here, for a function its own module never refers to)
            found = None if elsewhere is None else bool(elsewhere)
            if found and self.unimported():
                found = False
                self.by_module.add(name)
        if not asking or found is not False:
            self.memo[name] = found  # a False inside a cycle is the cycle's, not yet final
        return found


def unreferenced_method(m, f) -> Optional[str]:
    """Why the method ``f`` is referenced by nothing in the project (a sentence for a finding's
    evidence), or None when it may be, or it is not a candidate (see the module's text)."""
    if f is None or f.cls is None or f.parent is not None or getattr(m, "project", None) is None \
            or getattr(m, "path", None) is None or getattr(m, "notebook", False):
        return None
    state = getattr(m, "_unreferenced_state", None)
    if state is None:
        state = m._unreferenced_state = _State(m)
    memo = state.methods
    key = id(f.node)
    if key not in memo:
        memo[key] = _method_dead(m, f)
    if not memo[key]:
        return None
    return (f"nothing in the project refers to the method `{f.cls.node.name}.{f.name}` (no attribute or string "
            "with its name outside comments, the method itself and lines that never run, and no framework base "
            "that could call it): whether it runs is not shown")


def unreferenced_class(m, line: int) -> Optional[str]:
    """Why the module-level class around ``line`` is never instantiated: its name is spelled nowhere outside
    its own body (comments aside) in its module nor in another file of the project (a notebook: in no cell),
    and nothing can register it (no decorator but a dataclass's, no class keyword, no computed ``getattr``):
    none of its methods runs, a framework module's ``__call__`` included (fresh AR: draws in two
    ``nnx.Module`` classes nothing made, judged FALSE). None otherwise."""
    cls = next((c for c in m.tree.body if isinstance(c, ast.ClassDef) and c.lineno <= line <= (c.end_lineno or 0)),
               None)
    notebook = bool(getattr(m, "notebook", False))
    if cls is None or cls.keywords or (not notebook and (getattr(m, "project", None) is None
                                                           or getattr(m, "path", None) is None)):
        return None
    state = getattr(m, "_unreferenced_state", None)
    if state is None:
        state = m._unreferenced_state = _State(m)
    memo = state.classes
    if id(cls) not in memo:
        memo[id(cls)] = _class_dead(m, cls, notebook)
    if not memo[id(cls)]:
        return None
    where = "no cell of the notebook" if notebook else "nothing in the project"
    return (f"{where} refers to the class `{cls.name}` (its name appears nowhere outside its own body, comments "
            "aside): no instance of it is made, so whether its methods run is not shown")


def _class_dead(m, cls: ast.ClassDef, notebook: bool) -> bool:
    if any(m.resolve(d.func if isinstance(d, ast.Call) else d, m.module_scope) not in _DATACLASSES
           for d in cls.decorator_list):
        return False  # a decorator may register it
    text = getattr(m, "source_text", None)
    if text is None or _COMPUTED_GETATTR.search(text) or "__subclasses__" in text or "globals()" in text:
        return False
    first = cls.lineno - len(cls.decorator_list)
    line_starts = [0] + [nl.end() for nl in re.finditer("\n", text)]
    for hit in _words(cls.name, text):
        line = bisect.bisect_right(line_starts, hit.start())
        before = text[line_starts[line - 1]:hit.start()]
        if "#" in before or first <= line <= (cls.end_lineno or cls.lineno):
            continue
        return False
    return notebook or m.project.mentioned_elsewhere(m.path, cls.name) is False


def unimported_method(m, f) -> Optional[str]:
    """Why the method ``f`` never runs because nothing imports its module (:func:`.importgraph.unimported`:
    its class cannot be reached, whatever its bases), or None (fresh AA's first look: a trainer module
    its package left out, whose class derives from the package's base trainer)."""
    if f is None or f.cls is None or getattr(m, "project", None) is None or getattr(m, "path", None) is None \
            or getattr(m, "notebook", False):
        return None
    state = getattr(m, "_unreferenced_state", None)
    if state is None:
        state = m._unreferenced_state = _State(m)
    if not state.unimported():
        return None
    return (f"nothing in the repository imports `{os.path.basename(m.path)}` (no import statement reaches it, and it "
            f"runs nothing of its own as a script), so no instance of `{f.cls.node.name}` is made from it: whether "
            f"`{f.name}` runs is not shown")


def _method_dead(m, f, asking: frozenset = frozenset()) -> bool:
    """Whether nothing refers to the method ``f`` (see :func:`unreferenced_method`); ``asking``: the
    methods whose question this one answers part of (methods that only refer to each other are dead)."""
    name, cls = f.name, f.cls.node
    if (name.startswith("__") and name.endswith("__")) or runs_as_test(f, m.tests_collected) or cls not in m.tree.body:
        return False
    if not all(_plain_method_decorator(m, d) for d in f.node.decorator_list) or not _plain_class(m, cls, set()):
        return False
    text = getattr(m, "source_text", None)
    if text is None or _COMPUTED_GETATTR.search(text):
        return False  # an attribute read by a computed name may reach any method
    own = (f.node.lineno - len(f.node.decorator_list), f.node.end_lineno)
    body = (cls.lineno, cls.end_lineno)
    line_starts = [0] + [nl.end() for nl in re.finditer("\n", text)]
    for hit in _words(name, text):
        line = bisect.bisect_right(line_starts, hit.start())
        before = text[line_starts[line - 1]:hit.start()]
        if "#" in before or before.rstrip().endswith("def") or own[0] <= line <= own[1]:
            continue
        if never_runs(m, line) is not None:
            continue  # a line after a statement that always raises refers to nothing (fresh Z's JAX-RL)
        holder = enclosing_method(m, line)
        if holder is not None and holder is not f and (id(holder.node) in asking or (
                holder.cls is not None and _method_dead(m, holder, asking | {id(f.node)}))):
            continue  # only a method nothing refers to refers to it (``step_noise`` -> ``rollout_noise``)
        if _attribute_or_string(before, text[hit.end():hit.end() + 2]) or body[0] <= line <= body[1]:
            return False
    if m.project.mentioned_elsewhere(m.path, name, spells=_method_spelled) is not False:
        return False
    # a class another file derives from may get a framework base there, which calls by protocol
    return m.project.mentioned_elsewhere(m.path, cls.name, spells=_subclassed) is False


_COMPUTED_GETATTR = re.compile(r"\bgetattr\(\s*[^,()]+,\s*(?![\s'\"])")
_PLAIN_DECORATORS = frozenset({"staticmethod", "classmethod", "property", "cached_property", "abstractmethod"})
_DATACLASSES = frozenset({"dataclasses.dataclass", "flax.struct.dataclass", "chex.dataclass"})


def _words(name: str, text: str):
    """The occurrences of ``name`` as a whole word in ``text`` (``hit.start()``, ``hit.end()``): the
    literal is searched (the regex engine skips ahead to it), its boundaries checked after, which is
    much cheaper than a pattern that starts with a look-behind (tried at every character)."""
    for hit in re.finditer(re.escape(name), text):
        i, j = hit.start(), hit.end()
        if (i == 0 or not _WORD_CHAR(text[i - 1])) and (j == len(text) or not _WORD_CHAR(text[j])):
            yield hit


def _WORD_CHAR(c: str) -> bool:
    return c.isalnum() or c == "_"


def _attribute_or_string(before: str, after: str) -> bool:
    """Whether an occurrence of a name, with the text of its line ``before`` it and ``after`` it,
    is an attribute (``x.name``, ``x .name``) or a whole string (``"name"``, a notebook's ``\\"name\\"``)."""
    stripped = before.rstrip()
    if stripped.endswith("."):
        return True
    return stripped[-1:] in ("'", '"') and after.lstrip("\\")[:1] in ("'", '"')


def _plain_method_decorator(m, dec: ast.AST) -> bool:
    if isinstance(dec, ast.Name) and dec.id in _PLAIN_DECORATORS:
        return True
    if isinstance(dec, ast.Attribute) and (dec.attr in ("setter", "getter", "deleter") or dec.attr in _PLAIN_DECORATORS):
        return True
    return _transform(m, dec)


def _plain_class(m, cls: ast.ClassDef, seen: set) -> bool:
    """Whether no framework can call ``cls``'s methods by protocol: no metaclass or class keyword, no
    decorator but a dataclass's, and every base ``object`` or such a class of the module."""
    if cls.name in seen:
        return True  # being asked already: the answer is the first question's
    seen.add(cls.name)
    if cls.keywords:
        return False
    for dec in cls.decorator_list:
        target = dec.func if isinstance(dec, ast.Call) else dec
        if m.resolve(target, m.module_scope) not in _DATACLASSES:
            return False
    for base in cls.bases:
        if isinstance(base, ast.Name) and base.id == "object":
            continue
        local = next((c for c in m.tree.body if isinstance(c, ast.ClassDef) and isinstance(base, ast.Name)
                      and c.name == base.id), None)
        if local is None or not _plain_class(m, local, seen):
            return False
    # a class of the module that derives from it with a framework base may be called by protocol
    return not any(isinstance(c, ast.ClassDef) and c is not cls and any(isinstance(b, ast.Name) and b.id == cls.name
                   for b in c.bases) and not _plain_class(m, c, seen) for c in m.tree.body)


def _method_spelled(other: str, data, name: str, owner: str, files=()) -> bool:
    """For :meth:`~jaxlint.project.ProjectResolver.mentioned_elsewhere`: whether another file's text
    ``data`` refers to the method ``name`` of the module ``owner`` (an attribute or a string outside
    comments). Only a file of a program that imports the owner (:func:`_program_files`) can hold an
    instance: a ``.train()`` in a repository's unrelated folder is another class's."""
    if other not in _program_files(owner, files):
        return False
    text = data if isinstance(data, str) else data.decode("utf-8", "replace")
    for hit in _words(name, text):
        start = text.rfind("\n", 0, hit.start()) + 1
        before = text[start:hit.start()]
        if "#" not in before and _attribute_or_string(before, text[hit.end():hit.end() + 3]):
            return True
    return False


# An import statement at a line's start (also a notebook's JSON line, ``"from x import y``). The start is
# matched as a newline (the text gets one in front), not as ``^`` with re.MULTILINE or ``\A|\n``, which the
# regex engine tries at every character (the same trick as project.py's export search).
_PROGRAMS: dict = {}  # owner path -> (the project's listing it was found in, the files of its programs)


def _program_files(owner: str, files) -> frozenset:
    """The files of ``files`` (a repository's ``(path, bytes)`` listing) that may hold an instance of
    a class of the module ``owner``: those that import it, directly or through other files, and every
    file those import in turn (a runner handed an agent by the script that imports both). An import
    of a dotted name (``pkg.models``) may reach every file whose path ends so; of one name
    (``models``), a file of that name beside the importing file or in a folder above it (the
    script's folder, or the repository's root, on ``sys.path``); a relative import, the file it
    names. The import graph is read once per listing, the closure once per owner."""
    held = _PROGRAMS.get(owner)
    if held is not None and held[0] is files:
        return held[1]
    imports, importers = _import_graph(files)
    out = _closure(_closure({owner}, importers), imports)
    out.discard(owner)
    if len(_PROGRAMS) > 64:
        _PROGRAMS.clear()
    _PROGRAMS[owner] = (files, frozenset(out))
    return _PROGRAMS[owner][1]


def enclosing_method(m, line: int):
    """The method of a module-level class whose lines hold ``line``, or None."""
    for top in m.tree.body:
        if isinstance(top, ast.ClassDef) and top.lineno <= line <= top.end_lineno:
            for stmt in top.body:
                if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) \
                        and stmt.lineno - len(stmt.decorator_list) <= line <= stmt.end_lineno:
                    return m.func_of_node.get(id(stmt))
    return None


def enclosing(m, node, line: Optional[int] = None):
    """The top-level function (a ``def`` of the module's body) whose lines hold ``node`` (or
    ``line``), or None."""
    line = getattr(node, "lineno", None) if line is None else line
    if line is None:
        return None
    for top in m.tree.body:
        if isinstance(top, (ast.FunctionDef, ast.AsyncFunctionDef)) and top.lineno <= line <= top.end_lineno:
            return m.func_of_node.get(id(top))
    return None


_PARKED = object()  # a module-level string statement: what it spells is no reference


class _Alias:
    """A module-level ``fast = jax.jit(f)`` (or ``partial``, a transform, ``g = f``): the names it binds."""

    __slots__ = ("names",)

    def __init__(self, names: tuple):
        self.names = names


def _aliases(m, candidates: dict) -> dict:
    """``{id(statement): _Alias}`` for the module-level assignments to plain names whose value only wraps
    a candidate: the candidate itself, or a jit wrapper, a transform or ``functools.partial`` of one."""
    out = {}
    for top in m.tree.body:
        if not (isinstance(top, ast.Assign) and all(isinstance(t, ast.Name) for t in top.targets)):
            continue
        value = top.value
        while isinstance(value, ast.Call) and value.args:
            qn = m.resolve(value.func, m.module_scope)
            if not (qn == N.PARTIAL or qn in N.JIT_WRAPPERS or qn in N.TRANSFORMS):
                break
            value = value.args[0]
        if isinstance(value, ast.Name) and value.id in candidates:
            out[id(top)] = _Alias(tuple(t.id for t in top.targets))
    return out


def _candidates(m) -> list:
    out = []
    for f in m.functions:
        if f.parent is not None or f.cls is not None or not isinstance(f.node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        if runs_as_test(f, m.tests_collected) or f.name.startswith("__") or not all(_transform(m, d) for d in f.node.decorator_list):
            continue
        out.append(f)
    return out


def _transform(m, dec: ast.AST) -> bool:
    """A decorator that only transforms the function (``@jax.jit``, ``@partial(jax.jit, static_argnums=0)``,
    ``@jax.vmap``): it registers it nowhere, so the name is still the only way to reach it."""
    if isinstance(dec, ast.Call):
        if m.resolve(dec.func, m.module_scope) == N.PARTIAL and dec.args:
            dec = dec.args[0]
        else:
            dec = dec.func  # ``@jax.jit(static_argnums=0)``-style
    qn = m.resolve(dec, m.module_scope)
    return qn is not None and (qn in N.JIT_WRAPPERS or qn in N.TRANSFORMS)


def _mentioned(node: ast.AST) -> Optional[str]:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.isidentifier():
        return node.value
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return None
    if isinstance(node, ast.alias):
        return (node.asname or node.name).split(".")[-1]
    return None


def not_only_imported(path: str, data, name: str, owner: str = "", files=None) -> bool:
    """Whether ``path`` (its text ``data``) uses the name, not only imports it (:func:`only_imported`)."""
    return not only_imported(path, data, name, owner)


def only_imported(path: str, data: bytes, name: str, owner: str = "") -> bool:
    """Whether a module (not a package's ``__init__.py``, whose imports are its API) spells
    ``name`` without referring to the function of the module ``owner`` (its path) that bears it:
    only to import it and never use it (``from utils import all_gather``: an unused import), or
    only as another module's name (``jax.random.uniform``, ``from numpy.random import uniform``,
    when ``owner``'s module is ``init.py`` and this file imports no module of that name), or only
    as its own top-level function of that name (a script's own ``main``, no import of the name).
    Anything else, a notebook or a file that does not parse included, counts as a use."""
    if path.endswith(".ipynb"):  # the project resolver hands a notebook's code cells as their text
        try:
            tree = ast.parse(data)
        except (SyntaxError, ValueError):
            return False
    elif not path.endswith(".py") or os.path.basename(path) == "__init__.py":
        return False
    else:
        try:
            tree = ast.parse(data)
        except (SyntaxError, ValueError):
            return False
    stem = os.path.splitext(os.path.basename(owner))[0] if owner else ""
    foreign = _foreign_modules(tree, stem, _packages(owner)) if stem else {}
    imported = False
    # a file with a top-level def of its own of the name (its own ``main``) that imports no such name
    # reads its own function where it reads the plain name (fresh AK's JaxFEM: every script has a ``main``)
    own = [n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and n.name == name]
    shadowed = bool(own) and not any(isinstance(n, (ast.ImportFrom, ast.Import)) and any(
        (a.asname or a.name.split(".")[0]) == name or a.name == "*" for a in n.names) for n in ast.walk(tree))
    # imported from the owner's module too (``from targets_shortcut import get_targets`` in one branch,
    # ``from baselines.targets_naive import get_targets`` in another): a plain read may be the owner's
    from_owner = any(isinstance(n, ast.ImportFrom) and not _other_module(n, stem) and any(
        a.name == name and a.asname in (None, name) for a in n.names) for n in ast.walk(tree))
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            for alias in node.names:
                if alias.name == name or alias.asname == name:
                    if _other_module(node, stem):
                        foreign[alias.asname or alias.name] = node.module  # another module's function
                        continue
                    if alias.asname not in (None, name):
                        return False  # used under another name: not followed
                    imported = True
        elif isinstance(node, ast.Attribute) and node.attr == name:
            root = node.value
            while isinstance(root, ast.Attribute):
                root = root.value
            if not (isinstance(root, ast.Name) and root.id in foreign):
                return False  # an attribute of something that may be the owner's module
        elif isinstance(node, ast.Name) and node.id == name:
            if (name not in foreign or from_owner) and not shadowed:
                return False
        elif name == getattr(node, "value", None) \
                or (isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == name
                    and not (shadowed and node in own)):
            return False  # a string, or a definition of its own (nested: the reads may be the owner's)
    return True if (foreign or shadowed) else imported


def _other_module(node: ast.ImportFrom, stem: str) -> bool:
    """Whether ``from M import ...`` names a module other than the owner's (its last part is not ``stem``)."""
    return bool(stem and node.module and node.level == 0 and node.module.split(".")[-1] != stem)


def _packages(owner: str) -> frozenset:
    """The names of the packages around the module ``owner`` (folders with ``__init__.py`` above it)."""
    out = set()
    folder = os.path.dirname(os.path.abspath(owner))
    while os.path.isfile(os.path.join(folder, "__init__.py")):
        out.add(os.path.basename(folder))
        parent = os.path.dirname(folder)
        if parent == folder:
            break
        folder = parent
    return frozenset(out)


def _foreign_modules(tree: ast.Module, stem: str, packages: frozenset = frozenset()) -> dict:
    """Names bound to modules whose last part is not ``stem`` (``import jax``, ``import numpy as
    np``, ``from jax import random``), when no import of the file names a module ``stem``: there,
    ``random.uniform`` is not the owner's function. Imports of the owner's own ``packages`` are not
    foreign (``import sbgm`` reaches ``sbgm._train`` through the package's re-export ``from . import
    _train as train``)."""
    out: dict = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if stem in alias.name.split("."):
                    return {}
                if alias.name.split(".")[0] in packages:
                    continue  # the owner's own package: its attributes may reach the owner
                out[alias.asname or alias.name.split(".")[0]] = alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level == 0 and (node.module or "").split(".")[0] in packages:
                continue  # names from the owner's own package may be the owner's module
            if node.level or stem in (node.module or "").split("."):
                if any(a.name == stem for a in node.names) or stem in (node.module or "").split("."):
                    return {}
            for alias in node.names:
                if alias.name == stem:
                    return {}
                if node.level == 0 and node.module:
                    out.setdefault(alias.asname or alias.name, f"{node.module}.{alias.name}")
    return out
