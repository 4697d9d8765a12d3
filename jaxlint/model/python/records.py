"""The Python records of a module: loops, contexts, functions, classes, scopes, bindings. What JAX
makes of them (traced functions, jit wrappers, ...) is the facts layer's (facts/jaxrecords.py)."""

from __future__ import annotations

import ast
from typing import Optional, Union

from .syntax import _names_in

FuncNode = Union[ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda]
_DICT_VIEWS = frozenset({"items", "keys", "values"})
_COMPS = (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)

# --------------------------------------------------------------------------- records


class Loop:
    """A ``for``/``while`` loop or a comprehension: where it is, what runs in it, and what its syntax
    says of its trip count."""

    __slots__ = ("node", "kind", "parent", "children", "calls", "iter_nodes", "depth", "bounded", "ranged")

    def __init__(self, node: ast.AST, kind: str, parent: Optional["Loop"], depth: int):
        self.node = node
        self.kind = kind  # "for" | "while" | "comprehension"
        self.parent = parent
        self.children: list[Loop] = []
        self.calls: list[ast.Call] = []  # calls that run per iteration, not inside a nested loop
        self.iter_nodes: list[tuple[ast.AST, "Scope"]] = []  # iterables of nested comprehension generators
        self.depth = depth
        iterable = loop_iterable_of(node)
        # A loop over a literal list of options or a short literal range runs a bounded, small number
        # of times: per-iteration costs there are per-call costs of the code around it.
        self.bounded = iterable is not None and _is_bounded(iterable)
        # A loop over steps rather than items: ``while``, or ``range``/``count``/``trange`` iteration.
        self.ranged = kind == "while" or (iterable is not None and _is_steplike(iterable))

    def all_calls(self):
        """Every call that runs in an iteration, nested loops included."""
        yield from self.calls
        for child in self.children:
            yield from child.all_calls()

    def target_names(self) -> set[str]:
        node = self.node
        if isinstance(node, (ast.For, ast.AsyncFor)):
            return _names_in(node.target)
        if isinstance(node, _COMPS):
            out: set[str] = set()
            for gen in node.generators:
                out |= _names_in(gen.target)
            return out
        return set()


def loop_iterable_of(node: ast.AST) -> Optional[ast.AST]:
    """What a ``for`` loop or a comprehension iterates over (its first generator's iterable)."""
    if isinstance(node, (ast.For, ast.AsyncFor)):
        return node.iter
    generators = getattr(node, "generators", None)
    return generators[0].iter if generators else None


def _is_bounded(it: ast.AST) -> bool:
    if isinstance(it, (ast.Tuple, ast.List, ast.Set, ast.Dict)):
        return True
    if isinstance(it, ast.Call) and isinstance(it.func, ast.Name):
        if it.func.id == "range" and it.args and all(isinstance(a, ast.Constant) and isinstance(a.value, int)
                                                    for a in it.args):
            vals = [a.value for a in it.args]
            try:
                return len(range(*vals)) <= BOUNDED_TRIPS
            except (TypeError, ValueError):
                return False
        if it.func.id in ("enumerate", "zip", "reversed", "product") and it.args:
            return all(_is_bounded(a) for a in it.args if not isinstance(a, ast.Starred))
    if (isinstance(it, ast.Call) and isinstance(it.func, ast.Attribute) and it.func.attr == "product"
            and it.args):
        return all(_is_bounded(a) for a in it.args if not isinstance(a, ast.Starred))
    return False


def _element(expr: ast.AST, index: int) -> ast.AST:
    """Element ``index`` of a tuple/list literal (the whole expression when it is not one)."""
    if isinstance(expr, (ast.Tuple, ast.List)) and index < len(expr.elts) and not any(
            isinstance(x, ast.Starred) for x in expr.elts):
        return expr.elts[index]
    return expr


def _is_steplike(it: ast.AST) -> bool:
    while isinstance(it, ast.Call) and it.args:
        name = it.func.attr if isinstance(it.func, ast.Attribute) else getattr(it.func, "id", "")
        if name in ("range", "count", "trange", "islice"):
            return True
        if name in ("enumerate", "tqdm", "reversed"):
            it = it.args[0]
            continue
        return False
    return isinstance(it, ast.Call) and getattr(it.func, "attr", getattr(it.func, "id", "")) == "count"


BOUNDED_TRIPS = 16
# A loop known to run at most this many iterations in all (nested loops multiplied, in a function
# that does not itself repeat) syncs at most this many times: at ~1 ms a sync, at most ~0.1 s in
# all, less than compiling the step it runs once. Per-iteration syncs there are not worth changing.
FEW_ITERATIONS = 100


class Context:
    """Where a node runs. Shared by all nodes with the same surroundings."""

    __slots__ = ("scope", "loops", "guards", "branches", "raising")

    def __init__(self, scope: "Scope", loops: tuple = (), guards: tuple = (), branches: tuple = (),
                 raising: bool = False):
        self.scope = scope
        self.loops = loops  # Loop records, outermost first, within the node's own function
        self.guards = guards  # (if-test expression, number of loops around that if)
        self.branches = branches  # (id of an If, 0 for its body / 1 for its else): paths that exclude each other
        self.raising = raising  # inside a ``raise`` statement or an ``assert`` message: runs at most once

    def __repr__(self) -> str:
        return f"Context(loops={len(self.loops)}, guards={len(self.guards)}, raising={self.raising})"


class FunctionInfo:
    """A function, method or lambda: where it is and what its body holds (calls, returns, subscripts,
    loops), as the walk records them. What JAX does with it is the facts layer's
    (jaxlint/model/facts/jaxrecords.py extends this record with it)."""

    def __init__(self, node: FuncNode, name: str, qualname: str, scope: "Scope", parent: Optional["FunctionInfo"],
                 cls: Optional["ClassInfo"], params: list, kwonly: list, decorators: Optional[list] = None):
        self.node = node
        self.name = name
        self.qualname = qualname
        self.scope = scope  # the function's own scope
        self.parent = parent
        self.cls = cls
        self.params = params  # positional parameters in order (posonly + regular)
        self.kwonly = kwonly
        self.decorators = [] if decorators is None else decorators  # resolved qualnames of decorators
        self.calls: list = []  # calls in the body, not in nested functions
        self.returns: list = []  # returned expressions
        self.subscripts: list = []  # x[...] reads in the body, not in nested functions
        self.loops: list = []  # loops in the body, not in nested functions

    def __repr__(self) -> str:
        return f"FunctionInfo({self.qualname!r}, line {getattr(self.node, 'lineno', '?')})"

    @property
    def vararg(self) -> Optional[str]:
        """The name of its ``*args`` parameter, or None."""
        return getattr(getattr(self.node.args, "vararg", None), "arg", None)

    @property
    def is_method(self) -> bool:
        """A function of a class whose calls through an instance bind its first parameter (a
        ``@staticmethod`` binds none: ``self.extract(a, t, shape)`` passes ``a`` as its first)."""
        return self.cls is not None and not isinstance(self.node, ast.Lambda) and not any(
            isinstance(d, ast.Name) and d.id == "staticmethod" for d in self.node.decorator_list)

    def default(self, name: str) -> Optional[ast.AST]:
        """The default value expression of parameter ``name``, or None when it has none."""
        a = self.node.args
        positional = list(self.params)
        if name in positional:
            i = positional.index(name) - (len(positional) - len(a.defaults))
            return a.defaults[i] if i >= 0 else None
        if name in self.kwonly:
            return a.kw_defaults[self.kwonly.index(name)]
        return None


def runs_as_test(f: "FunctionInfo", collected: bool = True) -> bool:
    """Whether the test frameworks run ``f`` as a test or a fixture, by their discovery rules (the
    one definition jaxlint uses): pytest's and unittest's ``test*`` functions and methods, ``*_test``
    functions, ``setUp*`` fixtures, and every method of a ``Test*`` class. ``collected``: whether
    pytest collects the module's functions (:func:`.testdiscovery.collects_tests`); where it does
    not, only the methods of a ``Test*`` class or of a class derived from a ``*TestCase`` (unittest
    runs those from any module) are tests."""
    name = f.name
    named = name.startswith(("test", "setUp")) or name.endswith("_test")
    if f.cls is None:
        return named and collected
    cls = f.cls.node
    if cls.name.startswith("Test"):
        return True
    if not named:
        return False
    return collected or any(_last_name(b).endswith(("TestCase", "Test")) for b in cls.bases)


def _last_name(node: ast.AST) -> str:
    return node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name) else ""


class ClassInfo:
    def __init__(self, node: ast.ClassDef, methods: Optional[dict] = None, self_attrs: Optional[dict] = None,
                 scope: Optional["Scope"] = None):
        self.node = node
        self.methods: dict = {} if methods is None else methods  # name -> FunctionInfo
        self.self_attrs: dict = {} if self_attrs is None else self_attrs  # attribute -> [value expressions assigned to self.attr]
        self.scope = scope  # the class body's scope (its bindings: methods, class attributes)

    def __repr__(self) -> str:
        return f"ClassInfo({self.node.name!r})"


class Scope:
    __slots__ = ("node", "kind", "parent", "imports", "import_src", "events", "func", "cls", "globals", "defs")

    def __init__(self, node: ast.AST, kind: str, parent: Optional["Scope"]):
        self.node = node
        self.kind = kind  # "module" | "function" | "class"
        self.parent = parent
        self.imports: dict[str, str] = {}
        self.import_src: dict[str, tuple] = {}  # local name -> (module, imported name or None, level)
        self.events: dict[str, list[Binding]] = {}
        self.func: Optional[FunctionInfo] = None
        self.cls: Optional[ClassInfo] = None
        self.globals: set[str] = set()
        self.defs: dict[str, FunctionInfo] = {}

    def within_parent_of(self, f: "FunctionInfo") -> bool:
        """Whether this scope is the function ``f`` is defined in, or a function nested in it (``_soft_reset``
        beside ``_step`` in an environment's ``__init__``): a call here reaches that fixed ``f`` by name."""
        s: Optional[Scope] = self
        while s is not None and s.kind == "function":
            if f.scope.parent is s:
                return True
            s = s.parent
        return False


# The path index of a starred unpacking target: ``a, *rest = xs`` binds ``rest`` at path (STARRED,).
STARRED = 10 ** 6


class Binding:
    """One binding of a name: a parameter, assignment, loop target, def, ...

    ``kind`` is "param" | "assign" | "aug" | "for" | "def" | "other"; ``value`` is the assigned
    expression (the iterable for "for", the parameter's name for "param"); ``path`` the index
    path into a tuple-unpacking target (None when the whole value is bound); ``node`` the binding
    statement or definition; ``loops`` the loops around the binding in its function."""

    __slots__ = ("pos", "kind", "value", "path", "node", "scope", "loops")

    def __init__(self, pos, kind, value, path, node, scope, loops=()):
        self.loops = loops
        self.pos = pos
        self.kind = kind
        self.value = value
        self.path = path
        self.node = node
        self.scope = scope

    @property
    def plain_assign(self) -> bool:
        """``name = value``: the whole value bound to the name (not unpacked, augmented or looped)."""
        return self.kind == "assign" and self.path is None


