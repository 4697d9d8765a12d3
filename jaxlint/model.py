"""The module model: one walk over a module's AST that every rule reads.

It answers the questions the rules need and nothing more:

* what a name means (imports and aliases, with local shadowing): :meth:`ModuleModel.resolve`;
* which functions are traced (jit/pmap, transforms, lax bodies, same-module callees),
  with static arguments and which parameters hold tracers: :class:`FunctionInfo`;
* where a node runs: its scope, the loops around it in its own function, and the ``if``
  tests guarding it: :class:`Context`, :meth:`ModuleModel.hot_loop`;
* which expressions hold JAX values: :meth:`ModuleModel.is_jax`;
* the jit wrappers created in the module: :attr:`ModuleModel.jit_wraps`.

The walk records contexts and bindings; everything that needs inference (value kinds,
callable lookups) is computed lazily and memoized, so rules only pay for what they ask.
"""

from __future__ import annotations

import ast
import builtins
from dataclasses import dataclass, field
from typing import Iterator, Optional, Union

from . import names as N

FuncNode = Union[ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda]
_BUILTINS = frozenset(dir(builtins))
_DICT_VIEWS = frozenset({"items", "keys", "values"})
_COMPS = (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)


# --------------------------------------------------------------------------- records


class Loop:
    """A ``for``/``while`` loop or a comprehension."""

    __slots__ = ("node", "kind", "parent", "children", "calls", "iter_jax_nodes", "_jax_work", "_direct",
                 "depth", "bounded", "steplike", "ranged")

    def __init__(self, node: ast.AST, kind: str, parent: Optional["Loop"], depth: int):
        self.node = node
        self.kind = kind  # "for" | "while" | "comprehension"
        self.parent = parent
        self.children: list[Loop] = []
        self.calls: list[ast.Call] = []  # calls that run per iteration, not inside a nested loop
        self.iter_jax_nodes: list[tuple[ast.AST, "Scope"]] = []  # iterables of nested comprehension generators
        self._jax_work: Optional[bool] = None
        self._direct: Optional[bool] = None
        self.depth = depth
        iterable = getattr(node, "iter", None)
        if isinstance(node, _COMPS):
            iterable = node.generators[0].iter
        # A loop over a literal list of options or a short literal range runs a bounded, small number
        # of times: per-iteration costs there are per-call costs of the code around it.
        self.bounded = iterable is not None and _is_bounded(iterable)
        # Whether plain array operations in the body count as JAX work: not in loops over the
        # parts of a structure (``for k, v in tree.items()``), where they are trace-time bookkeeping.
        self.steplike = kind == "while" or iterable is None or not _is_structural(iterable)
        # A loop over steps rather than items: ``while``, or ``range``/``count``/``trange`` iteration.
        self.ranged = kind == "while" or (iterable is not None and _is_steplike(iterable))

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


def _waits(call: ast.Call) -> bool:
    """``block_until_ready`` waits for work already dispatched; it dispatches none."""
    f = call.func
    return isinstance(f, ast.Attribute) and f.attr == "block_until_ready"


def _is_structural(it: ast.AST) -> bool:
    """Iteration over the parts of one structure (dict items, zipped leaves, a pytree's leaves):
    trace-time bookkeeping in library code rather than a loop over steps or batches."""
    while isinstance(it, ast.Call):
        f = it.func
        name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")
        if name in _DICT_VIEWS or name in ("zip", "leaves", "tree_leaves", "tree_flatten", "flatten",
                                           "tree_flatten_with_path", "leaves_with_path", "safe_zip"):
            return True
        if name in ("enumerate", "reversed", "sorted", "list", "tuple") and it.args:
            it = it.args[0]
            continue
        return False
    return False


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


@dataclass(eq=False)
class Context:
    """Where a node runs. Shared by all nodes with the same surroundings."""

    scope: "Scope"
    loops: tuple = ()  # Loop records, outermost first, within the node's own function
    guards: tuple = ()  # (if-test expression, number of loops around that if)
    branches: tuple = ()  # (id of an If, 0 for its body / 1 for its else): paths that exclude each other
    raising: bool = False  # inside a ``raise`` statement or an ``assert`` message: runs at most once


@dataclass(eq=False)
class FunctionInfo:
    node: FuncNode
    name: str
    qualname: str
    scope: "Scope"  # the function's own scope
    parent: Optional["FunctionInfo"]
    cls: Optional["ClassInfo"]
    params: list[str]  # positional parameters in order (posonly + regular)
    kwonly: list[str]
    decorators: list[str] = field(default_factory=list)  # resolved qualnames of decorators
    traced: bool = False
    trace_reasons: list[str] = field(default_factory=list)
    jit_entry: Optional["JitWrap"] = None  # set when the function itself is compiled by a jit wrapper
    static_argnums: set = field(default_factory=set)
    static_argnames: set = field(default_factory=set)
    tracer_params: set = field(default_factory=set)
    calls: list = field(default_factory=list)  # calls in the body, not in nested functions
    returns: list = field(default_factory=list)  # returned expressions
    subscripts: list = field(default_factory=list)  # x[...] reads in the body, not in nested functions
    loops: list = field(default_factory=list)  # loops in the body, not in nested functions

    @property
    def is_method(self) -> bool:
        return self.cls is not None and not isinstance(self.node, ast.Lambda)

    def static_names(self) -> set[str]:
        out = set(self.static_argnames)
        for i in self.static_argnums:
            if -len(self.params) <= i < len(self.params):
                out.add(self.params[i])
        return out


@dataclass(eq=False)
class ClassInfo:
    node: ast.ClassDef
    methods: dict = field(default_factory=dict)  # name -> FunctionInfo
    self_attrs: dict = field(default_factory=dict)  # attribute -> [value expressions assigned to self.attr]


@dataclass(eq=False)
class JitWrap:
    """A place where a jit/pmap wrapper is created: a call ``jax.jit(f, ...)`` or a decorator."""

    node: ast.AST  # the Call, or the decorated FunctionDef
    kind: str  # "jit" | "pmap" | "filter_jit"
    spelling: str  # how the user wrote the wrapper, e.g. "jax.jit"
    target: Optional[ast.AST]  # the wrapped callable expression (None for decorators)
    func: Optional[FunctionInfo]  # the decorated function, for decorators
    ctx: Context
    static_argnums: set = field(default_factory=set)
    static_argnames: set = field(default_factory=set)
    decorator: bool = False
    inline: bool = False  # jax.jit(..., inline=True): meant to be inlined into an enclosing trace
    params: tuple = ()  # positional parameters, for wrappers summarized from another module (func is None)

    def positional_params(self) -> list:
        return list(self.func.params) if self.func is not None else list(self.params)


class Scope:
    __slots__ = ("node", "kind", "parent", "imports", "import_src", "events", "func", "cls", "globals", "defs")

    def __init__(self, node: ast.AST, kind: str, parent: Optional["Scope"]):
        self.node = node
        self.kind = kind  # "module" | "function" | "class"
        self.parent = parent
        self.imports: dict[str, str] = {}
        self.import_src: dict[str, tuple] = {}  # local name -> (module, imported name or None, level)
        self.events: dict[str, list[_Event]] = {}
        self.func: Optional[FunctionInfo] = None
        self.cls: Optional[ClassInfo] = None
        self.globals: set[str] = set()
        self.defs: dict[str, FunctionInfo] = {}


class _Event:
    """One binding of a name: a parameter, assignment, loop target, def, ..."""

    __slots__ = ("pos", "kind", "value", "path", "node", "scope", "loops")

    def __init__(self, pos, kind, value, path, node, scope, loops=()):
        self.loops = loops  # the loops around the binding, in its function
        self.pos = pos
        self.kind = kind  # "param" | "assign" | "aug" | "for" | "def" | "other"
        self.value = value
        self.path = path  # index path into a tuple-unpacking target
        self.node = node
        self.scope = scope


def _names_in(target: ast.AST) -> set[str]:
    if isinstance(target, ast.Name):
        return {target.id}
    if isinstance(target, (ast.Tuple, ast.List)):
        out: set[str] = set()
        for elt in target.elts:
            out |= _names_in(elt)
        return out
    if isinstance(target, ast.Starred):
        return _names_in(target.value)
    return set()


def _contains(node: ast.AST, pos: tuple) -> bool:
    return (node.lineno, node.col_offset) <= pos <= _end(node)


def _pos(node: ast.AST) -> tuple:
    return (node.lineno, node.col_offset)


def _end(node: ast.AST) -> tuple:
    return (node.end_lineno or node.lineno, node.end_col_offset or 0)


def _int_set(node: Optional[ast.AST]) -> set:
    """Literal ints (or one int) from a static_argnums-like argument."""
    if node is None:
        return set()
    if isinstance(node, ast.Constant) and isinstance(node.value, int) and not isinstance(node.value, bool):
        return {node.value}
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and isinstance(node.operand, ast.Constant):
        v = node.operand.value
        return {-v} if isinstance(v, int) else set()
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        out: set = set()
        for elt in node.elts:
            out |= _int_set(elt)
        return out
    return set()


def _str_set(node: Optional[ast.AST]) -> set:
    if node is None:
        return set()
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return {node.value}
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        out: set = set()
        for elt in node.elts:
            out |= _str_set(elt)
        return out
    return set()


def call_arg(call: ast.Call, index: int, keyword: Optional[str]) -> Optional[ast.AST]:
    """The argument at a position or keyword, if the call spells it out."""
    if keyword is not None:
        for kw in call.keywords:
            if kw.arg == keyword:
                return kw.value
    if index is not None and index < len(call.args):
        arg = call.args[index]
        if not any(isinstance(a, ast.Starred) for a in call.args[: index + 1]):
            return arg
    return None


def _kw(call: ast.Call, name: str) -> Optional[ast.AST]:
    for kw in call.keywords:
        if kw.arg == name:
            return kw.value
    return None


# --------------------------------------------------------------------------- the model


class ModuleModel:
    """Everything the rules know about one module. Build with :func:`build_model`."""

    def __init__(self, tree: ast.Module):
        self.tree = tree
        self.module_scope = Scope(tree, "module", None)
        self.scopes: list[Scope] = [self.module_scope]  # every scope, for dispose()
        self.functions: list[FunctionInfo] = []
        self.func_of_node: dict[int, FunctionInfo] = {}
        self.classes: dict[int, ClassInfo] = {}
        self.loops: list[Loop] = []
        self.calls: list[ast.Call] = []
        self.ifs: list[ast.AST] = []  # If / While / IfExp / Assert nodes whose test is evaluated as bool
        self.joined_strs: list[ast.JoinedStr] = []
        self.percent_formats: list[ast.BinOp] = []
        self.stores: list[tuple] = []  # (Subscript or Attribute target, "assign" | "aug" | "del")
        self.expr_values: set[int] = set()  # ids of expressions evaluated as statements (results unused)
        self.bool_nodes: list[ast.AST] = []  # BoolOp and ``not`` nodes: they call bool() on operands
        self.decls: list[ast.AST] = []  # Global / Nonlocal statements
        self.calls_by_name: dict[str, list] = {}  # last name of the callee (``np.asarray`` -> asarray) -> calls
        self.attr_names: set[str] = set()  # every attribute name read in the module
        self.jit_wraps: list[JitWrap] = []
        self.ctx: dict[int, Context] = {}  # id(node) -> Context for calls, statements, defs, lambdas
        self.imports_jax = False
        self.path: Optional[str] = None
        self.project = None  # a ProjectResolver, for names imported from the project's modules
        self._resolve_memo: dict[int, Optional[str]] = {}
        self._kind_memo: dict[int, bool] = {}
        self._callable_memo: dict[int, object] = {}
        self._returns_memo: dict[int, Optional[bool]] = {}
        self._event_memo: dict[int, bool] = {}

    def uses_jax(self) -> bool:
        """Whether any rule can fire: the module imports JAX, or imports from a module of the
        project that does (a training script importing its jitted step from ``model.py``)."""
        if self.imports_jax:
            return True
        if self.project is None or self.path is None:
            return False
        for module, attr, level in self.module_scope.import_src.values():
            other = self.project.imported(self.path, module, attr, level)
            if other is not None and (other[0].imports_jax or (
                    other[1] is not None and other[0].exported_callable(other[1]) is not None)):
                return True
        return False

    # ----------------------------------------------------------- name resolution

    def resolve(self, expr: ast.AST, scope: Optional[Scope] = None) -> Optional[str]:
        """The canonical qualified name an expression refers to, or None.

        ``jnp.zeros`` -> ``jax.numpy.zeros`` after ``import jax.numpy as jnp``; a local
        variable that shadows the import resolves to None; an unshadowed builtin resolves to
        ``builtins.<name>``.
        """
        key = id(expr)
        memo = self._resolve_memo
        if key in memo:
            return memo[key]
        if scope is None:
            scope = self.scope_at(expr)
        result = self._resolve(expr, scope, 0)
        memo[key] = result
        return result

    def _resolve(self, expr: ast.AST, scope: Scope, depth: int) -> Optional[str]:
        if depth > 20:
            return None
        if isinstance(expr, ast.Attribute):
            base = self._resolve(expr.value, scope, depth + 1)
            return N.canonical(base + "." + expr.attr) if base else None
        if not isinstance(expr, ast.Name):
            return None
        name = expr.id
        s: Optional[Scope] = scope
        first = True
        while s is not None:
            if s.kind == "class" and not first:
                s = s.parent
                continue
            first = False
            if name in s.globals:
                s = self.module_scope
                continue
            if name in s.imports:
                imp = s.imports[name]
                return imp or None
            evs = s.events.get(name)
            if evs:
                # ``jit = jax.jit`` style aliases: every binding is the same resolvable name.
                if all(ev.kind == "assign" and ev.path is None and isinstance(ev.value, (ast.Name, ast.Attribute))
                       for ev in evs):
                    targets = {self._resolve(ev.value, ev.scope, depth + 1) for ev in evs}
                    if len(targets) == 1:
                        return targets.pop()
                return None
            s = s.parent
        if name in _BUILTINS:
            return "builtins." + name
        return None

    def scope_at(self, node: ast.AST) -> Scope:
        """The scope a node is evaluated in. Calls, statements, defs and lambdas have it recorded;
        for any other node it is found from its position (the innermost function around it)."""
        ctx = self.ctx.get(id(node))
        if ctx is not None:
            return ctx.scope
        pos = (getattr(node, "lineno", 0), getattr(node, "col_offset", 0))
        best: Optional[FunctionInfo] = None
        for f in self.functions:
            fn = f.node
            start = (fn.lineno, fn.col_offset)
            if start < pos <= _end(fn) and (best is None or start >= (best.node.lineno, best.node.col_offset)):
                best = f
        return best.scope if best is not None else self.module_scope

    # ----------------------------------------------------------- contexts

    def context(self, node: ast.AST) -> Optional[Context]:
        return self.ctx.get(id(node))

    def function_at(self, node: ast.AST) -> Optional[FunctionInfo]:
        """The innermost function a (recorded) node runs in, or None at module/class level."""
        ctx = self.ctx.get(id(node))
        if ctx is None:
            return None
        s: Optional[Scope] = ctx.scope
        while s is not None and s.kind == "class":
            s = s.parent
        return s.func if s is not None else None

    def dispose(self) -> None:
        """Break the model's reference cycles (scopes <-> functions, loops <-> children) so that
        reference counting frees it at once; left to the cyclic GC, freeing hundreds of thousands
        of objects per file cost a quarter of a corpus run."""
        for f in self.functions:
            f.__dict__.clear()
        for scope in getattr(self, "scopes", ()):  # class scopes too: their events point back
            scope.events.clear()
            scope.defs.clear()
            scope.func = scope.cls = scope.parent = scope.node = None
        for loop in self.loops:
            loop.children = []
            loop.parent = None
        for cls in self.classes.values():
            cls.__dict__.clear()
        self.__dict__.clear()

    def spellings(self, names) -> set:
        """The names a reference to an API function whose own name is in ``names`` can end in,
        in this module: those names plus local aliases (``from jax.random import normal as N``,
        ``sample = jax.random.normal``)."""
        out = set(names)
        for scope in [self.module_scope] + [f.scope for f in self.functions]:
            for local, qn in scope.imports.items():
                if qn and qn.rsplit(".", 1)[-1] in names:
                    out.add(local)
        # Aliases by assignment are looked for at module level only (``sample = jax.random.normal``).
        for local, evs in self.module_scope.events.items():
            for ev in evs:
                v = ev.value if ev.kind == "assign" else None
                if isinstance(v, (ast.Attribute, ast.Name)) and \
                        (v.attr if isinstance(v, ast.Attribute) else v.id) in out:
                    out.add(local)
        return out

    def calls_named(self, names) -> list:
        """Calls whose callee is spelled with one of ``names`` or a local alias of one: a cheap
        pre-filter before resolving (the caller still checks the qualified name)."""
        out = []
        by_name = self.calls_by_name
        for name in self.spellings(names):
            out.extend(by_name.get(name, ()))
        out.sort(key=_pos)
        return out

    def traced_calls(self) -> Iterator[tuple]:
        """``(function, call)`` for every call made directly in a traced function's body."""
        for f in self.functions:
            if f.traced:
                for call in f.calls:
                    yield f, call

    def in_traced_code(self, node: ast.AST) -> bool:
        f = self.function_at(node)
        return f is not None and f.traced

    def effective_children(self, loop: Loop) -> Iterator[Loop]:
        """Nested loops that repeat within one iteration; bounded ones (``for k in ("a", "b")``)
        are seen through, as if their bodies were written out."""
        for ch in loop.children:
            if ch.bounded:
                yield from self.effective_children(ch)
            else:
                yield ch

    def _direct_work(self, loop: Loop) -> bool:
        if loop._direct is None:
            loop._direct = False
            eager_counts = loop.steplike
            work = False
            for call in loop.calls:
                if _waits(call):
                    continue
                if self.callable_info(call.func, self.scope_at(call)) is not None:
                    work = True
                    break
                if eager_counts and self.is_jax(call):
                    work = True
                    break
            if not work:
                work = any(self._iterates_array(it, sc) for it, sc in loop.iter_jax_nodes)
            if not work:
                work = any(ch.bounded and self._direct_work(ch) for ch in loop.children)
            loop._direct = work
        return loop._direct

    def _iterates_array(self, it: ast.AST, scope: Scope) -> bool:
        if isinstance(it, ast.Call) and isinstance(it.func, ast.Attribute) and it.func.attr in _DICT_VIEWS:
            return False
        return self.is_jax(it, scope)

    def loop_runs_jax_work(self, loop: Loop) -> bool:
        """Whether one iteration of the loop (nested loops included) dispatches JAX work: a call of a
        compiled or transformed function, iteration over an array, or, in step-like loops (``while``,
        ``range``), any array operation."""
        if loop._jax_work is None:
            loop._jax_work = False  # cycle guard
            loop._jax_work = self._direct_work(loop) or any(
                self.loop_runs_jax_work(ch) for ch in self.effective_children(loop))
        return loop._jax_work

    def hot_loop(self, ctx: Context) -> Optional[Loop]:
        """The loop whose every iteration a node with this context runs in, when that loop is the
        innermost one dispatching JAX work. A node in an outer loop after an inner JAX loop (an
        epoch loop around a step loop) runs once per many steps, and gets None; so does a node in
        a ``raise`` statement."""
        if ctx.raising:
            return None
        for loop in reversed(ctx.loops):
            if loop.bounded or not self.loop_runs_jax_work(loop):
                continue
            if any(self.loop_runs_jax_work(ch) for ch in self.effective_children(loop)):
                return None
            return loop
        return None

    def periodic_guard(self, ctx: Context, loop: Optional[Loop] = None) -> bool:
        """Whether an ``if`` inside a loop around the node makes it run only now and then:
        ``if step % 100 == 0``, ``if i == n - 1``, ``if (i + 1) % every == 0 and i > 0``. A guard in
        an outer loop counts too: a periodic evaluation loop runs only periodically."""
        names: Optional[set] = None
        for test, depth in ctx.guards:
            if depth == 0:
                continue
            if names is None:
                names = set()
                for lp in ctx.loops:
                    names |= lp.target_names() | self._counters(lp)
            if _is_periodic(test, names):
                return True
        return False

    def in_timing_harness(self, ctx: Context) -> bool:
        """Whether the node's loops, or the function around them, read a timer or call a
        measuring helper (``time.perf_counter()``, ``timeit``, ``profiler.measure(...)``): in a
        benchmark, blocking and compiling per configuration is the point."""
        def timed(calls) -> bool:
            for c in calls:
                if self.resolve(c.func, self.scope_at(c)) in N.TIMERS:
                    return True
                f = c.func
                name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")
                if name in N.MEASURE_NAMES:
                    return True
            return False

        def loop_calls(loop: Loop):
            yield from loop.calls
            for ch in loop.children:
                yield from loop_calls(ch)

        if ctx.loops and timed(loop_calls(ctx.loops[0])):
            return True
        f = ctx.scope.func
        if f is not None:
            g: Optional[FunctionInfo] = f
            while g is not None:
                lowered = g.name.lower()
                if any(word in lowered for word in N.MEASURE_NAMES):
                    return True
                g = g.parent
            return timed(f.calls)
        return timed(c for c in self.calls if self.scope_at(c) is self.module_scope)

    def _counters(self, loop: Loop) -> set[str]:
        """Names incremented in the loop body (``step += 1``)."""
        out = set()
        body = getattr(loop.node, "body", [])
        for stmt in body:
            for node in ast.walk(stmt):
                if isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
                    out.add(node.target.id)
        return out

    # ----------------------------------------------------------- values

    def is_jax(self, expr: Optional[ast.AST], scope: Optional[Scope] = None) -> bool:
        """Whether the expression certainly holds a JAX array (or a pytree of them).
        Inside traced code such a value is a tracer."""
        if expr is None:
            return False
        key = id(expr)
        memo = self._kind_memo
        if key in memo:
            return memo[key]
        memo[key] = False  # cycle guard
        if scope is None:
            scope = self.scope_at(expr)
        result = self._kind(expr, scope)
        memo[key] = result
        return result

    def _kind(self, e: ast.AST, scope: Scope) -> bool:
        t = type(e)
        if t is ast.Name:
            return self._name_kind(e.id, scope, _pos(e))
        if t is ast.Call:
            return self._call_kind(e, scope)
        if t is ast.Attribute:
            if e.attr in N.METADATA_ATTRS:
                return False
            return self.is_jax(e.value, scope)
        if t is ast.Subscript:
            return self.is_jax(e.value, scope)
        if t is ast.BinOp:
            if isinstance(e.op, ast.Mod) and isinstance(e.left, (ast.Constant, ast.JoinedStr)):
                return False  # "%s" % x is a string
            return self.is_jax(e.left, scope) or self.is_jax(e.right, scope)
        if t is ast.UnaryOp:
            return not isinstance(e.op, ast.Not) and self.is_jax(e.operand, scope)
        if t is ast.Compare:
            if any(isinstance(op, (ast.Is, ast.IsNot, ast.In, ast.NotIn)) for op in e.ops):
                return False
            return self.is_jax(e.left, scope) or any(self.is_jax(c, scope) for c in e.comparators)
        if t is ast.IfExp:
            return self.is_jax(e.body, scope) or self.is_jax(e.orelse, scope)
        if t is ast.NamedExpr:
            return self.is_jax(e.value, scope)
        if t in (ast.Tuple, ast.List):
            return any(self.is_jax(x.value if isinstance(x, ast.Starred) else x, scope) for x in e.elts)
        if t is ast.Starred:
            return self.is_jax(e.value, scope)
        return False

    def _call_kind(self, call: ast.Call, scope: Scope) -> bool:
        func = call.func
        qn = self.resolve(func, scope)
        if qn is not None:
            if N.produces_array(qn):
                return True
            if qn in N.JIT_WRAPPERS or qn in N.TRANSFORMS or qn in N.HOST_BUILTINS or qn in N.FORMAT_BUILTINS:
                return False
            if qn.startswith(("builtins.", "numpy.", "math.")):
                return False
        if isinstance(func, ast.Attribute):
            # x.at[i].set(v)
            if func.attr in N.AT_METHODS and isinstance(func.value, ast.Subscript):
                inner = func.value.value
                if isinstance(inner, ast.Attribute) and inner.attr == "at":
                    return True
            if qn is None and self.is_jax(func.value, scope):
                return func.attr not in N.HOST_METHODS and func.attr not in N.NON_ARRAY_METHODS
        info = self.callable_info(func, scope)
        if info is not None:
            return True
        return self._local_result(call, scope, None)

    def _local_result(self, call: ast.Call, scope: Scope, index: Optional[int]) -> bool:
        """Whether a call of this module's own (not compiled) function returns a JAX value; with
        ``index``, element ``index`` of the tuple it returns (``arr, name = helper(x)``)."""
        local = self.local_functions(call.func, scope)
        args_jax = None
        for f in local:
            if index is None:
                if not self.returns_jax(f):
                    continue
            elif not any(self.is_jax(_element(r, index), f.scope) for r in f.returns):
                continue
            # A helper whose result is an array only because its parameters held tracers where it
            # was traced returns whatever it is given here: NumPy in, NumPy out.
            if not f.tracer_params:
                return True
            if args_jax is None:
                args_jax = any(self.is_jax(a, scope) for a in call.args) or any(
                    self.is_jax(kw.value, scope) for kw in call.keywords)
            if args_jax:
                return True
        return False

    def _lookup(self, name: str, scope: Scope, pos: tuple):
        """The binding of ``name`` that reaches ``pos`` in ``scope``, with the bindings after it in
        the same scope: ``(event, later)``; None when the name is an import or unbound. In the
        node's own scope this is the last binding before ``pos`` (the first use before any binding
        sees the last one, as a loop would); in enclosing scopes, their last binding."""
        s: Optional[Scope] = scope
        own = True
        while s is not None:
            if s.kind == "class" and not own:
                s = s.parent
                continue
            if name in s.globals:
                s, own = self.module_scope, False
                continue
            if name in s.imports:
                return None
            evs = s.events.get(name)
            if evs:
                if own:
                    for i, cand in enumerate(evs):
                        if cand.pos > pos:
                            return (evs[i - 1] if i else evs[-1]), evs[i:]
                return evs[-1], ()
            s, own = s.parent, False
        return None

    def _name_kind(self, name: str, scope: Scope, pos: tuple) -> bool:
        found = self._lookup(name, scope, pos)
        if found is None:
            return False
        ev, later = found
        if self._event_kind(ev):
            return True
        # A binding later in a loop that also holds this use reaches it on the next iteration:
        # ``while delta > tol: ...; delta = jnp.max(...)`` (not when the name is rebound in the
        # loop before the use, e.g. as the for target).
        for cand in later:
            for lp in cand.loops:
                if _contains(lp.node, pos) and ev.pos < _pos(lp.node) and self._event_kind(cand):
                    return True
        return False

    def _event_kind(self, ev: _Event) -> bool:
        key = id(ev)
        memo = self._event_memo
        if key in memo:
            return memo[key]
        memo[key] = False  # cycle guard: ``x += 1`` seen through its own binding
        result = self._event_kind_uncached(ev)
        memo[key] = result
        return result

    def _event_kind_uncached(self, ev: _Event) -> bool:
        kind = ev.kind
        if kind == "param":
            f = ev.scope.func
            return f is not None and ev.value in f.tracer_params
        if kind == "assign":
            value = ev.value
            path = list(ev.path or ())
            while path and isinstance(value, (ast.Tuple, ast.List)) and path[0] < len(value.elts) and not any(
                    isinstance(x, ast.Starred) for x in value.elts):
                value = value.elts[path.pop(0)]
            if path and isinstance(value, ast.Call) and self.callable_info(value.func, ev.scope) is None \
                    and self.local_functions(value.func, ev.scope):
                # ``arr, name = helper(x)``: each element has its own kind
                return self._local_result(value, ev.scope, path[0])
            return self.is_jax(value, ev.scope)
        if kind == "aug":
            node = ev.node
            if self.is_jax(node.value, ev.scope):
                return True
            return self._name_kind(node.target.id, ev.scope, _pos(node))
        if kind == "for":
            it = ev.value
            if isinstance(it, ast.Call) and isinstance(it.func, ast.Attribute) and it.func.attr in _DICT_VIEWS:
                # for k, v in tree.items(): keys are Python values
                if it.func.attr == "keys" or (it.func.attr == "items" and ev.path and ev.path[0] == 0):
                    return False
                return self.is_jax(it.func.value, ev.scope)
            if isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id == "enumerate":
                if not it.args or (ev.path and ev.path[0] == 0):
                    return False
                return self.is_jax(it.args[0], ev.scope)
            return self.is_jax(it, ev.scope)
        return False

    def clear_value_memos(self) -> None:
        self._kind_memo.clear()
        self._returns_memo.clear()
        self._event_memo.clear()

    def formats_jax(self, value: ast.AST, scope: Scope, deep: bool = False) -> bool:
        """Whether formatting ``value`` as text (a print/log argument, an f-string, ``%``- or
        ``str.format``-formatting) formats a JAX value. ``deep`` also looks inside nested f-strings
        and through ``str()``/``repr()``/``format()``/``"...".format()`` calls."""
        if isinstance(value, ast.Starred):
            value = value.value
        if isinstance(value, ast.JoinedStr):
            return any(isinstance(v, ast.FormattedValue) and (
                self.formats_jax(v.value, scope, deep) if deep else self.is_jax(v.value, scope))
                for v in value.values)
        if isinstance(value, ast.BinOp) and isinstance(value.op, ast.Mod) and isinstance(value.left, ast.Constant):
            return self.formats_jax(value.right, scope, deep)
        if isinstance(value, (ast.Tuple, ast.List)):
            return any(self.formats_jax(v, scope, deep) for v in value.elts)
        if isinstance(value, ast.Dict):
            return any(v is not None and self.formats_jax(v, scope, deep) for v in value.values)
        if deep and isinstance(value, ast.Call):
            func = value.func
            if isinstance(func, ast.Attribute) and func.attr == "format" and isinstance(func.value, ast.Constant):
                return any(self.formats_jax(a, scope, deep) for a in list(value.args) + [k.value for k in value.keywords])
            if self.resolve(func, scope) in ("builtins.str", "builtins.repr", "builtins.format"):
                return bool(value.args) and self.formats_jax(value.args[0], scope, deep)
        return self.is_jax(value, scope)

    # ----------------------------------------------------------- callables

    def callable_info(self, func: ast.AST, scope: Optional[Scope] = None) -> Optional[JitWrap]:
        """If calling ``func`` runs compiled/transformed JAX code, the wrapper that made it.

        Recognises ``jax.jit(f)(x)``, names bound to ``jax.jit(...)``/``jax.grad(...)``, functions
        decorated with a jit wrapper or transform, ``partial`` of those, and ``self.attr`` set to a
        jit wrapper in any method of the class.
        """
        key = id(func)
        if key in self._callable_memo:
            return self._callable_memo[key]  # type: ignore[return-value]
        self._callable_memo[key] = None
        if scope is None:
            scope = self.scope_at(func)
        result = self._callable(func, scope, 0)
        self._callable_memo[key] = result
        return result

    def _callable(self, func: ast.AST, scope: Scope, depth: int) -> Optional[JitWrap]:
        if depth > 8:
            return None
        if isinstance(func, ast.Call):
            qn = self.resolve(func.func, scope)
            if qn in N.JIT_WRAPPERS or qn in N.TRANSFORMS:
                return self._wrap_for_call(func)
            if qn == N.PARTIAL and func.args:
                return self._callable(func.args[0], scope, depth + 1)
            # partial(jax.jit, static_argnums=...)(f)
            if isinstance(func.func, ast.Call) and self._jit_factory(func.func, scope):
                return self._wrap_for_call(func)
            return None
        if isinstance(func, ast.Name):
            ev = self.binding(func.id, scope, _pos(func))
            if ev is None:
                other = self._imported(func.id, scope)
                if other is not None and other[1] is not None:
                    return other[0].exported_callable(other[1])
                return None
            if ev.kind == "def":
                # Only a decorator makes the name itself compiled: after ``g = jax.jit(f)``,
                # calling ``f`` still runs the Python function.
                f = self.func_of_node.get(id(ev.node))
                if f is not None and f.jit_entry is not None and f.jit_entry.decorator:
                    return f.jit_entry
                if f is not None and f.traced and any(r.startswith("@") for r in f.trace_reasons):
                    return _TRANSFORMED
                return None
            if ev.kind == "assign" and ev.path is None:
                return self._callable(ev.value, ev.scope, depth + 1)
            return None
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "self":
            cls = self._class_of(scope)
            if cls is not None:
                for value in cls.self_attrs.get(func.attr, ()):
                    info = self._callable(value, self.scope_at(value), depth + 1)
                    if info is not None:
                        return info
                meth = cls.methods.get(func.attr)
                if meth is not None and meth.jit_entry is not None and meth.jit_entry.decorator:
                    return meth.jit_entry
        elif isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
            # mod.train_step(...) with ``from . import mod`` / ``import pkg.mod as mod``
            other = self._imported(func.value.id, scope)
            if other is not None and other[1] is None:
                return other[0].exported_callable(func.attr)
        return None

    def _imported(self, name: str, scope: Scope):
        """``(model, name)`` for a name imported from one of the project's modules, ``(model, None)``
        for an imported project module; None otherwise or without a project resolver."""
        if self.project is None or self.path is None:
            return None
        s: Optional[Scope] = scope
        while s is not None:
            if name in s.import_src:
                module, attr, level = s.import_src[name]
                return self.project.imported(self.path, module, attr, level)
            if name in s.events:
                return None
            s = s.parent
        return None

    def exported_callable(self, name: str) -> Optional[JitWrap]:
        """What calling this module's top-level ``name`` runs (see :meth:`callable_info`)."""
        key = ("export", name)
        if key in self._callable_memo:
            return self._callable_memo[key]  # type: ignore[return-value]
        self._callable_memo[key] = None
        probe = ast.Name(id=name, ctx=ast.Load(), lineno=10 ** 9, col_offset=0)
        result = self._callable(probe, self.module_scope, 0)
        self._callable_memo[key] = result
        return result

    def binding(self, name: str, scope: Scope, pos: tuple) -> Optional[_Event]:
        """The binding event of ``name`` that reaches position ``pos`` in ``scope`` (None for
        imports and unbound names)."""
        found = self._lookup(name, scope, pos)
        return found[0] if found is not None else None

    def _class_of(self, scope: Scope) -> Optional[ClassInfo]:
        s: Optional[Scope] = scope
        while s is not None:
            if s.kind == "class":
                return s.cls
            if s.kind == "function" and s.func is not None and s.func.cls is not None:
                return s.func.cls
            s = s.parent
        return None

    def _jit_factory(self, call: ast.Call, scope: Scope) -> Optional[str]:
        """``partial(jax.jit, ...)`` or ``jax.jit(static_argnums=...)``: a decorator that jits."""
        qn = self.resolve(call.func, scope)
        if qn == N.PARTIAL and call.args:
            inner = self.resolve(call.args[0], scope)
            if inner in N.JIT_WRAPPERS:
                return inner
        if qn in N.JIT_WRAPPERS and not call.args:
            return qn
        return None

    def _wrap_for_call(self, call: ast.Call) -> JitWrap:
        for w in self._wraps_by_call.get(id(call), ()):
            return w
        return _TRANSFORMED

    def local_functions(self, expr: ast.AST, scope: Scope, depth: int = 0) -> list[FunctionInfo]:
        """The functions of this module an expression names: a def in scope, ``self.method``,
        a lambda, ``partial(f, ...)``, or the function inside ``jax.jit(f)``/``jax.grad(f)``."""
        if depth > 8:
            return []
        if isinstance(expr, ast.Lambda):
            f = self.func_of_node.get(id(expr))
            return [f] if f else []
        if isinstance(expr, ast.Name):
            ev = self.binding(expr.id, scope, _pos(expr))
            if ev is None:
                return []
            if ev.kind == "def":
                f = self.func_of_node.get(id(ev.node))
                return [f] if f else []
            if ev.kind == "assign" and ev.path is None:
                return self.local_functions(ev.value, ev.scope, depth + 1)
            return []
        if isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name) and expr.value.id in ("self", "cls"):
            cls = self._class_of(scope)
            if cls is not None and expr.attr in cls.methods:
                return [cls.methods[expr.attr]]
            return []
        if isinstance(expr, ast.Call):
            qn = self.resolve(expr.func, scope)
            if (qn == N.PARTIAL or qn in N.JIT_WRAPPERS or qn in N.TRANSFORMS) and expr.args:
                return self.local_functions(expr.args[0], scope, depth + 1)
        return []

    def returns_jax(self, f: FunctionInfo) -> bool:
        key = id(f)
        if key in self._returns_memo:
            return bool(self._returns_memo[key])
        self._returns_memo[key] = False
        result = any(self.is_jax(r, f.scope) for r in f.returns)
        self._returns_memo[key] = result
        return result


class _Transformed(JitWrap):
    pass


# Stands for "a callable made by a transform whose wrapper we did not record" (e.g. jax.grad(f)).
_TRANSFORMED = _Transformed(node=ast.Pass(), kind="transform", spelling="", target=None, func=None,
                            ctx=Context(scope=Scope(ast.Module(body=[], type_ignores=[]), "module", None)))


def _is_periodic(test: ast.AST, loop_names: set[str]) -> bool:
    if isinstance(test, ast.BoolOp):
        if isinstance(test.op, ast.And):
            return any(_is_periodic(v, loop_names) for v in test.values)
        return all(_is_periodic(v, loop_names) for v in test.values)
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return _has_mod(test.operand)
    if isinstance(test, ast.Compare):
        if _has_mod(test):
            return True
        if any(isinstance(op, (ast.Eq, ast.In)) for op in test.ops):
            mentioned = set()
            for part in [test.left, *test.comparators]:
                for n in ast.walk(part):
                    if isinstance(n, ast.Name):
                        mentioned.add(n.id)
            return bool(mentioned & loop_names)
    return False


def _has_mod(node: ast.AST) -> bool:
    for n in ast.walk(node):
        if isinstance(n, ast.BinOp) and isinstance(n.op, ast.Mod) and not isinstance(n.left, (ast.Constant, ast.JoinedStr)):
            return True
    return False


# --------------------------------------------------------------------------- building


def build_model(tree: ast.Module, path: Optional[str] = None, project=None, shallow: bool = False) -> ModuleModel:
    """Walk the tree once, then work out which functions are traced. With ``path`` and a
    :class:`~jaxlint.project.ProjectResolver`, names imported from the project's own modules are
    looked up there. ``shallow`` skips function bodies (for summaries of imported modules)."""
    model = ModuleModel(tree)
    model.path = path
    model.project = project
    model._wraps_by_call = {}
    _Builder(model, shallow).run(tree)
    _TraceAnalysis(model).run()
    return model


class _Builder:
    """The single walk: scopes, bindings, loops, guards, calls."""

    def __init__(self, model: ModuleModel, shallow: bool = False):
        self.m = model
        self.shallow = shallow  # module and class level only: enough to summarize what a module exports
        self.scope = model.module_scope
        self.loops: tuple = ()
        self.guards: tuple = ()
        self.func: Optional[FunctionInfo] = None
        self.loop: Optional[Loop] = None
        self.raising = False
        self.branches: tuple = ()
        self.cur = Context(self.scope)
        self.qual: list[str] = []
        self.handlers = {}
        for name in dir(self):
            node_type = getattr(ast, name[2:], None) if name.startswith("v_") else None
            if node_type is not None:  # ast.TryStar is 3.11+
                self.handlers[node_type] = getattr(self, name)

    def run(self, tree: ast.Module) -> None:
        self.body(tree.body)

    # -- plumbing

    def _refresh(self) -> None:
        self.cur = Context(self.scope, self.loops, self.guards, self.branches, self.raising)

    def body(self, stmts: list) -> None:
        ctx = self.m.ctx
        for stmt in stmts:
            ctx[id(stmt)] = self.cur
            self.visit(stmt)

    def visit(self, node: ast.AST) -> None:
        handler = self.handlers.get(type(node))
        if handler is not None:
            handler(node)
            return
        for child in ast.iter_child_nodes(node):
            self.visit(child)

    def visit_all(self, nodes) -> None:
        for n in nodes:
            if n is not None:
                self.visit(n)

    def bind(self, name: str, kind: str, value, path, node, pos) -> None:
        self.scope.events.setdefault(name, []).append(_Event(pos, kind, value, path, node, self.scope, self.loops))

    def bind_target(self, target: ast.AST, value, pos, kind: str = "assign", path: tuple = ()) -> None:
        if isinstance(target, ast.Name):
            self.bind(target.id, kind, value, path or None, target, pos)
        elif isinstance(target, (ast.Tuple, ast.List)):
            for i, elt in enumerate(target.elts):
                if isinstance(elt, ast.Starred):
                    self.bind_target(elt.value, value, pos, kind, path + (10 ** 6,))
                else:
                    self.bind_target(elt, value, pos, kind, path + (i,))
        elif isinstance(target, ast.Starred):
            self.bind_target(target.value, value, pos, kind, path)
        elif isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and target.value.id == "self":
            cls = self.func.cls if self.func is not None else None
            if cls is not None and value is not None and not path:
                cls.self_attrs.setdefault(target.attr, []).append(value)

    # -- imports

    def v_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            if alias.asname:
                self.scope.imports[alias.asname] = N.canonical(alias.name)
                self.scope.import_src[alias.asname] = (alias.name, None, 0)
            else:
                top = alias.name.split(".")[0]
                self.scope.imports[top] = top
                self.scope.import_src[top] = (top, None, 0)
            if alias.name.split(".")[0] in ("jax", "equinox", "flax"):
                self.m.imports_jax = True

    def v_ImportFrom(self, node: ast.ImportFrom) -> None:
        mod = "." * node.level + (node.module or "")
        if node.level == 0 and mod.split(".")[0] in ("jax", "equinox", "flax"):
            self.m.imports_jax = True
        for alias in node.names:
            if alias.name == "*":
                continue
            local = alias.asname or alias.name
            full = f"{mod}.{alias.name}" if mod and not mod.endswith(".") else mod + alias.name
            self.scope.imports[local] = N.canonical(full) if node.level == 0 else ""
            self.scope.import_src[local] = (node.module, alias.name, node.level)

    def v_Global(self, node: ast.Global) -> None:
        # At module level ``global x`` is legal and means nothing; recorded there, the lookups that
        # follow a global name to the module scope would find it again there and loop forever.
        if self.scope.kind != "module":
            self.scope.globals.update(node.names)
        self.m.ctx[id(node)] = self.cur
        self.m.decls.append(node)

    def v_Nonlocal(self, node: ast.Nonlocal) -> None:
        self.m.ctx[id(node)] = self.cur
        self.m.decls.append(node)

    # -- definitions

    def _function(self, node: FuncNode, name: str) -> FunctionInfo:
        m = self.m
        a = node.args
        params = [p.arg for p in a.posonlyargs] + [p.arg for p in a.args]
        kwonly = [p.arg for p in a.kwonlyargs]
        cls = self.scope.cls if self.scope.kind == "class" else None
        scope = Scope(node, "function", self.scope)
        self.m.scopes.append(scope)
        qual = ".".join(self.qual + [name])
        fi = FunctionInfo(node=node, name=name, qualname=qual, scope=scope, parent=self.func, cls=cls,
                          params=params, kwonly=kwonly)
        scope.func = fi
        m.functions.append(fi)
        m.func_of_node[id(node)] = fi
        m.ctx[id(node)] = self.cur
        pos = _pos(node)
        for p in params + kwonly + ([a.vararg.arg] if a.vararg else []) + ([a.kwarg.arg] if a.kwarg else []):
            scope.events.setdefault(p, []).append(_Event(pos, "param", p, None, node, scope))
        if cls is not None and not isinstance(node, ast.Lambda):
            cls.methods[name] = fi
        return fi

    def _enter(self, fi: FunctionInfo, name: str):
        saved = (self.scope, self.loops, self.guards, self.func, self.loop, self.cur, self.raising, self.branches)
        self.scope, self.loops, self.guards, self.func, self.loop = fi.scope, (), (), fi, None
        self.raising = False
        self.branches = ()
        self.qual.append(name)
        self._refresh()
        return saved

    def _leave(self, saved) -> None:
        self.scope, self.loops, self.guards, self.func, self.loop, self.cur, self.raising, self.branches = saved
        self.qual.pop()

    def v_FunctionDef(self, node) -> None:
        self.visit_all(node.decorator_list)
        self.visit_all(node.args.defaults)
        self.visit_all(node.args.kw_defaults)
        fi = self._function(node, node.name)
        self.bind(node.name, "def", None, None, node, _pos(node))
        self.scope.defs[node.name] = fi
        if self.shallow:
            return
        saved = self._enter(fi, node.name)
        self.body(node.body)
        self._leave(saved)

    v_AsyncFunctionDef = v_FunctionDef

    def v_Lambda(self, node: ast.Lambda) -> None:
        self.visit_all(node.args.defaults)
        self.visit_all(node.args.kw_defaults)
        fi = self._function(node, "<lambda>")
        fi.returns.append(node.body)
        if self.shallow:
            return
        saved = self._enter(fi, "<lambda>")
        self.visit(node.body)
        self._leave(saved)

    def v_ClassDef(self, node: ast.ClassDef) -> None:
        self.visit_all(node.decorator_list)
        self.visit_all(node.bases)
        self.visit_all(node.keywords)
        self.bind(node.name, "other", None, None, node, _pos(node))
        info = ClassInfo(node)
        self.m.classes[id(node)] = info
        scope = Scope(node, "class", self.scope)
        self.m.scopes.append(scope)
        scope.cls = info
        saved = (self.scope, self.cur)
        self.scope = scope
        self.qual.append(node.name)
        self._refresh()
        self.body(node.body)
        self.qual.pop()
        self.scope, self.cur = saved

    # -- bindings

    def _store(self, target: ast.AST, kind: str) -> None:
        if isinstance(target, (ast.Subscript, ast.Attribute)):
            self.m.ctx[id(target)] = self.cur
            self.m.stores.append((target, kind))
        elif isinstance(target, (ast.Tuple, ast.List)):
            for elt in target.elts:
                self._store(elt, kind)
        elif isinstance(target, ast.Starred):
            self._store(target.value, kind)

    def v_Assign(self, node: ast.Assign) -> None:
        self.visit(node.value)
        self.visit_all(node.targets)
        pos = _end(node)
        for t in node.targets:
            self._store(t, "assign")
            self.bind_target(t, node.value, pos)

    def v_Delete(self, node: ast.Delete) -> None:
        for t in node.targets:
            self.visit(t)
            self._store(t, "del")

    def v_AnnAssign(self, node: ast.AnnAssign) -> None:
        if node.value is not None:
            self.visit(node.value)
            self.visit(node.target)
            self._store(node.target, "assign")
            self.bind_target(node.target, node.value, _end(node))

    def v_AugAssign(self, node: ast.AugAssign) -> None:
        self.visit(node.value)
        self.visit(node.target)
        self._store(node.target, "aug")
        if isinstance(node.target, ast.Name):
            self.bind(node.target.id, "aug", None, None, node, _end(node))

    def v_NamedExpr(self, node: ast.NamedExpr) -> None:
        self.visit(node.value)
        self.bind_target(node.target, node.value, _end(node))

    def v_With(self, node) -> None:
        for item in node.items:
            self.visit(item.context_expr)
            if item.optional_vars is not None:
                self.visit(item.optional_vars)
                for n in _names_in(item.optional_vars):
                    self.bind(n, "other", None, None, item, _end(item.context_expr))
        self.body(node.body)

    v_AsyncWith = v_With

    def v_ExceptHandler(self, node: ast.ExceptHandler) -> None:
        if node.type is not None:
            self.visit(node.type)
        if node.name:
            self.bind(node.name, "other", None, None, node, _pos(node))
        self.body(node.body)

    def v_Try(self, node) -> None:
        self.body(node.body)
        for h in node.handlers:
            self.v_ExceptHandler(h)
        self.body(node.orelse)
        self.body(node.finalbody)

    v_TryStar = v_Try

    def _raising(self, nodes) -> None:
        saved = self.raising, self.cur
        self.raising = True
        self._refresh()
        self.visit_all(nodes)
        self.raising, self.cur = saved

    def v_Raise(self, node: ast.Raise) -> None:
        self._raising([node.exc, node.cause])

    def v_Return(self, node: ast.Return) -> None:
        if node.value is not None:
            self.visit(node.value)
            if self.func is not None:
                self.func.returns.append(node.value)

    # -- control flow

    def _push_loop(self, node: ast.AST, kind: str) -> tuple:
        loop = Loop(node, kind, self.loop, len(self.loops))
        self.m.loops.append(loop)
        self.m.ctx[id(node)] = self.cur
        if self.func is not None:
            self.func.loops.append(loop)
        if self.loop is not None:
            self.loop.children.append(loop)
        saved = (self.loops, self.loop, self.cur)
        self.loops = self.loops + (loop,)
        self.loop = loop
        self._refresh()
        return saved

    def _pop_loop(self, saved: tuple) -> None:
        self.loops, self.loop, self.cur = saved

    def v_For(self, node) -> None:
        self.visit(node.iter)
        self.bind_target(node.target, node.iter, _end(node.target), kind="for")
        saved = self._push_loop(node, "for")
        self.loop.iter_jax_nodes.append((node.iter, self.scope))
        self.body(node.body)
        self._pop_loop(saved)
        self.body(node.orelse)

    v_AsyncFor = v_For

    def v_While(self, node: ast.While) -> None:
        saved = self._push_loop(node, "while")
        self.m.ctx[id(node.test)] = self.cur
        self.m.ifs.append(node)
        self.visit(node.test)
        self.body(node.body)
        self._pop_loop(saved)
        self.body(node.orelse)

    def v_If(self, node: ast.If) -> None:
        self.m.ifs.append(node)
        self.visit(node.test)
        saved_guards, saved_branches, saved_cur = self.guards, self.branches, self.cur
        self.guards = self.guards + ((node.test, len(self.loops)),)
        self.branches = saved_branches + ((id(node), 0),)
        self._refresh()
        self.body(node.body)
        self.guards = saved_guards
        if node.orelse:
            self.branches = saved_branches + ((id(node), 1),)
            self._refresh()
            self.body(node.orelse)
        self.branches, self.cur = saved_branches, saved_cur

    def v_IfExp(self, node: ast.IfExp) -> None:
        self.m.ctx[id(node)] = self.cur
        self.m.ifs.append(node)
        self.visit(node.test)
        self.visit(node.body)
        self.visit(node.orelse)

    def v_Assert(self, node: ast.Assert) -> None:
        self.m.ifs.append(node)
        self.visit(node.test)
        if node.msg is not None:
            self._raising([node.msg])

    def _comprehension(self, node, elts: list) -> None:
        gens = node.generators
        self.visit(gens[0].iter)
        saved = self._push_loop(node, "comprehension")
        for i, gen in enumerate(gens):
            if i:
                self.visit(gen.iter)
                self.loop.iter_jax_nodes.append((gen.iter, self.scope))
            else:
                self.loop.iter_jax_nodes.append((gen.iter, self.scope))
            self.bind_target(gen.target, gen.iter, _end(gen.target), kind="for")
            self.visit_all(gen.ifs)
        self.visit_all(elts)
        self._pop_loop(saved)

    def v_ListComp(self, node) -> None:
        self._comprehension(node, [node.elt])

    v_SetComp = v_ListComp
    v_GeneratorExp = v_ListComp

    def v_DictComp(self, node) -> None:
        self._comprehension(node, [node.key, node.value])

    # -- expressions of interest

    def v_Call(self, node: ast.Call) -> None:
        m = self.m
        m.ctx[id(node)] = self.cur
        m.calls.append(node)
        func = node.func
        last = func.attr if type(func) is ast.Attribute else (func.id if type(func) is ast.Name else "")
        bucket = m.calls_by_name.get(last)
        if bucket is None:
            m.calls_by_name[last] = [node]
        else:
            bucket.append(node)
        if self.func is not None:
            self.func.calls.append(node)
        if self.loop is not None:
            self.loop.calls.append(node)
        self.visit(node.func)
        for a in node.args:
            self.visit(a)
        for kw in node.keywords:
            self.visit(kw.value)

    def v_JoinedStr(self, node: ast.JoinedStr) -> None:
        self.m.ctx[id(node)] = self.cur
        self.m.joined_strs.append(node)
        for v in node.values:
            self.visit(v)

    def v_BinOp(self, node: ast.BinOp) -> None:
        if isinstance(node.op, ast.Mod) and isinstance(node.left, ast.Constant) and isinstance(node.left.value, str):
            self.m.ctx[id(node)] = self.cur
            self.m.percent_formats.append(node)
        self.visit(node.left)
        self.visit(node.right)

    # Fast paths for the commonest nodes (ast.iter_child_nodes is slow).

    def v_Name(self, node: ast.Name) -> None:
        pass

    v_Constant = v_Name
    v_Pass = v_Name
    v_Break = v_Name
    v_Continue = v_Name

    def v_Attribute(self, node: ast.Attribute) -> None:
        self.m.attr_names.add(node.attr)
        self.visit(node.value)

    def v_Expr(self, node: ast.Expr) -> None:
        self.m.expr_values.add(id(node.value))
        self.visit(node.value)

    def v_Starred(self, node) -> None:
        self.visit(node.value)

    v_keyword = v_Starred
    v_Await = v_Starred

    def v_FormattedValue(self, node: ast.FormattedValue) -> None:
        self.visit(node.value)
        if node.format_spec is not None:
            self.visit(node.format_spec)

    def v_Subscript(self, node: ast.Subscript) -> None:
        if self.func is not None and isinstance(node.ctx, ast.Load):
            self.m.ctx[id(node)] = self.cur
            self.func.subscripts.append(node)
        self.visit(node.value)
        self.visit(node.slice)

    def v_Tuple(self, node) -> None:
        for elt in node.elts:
            self.visit(elt)

    v_List = v_Tuple
    v_Set = v_Tuple

    def v_Compare(self, node: ast.Compare) -> None:
        self.visit(node.left)
        for c in node.comparators:
            self.visit(c)

    def v_BoolOp(self, node: ast.BoolOp) -> None:
        self.m.ctx[id(node)] = self.cur
        self.m.bool_nodes.append(node)
        for v in node.values:
            self.visit(v)

    def v_UnaryOp(self, node: ast.UnaryOp) -> None:
        if isinstance(node.op, ast.Not):
            self.m.ctx[id(node)] = self.cur
            self.m.bool_nodes.append(node)
        self.visit(node.operand)

    def v_Dict(self, node: ast.Dict) -> None:
        for k in node.keys:
            if k is not None:
                self.visit(k)
        for v in node.values:
            self.visit(v)

    def v_Slice(self, node: ast.Slice) -> None:
        for part in (node.lower, node.upper, node.step):
            if part is not None:
                self.visit(part)


class _TraceAnalysis:
    """Which functions are traced, with static arguments and tracer parameters."""

    def __init__(self, model: ModuleModel):
        self.m = model

    def run(self) -> None:
        m = self.m
        if not m.imports_jax:
            return
        for fi in m.functions:
            if not isinstance(fi.node, ast.Lambda):
                self._decorators(fi)
        names = self._spellings()
        for call in m.calls:
            func = call.func
            last = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
            if last in names or isinstance(func, ast.Call):
                self._call(call)
        for fi in m.functions:  # a static argument is static whatever else traces the function
            fi.tracer_params -= fi.static_names()
        self._propagate()

    def _spellings(self) -> set:
        """Names a call of a jit wrapper, transform or lax primitive can end in here (the API's own
        names plus local aliases). Calls ending otherwise are not resolved at all."""
        known = set(N.JIT_WRAPPERS) | set(N.TRANSFORMS) | set(N.LAX_BODIES)
        return self.m.spellings({q.rsplit(".", 1)[1] for q in known})

    # -- marking

    def _mark(self, fi: FunctionInfo, reason: str, tracers) -> bool:
        changed = not fi.traced
        fi.traced = True
        if reason not in fi.trace_reasons:
            fi.trace_reasons.append(reason)
        new = set(tracers) - fi.tracer_params - fi.static_names()
        if new:
            fi.tracer_params |= new
            changed = True
        return changed

    def _all_params(self, fi: FunctionInfo, static: set) -> set:
        a = fi.node.args
        names = list(fi.params) + list(fi.kwonly)
        if a.vararg:
            names.append(a.vararg.arg)
        if a.kwarg:
            names.append(a.kwarg.arg)
        if fi.is_method and fi.params and fi.params[0] in ("self", "cls"):
            names = names[1:] if names and names[0] == fi.params[0] else names
        return {n for n in names if n not in static}

    def _policy_params(self, fi: FunctionInfo, policy: str, call: Optional[ast.Call], bound: bool) -> set:
        if policy == "unknown":
            return set()
        params = fi.params[1:] if bound and fi.params else fi.params
        if policy == "argnums":
            nums = {0}
            if call is not None:
                given = _kw(call, "argnums")
                if given is not None:
                    nums = _int_set(given)
            return {params[i] for i in nums if -len(params) <= i < len(params)}
        if policy == "vmap" and call is not None:
            axes = call_arg(call, 1, "in_axes")
            if isinstance(axes, ast.Constant) and axes.value is None:
                return set()
            if isinstance(axes, (ast.Tuple, ast.List)):
                return {params[i] for i, ax in enumerate(axes.elts)
                        if i < len(params) and not (isinstance(ax, ast.Constant) and ax.value is None)}
        return self._all_params(fi, set())

    # -- decorators

    def _decorators(self, fi: FunctionInfo) -> None:
        m = self.m
        scope = fi.scope.parent or m.module_scope
        for dec in fi.node.decorator_list:
            target = dec.func if isinstance(dec, ast.Call) else dec
            qn = m.resolve(target, scope)
            if qn:
                fi.decorators.append(qn)
            factory = m._jit_factory(dec, scope) if isinstance(dec, ast.Call) else None
            if qn in N.JIT_WRAPPERS and not isinstance(dec, ast.Call):
                self._jit_entry(fi, JitWrap(node=fi.node, kind=N.JIT_WRAPPERS[qn], spelling=ast.unparse(dec),
                                            target=None, func=fi, ctx=m.ctx[id(fi.node)], decorator=True))
            elif factory is not None:
                wrap = JitWrap(node=fi.node, kind=N.JIT_WRAPPERS[factory], spelling=_spelling(dec, m, scope),
                               target=None, func=fi, ctx=m.ctx[id(fi.node)], decorator=True)
                _statics(wrap, dec)
                self._jit_entry(fi, wrap)
            elif qn in N.TRANSFORMS:
                self._mark(fi, "@" + qn, self._policy_params(fi, N.TRANSFORMS[qn],
                                                              dec if isinstance(dec, ast.Call) else None, False))
            elif qn == N.PARTIAL and isinstance(dec, ast.Call) and dec.args:
                inner = m.resolve(dec.args[0], scope)
                if inner in N.TRANSFORMS:
                    self._mark(fi, "@" + inner, self._policy_params(fi, N.TRANSFORMS[inner], dec, False))
                elif inner:
                    fi.decorators.append(inner)

    def _jit_entry(self, fi: FunctionInfo, wrap: JitWrap, bound: bool = False) -> None:
        self.m.jit_wraps.append(wrap)
        if fi.jit_entry is None:
            fi.jit_entry = wrap
        fi.static_argnames |= wrap.static_argnames
        if bound and fi.params:
            # static_argnums of a bound method count from the first parameter after self:
            # record them by name, since FunctionInfo.static_argnums count self
            after_self = fi.params[1:]
            fi.static_argnames |= {after_self[i] for i in wrap.static_argnums
                                   if -len(after_self) <= i < len(after_self)}
        else:
            fi.static_argnums |= wrap.static_argnums
        static = set(fi.static_names())
        tracers = set() if wrap.kind == "filter_jit" else self._all_params(fi, static)
        self._mark(fi, "@" + wrap.spelling if wrap.decorator else wrap.spelling, tracers)

    # -- calls

    def _call(self, call: ast.Call) -> None:
        m = self.m
        scope = m.scope_at(call)
        qn = m.resolve(call.func, scope)
        factory = m._jit_factory(call.func, scope) if isinstance(call.func, ast.Call) else None
        if (qn in N.JIT_WRAPPERS and (call.args or _kw(call, "fun") is not None)) or factory is not None:
            kind = N.JIT_WRAPPERS[factory or qn]
            target = call_arg(call, 0, "fun") if call.args or _kw(call, "fun") is not None else None
            if target is None and call.args:
                target = call.args[0]
            spelling = _spelling(call.func, m, scope) if factory is None else _spelling(call.func, m, scope)
            wrap = JitWrap(node=call, kind=kind, spelling=spelling, target=target, func=None, ctx=m.ctx[id(call)])
            _statics(wrap, call)
            if factory is not None:
                _statics(wrap, call.func)
            targets = m.local_functions(target, scope) if target is not None else []
            if len(targets) == 1:
                wrap.func = targets[0]
            m._wraps_by_call.setdefault(id(call), []).append(wrap)
            if targets:
                bound = isinstance(target, ast.Attribute)
                for fi in targets:
                    self._jit_entry(fi, wrap, bound=bound and fi.is_method)
            else:
                m.jit_wraps.append(wrap)
            return
        if qn in N.TRANSFORMS:
            target = call_arg(call, 0, "fun")
            if target is None:
                return
            bound = isinstance(target, ast.Attribute)
            for fi in m.local_functions(target, scope):
                tracers = self._policy_params(fi, N.TRANSFORMS[qn], call, bound and fi.is_method)
                self._mark(fi, qn, tracers - self._bound_by_partial(target, fi, scope))
            return
        bodies = N.LAX_BODIES.get(qn or "")
        if bodies:
            for idx, kw in bodies:
                arg = call_arg(call, idx, kw)
                if arg is None:
                    continue
                elts = arg.elts if isinstance(arg, (ast.List, ast.Tuple)) else [arg]
                arity = _lax_arity(qn, call)
                for elt in elts:
                    for fi in m.local_functions(elt, scope):
                        partial_bound = self._bound_by_partial(elt, fi, scope)
                        free = [p for p in fi.params if p not in partial_bound]
                        if fi.is_method and free and free[0] in ("self", "cls") and isinstance(elt, ast.Attribute):
                            free = free[1:]
                        tracers = set(free if arity is None else free[:arity])
                        if fi.node.args.vararg is not None and (arity is None or arity > len(free)):
                            tracers.add(fi.node.args.vararg.arg)
                        self._mark(fi, qn, tracers)

    def _bound_by_partial(self, expr: ast.AST, fi: FunctionInfo, scope: Scope) -> set:
        """Parameters of ``fi`` fixed by ``functools.partial`` in ``expr`` (constants closed over,
        not tracers): ``partial(f, eq)`` binds f's first parameter, ``partial(f, n=3)`` binds n."""
        m = self.m
        n_pos, names = 0, set()
        depth = 0
        while isinstance(expr, ast.Call) and expr.args and depth < 8:
            depth += 1
            qn = m.resolve(expr.func, scope)
            if qn == N.PARTIAL:
                if any(isinstance(a, ast.Starred) for a in expr.args):
                    return set(fi.params)
                n_pos += len(expr.args) - 1
                names |= {kw.arg for kw in expr.keywords if kw.arg}
            elif not (qn in N.JIT_WRAPPERS or qn in N.TRANSFORMS):
                break
            expr = expr.args[0]
        if isinstance(expr, ast.Name):  # f = partial(g, x) bound to a name
            ev = m.binding(expr.id, scope, _pos(expr))
            if ev is not None and ev.kind == "assign" and ev.path is None and isinstance(ev.value, ast.Call) \
                    and depth < 8:
                return self._bound_by_partial(ev.value, fi, ev.scope) | names
        params = fi.params[1:] if fi.is_method and isinstance(expr, ast.Attribute) else fi.params
        return set(params[:n_pos]) | names

    # -- same-module callees of traced code

    def _propagate(self) -> None:
        m = self.m
        work = [f for f in m.functions if f.traced]
        budget = 50 * (len(m.functions) + 1)
        while work and budget > 0:
            budget -= 1
            f = work.pop()
            for call in f.calls:
                qn = m.resolve(call.func, f.scope)
                if qn in N.JIT_WRAPPERS or qn in N.TRANSFORMS or qn in N.LAX_BODIES or qn == N.PARTIAL:
                    continue
                targets = m.local_functions(call.func, f.scope)
                if not targets:
                    continue
                via_attr = isinstance(call.func, ast.Attribute)
                for g in targets:
                    if g is f:
                        continue
                    params = g.params[1:] if via_attr and g.is_method else g.params
                    tracers = set()
                    star = False
                    for i, arg in enumerate(call.args):
                        if isinstance(arg, ast.Starred):
                            star = True
                            break
                        if i < len(params) and m.is_jax(arg, f.scope):
                            tracers.add(params[i])
                    for kw in call.keywords:
                        if kw.arg and m.is_jax(kw.value, f.scope):
                            tracers.add(kw.arg)
                    if star and g.node.args.vararg is not None and any(m.is_jax(a, f.scope) for a in call.args):
                        tracers.add(g.node.args.vararg.arg)
                    tracers -= g.static_names()
                    if self._mark(g, "called from " + f.qualname, tracers):
                        m.clear_value_memos()
                        work.append(g)


_LAX_ARITY = {"jax.lax.scan": 2, "jax.lax.fori_loop": 2, "jax.lax.while_loop": 1, "jax.lax.map": 1,
              "jax.lax.associative_scan": 2, "flax.nnx.scan": 2, "flax.nnx.fori_loop": 2,
              "flax.nnx.while_loop": 1}


def _lax_arity(qn: str, call: ast.Call) -> Optional[int]:
    """How many positional arguments the primitive passes its body (None: all of them)."""
    if qn in _LAX_ARITY:
        return _LAX_ARITY[qn]
    if any(isinstance(a, ast.Starred) for a in call.args) or call.keywords:
        return None
    if qn.endswith(".cond"):
        return max(len(call.args) - 3, 0)
    if qn.endswith(".switch"):
        return max(len(call.args) - 2, 0)
    return None


def _statics(wrap: JitWrap, call: ast.Call) -> None:
    for kw in call.keywords:
        if kw.arg == "inline" and isinstance(kw.value, ast.Constant) and kw.value.value is True:
            wrap.inline = True
        if kw.arg in ("static_argnums", "static_broadcasted_argnums"):
            wrap.static_argnums |= _int_set(kw.value)
        elif kw.arg == "static_argnames":
            wrap.static_argnames |= _str_set(kw.value)


def _spelling(func: ast.AST, m: ModuleModel, scope: Scope) -> str:
    """How the user wrote a jit wrapper: ``jax.jit``, ``jit``, ``eqx.filter_jit``."""
    if isinstance(func, ast.Call):
        qn = m.resolve(func.func, scope)
        if qn == N.PARTIAL and func.args:
            return ast.unparse(func.args[0])
        return ast.unparse(func.func)
    return ast.unparse(func)


class ModuleSummary:
    """What other modules need to know of a module, without its tree: whether it imports JAX,
    which top-level names are jitted/transformed callables, and which names it re-exports."""

    __slots__ = ("path", "imports_jax", "exports", "reexports", "project")

    def __init__(self, model: ModuleModel):
        self.path = model.path
        self.project = model.project
        self.imports_jax = model.imports_jax
        self.exports: dict[str, JitWrap] = {}
        self.reexports: dict[str, tuple] = dict(model.module_scope.import_src)
        for name in model.module_scope.events:
            wrap = model.exported_callable(name)
            if wrap is None:
                continue
            if wrap is _TRANSFORMED:
                self.exports[name] = wrap
                continue
            self.exports[name] = JitWrap(
                node=_SUMMARY_NODE, kind=wrap.kind, spelling=wrap.spelling, target=None, func=None, ctx=_TRANSFORMED.ctx,
                static_argnums=set(wrap.static_argnums), static_argnames=set(wrap.static_argnames),
                decorator=False, inline=wrap.inline, params=tuple(wrap.positional_params()))
        model.dispose()

    @classmethod
    def empty(cls, path: str, project, imports_jax: bool) -> "ModuleSummary":
        """A module that exports nothing compiled (and whose imports do not matter)."""
        self = cls.__new__(cls)
        self.path, self.project, self.imports_jax = path, project, imports_jax
        self.exports, self.reexports = {}, {}
        return self

    def exported_callable(self, name: str) -> Optional[JitWrap]:
        if name in self.exports:
            return self.exports[name]
        src = self.reexports.get(name)
        if src is None or self.project is None or self.path is None:
            return None
        other = self.project.imported(self.path, *src)
        if other is not None and other[1] is not None:
            return other[0].exported_callable(other[1])
        return None


_SUMMARY_NODE = ast.Pass()
