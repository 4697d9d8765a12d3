#!/usr/bin/env python3
"""Rename every user-chosen identifier of a tree of Python files, keeping line numbers.

Usage:
  python bench/rename.py SRC DEST [--mapping FILE.json] [-q]

A linter's findings must not depend on the names a user chose. This copies the tree SRC (a file
or a folder) to DEST with every user-chosen identifier replaced by a meaningless one, so that
jaxlint's findings on SRC and on DEST can be compared (tests/test_rename.py does it for the
fixtures). ``.py`` files are rewritten; every other file is copied as it is, notebooks (``.ipynb``)
and stubs (``.pyi``) included. A ``.py`` file that does not parse (or cannot be decoded or
tokenized) is copied unchanged. Importable: :func:`rename_tree` (``src``, ``dest`` -> the mapping
used), :func:`rename_source` (one file's text and a mapping -> the renamed text),
:func:`build_info` / :func:`make_mapping` (the facts and the mapping for a set of sources) and
:func:`renamed_ast` (the original tree with the mapping applied, which the renamed text must parse
to).

Which names are renamed (user-chosen): every name *defined* somewhere in the tree, one mapping for
the whole tree: function, class and method names, parameters (lambdas' too), assignment targets of
every kind (for/with/except/walrus/comprehension/augmented/annotated/unpacking/del, ``global`` and
``nonlocal`` lists, ``match`` captures), attributes assigned as ``self.NAME``/``cls.NAME`` inside a
class of the tree and class-level names. Kept: keywords, builtins, dunders, ``self``, ``cls``,
``_``; names bound by ``import`` statements (``np``, ``jax``, ``jnp``, ``M`` in ``from . import
model as M``) unless the imported name is defined in the tree (``from .model import step`` renames
``step``, never a module, package or file name); names never defined in the tree (library
attributes like ``.block_until_ready`` and library keywords like ``static_argnums=``); pytest and
unittest names (``test*`` functions and their parameters, ``Test*`` classes, ``setUp``/``tearDown``
and the xunit ``setup*``/``teardown*`` names, ``pytest_*`` hooks and their parameters, fixtures and
their parameters, ``fixture(name=...)`` names, the built-in fixtures, ``parametrize`` argnames);
JAX's pytree protocol methods (``tree_flatten``, ``tree_unflatten``, ``tree_flatten_with_keys``).
Kept as attributes only: a method, class-level name or ``self.`` attribute of a tree class whose
name is an attribute of Python's builtin types or of arrays (``update``, ``keys``, ``count``,
``shape``, ``mean``, ``at``, ``set``: ``LIBRARY_ATTRS``), since library objects are reached through
that name (``opts.update``, ``x.shape``) and a class defining it follows their protocol; the same
name is still renamed as a variable or parameter. ``main`` and names listed in ``__all__`` are
renamed (the ``__all__`` strings too).

Uses renamed: ``Name`` nodes (except, per file, names an import of that file binds and keeps);
``X.attr`` when ``X`` is a module of the tree that defines ``attr`` at module level (``M.step``,
``pkg.model.step``) or, for any other receiver (``self.x``, ``state.x``), when ``attr`` was
defined as an attribute, method or class-level name of a class of the tree, unless the receiver is
something the file imports from outside the tree (``jnp.x``); keyword arguments (``f(n=1)``) when
the callee is not known to be a library's (``jnp.zeros(dtype=...)``, ``dict(a=1)`` and calls of
names imported from libraries keep theirs) and the keyword is a parameter of the tree's functions
of the callee's name (its ``__init__`` parameters and fields for a class; any function's when the
callee has no name, as in ``jax.jit(f)(n=1)``); ``partial(f, n=1)`` is judged by ``f``;
``x.replace(n=1)``/``x._replace(n=1)`` rename dataclass/namedtuple fields; the strings of
``static_argnames=``/``donate_argnames=`` (a string, or a tuple/list of strings) that name a renamed
parameter, and those of ``__all__``, ``__slots__`` and ``__match_args__``.

New names: ``v`` and the first hex digits of the name's SHA-1 (``_`` prefixes kept, so ``_x`` stays
private and ``__x`` stays mangled), six digits unless two new names, or a new name and any
identifier of the tree (NAME tokens, file and folder names, builtins, keywords), coincide: then two
more digits for all, until none does.

How: the tree's facts (definitions, imports, modules, signatures) are collected from the ASTs
first; then each file's AST decides which nodes to rename, and the text is rewritten by replacing
only those NAME tokens (and the chosen STRING tokens) in place, found with ``tokenize`` at the
node's position (or the first NAME after it for ``def``/``class`` names, ``except ... as`` names and
``global`` lists). Comments, other strings, layout and line numbers stay exactly as they were. Each
renamed file is checked: it must parse and its ``ast.dump`` must equal the original's with the
renames applied (:func:`renamed_ast`).

Known limitations (the renamed program may differ in meaning in these cases):
- Attributes are renamed by name, not by type: an attribute of a library object that shares its
  name with an attribute or method defined in a tree class is renamed too (``field.metadata`` when
  a tree class sets ``self.metadata``, ``fn.register`` when a tree class defines ``register``),
  beyond the builtin-type and array names kept above; and a tree method that overrides a library
  base class's method (other than the kept ones) is renamed although the library calls it by name.
- Scopes are not modelled: a name is renamed everywhere it is defined or used, except in a file
  whose import binds it (there it is kept throughout the file). Absolute imports are resolved
  against the tree's folders (the importing file's folder first), so a tree module named like a
  library module (``random.py``) stands for it; only names that module defines are renamed on it.
- Keywords are judged by the callee's name, not its identity: a keyword a tree function passes on
  through ``**kwargs`` keeps its name (right for a library callee, wrong for a tree one); a local
  variable holding a library function (``f = jnp.sum; f(x, axis=0)``) gets keywords that match a
  tree function named ``f`` renamed; a tree function reached through a library call
  (``hk.transform(f).apply(..., n=1)``) or a ``**{"n": 1}`` dict keeps the old keyword; class
  keywords (``class C(Base, flag=True)``) are never renamed.
- Strings are renamed only where listed above: names in ``getattr(obj, "x")``,
  ``namedtuple("P", "x y")``, string annotations (``x: "Model"``), comparisons with
  ``cls.__name__``, ``parametrize`` argnames (kept instead), docstrings and comments stay as
  written.
- Parameters of ``test*`` functions and fixtures are kept everywhere in the tree (they are fixture
  or parametrize names); an externally provided fixture is therefore safe, at the cost of keeping
  those names in non-test code too.
- ``import *`` from outside the tree: a name it binds that is also defined in the tree is renamed.
- A file with a lone ``\\r`` line break, or whose renaming cannot be verified (a Python 3.11
  multi-line f-string whose inner positions are off), is copied unchanged and reported, so names it
  imports from the tree no longer match there.
"""

from __future__ import annotations

import argparse
import ast
import bisect
import builtins
import hashlib
import io
import json
import keyword
import os
import shutil
import sys
import tokenize
import warnings as _warnings
from typing import Optional

KEPT = frozenset(dir(builtins)) | frozenset(keyword.kwlist) | {"self", "cls", "_"}
# methods a library calls by name on the user's classes: JAX's pytree protocol
# (register_pytree_node_class, register_pytree_with_keys_class)
PROTOCOL_METHODS = frozenset({"tree_flatten", "tree_unflatten", "tree_flatten_with_keys"})
# unittest / pytest xunit hooks, called by name (``setup`` is also flax's Module hook)
SPECIAL_METHODS = frozenset({
    "setUp", "tearDown", "setUpClass", "tearDownClass", "setUpModule", "tearDownModule", "runTest",
    "asyncSetUp", "asyncTearDown",
    "setup", "teardown", "setup_method", "teardown_method", "setup_class", "teardown_class",
    "setup_module", "teardown_module", "setup_function", "teardown_function",
})
BUILTIN_FIXTURES = frozenset({
    "cache", "capfd", "capfdbinary", "caplog", "capsys", "capsysbinary", "capteesys", "doctest_namespace",
    "monkeypatch", "pytestconfig", "record_property", "record_testsuite_property", "record_xml_attribute",
    "recwarn", "request", "testdir", "pytester", "tmp_path", "tmp_path_factory", "tmpdir", "tmpdir_factory",
    "subtests",
})
STATIC_NAME_KEYWORDS = ("static_argnames", "donate_argnames")
# Attributes of library objects that a tree class may define too (a Mapping's ``keys``/``update``,
# an array-like's ``shape``): kept as attributes when a tree class defines them (see the docstring)
ARRAY_ATTRS = frozenset({
    "T", "all", "any", "argmax", "argmin", "argsort", "astype", "at", "block_until_ready", "clip", "conj",
    "copy", "copy_to_host_async", "cumprod", "cumsum", "delete", "device", "devices", "diagonal", "dot",
    "dtype", "flatten", "imag", "is_deleted", "item", "itemsize", "max", "mean", "min", "nbytes", "ndim",
    "nonzero", "prod", "ravel", "real", "repeat", "reshape", "round", "shape", "sharding", "size", "sort",
    "squeeze", "std", "sum", "swapaxes", "take", "tolist", "trace", "transpose", "var", "view",
    # the .at[...] updates
    "set", "get", "add", "subtract", "multiply", "mul", "divide", "power", "apply",
})
# The probability libraries' distribution API (distrax, tensorflow_probability, numpyro): a tree class
# that defines ``sample`` follows it, and ``dist.sample(seed=key)`` on a library object must keep
# its name, or the renamed program calls a method that does not exist.
DISTRIBUTION_ATTRS = frozenset({"sample", "sample_and_log_prob", "log_prob", "prob", "entropy", "mode"})
LIBRARY_ATTRS = ARRAY_ATTRS | DISTRIBUTION_ATTRS | frozenset(
    n for t in (object, str, bytes, bytearray, list, tuple, dict, set, frozenset, int, float, complex)
    for n in dir(t) if not (n.startswith("__") and n.endswith("__")))

EXTERNAL = object()  # what a module expression resolves to when it is not a module of the tree


class RenameError(Exception):
    """A file's renaming could not be carried out or verified."""


def _parse(text: str) -> ast.Module:
    with _warnings.catch_warnings():  # invalid escapes etc.: the file's business, not ours
        _warnings.simplefilter("ignore")
        return ast.parse(text)


def is_dunder(name: str) -> bool:
    return len(name) > 4 and name.startswith("__") and name.endswith("__")


def _dotted(expr) -> Optional[str]:
    parts = []
    while isinstance(expr, ast.Attribute):
        parts.append(expr.attr)
        expr = expr.value
    if isinstance(expr, ast.Name):
        parts.append(expr.id)
        return ".".join(reversed(parts))
    return None


def _is_fixture_decorator(dec) -> bool:
    target = dec.func if isinstance(dec, ast.Call) else dec
    name = _dotted(target)
    return name is not None and name.split(".")[-1] == "fixture"


def _params(args: ast.arguments) -> list:
    """The names a function takes by keyword (``*args``/``**kwargs`` left out)."""
    return [a.arg for a in args.posonlyargs + args.args + args.kwonlyargs]


def _strings(expr) -> list:
    """The string constants of a string, or of a tuple/list of strings."""
    if isinstance(expr, ast.Constant) and isinstance(expr.value, str):
        return [expr]
    if isinstance(expr, (ast.Tuple, ast.List)):
        return [e for e in expr.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
    return []


# ------------------------------------------------------------------ facts about the tree


class FileInfo:
    """One parsed ``.py`` file of the tree."""

    def __init__(self, rel: str, text: str, tree: ast.Module):
        self.rel = rel  # path relative to the tree root, with "/"
        self.text = text
        self.tree = tree
        self.bound: set = set()  # names an import of this file binds
        self.keep: set = set()  # names never renamed in this file (bound by a kept import)
        self.external: set = set()  # names bound to something outside the tree (or kept)
        self.modules: dict = {}  # name -> tree module (file "a/b.py" or folder "a/b") it is bound to
        self.candidates: list = []  # (alias, target module, bound name) of ``from <tree> import``
        self.toplevel: set = set()  # names the module defines at module level (``global`` ones too)
        self.stars: list = []  # tree modules it imports ``*`` from


class TreeInfo:
    """What the whole tree defines, and each file's imports."""

    def __init__(self, files: dict, root_name: Optional[str] = None):
        self.files: dict = {}  # rel -> FileInfo, parseable files only
        self.root_name = root_name
        self.names: set = set()  # names bound as variables, functions, classes, parameters
        self.attrs: set = set()  # attributes, methods and class-level names of tree classes
        self.params: set = set()  # parameters of functions and lambdas
        self.fields: set = set()  # class-level names (dataclass / namedtuple fields)
        self.signatures: dict = {}  # function or class name -> the keywords it takes by name
        self.class_fields: dict = {}  # class name -> its class-level names
        self.kept: set = set(KEPT)  # never renamed anywhere
        self.idents: set = set(KEPT)  # every identifier seen: new names must avoid them
        self.dirs: set = set()
        self.py: set = {rel.replace(os.sep, "/") for rel in files}
        self.kept |= BUILTIN_FIXTURES | PROTOCOL_METHODS
        for rel, text in files.items():
            rel = rel.replace(os.sep, "/")
            parts = rel.split("/")
            self.idents.update(p[:-3] if p.endswith(".py") else p for p in parts)
            for i in range(len(parts)):
                self.dirs.add("/".join(parts[:i]))
            try:
                tree = _parse(text)
                tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
            except (SyntaxError, ValueError, tokenize.TokenError, MemoryError, RecursionError):
                continue
            self.idents.update(t.string for t in tokens if t.type == tokenize.NAME)
            self.files[rel] = FileInfo(rel, text, tree)
        for fi in self.files.values():
            self._imports(fi)
        for fi in self.files.values():
            try:
                _Collector(self, fi).visit(fi.tree)
            except RecursionError:
                pass
        self.names -= self.kept
        self.attrs -= self.kept
        # attribute names of library objects (LIBRARY_ATTRS) defined by a tree class: kept as
        # attributes (still renamed as variables)
        self.lib_attrs = self.attrs & LIBRARY_ATTRS
        self.attrs -= self.lib_attrs
        for name, fields in self.class_fields.items():  # a dataclass's fields are keywords
            self.signatures.setdefault(name, set()).update(fields - self.lib_attrs)
        self._settle_imports()

    # -------------------------------------------------------------- modules

    def _lookup(self, parts: list) -> Optional[str]:
        rel = "/".join(parts)
        if (rel + "/__init__.py" if rel else "__init__.py") in self.py:
            return rel  # a regular package
        if rel and rel + ".py" in self.py:
            return rel + ".py"
        if rel in self.dirs:
            return rel  # a namespace package (or the root folder)
        return None

    def resolve(self, from_rel: str, module: Optional[str], level: int):
        """The tree module (``"a/b.py"`` or folder ``"a/b"``) an import names, or None."""
        here = from_rel.split("/")[:-1]
        mod = module.split(".") if module else []
        if level:
            if level - 1 > len(here):
                return None
            return self._lookup(here[:len(here) - (level - 1)] + mod)
        if not mod:
            return None
        for i in range(len(here), -1, -1):
            found = self._lookup(here[:i] + mod)
            if found is not None:
                return found
        if self.root_name and mod[0] == self.root_name:
            return self._lookup(mod[1:])
        return None

    def submodule(self, target: str, name: str) -> Optional[str]:
        if target.endswith(".py"):
            return None
        return self._lookup((target.split("/") if target else []) + [name])

    def _imports(self, fi: FileInfo) -> None:
        for node in ast.walk(fi.tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.asname:
                        bound, target = alias.asname, self.resolve(fi.rel, alias.name, 0)
                    else:
                        bound = alias.name.split(".")[0]
                        target = self.resolve(fi.rel, bound, 0)
                    self._bind_module(fi, bound, target)
            elif isinstance(node, ast.ImportFrom):
                target = self.resolve(fi.rel, node.module, node.level)
                for alias in node.names:
                    if alias.name == "*":
                        if target is not None:
                            fi.stars.append(target)
                        continue
                    bound = alias.asname or alias.name
                    sub = self.submodule(target, alias.name) if target is not None else None
                    if target is None or sub is not None:
                        self._bind_module(fi, bound, sub)
                    else:
                        fi.bound.add(bound)
                        fi.candidates.append((alias, target, bound))
                        if alias.asname:
                            fi.keep.add(bound)

    @staticmethod
    def _bind_module(fi: FileInfo, bound: str, target) -> None:
        fi.bound.add(bound)
        fi.keep.add(bound)
        if target is None:
            fi.external.add(bound)
            fi.modules.pop(bound, None)
        elif bound not in fi.external:
            if fi.modules.get(bound, target) != target:
                fi.external.add(bound)  # bound to two modules: judged as unknown
                fi.modules.pop(bound, None)
            else:
                fi.modules[bound] = target

    def alias_renamed(self, fi: FileInfo, alias, target) -> bool:
        """Whether ``name`` in ``from <target> import name [as x]`` is renamed."""
        if alias.name not in self.names or not self.module_defines(target, alias.name):
            return False
        return bool(alias.asname) or alias.name not in fi.keep

    def _module_file(self, target: str) -> Optional[FileInfo]:
        if target.endswith(".py"):
            return self.files.get(target)
        return self.files.get(target + "/__init__.py" if target else "__init__.py")

    def module_defines(self, target: str, name: str) -> bool:
        """Whether the tree module defines ``name`` at module level (and renames it there)."""
        fi = self._module_file(target)
        return fi is not None and name in fi.toplevel and name not in fi.keep

    def _settle_imports(self) -> None:
        """What each module defines, re-exports included; then which ``from <tree module> import
        name`` keep their name: one that the module does not define, or keeps itself (it imports
        it from a library). Both to a fixed point (chains of re-exports)."""
        changed = True
        while changed:
            changed = False
            for fi in self.files.values():
                new = set()
                for alias, target, bound in fi.candidates:
                    other = self._module_file(target)
                    if other is not None and alias.name in other.toplevel:
                        new.add(bound)
                for target in fi.stars:
                    other = self._module_file(target)
                    if other is not None:
                        new |= {n for n in other.toplevel if not n.startswith("_")}
                if not new <= fi.toplevel:
                    fi.toplevel |= new
                    changed = True
        changed = True
        while changed:
            changed = False
            for fi in self.files.values():
                for alias, target, bound in fi.candidates:
                    if not self.alias_renamed(fi, alias, target) and bound not in fi.external:
                        fi.keep.add(bound)
                        fi.external.add(bound)
                        changed = True

    def renamable(self) -> set:
        return (self.names | self.attrs) - self.kept


class _Collector(ast.NodeVisitor):
    """Definitions of one file: names, attributes, parameters, fields, pytest names to keep."""

    def __init__(self, info: TreeInfo, fi: FileInfo):
        self.info = info
        self.fi = fi
        self.scopes: list = []  # "class" / "func"

    def _name(self, name: str, class_level: bool = False, toplevel: bool = False) -> None:
        if is_dunder(name):
            return
        if toplevel or not self.scopes:
            self.fi.toplevel.add(name)
        if name not in self.fi.bound:
            self.info.names.add(name)
        if class_level:
            self.info.attrs.add(name)

    def _in_class_body(self) -> bool:
        return bool(self.scopes) and self.scopes[-1] == "class"

    def _function(self, node) -> None:
        for dec in node.decorator_list:
            self.visit(dec)
        class_level = self._in_class_body()
        self._name(node.name, class_level)
        args = node.args
        all_args = args.posonlyargs + args.args + args.kwonlyargs + [a for a in (args.vararg, args.kwarg) if a]
        fixture = any(_is_fixture_decorator(d) for d in node.decorator_list)
        self.info.signatures.setdefault(node.name, set()).update(_params(args))
        called_by_name = node.name.startswith(("test", "pytest_")) or fixture
        if called_by_name or node.name in SPECIAL_METHODS:
            self.info.kept.add(node.name)
        if called_by_name:  # its parameters are fixture, parametrize or hook argument names
            self.info.kept.update(a.arg for a in all_args)
        if fixture:
            for dec in node.decorator_list:
                if isinstance(dec, ast.Call):
                    for kw in dec.keywords:
                        if kw.arg == "name":
                            self.info.kept.update(c.value for c in _strings(kw.value))
        for d in args.defaults + [d for d in args.kw_defaults if d is not None]:
            self.visit(d)
        if node.returns:
            self.visit(node.returns)
        self.scopes.append("func")
        for a in all_args:
            self.visit(a)
        for stmt in node.body:
            self.visit(stmt)
        self.scopes.pop()

    visit_FunctionDef = visit_AsyncFunctionDef = _function

    def visit_Assign(self, node) -> None:
        if isinstance(node.value, ast.Lambda):  # ``f = lambda a: ...``: f takes a
            for t in node.targets:
                if isinstance(t, ast.Name):
                    self.info.signatures.setdefault(t.id, set()).update(_params(node.value.args))
        self.generic_visit(node)

    def visit_Lambda(self, node) -> None:
        self.scopes.append("func")
        self.generic_visit(node)
        self.scopes.pop()

    def visit_arg(self, node) -> None:
        if not is_dunder(node.arg):
            self.info.params.add(node.arg)
            self._name(node.arg)
        if node.annotation:
            self.visit(node.annotation)

    def visit_ClassDef(self, node) -> None:
        for expr in node.decorator_list + node.bases + [k.value for k in node.keywords]:
            self.visit(expr)
        self._name(node.name, self._in_class_body())
        fields = self.info.class_fields.setdefault(node.name, set())
        for stmt in node.body:
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) and stmt.name == "__init__":
                self.info.signatures.setdefault(node.name, set()).update(_params(stmt.args))
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target] if isinstance(
                stmt, ast.AnnAssign) else []
            fields.update(t.id for t in targets if isinstance(t, ast.Name))
        if node.name.startswith("Test"):
            self.info.kept.add(node.name)
        self.scopes.append("class")
        for stmt in node.body:
            self.visit(stmt)
        self.scopes.pop()

    def visit_Name(self, node) -> None:
        if isinstance(node.ctx, (ast.Store, ast.Del)):
            class_level = self._in_class_body()
            self._name(node.id, class_level)
            if class_level and not is_dunder(node.id):
                self.info.fields.add(node.id)

    def visit_Attribute(self, node) -> None:
        if (isinstance(node.ctx, (ast.Store, ast.Del)) and isinstance(node.value, ast.Name)
                and node.value.id in ("self", "cls") and "class" in self.scopes and not is_dunder(node.attr)):
            self.info.attrs.add(node.attr)
        self.generic_visit(node)

    def visit_ExceptHandler(self, node) -> None:
        if node.name:
            self._name(node.name)
        self.generic_visit(node)

    def visit_Global(self, node) -> None:
        for name in node.names:
            self._name(name, toplevel=True)

    def visit_Nonlocal(self, node) -> None:
        for name in node.names:
            self._name(name)

    def visit_MatchAs(self, node) -> None:
        if node.name:
            self._name(node.name)
        self.generic_visit(node)

    def visit_MatchStar(self, node) -> None:
        if node.name:
            self._name(node.name)

    def visit_MatchMapping(self, node) -> None:
        if node.rest:
            self._name(node.rest)
        self.generic_visit(node)

    def _type_param(self, node) -> None:  # Python 3.12: ``def f[T]()``, ``class C[**P]``
        self._name(node.name)
        self.generic_visit(node)

    visit_TypeVar = visit_ParamSpec = visit_TypeVarTuple = _type_param

    def visit_Call(self, node) -> None:
        if isinstance(node.func, ast.Attribute) and node.func.attr == "parametrize":
            argnames = node.args[0] if node.args else next(
                (k.value for k in node.keywords if k.arg == "argnames"), None)
            for c in _strings(argnames) if argnames is not None else []:
                self.info.kept.update(p.strip() for p in c.value.split(",") if p.strip())
        self.generic_visit(node)


# ------------------------------------------------------------------ the mapping


def _new_name(name: str, digits: int) -> str:
    stripped = name.lstrip("_")
    return name[:len(name) - len(stripped)] + "v" + hashlib.sha1(name.encode("utf-8")).hexdigest()[:digits]


def make_mapping(info: TreeInfo) -> dict:
    """old name -> new name for every renamable name of the tree; no new name equals another one or
    any identifier of the tree."""
    names = sorted(info.renamable())
    for digits in range(6, 41, 2):
        mapping = {n: _new_name(n, digits) for n in names}
        new = set(mapping.values())
        if len(new) == len(mapping) and not (new & info.idents):
            return mapping
    raise RenameError("could not find distinct new names")  # needs a SHA-1 collision


def build_info(files: dict, root_name: Optional[str] = None) -> TreeInfo:
    """The facts of a tree given as ``{relative path: source text}``."""
    return TreeInfo(files, root_name)


# ------------------------------------------------------------------ planning one file


class _Source:
    """A file's text and tokens, and positions converted from the AST's (UTF-8 byte columns)."""

    def __init__(self, text: str):
        self.text = text
        self.lines = text.split("\n")
        self.tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
        self.starts = [t.start for t in self.tokens]

    def pos(self, lineno: int, col: int) -> tuple:
        line = self.lines[lineno - 1]
        if not line.isascii():
            col = len(line.encode("utf-8")[:col].decode("utf-8", errors="ignore"))
        return (lineno, col)

    def first(self, pos: tuple) -> int:
        return bisect.bisect_left(self.starts, pos)

    def is_name_at(self, pos: tuple, name: str) -> bool:
        row, col = pos
        if row > len(self.lines):
            return False
        line = self.lines[row - 1]
        if line[col:col + len(name)] != name:
            return False
        after = line[col + len(name):col + len(name) + 1]
        before = line[col - 1:col] if col else ""
        return not (after.isalnum() or after == "_" or before.isalnum() or before == "_")


class _Planner(ast.NodeVisitor):
    """The renames of one file: (node, field, index, new value, position, old text, new text)."""

    def __init__(self, info: TreeInfo, fi: FileInfo, mapping: dict, src: _Source):
        self.info = info
        self.fi = fi
        self.mapping = mapping
        self.src = src
        self.sites: list = []
        self.scopes: list = []  # "class" / "func"

    # -------------------------------------------------------------- sites

    def _add(self, node, field, index, old, new, pos, old_text=None, new_text=None) -> None:
        old_text = old if old_text is None else old_text
        new_text = new if new_text is None else new_text
        if not self.src.is_name_at(pos, old_text) and old_text == old:
            raise RenameError(f"line {pos[0]}: {old!r} not found at column {pos[1]}")
        self.sites.append((node, field, index, new, pos, old_text, new_text))

    def _exact(self, node, field, index, old, lineno, col) -> None:
        self._add(node, field, index, old, self.mapping[old], self.src.pos(lineno, col))

    def _from_end(self, node, field, index, old) -> None:
        """A name that ends where ``node`` ends (an attribute, a match capture)."""
        end = self.src.pos(node.end_lineno, node.end_col_offset)
        self._add(node, field, index, old, self.mapping[old], (end[0], end[1] - len(old)))

    def _scan(self, node, field, index, old, start: tuple, after: Optional[str] = None,
              skip=("def", "async", "class", "global", "nonlocal"), nth: int = 0) -> None:
        """The ``nth`` NAME token equal to ``old`` from ``start`` (after the keyword ``after``)."""
        i = self.src.first(start)
        seen_after = after is None
        count = 0
        for tok in self.src.tokens[i:]:
            if tok.type != tokenize.NAME:
                continue
            if not seen_after:
                seen_after = tok.string == after
                continue
            if tok.string in skip:
                continue
            if tok.string == old:
                if count == nth:
                    self._add(node, field, index, old, self.mapping[old], tok.start)
                    return
                count += 1
            elif after is None and field == "name":
                break
        raise RenameError(f"line {start[0]}: no NAME token {old!r} after column {start[1]}")

    def _renamed(self, name: Optional[str]) -> bool:
        return name is not None and name in self.mapping and name not in self.fi.keep and name in self.info.names

    def _class_kept(self, name: str) -> bool:
        """A class-level name that is a library object's attribute (``def update``, ``shape: int``)."""
        return bool(self.scopes) and self.scopes[-1] == "class" and name in self.info.lib_attrs

    # -------------------------------------------------------------- module and callee judgement

    def module_of(self, expr):
        """The tree module ``expr`` names, EXTERNAL for a module or object from outside the tree,
        else None (an object of the tree, or unknown)."""
        if isinstance(expr, ast.Name):
            if expr.id in self.fi.external:
                return EXTERNAL
            return self.fi.modules.get(expr.id)
        if isinstance(expr, ast.Attribute):
            inner = self.module_of(expr.value)
            if inner is EXTERNAL:
                return EXTERNAL
            if inner is not None:
                return self.info.submodule(inner, expr.attr)
        return None

    def attr_renamed(self, node: ast.Attribute) -> bool:
        attr = node.attr
        if attr not in self.mapping:
            return False
        mod = self.module_of(node.value)
        if mod is EXTERNAL:
            return False
        if mod is not None:
            return (self.info.submodule(mod, attr) is None and attr in self.info.names
                    and self.info.module_defines(mod, attr))
        return attr in self.info.attrs

    def treeish(self, expr) -> bool:
        """Whether ``expr`` may be a callable of the tree."""
        if isinstance(expr, ast.Name):
            return self._renamed(expr.id)
        if isinstance(expr, ast.Attribute):
            return self.attr_renamed(expr)
        if isinstance(expr, ast.Lambda):
            return True
        if isinstance(expr, ast.Call):
            return self.callee_kind(expr.func, expr) != "external" or any(self.treeish(a) for a in expr.args)
        return False

    def _is_partial(self, func) -> bool:
        if isinstance(func, ast.Name):
            return func.id == "partial" and func.id in self.fi.external
        return isinstance(func, ast.Attribute) and func.attr == "partial" and self.module_of(func.value) is EXTERNAL

    def callee_kind(self, func, call) -> str:
        """"tree", "unknown" or "external" (a call whose keywords are a library's)."""
        if self._is_partial(func):
            return "unknown" if call.args and self.treeish(call.args[0]) else "external"
        if isinstance(func, ast.Name):
            if func.id in self.fi.external or func.id in self.fi.modules:
                return "external"
            if self._renamed(func.id):
                return "tree"
            return "external" if func.id in KEPT else "unknown"
        if isinstance(func, ast.Attribute):
            if is_dunder(func.attr):
                return "unknown"
            mod = self.module_of(func.value)
            if mod is EXTERNAL:
                return "external"
            if mod is not None:
                return "tree" if self.attr_renamed(func) else "external"
            return "tree" if func.attr in self.info.attrs else "external"
        if isinstance(func, ast.Call):
            if self.callee_kind(func.func, func) != "external" or any(self.treeish(a) for a in func.args):
                return "unknown"
            return "external"
        return "unknown"

    # -------------------------------------------------------------- visitors

    def visit_Name(self, node) -> None:
        if self._renamed(node.id) and not self._class_kept(node.id):
            self._exact(node, "id", None, node.id, node.lineno, node.col_offset)

    def _function(self, node) -> None:
        if self._renamed(node.name) and not self._class_kept(node.name):
            self._scan(node, "name", None, node.name, self.src.pos(node.lineno, node.col_offset))
        args = node.args
        for expr in node.decorator_list + args.defaults + [d for d in args.kw_defaults if d is not None]:
            self.visit(expr)
        if node.returns:
            self.visit(node.returns)
        self.scopes.append("func")
        self.visit(args)
        for stmt in node.body:
            self.visit(stmt)
        self.scopes.pop()

    visit_FunctionDef = visit_AsyncFunctionDef = _function

    def visit_arguments(self, node) -> None:
        for a in node.posonlyargs + node.args + node.kwonlyargs + [a for a in (node.vararg, node.kwarg) if a]:
            self.visit(a)

    def _local_scope(self, node) -> None:
        self.scopes.append("func")
        self.generic_visit(node)
        self.scopes.pop()

    visit_Lambda = visit_ListComp = visit_SetComp = visit_DictComp = visit_GeneratorExp = _local_scope

    def visit_ClassDef(self, node) -> None:
        if self._renamed(node.name) and not self._class_kept(node.name):
            self._scan(node, "name", None, node.name, self.src.pos(node.lineno, node.col_offset))
        for expr in node.decorator_list + node.bases + [k.value for k in node.keywords]:
            self.visit(expr)
        self.scopes.append("class")
        for stmt in node.body:
            self.visit(stmt)
        self.scopes.pop()

    def visit_arg(self, node) -> None:
        if self._renamed(node.arg):
            self._exact(node, "arg", None, node.arg, node.lineno, node.col_offset)
        if node.annotation:
            self.visit(node.annotation)

    def visit_Attribute(self, node) -> None:
        if self.attr_renamed(node):
            self._from_end(node, "attr", None, node.attr)
        self.visit(node.value)

    def visit_Call(self, node) -> None:
        kind = None
        for kw in node.keywords:
            if kw.arg is None or kw.arg not in self.mapping:
                continue
            if kind is None:
                kind = self._keyword_kind(node)
            if kind == "fields":
                ok = kw.arg in self.info.fields and kw.arg not in self.info.lib_attrs
            elif kind == "external":
                ok = False
            else:
                takes = self.info.signatures.get(self._callee_name(node))
                if takes is not None:  # the tree's functions (or classes) of that name
                    ok = kw.arg in takes
                else:  # a callable the syntax does not name (``jax.jit(f)(n=1)``, ``fns[i](n=1)``)
                    ok = kw.arg in self.info.params or (
                        kw.arg in self.info.fields and kw.arg not in self.info.lib_attrs)
            if ok and kw.arg not in self.fi.keep:
                self._exact(kw, "arg", None, kw.arg, kw.lineno, kw.col_offset)
        for kw in node.keywords:
            if kw.arg in STATIC_NAME_KEYWORDS and self._static_names_apply(node):
                for const in _strings(kw.value):
                    if const.value in self.info.params:
                        self._string(const)
        self.generic_visit(node)

    def _callee_name(self, call) -> Optional[str]:
        """The name of the callable a call's keywords go to: ``f`` in ``f()``, ``m.f()`` and
        ``partial(f, ...)``."""
        func = call.func
        if self._is_partial(func) and call.args:
            func = call.args[0]
        if isinstance(func, ast.Name):
            return func.id
        if isinstance(func, ast.Attribute):
            return func.attr
        return None

    def _keyword_kind(self, call) -> str:
        func = call.func
        if (isinstance(func, ast.Attribute) and func.attr in ("replace", "_replace")) or (
                isinstance(func, ast.Name) and func.id == "replace" and func.id in self.fi.external):
            return "fields"
        return self.callee_kind(func, call)

    def _static_names_apply(self, call) -> bool:
        if self._is_partial(call.func) or not call.args:
            return True
        return self.treeish(call.args[0])

    def _string(self, const) -> None:
        old = const.value
        if old not in self.mapping or old in self.fi.keep:
            return
        if const.lineno != const.end_lineno:
            return
        start = self.src.pos(const.lineno, const.col_offset)
        end = self.src.pos(const.end_lineno, const.end_col_offset)
        i = self.src.first(start)
        if i >= len(self.src.tokens):
            return
        tok = self.src.tokens[i]
        if tok.type != tokenize.STRING or tok.start != start or tok.end != end:
            return  # implicit concatenation, or an f-string part
        raw = tok.string
        q = len(raw) - len(raw.lstrip("rRbBuUfF"))
        prefix, body = raw[:q], raw[q:]
        quote = body[:3] if body[:3] in ('"""', "'''") else body[:1]
        if "f" in prefix.lower() or "b" in prefix.lower() or body[len(quote):-len(quote)] != old:
            return  # written with escapes: left as it is
        new = self.mapping[old]
        self.sites.append((const, "value", None, new, start, raw, prefix + quote + new + quote))

    def visit_ImportFrom(self, node) -> None:
        target = self.info.resolve(self.fi.rel, node.module, node.level)
        if target is None:
            return
        for alias in node.names:
            if alias.name == "*" or self.info.submodule(target, alias.name) is not None:
                continue
            if self.info.alias_renamed(self.fi, alias, target):
                self._exact(alias, "name", None, alias.name, alias.lineno, alias.col_offset)

    def visit_Import(self, node) -> None:
        return

    def visit_ExceptHandler(self, node) -> None:
        if self._renamed(node.name):
            self._scan(node, "name", None, node.name, self.src.pos(node.lineno, node.col_offset), after="as")
        self.generic_visit(node)

    def _global(self, node) -> None:
        start = self.src.pos(node.lineno, node.col_offset)
        for i, name in enumerate(node.names):
            if self._renamed(name):
                self._scan(node, "names", i, name, start, nth=node.names[:i].count(name))

    visit_Global = visit_Nonlocal = _global

    def visit_JoinedStr(self, node) -> None:
        """``f"{x=}"`` holds the expression's text in a constant: it changes with the text."""
        before = len(self.sites)
        self.generic_visit(node)
        inner = [s for s in self.sites[before:] if s[4] is not None]
        if not inner:
            return
        for prev, value in zip(node.values, node.values[1:]):
            if not (isinstance(prev, ast.Constant) and isinstance(prev.value, str)
                    and isinstance(value, ast.FormattedValue)):
                continue
            expr = value.value
            if expr.lineno != expr.end_lineno:
                continue
            row, start = self.src.pos(expr.lineno, expr.col_offset)
            end = self.src.pos(expr.end_lineno, expr.end_col_offset)[1]
            line = self.src.lines[row - 1]
            if not line[end:].lstrip().startswith("="):
                continue  # only ``{expr=}`` (after an expression, "=" can only be that)
            old = new = line[start:end]
            for site in sorted((s for s in inner if s[4][0] == row and start <= s[4][1] < end),
                               key=lambda s: -s[4][1]):
                off = site[4][1] - start
                new = new[:off] + site[6] + new[off + len(site[5]):]
            k = prev.value.rfind(old)
            if new != old and k >= 0:
                self.sites.append((prev, "value", None, prev.value[:k] + new + prev.value[k + len(old):],
                                   None, None, None))

    def _type_param(self, node) -> None:
        if self._renamed(node.name):
            self._scan(node, "name", None, node.name, self.src.pos(node.lineno, node.col_offset))
        self.generic_visit(node)

    visit_TypeVar = visit_ParamSpec = visit_TypeVarTuple = _type_param

    def visit_MatchAs(self, node) -> None:
        if self._renamed(node.name):
            self._from_end(node, "name", None, node.name)
        self.generic_visit(node)

    def visit_MatchStar(self, node) -> None:
        if self._renamed(node.name):
            self._from_end(node, "name", None, node.name)

    def visit_MatchMapping(self, node) -> None:
        self.generic_visit(node)
        if self._renamed(node.rest):
            # ``**rest`` is the last NAME before the closing brace
            start = self.src.pos(node.lineno, node.col_offset)
            end = self.src.pos(node.end_lineno, node.end_col_offset)
            toks = [t for t in self.src.tokens[self.src.first(start):self.src.first(end)]
                    if t.type == tokenize.NAME and t.string == node.rest]
            if not toks:
                raise RenameError(f"line {start[0]}: no **{node.rest}")
            self._add(node, "rest", None, node.rest, self.mapping[node.rest], toks[-1].start)

    def visit_MatchClass(self, node) -> None:
        for i, (attr, pattern) in enumerate(zip(node.kwd_attrs, node.kwd_patterns)):
            if attr in self.mapping and attr in self.info.attrs:
                j = self.src.first(self.src.pos(pattern.lineno, pattern.col_offset)) - 1
                while j >= 0 and self.src.tokens[j].type != tokenize.NAME:
                    j -= 1
                if j < 0 or self.src.tokens[j].string != attr:
                    raise RenameError(f"line {pattern.lineno}: no keyword pattern {attr!r}")
                self._add(node, "kwd_attrs", i, attr, self.mapping[attr], self.src.tokens[j].start)
        self.generic_visit(node)

    def _all_strings(self, node, value) -> None:
        """The strings of ``__all__`` (module-level names), ``__slots__`` and ``__match_args__``
        (attributes)."""
        if value is None:
            return
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        for t in targets:
            if isinstance(t, ast.Name) and t.id in ("__all__", "__slots__", "__match_args__"):
                names = self.info.names if t.id == "__all__" else self.info.attrs
                for const in _strings(value):
                    if const.value in names:
                        self._string(const)

    def visit_Assign(self, node) -> None:
        self._all_strings(node, node.value)
        self.generic_visit(node)

    def visit_AugAssign(self, node) -> None:
        self._all_strings(node, node.value)
        self.generic_visit(node)

    def visit_AnnAssign(self, node) -> None:
        self._all_strings(node, node.value)
        self.generic_visit(node)


def _plan(text: str, mapping: dict, info: Optional[TreeInfo], path: Optional[str]):
    if info is None:
        path = path or "module.py"
        info = build_info({path: text})
    if path is None:
        if len(info.files) != 1:
            raise ValueError("path is needed to rename a file of a tree of several files")
        path = next(iter(info.files))
    path = path.replace(os.sep, "/")
    fi = info.files.get(path)
    if fi is None:
        raise ValueError(f"{path} is not a parseable file of the tree")
    tree = _parse(text)
    src = _Source(text)
    planner = _Planner(info, fi, mapping, src)
    planner.visit(tree)
    return tree, src, planner.sites


def _apply_to_tree(sites) -> None:
    for node, field, index, new, _pos, _old, _new in sites:
        if index is None:
            setattr(node, field, new)
        else:
            getattr(node, field)[index] = new


def renamed_ast(text: str, mapping: dict, info: Optional[TreeInfo] = None, path: Optional[str] = None) -> ast.Module:
    """The AST of ``text`` with the renames :func:`rename_source` makes applied to its nodes."""
    tree, _src, sites = _plan(text, mapping, info, path)
    _apply_to_tree(sites)
    return tree


def rename_source(text: str, mapping: dict, info: Optional[TreeInfo] = None, path: Optional[str] = None,
                  verify: bool = True) -> str:
    """``text`` with the identifiers of ``mapping`` renamed where they are user-chosen. ``info`` and
    ``path``: the tree the file belongs to (:func:`build_info`) and its path in it; without them the
    text is taken as a tree of one file. Raises RenameError when the result cannot be verified."""
    tree, src, sites = _plan(text, mapping, info, path)
    edits: dict = {}
    for _node, _field, _index, _new, pos, old_text, new_text in sites:
        if pos is None:
            continue  # a change of the tree that follows from the text's (``f"{x=}"``)
        if edits.get(pos, (old_text, new_text)) != (old_text, new_text):
            raise RenameError(f"two renames at line {pos[0]} column {pos[1]}")
        edits[pos] = (old_text, new_text)
    lines = src.lines[:]
    by_row: dict = {}
    for (row, col), (old, new) in edits.items():
        by_row.setdefault(row, []).append((col, old, new))
    for row, items in by_row.items():
        line = lines[row - 1]
        last = None
        for col, old, new in sorted(items, reverse=True):
            if line[col:col + len(old)] != old or (last is not None and col + len(old) > last):
                raise RenameError(f"line {row}: cannot replace {old!r} at column {col}")
            line = line[:col] + new + line[col + len(old):]
            last = col
        lines[row - 1] = line
    out = "\n".join(lines)
    if verify:
        try:
            new_tree = _parse(out)
        except SyntaxError as e:
            raise RenameError(f"renamed text does not parse: {e}") from None
        _apply_to_tree(sites)
        if ast.dump(new_tree) != ast.dump(tree):
            raise RenameError("renamed text does not parse to the renamed tree")
    return out


# ------------------------------------------------------------------ trees


def _read(path: str):
    """(text, encoding) of a Python file, or None when it cannot be decoded."""
    with open(path, "rb") as fh:
        data = fh.read()
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
        text = data.decode(encoding)
    except (SyntaxError, UnicodeError, LookupError):
        return None
    if "\r" in text.replace("\r\n", ""):
        return None  # a lone \r: ast and tokenize count its lines differently
    return text, encoding


def _walk(src: str):
    """(relative path, absolute path, is_symlink) of every file under ``src``, and its folders."""
    files, dirs = [], []
    for dirpath, dirnames, filenames in os.walk(src):
        dirnames.sort()
        rel_dir = os.path.relpath(dirpath, src)
        rel_dir = "" if rel_dir == "." else rel_dir
        for d in dirnames:
            full = os.path.join(dirpath, d)
            if os.path.islink(full):
                files.append((os.path.join(rel_dir, d), full, True))
            else:
                dirs.append(os.path.join(rel_dir, d))
        for f in sorted(filenames):
            full = os.path.join(dirpath, f)
            files.append((os.path.join(rel_dir, f), full, os.path.islink(full)))
    return files, dirs


def rename_tree(src: str, dest: str, warnings: Optional[list] = None) -> dict:
    """Copy ``src`` (a file or a folder) to ``dest`` with its ``.py`` files renamed; returns the
    mapping used (old name -> new name). Files that cannot be renamed are copied unchanged and
    described in ``warnings`` (a list, when given)."""
    warnings = warnings if warnings is not None else []
    src_abs, dest_abs = os.path.realpath(src), os.path.realpath(dest)
    if os.path.isdir(src_abs):
        if dest_abs == src_abs or dest_abs.startswith(src_abs + os.sep):
            raise ValueError("DEST must not be inside SRC")
        files, dirs = _walk(src)
        root_name = os.path.basename(src_abs)
        dest_of = lambda rel: os.path.join(dest, rel)  # noqa: E731
    else:
        if os.path.isdir(dest):
            dest = os.path.join(dest, os.path.basename(src))
        files, dirs = [(os.path.basename(src), src, os.path.islink(src))], []
        root_name = None
        dest_of = lambda rel: dest  # noqa: E731
    texts, encodings = {}, {}
    for rel, full, link in files:
        if not link and rel.endswith(".py") and os.path.isfile(full):
            try:
                read = _read(full)
            except OSError as e:
                warnings.append(f"{rel}: cannot be read ({e}): copied unchanged")
                continue
            if read is None:
                warnings.append(f"{rel}: cannot be decoded (or has a lone \\r): copied unchanged")
                continue
            key = rel.replace(os.sep, "/")
            texts[key], encodings[key] = read
    info = build_info(texts, root_name)
    for key in texts:
        if key not in info.files:
            warnings.append(f"{key}: does not parse: copied unchanged")
    mapping = make_mapping(info)
    if os.path.isdir(src_abs):
        os.makedirs(dest, exist_ok=True)
    for d in dirs:
        os.makedirs(dest_of(d), exist_ok=True)
    for rel, full, link in files:
        out = dest_of(rel)
        key = rel.replace(os.sep, "/")
        parent = os.path.dirname(out)
        if parent:
            os.makedirs(parent, exist_ok=True)
        if link:
            if os.path.lexists(out):
                os.remove(out)
            os.symlink(os.readlink(full), out)
            continue
        if key in info.files:
            try:
                text = rename_source(texts[key], mapping, info, key)
            except (RenameError, tokenize.TokenError, SyntaxError, ValueError, RecursionError) as e:
                warnings.append(f"{key}: {e}: copied unchanged")
            else:
                with open(out, "w", encoding=encodings[key], newline="") as fh:
                    fh.write(text)
                continue
        try:
            shutil.copyfile(full, out)
        except OSError as e:
            warnings.append(f"{rel}: cannot be copied ({e})")
    return mapping


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("src", help="a .py file or a folder")
    parser.add_argument("dest", help="where the renamed copy goes")
    parser.add_argument("--mapping", metavar="FILE", help="write the mapping (old -> new) as JSON")
    parser.add_argument("-q", "--quiet", action="store_true", help="print only the warnings")
    args = parser.parse_args(argv)
    if not os.path.exists(args.src):
        parser.error(f"{args.src}: no such file or folder")
    warnings: list = []
    try:
        mapping = rename_tree(args.src, args.dest, warnings)
    except ValueError as e:
        parser.error(str(e))
    for w in warnings:
        print(f"warning: {w}", file=sys.stderr)
    if args.mapping:
        with open(args.mapping, "w", encoding="utf-8") as fh:
            json.dump(mapping, fh, indent=1, sort_keys=True)
    if not args.quiet:
        print(f"{args.src} -> {args.dest}: {len(mapping)} names renamed, {len(warnings)} files copied unchanged")
    return 0


if __name__ == "__main__":
    sys.exit(main())
