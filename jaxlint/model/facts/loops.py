"""Loop queries: per-iteration JAX work, hot loops, timing harnesses, known trip counts, a function's
own loop of work (periodic guards: periodicity.py).

Functions of the model (``m``), not a mixin; modules that also use ``loops`` as a variable import
this one as ``loopfacts``.
"""

from __future__ import annotations

import ast
from typing import Iterator, Optional

from . import callables, frequency
from ..python import limits as L
from . import values as V
from ..python.records import _COMPS as _COMPREHENSIONS
from ..python.records import _DICT_VIEWS, BOUNDED_TRIPS, FEW_ITERATIONS, Context, FunctionInfo, Loop, Scope
from .jaxrecords import _waits, blocked_anew
from ..python.syntax import _names_in, _pos, child_nodes, walk

# Methods that change a list, dict or set in place: a literal bound to a name and changed so is
# not a fixed collection.
_ARANGES = frozenset({"numpy.arange", "jax.numpy.arange"})
# ``jnp.array([0.2, 0.5, 0.8])``: an array made from a literal has as many rows as the literal,
# and no operation changes an array's length in place
_ARRAY_OF = frozenset({"numpy.array", "numpy.asarray", "jax.numpy.array", "jax.numpy.asarray"})
_IN_PLACE = frozenset({"append", "extend", "insert", "pop", "remove", "clear", "update", "add",
                       "discard", "setdefault", "popitem", "sort", "reverse", "__setitem__", "__delitem__"})


def loop_iterable(node: ast.AST) -> Optional[ast.AST]:
    if isinstance(node, (ast.For, ast.AsyncFor)):
        return node.iter
    generators = getattr(node, "generators", None)
    return generators[0].iter if generators else None


def varying_names(loop: Loop) -> set:
    """Names that take a new value each iteration: the loop's targets (unless it walks a short
    literal list of options) and names assigned non-constant values in its body."""
    node = loop.node
    out: set = set()
    if isinstance(node, (ast.For, ast.AsyncFor)):
        if not isinstance(node.iter, (ast.Tuple, ast.List, ast.Set)):
            out |= loop.target_names()
        body = node.body
    elif isinstance(node, ast.While):
        body = node.body
    else:
        if not all(isinstance(g.iter, (ast.Tuple, ast.List, ast.Set)) for g in node.generators):
            out |= loop.target_names()
        body = []
    for stmt in body:
        for sub in walk(stmt):
            if isinstance(sub, ast.Assign) and not isinstance(sub.value, ast.Constant):
                for t in sub.targets:
                    out |= {n.id for n in walk(t) if isinstance(n, ast.Name)}
            elif isinstance(sub, ast.AugAssign) and isinstance(sub.target, ast.Name):
                out.add(sub.target.id)
    return out


def mentions(expr: ast.AST, names: set) -> bool:
    return any(isinstance(n, ast.Name) and n.id in names for n in walk(expr))


class _CarriedState:
    """Reads and bindings of one loop body in evaluation order, for :func:`iterations_alike`."""

    def __init__(self, model, targets: set):
        self.model = model
        self.targets = targets
        self.bound: set = set()
        self.read_first: set = set()  # names read before the body binds them
        self.differs = False

    def read(self, expr: ast.AST, local: frozenset = frozenset()) -> None:
        """Names ``expr`` reads; ``local`` the targets of comprehensions around it (their own)."""
        stack = [(expr, local)]
        while stack:
            n, own = stack.pop()
            if isinstance(n, ast.Name):
                if n.id in own:
                    continue
                if isinstance(n.ctx, ast.Load):
                    if n.id in self.targets:
                        self.differs = True
                    elif n.id not in self.bound:
                        self.read_first.add(n.id)
                else:
                    self.bound.add(n.id)
                continue
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "next":
                self.differs = True
            if isinstance(n, _COMPREHENSIONS):
                own = own | {t for g in n.generators for t in _names_in(g.target)}
            elif isinstance(n, ast.Lambda):
                a = n.args
                own = own | {x.arg for x in a.posonlyargs + a.args + a.kwonlyargs + [a.vararg, a.kwarg] if x}
            stack.extend((c, own) for c in child_nodes(n))

    def target(self, t: ast.AST) -> None:
        if isinstance(t, ast.Name):
            self.bound.add(t.id)
        elif isinstance(t, (ast.Tuple, ast.List)):
            for elt in t.elts:
                self.target(elt)
        elif isinstance(t, ast.Starred):
            self.target(t.value)
        elif isinstance(t, (ast.Attribute, ast.Subscript)):
            base = t
            while isinstance(base, (ast.Attribute, ast.Subscript)):
                base = base.value
            if not (isinstance(base, ast.Name) and base.id in self.bound):
                self.differs = True  # outside state written: the next iteration may see it
            self.read(t)

    def stmt(self, stmt: ast.stmt) -> None:
        if isinstance(stmt, (ast.Assign, ast.AnnAssign)):
            if stmt.value is not None:
                self.read(stmt.value)
            for t in (stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]):
                self.target(t)
        elif isinstance(stmt, ast.AugAssign):
            self.read(stmt.value)
            if isinstance(stmt.target, ast.Name) and stmt.target.id not in self.bound:
                self.differs = True  # x += ...: carried from the previous iteration
            self.target(stmt.target)
        elif isinstance(stmt, (ast.For, ast.AsyncFor)):
            self.read(stmt.iter)
            self.target(stmt.target)
            for sub in stmt.body + stmt.orelse:
                self.stmt(sub)
        elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            self.bound.add(stmt.name)
        else:
            for child in child_nodes(stmt):
                if isinstance(child, ast.stmt):
                    self.stmt(child)
                elif isinstance(child, ast.AST):
                    self.read(child)


def refine_bounds(m) -> None:
    """Mark as bounded the loops whose trip count the module fixes at a few iterations, beyond
    what the syntax of the iterable shows (:func:`known_trips`): ``for p in prompts`` with
    ``prompts = ["a", "b", "c"]``, ``for i in range(len(prompts))``, ``range(n_views)`` with
    ``n_views = 3``. Run once, after the walk, before any query reads ``Loop.bounded``."""
    for loop in m.loops:
        if loop.bounded:
            continue
        it = loop_iterable(loop.node)
        ctx = m.ctx.get(id(loop.node))
        if it is None or ctx is None:
            continue
        n = known_trips(m, it, ctx.scope)
        if n is not None and n <= BOUNDED_TRIPS:
            loop.bounded = True


def few_iterations(m, ctx: Context) -> bool:
    """Whether a node in ``ctx`` runs at most ``FEW_ITERATIONS`` times in all per program:
    the trip counts of every loop around it in its function are known
    (:func:`known_trips`, with parameter defaults the module never overrides: ``def
    main(steps=20)`` called as ``main()``), their product is at most that, and the function
    is not known to run again and again (:func:`~jaxlint.model.frequency.repeats`). A docs example's
    ``for step in range(100): print(loss)`` syncs 100 times in all."""
    total = 1
    for lp in ctx.loops:  # the node runs once per iteration of every loop around it
        it = loop_iterable(lp.node)
        n = None if it is None else known_trips(m, it, m.scope_at(it), defaults=True)
        if n is None:
            return False
        total *= n
        if total > FEW_ITERATIONS:
            return False
    f = ctx.scope.func
    while f is not None and isinstance(f.node, ast.Lambda):
        f = f.parent
    return f is None or frequency.repeats(m, f) is None


def param_default_int(m, name: ast.Name, scope: Scope) -> Optional[int]:
    """The int literal default of the parameter ``name`` names, when the module calls its
    function somewhere and no call passes that argument (no ``*args``/``**kwargs`` either)."""
    ev = m.binding(name.id, scope, _pos(name))
    if ev is None or ev.kind != "param" or len(ev.scope.events.get(name.id, ())) != 1:
        return None
    f = ev.scope.func
    node = f.node if f is not None else None
    if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return None
    a = node.args
    positional = [p.arg for p in a.posonlyargs + a.args]
    default = None
    if name.id in positional:
        i = positional.index(name.id)
        j = i - (len(positional) - len(a.defaults))
        if j >= 0:
            default = a.defaults[j]
    else:
        kw = [p.arg for p in a.kwonlyargs]
        if name.id in kw:
            default = a.kw_defaults[kw.index(name.id)]
        i = None
    if not (isinstance(default, ast.Constant) and isinstance(default.value, int)
            and not isinstance(default.value, bool)):
        return None
    sites = frequency.callers(m, f)
    if not sites:
        return None
    for call, _ in sites:
        if any(isinstance(x, ast.Starred) for x in call.args) or any(k.arg is None or k.arg == name.id
                                                                      for k in call.keywords):
            return None
        offset = 1 if f.is_method and isinstance(call.func, ast.Attribute) else 0
        if i is not None and len(call.args) + offset > i:
            return None
    return default.value


def known_trips(m, it: ast.AST, scope: Scope, depth: int = 0, defaults: bool = False) -> Optional[int]:
    """How many items iterating ``it`` yields, when the module fixes it: a literal tuple, list,
    set or dict, or an array made from one (``jnp.array([0.2, 0.8])``); ``range`` of int constants (names bound once to int literals included); a name
    bound once to a literal tuple, or to a literal list, set or dict that no code changes in
    place; ``len`` of one of these inside ``range``; ``enumerate``/``reversed``/``zip`` of them.
    None when it depends on anything else."""
    if depth > L.CONST_CHAIN:
        return None
    if isinstance(it, (ast.Tuple, ast.List, ast.Set)):
        return None if any(isinstance(e, ast.Starred) for e in it.elts) else len(it.elts)
    if isinstance(it, ast.Dict):
        return None if any(k is None for k in it.keys) else len(it.keys)
    if isinstance(it, ast.Name):
        value = _fixed_collection(m, it, scope)
        if value is None:
            value = _fixed_range(m, it, scope)
        return None if value is None else known_trips(m, value, scope, depth + 1, defaults)
    if _array_of_literal(m, it, scope):
        return known_trips(m, it.args[0], scope, depth + 1, defaults)
    if isinstance(it, ast.Subscript) and isinstance(it.slice, ast.Slice):
        return _slice_at_most(it.slice)
    if not (isinstance(it, ast.Call) and it.args and not it.keywords
            and not any(isinstance(a, ast.Starred) for a in it.args)):
        return None
    qn = m.resolve(it.func, scope)
    if qn in _ARANGES and len(it.args) <= 3:
        # ``np.arange(0, 181, 5)``: as many items as range() of the same ints
        qn = "builtins.range"
    if qn == "builtins.range" and len(it.args) <= 3:
        vals = [_range_bound(m, a, scope, depth, defaults) for a in it.args]
        if any(v is None for v in vals):
            return None
        try:
            return len(range(*vals))
        except (TypeError, ValueError, OverflowError):
            return None
    if qn in ("builtins.enumerate", "builtins.reversed") and len(it.args) == 1:
        return known_trips(m, it.args[0], scope, depth + 1, defaults)
    if qn == "builtins.zip":
        counts = [known_trips(m, a, scope, depth + 1, defaults) for a in it.args]
        known = [c for c in counts if c is not None]
        return min(known) if known else None  # zip stops at its shortest input
    return None


def _slice_at_most(sl: ast.Slice) -> Optional[int]:
    """At most how many items a slice with int literal bounds takes, whatever the sequence:
    ``xs[-1:]`` one, ``xs[:3]`` three, ``xs[2:5]`` three; None when a bound is not a literal of the
    right sign or there is a step."""
    def literal(e):
        if isinstance(e, ast.UnaryOp) and isinstance(e.op, ast.USub):
            v = literal(e.operand)
            return None if v is None else -v
        return e.value if isinstance(e, ast.Constant) and type(e.value) is int else None

    if sl.step is not None:
        return None
    lo = 0 if sl.lower is None else literal(sl.lower)
    hi = None if sl.upper is None else literal(sl.upper)
    if lo is None or (sl.upper is not None and hi is None):
        return None
    if hi is None:
        return -lo if lo < 0 else None  # xs[-k:]: the last k at most
    if (lo >= 0) == (hi >= 0) or (lo == 0 and hi > 0):
        return max(hi - lo, 0)  # xs[:k], xs[a:b], xs[-k:-j]
    return None


def _range_bound(m, e: ast.AST, scope: Scope, depth: int, defaults: bool = False) -> Optional[int]:
    if isinstance(e, ast.IfExp):
        # ``range(100 if not SMOKE_TEST else 10)``: at most the larger of the two
        a = _range_bound(m, e.body, scope, depth + 1, defaults)
        b = _range_bound(m, e.orelse, scope, depth + 1, defaults)
        return None if a is None or b is None else max(a, b)
    if (isinstance(e, ast.Call) and len(e.args) == 1 and not e.keywords
            and m.resolve(e.func, scope) == "builtins.len"):
        return known_trips(m, e.args[0], scope, depth + 1, defaults)
    v = V.const_int(m, e, scope)
    if v is None and defaults and isinstance(e, ast.Name):
        v = param_default_int(m, e, scope)
    if v is None and isinstance(e, ast.BinOp) and isinstance(e.op, (ast.Add, ast.Sub)):
        # ``range(1, num_epochs + 1)``: a known bound plus or minus a known one
        a = _range_bound(m, e.left, scope, depth + 1, defaults)
        b = _range_bound(m, e.right, scope, depth + 1, defaults) if a is not None else None
        if a is not None and b is not None:
            v = a + b if isinstance(e.op, ast.Add) else a - b
    return v


def _fixed_range(m, name: ast.Name, scope: Scope) -> Optional[ast.AST]:
    """The ``range(...)``/``np.arange(...)`` call a name is bound to once in its scope
    (``angles = jnp.arange(0, 181, 5)``): it cannot change in place."""
    ev = m.binding(name.id, scope, _pos(name))
    if ev is None or not ev.plain_assign or len(ev.scope.events.get(name.id, ())) != 1:
        return None
    value = ev.value
    if isinstance(value, ast.Call) and m.resolve(value.func, ev.scope) in _ARANGES | {"builtins.range"}:
        return value
    return None


def _array_of_literal(m, node: ast.AST, scope: Scope) -> bool:
    """``np.array([0.2, 0.4])``, ``jnp.asarray((1, 2, 3), dtype=...)``: an array made from a
    literal list or tuple, whose length is the literal's."""
    return (isinstance(node, ast.Call) and len(node.args) == 1 and isinstance(node.args[0], (ast.List, ast.Tuple))
            and all(kw.arg == "dtype" for kw in node.keywords)
            and m.resolve(node.func, scope) in _ARRAY_OF)


def _fixed_collection(m, name: ast.Name, scope: Scope) -> Optional[ast.AST]:
    """The literal a name is bound to, once in its scope, when the collection cannot change: a
    tuple, or a list/set/dict that is never changed in place (no ``append``, item assignment
    or ``del``) through that name. (A callee it is passed to could still change it: unseen.)"""
    ev = m.binding(name.id, scope, _pos(name))
    if ev is None or not ev.plain_assign or len(ev.scope.events.get(name.id, ())) != 1:
        return None
    value = ev.value
    if isinstance(value, ast.Tuple) or _array_of_literal(m, value, ev.scope):
        return value
    if not isinstance(value, (ast.List, ast.Set, ast.Dict)):
        return None
    for method in _IN_PLACE:
        for c in m.calls_by_name.get(method, ()):
            f = c.func
            if (isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == name.id
                    and m.binding(name.id, m.scope_at(c), _pos(f.value)) is ev):
                return None
    for target, _kind in m.stores:
        if (isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name)
                and target.value.id == name.id):
            return None
    return value


def effective_children(m, loop: Loop) -> Iterator[Loop]:
    """Nested loops that repeat within one iteration; bounded ones (``for k in ("a", "b")``)
    are seen through, as if their bodies were written out."""
    for ch in loop.children:
        if ch.bounded:
            yield from effective_children(m, ch)
        else:
            yield ch


def _direct_work(m, loop: Loop) -> bool:
    if loop._direct is None:
        loop._direct = False
        eager_counts = loop.steplike
        work = False
        for call in loop.calls:
            if _waits(call):
                continue
            if callables.callable_info(m, call.func, m.scope_at(call)) is not None:
                work = True
                break
            if eager_counts and (V.is_jax(m, call) or _eager_step(m, call)):
                work = True
                break
            if callables.dispatches_compiled(m, call):
                work = True
                break
        if not work:
            work = any(_iterates_array(m, it, sc) for it, sc in loop.iter_nodes)
        if not work:
            work = blocked_anew(m, loop)
        if not work:
            work = any(ch.bounded and _direct_work(m, ch) for ch in loop.children)
        if not work and eager_counts:
            work = _array_arithmetic(m, loop)
        loop._direct = work
    return loop._direct


def _array_arithmetic(m, loop: Loop) -> bool:
    """A statement of the loop's own body doing arithmetic on a JAX array or indexing one, with no call:
    ``w += -coef * tau``, ``tau = vecs[j, :]`` (each an eager dispatch)."""
    for stmt in getattr(loop.node, "body", ()):
        if isinstance(stmt, ast.AugAssign) and isinstance(stmt.target, ast.Name):
            if V.is_jax(m, stmt.target, m.scope_at(stmt.target)):
                return True
        elif isinstance(stmt, ast.Assign) and isinstance(stmt.value, (ast.BinOp, ast.Subscript)):
            if V.is_jax(m, stmt.value, m.scope_at(stmt.value)):
                return True
    return False


def _eager_step(m, call: ast.Call) -> bool:
    """A plain function of the module whose body computes a gradient op by op (``agent.train_step()``)."""
    from .eagerwork import eager_step  # eagerwork reads loops' facts: imported here, when asked
    return eager_step(m, call) is not None


def _iterates_array(m, it: ast.AST, scope: Scope) -> bool:
    if isinstance(it, ast.Call) and isinstance(it.func, ast.Attribute) and it.func.attr in _DICT_VIEWS:
        return False
    return V.is_jax(m, it, scope)


def loop_runs_jax_work(m, loop: Loop) -> bool:
    """Whether one iteration of the loop (nested loops included) dispatches JAX work: a call of a
    compiled or transformed function, iteration over an array, or, in step-like loops (``while``,
    ``range``), any array operation."""
    if loop._jax_work is None:
        loop._jax_work = False  # cycle guard
        loop._jax_work = _direct_work(m, loop) or any(
            loop_runs_jax_work(m, ch) for ch in effective_children(m, loop))
    return loop._jax_work


def hot_loop(m, ctx: Context) -> Optional[Loop]:
    """The loop whose every iteration a node with this context runs in, when that loop is the
    innermost one dispatching JAX work. A node in an outer loop after an inner JAX loop (an
    epoch loop around a step loop) runs once per many steps, and gets None; so does a node in
    a ``raise`` statement. A comprehension in the loop's body (``[jnp.asarray(x) for x in
    losses]``) does not make it an outer loop: an iteration's parts, not steps (measured on the
    review sets: 10 findings more, none fewer)."""
    if ctx.raising:
        return None
    for loop in reversed(ctx.loops):
        if loop.bounded or not loop_runs_jax_work(m, loop):
            continue
        if loop.kind == "comprehension" and V.is_jax(m, loop_iterable(loop.node), m.scope_at(loop.node)):
            continue  # ``[float(v) for v in state["pos"]]``: the parts of one array, not steps
        if any(ch.kind != "comprehension" and loop_runs_jax_work(m, ch) and not _now_and_then(m, ch, loop)
               for ch in effective_children(m, loop)):
            return None
        return loop
    return None


def _now_and_then(m, child: Loop, loop: Loop) -> bool:
    """Whether the nested loop ``child`` runs only under a periodic ``if`` of ``loop`` (an evaluation
    pass every N steps): it does not make ``loop`` an outer loop."""
    from .periodicity import periodic_guard  # periodicity reads loops' facts: imported here, when asked

    ctx = m.context(child.node)
    return ctx is not None and periodic_guard(m, ctx, loop)


def rebound_each_iteration(m, name: str, event, loop: Loop) -> bool:
    """Whether ``name`` (in the scope of ``event``) gets a new binding in every iteration of ``loop``:
    the binding itself is in the loop, the name is a loop target, or it is assigned in the body."""
    if loop in event.loops or name in loop.target_names():
        return True
    return any(loop in ev.loops for ev in event.scope.events.get(name, ()))


def iterations_alike(m, loop: Loop) -> bool:
    """Whether every iteration of a ``for`` loop or comprehension computes what the one before
    did, apart from randomness: the loop variable is not read, no name carries a value from
    one iteration to the next (read in the body before the body binds it, or augmented), no
    attribute or item of outside state is assigned, and no ``next()`` is called. A ``while``
    loop must change something to end, and is not alike. (A call may still change an object's
    state unseen: this is what the syntax shows.)"""
    node = loop.node
    if isinstance(node, ast.While):
        return False
    targets = loop.target_names()
    if not isinstance(node, (ast.For, ast.AsyncFor)):  # a comprehension
        parts = [node.key, node.value] if isinstance(node, ast.DictComp) else [node.elt]
        for i, gen in enumerate(node.generators):
            parts.extend(gen.ifs)
            if i:
                parts.append(gen.iter)
        return not any(isinstance(n, ast.Name) and n.id in targets for p in parts for n in walk(p))
    state = _CarriedState(m, targets)
    for stmt in node.body:
        state.stmt(stmt)
        if state.differs:
            return False
    return not (state.read_first & state.bound)


def exclusive(m, a: Context, b: Context, ifs: dict) -> bool:
    """Whether two nodes with these contexts never both run: opposite sides of one ``if``, or one
    in a branch that ends with ``return``/``raise`` and the other outside that branch."""
    sides_a = dict(a.branches)
    sides_b = dict(b.branches)
    for if_id, side in sides_a.items():
        if if_id in sides_b and sides_b[if_id] != side:
            return True
    for first, other in ((sides_a, sides_b), (sides_b, sides_a)):
        for if_id, side in first.items():
            if other.get(if_id) == side:
                continue
            node = ifs.get(if_id)
            if node is None:
                continue
            stmts = node.body if side == 0 else node.orelse
            if stmts and isinstance(stmts[-1], (ast.Return, ast.Raise)):
                return True
    return False


def ifexp_arms(m) -> dict:
    """id(call) -> set of (id of an IfExp, arm) for calls inside conditional expressions (the
    model's Context.branches covers ``if`` statements only)."""
    out: dict = {}
    for node in m.ifs:
        if isinstance(node, ast.IfExp):
            for arm, part in ((0, node.body), (1, node.orelse)):
                for sub in walk(part):
                    if isinstance(sub, ast.Call):
                        out.setdefault(id(sub), set()).add((id(node), arm))
    return out


def traces_jax_ops(m, loop: Loop, f: FunctionInfo) -> bool:
    """Whether the loop body records JAX operations (a JAX call, a name or an item of a pytree
    assigned a JAX value in it), as opposed to Python bookkeeping that tracing runs but does not
    record."""
    for call in loop.all_calls():
        scope = m.scope_at(call)
        if V.is_jax(m, call, scope) or callables.callable_info(m, call.func, scope) is not None:
            return True
    for evs in f.scope.events.values():
        for ev in evs:
            if loop not in ev.loops:
                continue
            if ev.kind == "assign" and ev.value is not None and V.is_jax(m, ev.value, ev.scope):
                return True
            if ev.kind == "aug" and (V.is_jax(m, ev.node.value, ev.scope) or V.is_jax(m, ev.node.target, ev.scope)):
                return True
    for target, kind in m.stores:
        ctx = m.context(target)
        if kind != "del" and ctx is not None and loop in ctx.loops and V.is_jax(m, target.value, ctx.scope):
            return True  # params["w"] = ... on a pytree of tracers
    return False


def range_call(m, it: ast.AST, scope: Scope) -> Optional[ast.Call]:
    while isinstance(it, ast.Call) and it.args:
        qn = m.resolve(it.func, scope)
        if qn == "builtins.range":
            return it
        if qn in ("builtins.enumerate", "builtins.reversed"):
            it = it.args[0]
            continue
        return None
    return None


def own_loop(m, f: FunctionInfo, uses: list) -> Optional[Loop]:
    """A loop of ``f``'s own, without any of the calls ``uses`` in it, that runs JAX work or steps
    (a ``for`` over ``range``/``count``, a ``while``): one call of ``f`` does a whole loop of
    work (an evaluation pass, a training run), so a compile once per call of ``f`` is small next
    to it. Loops over a few literal options or the parts of one structure do not count."""
    for loop in f.loops:
        if loop.bounded or not loop.steplike:
            continue
        if any(c is u for c in loop.all_calls() for u in uses):
            continue
        if (loop.ranged and loop.kind != "comprehension") or loop_runs_jax_work(m, loop):
            return loop
    return None


def literal_numbers_loop(m, loop: Loop, scope: Scope) -> Optional[int]:
    """How many items a loop over a literal list or tuple of numbers has (``for s in (0.5, 1.0,
    2.0)``, or a name bound once to such a literal); None for any other loop."""
    it = loop_iterable(loop.node)
    if isinstance(it, ast.Name):
        ev = m.binding(it.id, scope, _pos(it))
        it = ev.value if ev is not None and ev.plain_assign else None
    if not isinstance(it, (ast.List, ast.Tuple)) or not it.elts:
        return None
    for e in it.elts:
        if isinstance(e, ast.UnaryOp) and isinstance(e.op, (ast.USub, ast.UAdd)):
            e = e.operand
        if not (isinstance(e, ast.Constant) and isinstance(e.value, (int, float)) and not isinstance(e.value, bool)):
            return None
    return len(it.elts)
