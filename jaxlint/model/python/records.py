"""The model's records: loops, contexts, functions, classes, jit wrappers, scopes, bindings."""

from __future__ import annotations

import ast
from typing import Optional, Union

from .syntax import _names_in

FuncNode = Union[ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda]
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


class TraceCause:
    """Why a function is traced.

    ``kind``: "jit" (compiled by a jit/pmap wrapper; ``name`` is the wrapper as the user spelled
    it), "transform" (``name`` the transform's qualified name, e.g. ``jax.vmap``), "lax" (the body
    of a lax primitive, ``name`` its qualified name) or "caller" (called from the traced function
    ``caller``; ``name`` its qualified name). ``decorator``: applied as a decorator."""

    __slots__ = ("kind", "name", "decorator", "caller")

    def __init__(self, kind: str, name: str, decorator: bool = False, caller: Optional["FunctionInfo"] = None):
        self.kind = kind
        self.name = name
        self.decorator = decorator
        self.caller = caller

    def _key(self) -> tuple:
        return (self.kind, self.name, self.decorator, id(self.caller))

    def __eq__(self, other) -> bool:  # a value: the same cause recorded twice is one cause
        return self._key() == other._key() if isinstance(other, TraceCause) else NotImplemented

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return f"TraceCause({self.kind!r}, {self.name!r}, decorator={self.decorator})"


class FunctionInfo:

    def __init__(self, node: FuncNode, name: str, qualname: str, scope: "Scope", parent: Optional["FunctionInfo"],
                 cls: Optional["ClassInfo"], params: list, kwonly: list, decorators: Optional[list] = None,
                 traced: bool = False):
        self.node = node
        self.name = name
        self.qualname = qualname
        self.scope = scope  # the function's own scope
        self.parent = parent
        self.cls = cls
        self.params = params  # positional parameters in order (posonly + regular)
        self.kwonly = kwonly
        self.decorators = [] if decorators is None else decorators  # resolved qualnames of decorators
        self.traced = traced
        self.trace_causes: list = []  # TraceCause records: why it is traced
        self.jit_entry: Optional[JitWrap] = None  # set when the function itself is compiled by a jit wrapper
        self.static_argnums: set = set()
        self.static_argnames: set = set()
        self.tracer_params: set = set()
        self.calls: list = []  # calls in the body, not in nested functions
        self.returns: list = []  # returned expressions
        self.subscripts: list = []  # x[...] reads in the body, not in nested functions
        self.loops: list = []  # loops in the body, not in nested functions

    def __repr__(self) -> str:
        return f"FunctionInfo({self.qualname!r}, line {getattr(self.node, 'lineno', '?')})"

    @property
    def traced_by_callers_only(self) -> bool:
        """Traced only because traced code calls it directly: it then runs inside the caller's
        trace, and state of a traced enclosing function is trace-local for it."""
        return bool(self.trace_causes) and all(c.kind == "caller" for c in self.trace_causes)

    @property
    def is_method(self) -> bool:
        return self.cls is not None and not isinstance(self.node, ast.Lambda)

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

    def static_names(self) -> set[str]:
        out = set(self.static_argnames)
        for i in self.static_argnums:
            if -len(self.params) <= i < len(self.params):
                out.add(self.params[i])
        return out


class ClassInfo:
    def __init__(self, node: ast.ClassDef, methods: Optional[dict] = None, self_attrs: Optional[dict] = None,
                 scope: Optional["Scope"] = None):
        self.node = node
        self.methods: dict = {} if methods is None else methods  # name -> FunctionInfo
        self.self_attrs: dict = {} if self_attrs is None else self_attrs  # attribute -> [value expressions assigned to self.attr]
        self.scope = scope  # the class body's scope (its bindings: methods, class attributes)

    def __repr__(self) -> str:
        return f"ClassInfo({self.node.name!r})"


class JitWrap:
    """A place where a jit/pmap wrapper is created: a call ``jax.jit(f, ...)`` or a decorator."""

    def __init__(self, node: ast.AST, kind: str, spelling: str, target: Optional[ast.AST],
                 func: Optional[FunctionInfo], ctx: Context, static_argnums: Optional[set] = None,
                 static_argnames: Optional[set] = None, decorator: bool = False, inline: bool = False,
                 params: tuple = ()):
        self.node = node  # the Call, or the decorated FunctionDef
        self.kind = kind  # "jit" | "pmap" | "filter_jit"
        self.spelling = spelling  # how the user wrote the wrapper, e.g. "jax.jit"
        self.target = target  # the wrapped callable expression (None for decorators)
        self.func = func  # the decorated function, for decorators
        self.ctx = ctx
        self.static_argnums: set = set() if static_argnums is None else static_argnums
        self.static_argnames: set = set() if static_argnames is None else static_argnames
        self.decorator = decorator
        self.inline = inline  # jax.jit(..., inline=True): meant to be inlined into an enclosing trace
        self.params = params  # positional parameters, for wrappers summarized from another module (func is None)
        self.donate_argnums: set = set()  # donate_argnums=... as literal ints
        self.donate_argnames: set = set()  # donate_argnames=... as literal strings
        # any donate_argnums/donate_argnames/donate keyword, or **kwargs, literal or not
        self.donation_declared = False

    def __repr__(self) -> str:
        return f"JitWrap({self.kind!r}, {self.spelling!r}, line {getattr(self.node, 'lineno', '?')})"

    def positional_params(self) -> list:
        return list(self.func.params) if self.func is not None else list(self.params)

    def static_layout(self, call: ast.Call) -> tuple:
        """How ``call`` (a call of this wrapper's result) lines up with the static arguments:
        ``(params, shift, static positions, static names)``. Argument ``i`` of the call is
        parameter ``params[i + shift]``: a decorated method called as ``self.m(...)`` counts
        ``self`` in ``static_argnums`` (shift 1); ``jax.jit(self.m)`` is bound, and its numbering
        starts after ``self``."""
        params = self.positional_params()
        shift = 0
        if self.func is not None and self.func.is_method and params and params[0] in ("self", "cls"):
            if self.decorator and isinstance(call.func, ast.Attribute):
                shift = 1
            elif not self.decorator:
                params = params[1:]
        static_pos = {i if i >= 0 else i + len(params) for i in self.static_argnums}
        names = set(self.static_argnames) | {params[i] for i in static_pos if 0 <= i < len(params)}
        return params, shift, static_pos, names

    def static_positions(self, call: ast.Call) -> tuple[set, set]:
        """(argument positions, keyword names) of ``call`` that are static."""
        params, shift, static_pos, names = self.static_layout(call)
        positions = {i - shift for i in static_pos}
        for i, p in enumerate(params):
            if p in names:
                positions.add(i - shift)
        return positions, names


class NewCallable:
    """A callable object created anew each time a region of code runs (``ModuleModel.new_callable``).

    ``kind``: "lambda", "partial" (a ``functools.partial`` call), "transformed" (the result of a
    jit wrapper or transform call; ``node`` is that call), "bound_method" (``self.method``), "def"
    (a function defined in the region and bound to ``name``) or "name" (``name`` bound in the
    region to ``inner``)."""

    __slots__ = ("kind", "node", "name", "inner")

    def __init__(self, kind: str, node: ast.AST, name: str = "", inner: Optional["NewCallable"] = None):
        self.kind = kind
        self.node = node
        self.name = name
        self.inner = inner

    def __repr__(self) -> str:
        return f"NewCallable({self.kind!r}, {self.name!r})"


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


class Repetition:
    """Evidence that a function runs many times (``ModuleModel.repeats``).

    ``kind``: "loop" (called in a loop: ``call`` the call, ``loop`` the loop), "step_name" (a
    per-step method name such as ``step``, ``update`` or ``__call__``), "caller" (called from
    ``via``, a function that itself repeats for the reason ``inner``), "factory" (a closure that
    its enclosing function ``via`` returns or stores: whoever gets it calls it again and again),
    "helper" (a helper whose whole work is one compiled call on its arguments, the kind of
    function that is called once per batch) or "step_param" (it takes the training step number,
    parameter ``name``: it is called at a step of a loop)."""

    __slots__ = ("kind", "func", "call", "loop", "via", "inner", "name")

    def __init__(self, kind: str, func: "FunctionInfo", call: Optional[ast.AST] = None, loop: Optional[Loop] = None,
                 via: Optional["FunctionInfo"] = None, inner: Optional["Repetition"] = None, name: str = ""):
        self.kind = kind
        self.func = func
        self.call = call
        self.loop = loop
        self.via = via
        self.inner = inner
        self.name = name

    def __repr__(self) -> str:
        return f"Repetition({self.kind!r}, {self.func.qualname!r})"


class Churn:
    """Why a value takes a new value on every iteration of ``loop`` (``ModuleModel.churn``).

    ``kind``: "counter" (a loop counter: the target of a ``range``/``count`` loop or the index of
    ``enumerate``), "item" (the item of a loop over a sequence that is not a few literal options)
    or "accumulated" (a name incremented in the loop, or recomputed from itself: ``n *= 2``,
    ``width = width * 2 + 1``) or "data" (a number read from the item's data, ``int(batch["mask"].sum())``:
    it changes with the data, each new value once). ``name`` is that loop-level name; the value may be computed from it
    (``rate = 0.5 * (1 - epoch / n)`` churns as the counter ``epoch``)."""

    __slots__ = ("kind", "loop", "name")

    def __init__(self, kind: str, loop: Loop, name: str):
        self.kind = kind
        self.loop = loop
        self.name = name

    def __repr__(self) -> str:
        return f"Churn({self.kind!r}, {self.name!r})"
