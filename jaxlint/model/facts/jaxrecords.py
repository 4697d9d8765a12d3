"""The JAX records of a module: what the facts layer adds to the Python records (python/records.py).

* :class:`TracedFunction`, the record of a function with what tracing found (traced or not, why,
  the jit wrapper that compiles it, its static and tracer parameters);
* :class:`StepLoop`, the record of a loop with whether array operations in it count as JAX work;
* :class:`JitWrap` (a jit wrapper made in the module), :class:`TraceCause`, :class:`NewCallable`,
  :class:`Repetition` and :class:`Churn` (evidence records of the facts).

The walk (python/builder.py) makes these subclasses when the facts layer builds the model
(facts/model.py), so the Python layer never knows them.
"""

from __future__ import annotations

import ast
from typing import Optional

from ..python.records import _DICT_VIEWS, Context, FunctionInfo, Loop, loop_iterable_of


class TracedFunction(FunctionInfo):
    """A function record with its tracing facts (filled by facts/tracing.py)."""

    def __init__(self, node, name: str, qualname: str, scope, parent, cls, params: list, kwonly: list,
                 decorators: Optional[list] = None):
        FunctionInfo.__init__(self, node, name, qualname, scope, parent, cls, params, kwonly, decorators)
        self.traced = False
        self.trace_causes: list = []  # TraceCause records: why it is traced
        self.jit_entry: Optional[JitWrap] = None  # set when the function itself is compiled by a jit wrapper
        self.static_argnums: set = set()
        self.static_argnames: set = set()
        self.tracer_params: set = set()

    @property
    def traced_by_callers_only(self) -> bool:
        """Traced only because traced code calls it directly: it then runs inside the caller's
        trace, and state of a traced enclosing function is trace-local for it."""
        return bool(self.trace_causes) and all(c.kind == "caller" for c in self.trace_causes)

    def static_names(self) -> set[str]:
        out = set(self.static_argnames)
        for i in self.static_argnums:
            if -len(self.params) <= i < len(self.params):
                out.add(self.params[i])
        return out


class StepLoop(Loop):
    """A loop record with its JAX facts: whether plain array operations in its body count as JAX
    work (``steplike``: not in loops over the parts of one structure, ``for k, v in tree.items()``,
    where they are trace-time bookkeeping) and the per-loop caches of facts/loops.py."""

    __slots__ = ("steplike", "_jax_work", "_direct")

    def __init__(self, node: ast.AST, kind: str, parent: Optional[Loop], depth: int):
        Loop.__init__(self, node, kind, parent, depth)
        iterable = loop_iterable_of(node)
        self.steplike = kind == "while" or iterable is None or not _is_structural(iterable)
        self._jax_work: Optional[bool] = None
        self._direct: Optional[bool] = None


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


class JitWrap:
    """A place where a jit/pmap wrapper is created: a call ``jax.jit(f, ...)`` or a decorator."""

    def __init__(self, node: ast.AST, kind: str, spelling: str, target: Optional[ast.AST],
                 func: Optional[FunctionInfo], ctx: Context, static_argnums: Optional[set] = None,
                 static_argnames: Optional[set] = None, decorator: bool = False, inline: bool = False,
                 params: tuple = (), site: Optional[ast.AST] = None):
        self.node = node  # the Call, or the decorated FunctionDef
        # where the wrapper is made, for a finding about making it: the Call, or the decorator
        # expression (``@jax.jit`` above ``@jax.vmap``: two lines above the ``def``)
        self.site = site if site is not None else node
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
        self.in_place: tuple = ()  # positions of parameters an NNX step updates in place, likewise
        # for a factory's step summarized from another module (its body is there): whether its wrapper
        # deletes donated arrays, {position: (operand, update, line)} of the optimizer updates it
        # applies to parameters, and (path, line) of the wrapper
        self.deletes_donated: Optional[bool] = None
        self.updates: dict = {}
        self.origin: Optional[tuple] = None
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


class Repetition:
    """Evidence that a function runs many times (``ModuleModel.repeats``).

    ``kind``: "loop" (called in a loop: ``call`` the call, ``loop`` the loop), "step_name" (a
    per-step method name such as ``step``, ``update`` or ``__call__``), "caller" (called from
    ``via``, a function that itself repeats for the reason ``inner``), "factory" (a closure that
    its enclosing function ``via`` returns or stores: whoever gets it calls it again and again),
    "elsewhere" / "inherited" (called in a loop of another module of the project, ``name`` its
    ``file:line``; "inherited": as ``self.f(...)`` in a base class's method), "helper" (a helper whose whole work is one compiled call on its arguments, the kind of
    function that is called once per batch) or "step_param" (it takes the training step number,
    parameter ``name``: it is called at a step of a loop) or "timed" (called on line ``warm.lineno``, then
    again at ``call`` inside the measurement ``name``: facts/warmups.py)."""

    __slots__ = ("kind", "func", "call", "loop", "via", "inner", "name", "warm")

    def __init__(self, kind: str, func: "FunctionInfo", call: Optional[ast.AST] = None, loop: Optional[Loop] = None,
                 via: Optional["FunctionInfo"] = None, inner: Optional["Repetition"] = None, name: str = "",
                 warm: Optional[ast.AST] = None):
        self.kind = kind
        self.func = func
        self.call = call
        self.loop = loop
        self.via = via
        self.inner = inner
        self.name = name
        self.warm = warm

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


def _waits(call: ast.Call) -> bool:
    """``block_until_ready`` waits for work already dispatched; it dispatches none."""
    f = call.func
    return isinstance(f, ast.Attribute) and f.attr == "block_until_ready"


def blocked_anew(m, loop: Loop) -> bool:
    """Whether the loop blocks on a value a call of the loop makes anew every iteration
    (``state, metrics = updater.update(state, batch)``, then ``state["step"].block_until_ready()``):
    only a JAX array has ``block_until_ready``, so that call dispatched JAX work (or a transfer) the
    loop waits for, whatever the callee is."""
    names = blocked_names(loop)
    if not names:
        return False
    for call in loop.calls:
        root = _root(call.func.value) if _waits(call) else None
        ev = m.binding(root, m.scope_at(call), (call.lineno, call.col_offset)) if root else None
        if ev is not None and loop in ev.loops and ev.kind == "assign" and isinstance(ev.value, ast.Call) \
                and not _waits(ev.value):
            return True  # the binding the block reads: made by a call earlier in the iteration
    return False


def blocked_names(loop: Loop) -> set:
    """The names whose values (or parts: ``state["step"]``) the loop calls ``block_until_ready`` on."""
    return {r for r in (_root(c.func.value) for c in loop.calls if _waits(c)) if r is not None}


def _root(expr: ast.AST) -> Optional[str]:
    while isinstance(expr, (ast.Subscript, ast.Attribute)):
        expr = expr.value
    return expr.id if isinstance(expr, ast.Name) else None


def _counts_steps(arg: ast.AST) -> bool:
    """A ``range(...)`` or ``itertools.count(...)`` call: numbers, not the parts of a structure."""
    if not isinstance(arg, ast.Call):
        return False
    f = arg.func
    name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")
    return name in ("range", "count")


def _is_structural(it: ast.AST) -> bool:
    """Iteration over the parts of one structure (dict items, zipped leaves, a pytree's leaves):
    trace-time bookkeeping in library code rather than a loop over steps or batches."""
    while isinstance(it, ast.Call):
        f = it.func
        name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")
        if name in ("zip", "safe_zip") and any(_counts_steps(a) for a in it.args):
            return False  # ``zip(range(start, n), batches)``: a count of steps beside the data, not leaves
        if name in _DICT_VIEWS or name in ("zip", "leaves", "tree_leaves", "tree_flatten", "flatten",
                                           "tree_flatten_with_path", "leaves_with_path", "safe_zip"):
            return True
        if name in ("enumerate", "reversed", "sorted", "list", "tuple") and it.args:
            it = it.args[0]
            continue
        return False
    return False
