"""Stale closures: the free variables a compiled function's traced code reads (module-level names
and an enclosing function's names, read while JAX traces and baked into the compiled program as
constants) and the places that rebind them after a call of the compiled function, so that later
calls run with the value of the first trace.

* :func:`traced_bodies`: the functions one trace of a compiled function runs (the function, the
  same-module functions it calls, the transform, lax and Pallas bodies applied in them);
* :func:`free_reads`: the reads, in those bodies, of names bound outside them;
* :func:`compiled_calls`: the calls of the compiled wrapper in this module;
* :func:`stale_reads`: for each free read, the rebinding after a call of the compiled function,
  with the facts of JAX603's proof obligation (``compiled-once``, ``rebound-after-call``,
  ``new-value``).

Functions of the model (``m``), not a mixin; JAX603 (jaxlint_rules/side_effects.py) reads them.
"""

from __future__ import annotations

import ast
from typing import Optional

from ... import names as N
from . import callables, loops, repetition
from .jaxrecords import JitWrap
from .proof import Fact, disproven, proven, unknown
from ..python.records import Binding, Context, FunctionInfo, Loop, Scope
from ..python.syntax import _pos, child_nodes, unreachable_spans

_NESTED = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)
_MAX_BODIES = 64  # functions followed from one compiled function (a trace's callees, bodies)
_REBINDS = ("assign", "aug", "for")  # bindings that give a variable a new value (not a def, class, import)


class StaleRead:
    """A free variable read by a compiled function's traced code (``read``, an ``ast.Name`` in
    ``body``, one of the functions the trace of ``func`` runs) that ``rebinding`` rebinds after
    ``call``, a call of the compiled wrapper ``wrap``; ``facts``: compiled-once,
    rebound-after-call and new-value, each proven, unknown or disproven."""

    __slots__ = ("func", "body", "read", "owner", "rebinding", "call", "wrap", "facts")

    def __init__(self, func, body, read, owner, rebinding, call, wrap, facts):
        self.func = func
        self.body = body
        self.read = read
        self.owner = owner  # the scope that binds the name: the module, or an enclosing function
        self.rebinding = rebinding
        self.call = call
        self.wrap = wrap
        self.facts = facts

    def __repr__(self) -> str:
        return f"StaleRead({self.read.id!r}, line {self.read.lineno}, rebound on line {self.rebinding.node.lineno})"


# ------------------------------------------------------------------ what one trace runs


def _trace_children(m) -> dict:
    """id(function) -> the functions its trace runs directly: same-module callees traced from it,
    transform and lax bodies applied in it, Pallas kernels it hands to ``pallas_call``."""
    found = m.facts.trace_children
    if found is not None:
        return found
    found = m.facts.trace_children = {}
    for h in m.functions:
        if not h.traced:
            continue
        parents: list = []
        for cause in h.trace_causes:
            if cause.kind == "caller":
                parents.append(cause.caller)
            elif cause.kind in ("transform", "lax"):
                parents.extend(repetition._applied_in(m, h))
        for g in parents:
            if g is not None and g is not h:
                found.setdefault(id(g), []).append(h)
    for call in m.calls_by_name.get("pallas_call", ()):
        scope = m.scope_at(call)
        if m.resolve(call.func, scope) not in N.PALLAS_CALLS:
            continue
        g = m.function_at(call)
        kernel = call.args[0] if call.args else next((k.value for k in call.keywords if k.arg == "kernel"), None)
        if g is not None and kernel is not None:
            found.setdefault(id(g), []).extend(callables.local_functions(m, kernel, scope))
    return found


def traced_bodies(m, f: FunctionInfo) -> list:
    """``f`` and the functions of this module its trace runs: the callees traced from it, the
    bodies of transforms and lax primitives applied in them (a ``lax.scan`` body, a ``shard_map``
    function), the Pallas kernels they call; breadth first, at most ``_MAX_BODIES``."""
    children = _trace_children(m)
    out = [f]
    seen = {id(f)}
    i = 0
    while i < len(out) and len(out) < _MAX_BODIES:
        for h in children.get(id(out[i]), ()):
            if id(h) not in seen:
                seen.add(id(h))
                out.append(h)
        i += 1
    return out


def _own_loads(node: ast.AST, conventions) -> list:
    """The ``ast.Name`` loads in a function's own code: its body (a lambda's expression), not
    nested functions' or classes' bodies (their decorators and defaults, run here, included), nor
    checks (an ``assert``, a unittest ``assert*`` call): a check made while tracing, by design
    (``self.assertTrue(python_should_be_executing)``), computes nothing the program keeps."""
    out: list = []
    if isinstance(node, ast.Lambda):
        stack = [node.body]
    else:
        stack = list(reversed(node.body))
    while stack:
        n = stack.pop()
        t = type(n)
        if t is ast.Name:
            if type(n.ctx) is ast.Load:
                out.append(n)
            continue
        if t is ast.Assert or (t is ast.Call and isinstance(n.func, ast.Attribute)
                               and conventions.matches("check-calls", n.func.attr)):
            continue
        if isinstance(n, _NESTED):
            if not isinstance(n, ast.ClassDef):
                stack.extend(n.args.defaults)
                stack.extend(d for d in n.args.kw_defaults if d is not None)
            if not isinstance(n, ast.Lambda):
                stack.extend(n.decorator_list)
            continue
        stack.extend(child_nodes(n))
    out.sort(key=_pos)
    return out


def free_reads(m, f: FunctionInfo) -> list:
    """``(body, read, binding)`` for each name the trace of ``f`` reads from outside the
    functions it runs (:func:`traced_bodies`): a module-level name or an enclosing function's,
    whose value JAX reads once, while tracing. Imports, builtins, functions and classes (names
    some binding makes a def or a class) are left out; the first read of a name in each body only."""
    bodies = traced_bodies(m, f)
    inside = {id(g.scope) for g in bodies}
    out: list = []
    for g in bodies:
        seen: set = set()
        memo = m.facts.own_loads
        loads = memo.get(id(g.node))
        if loads is None:  # a callee's body is read once, however many compiled functions trace it
            loads = memo[id(g.node)] = _own_loads(g.node, m.conventions)
        for n in loads:
            if n.id in seen or not m.work.spend():
                continue
            seen.add(n.id)
            found = m._lookup(n.id, g.scope, _pos(n))
            if found is None:
                continue
            ev = found[0]
            owner = ev.scope
            if id(owner) in inside or owner.kind == "class" or ev.kind == "def" or (
                    ev.kind == "other" and isinstance(ev.node, ast.ClassDef)):
                continue
            out.append((g, n, owner))
    return out


# ------------------------------------------------------------------ the compiled wrapper's calls


def compiled_wraps(m, f: FunctionInfo) -> list:
    """The jit wrappers made in this module that compile ``f`` itself (decorated, or
    ``g = jax.jit(f)``)."""
    return [w for w in m.jit_wraps if w.func is f or (
        w.func is None and w.target is not None and not w.decorator
        and f in callables.local_functions(m, w.target, w.ctx.scope))]


def compiled_calls(m, f: FunctionInfo) -> list:
    """``(call, wrap)`` for the calls in this module of a jit wrapper that compiles ``f``: through
    the decorated name, a name bound to the wrapper, or the wrapper called where it is made
    (``jax.jit(f)(x)``)."""
    out: list = []
    for wrap in compiled_wraps(m, f):
        if isinstance(wrap.node, ast.Call):
            parent_calls = [c for c in m.watched_calls if c.func is wrap.node]
            out.extend((c, wrap) for c in parent_calls)
        name = repetition.bound_name(m, wrap)
        if name is None:
            continue
        for c in m.calls_by_name.get(name, ()):
            if isinstance(c.func, ast.Name) and callables.callable_info(m, c.func, m.scope_at(c)) is wrap:
                out.append((c, wrap))
    out.sort(key=lambda cw: _pos(cw[0]))
    return out


# ------------------------------------------------------------------ rebindings after a call


def rebinding_sites(m, owner: Scope, name: str) -> Optional[list]:
    """The bindings that give ``name`` of ``owner`` a new value: in ``owner``, and in functions
    that declare it ``global`` (owner: the module) or ``nonlocal`` (owner: the function whose
    name it is). None when some binding makes it a function or a class (a def, a class, a
    lambda, a jit wrapper): rebinding a function object is left alone."""
    sites = list(owner.events.get(name, ()))
    for decl in m.decls:
        if name not in decl.names:
            continue
        ctx = m.ctx.get(id(decl))
        scope = ctx.scope if ctx is not None else None
        if scope is None or scope is owner:
            continue
        if isinstance(decl, ast.Global) and owner.kind == "module":
            sites.extend(scope.events.get(name, ()))
        elif isinstance(decl, ast.Nonlocal) and scope.parent is not None:
            found = m._lookup(name, scope.parent, (10 ** 9, 0))
            if found is not None and found[0].scope is owner:
                sites.extend(scope.events.get(name, ()))
    for b in sites:
        if b.kind == "def" or (b.kind == "other" and isinstance(b.node, ast.ClassDef)):
            return None
        if b.plain_assign and _makes_callable(m, b.value, b.scope):
            return None
    return [b for b in sites if b.kind in _REBINDS and not _unreachable(m, b)]


def _unreachable(m, b: Binding) -> bool:
    """A binding after a ``break`` (``return``, ...) in its block: it never runs."""
    spans = m.facts.unreachable
    if spans is None:
        spans = m.facts.unreachable = unreachable_spans(m.tree)
    pos = b.pos
    return any(start <= pos <= end for start, end in spans)


def _makes_callable(m, value: ast.AST, scope: Scope) -> bool:
    if isinstance(value, ast.Lambda):
        return True
    if isinstance(value, ast.Call):
        qn = m.resolve(value.func, scope)
        return qn == N.PARTIAL or qn in N.JIT_WRAPPERS or qn in N.TRANSFORMS
    return False


def _binding_ctx(m, b: Binding) -> Context:
    """The context of the statement that makes binding ``b`` (without its ``if`` branches when
    the walk recorded none: an unpacked target, a loop target, a walrus)."""
    stmt = m.stmt_of.get(id(b.node), b.node)
    ctx = m.ctx.get(id(stmt))
    return ctx if ctx is not None and ctx.scope is b.scope else Context(b.scope, tuple(b.loops))


def _within(node: ast.AST, outer: ast.AST) -> bool:
    return _pos(outer) <= _pos(node) and (node.end_lineno, node.end_col_offset) <= (
        outer.end_lineno, outer.end_col_offset)


def _loops_of(m, b: Binding) -> tuple:
    """The loops that repeat binding ``b``: those around it, and for a loop target its own loop."""
    loops = tuple(b.loops)
    if b.kind == "for":
        for lp in m.loops:
            if isinstance(lp.node, (ast.For, ast.AsyncFor)) and _within(b.node, lp.node.target):
                loops = loops + (lp,)
                break
    return loops


def _exclusive(a, b) -> bool:
    """Whether two contexts are in different branches of one ``if``."""
    mine = dict(a.branches)
    return any(k in mine and mine[k] != v for k, v in b.branches)


def stale_reads(m, f: FunctionInfo) -> list:
    """The free variables of ``f``'s trace that code rebinds after a call of ``f``'s compiled
    wrapper, one :class:`StaleRead` per read (the best-proven rebinding and call of each)."""
    if f.jit_entry is None:
        return []
    calls = compiled_calls(m, f)
    if not calls:
        return []
    if not _rebound_near(m, calls):
        return []  # no name is bound twice, in a loop, or through global/nonlocal where it is called
    bodies = traced_bodies(m, f)
    inside = {id(g.scope) for g in bodies}
    out: list = []
    structural = None
    for body, read, owner in free_reads(m, f):
        sites = rebinding_sites(m, owner, read.id)
        if not sites:
            continue
        if structural is None:
            structural = _structural_reads(bodies)
        best = None
        for b in sites:
            if id(b.scope) in inside:
                continue  # rebound by the traced code itself: JAX601's business
            for call, wrap in calls:
                facts = _facts(m, f, read, b, call, wrap, calls)
                if facts is None:
                    continue
                if id(read) in structural and facts[-1].status == "proven":
                    # ``range(len(params))``: the trace keeps only the structure, which a rebinding of the
                    # values may not change (fresh AR: a notebook's unflatten helper, judged FALSE)
                    facts[-1] = unknown("new-value", f"only the structure of `{read.id}` is read "
                                                     f"({structural[id(read)]}): whether the rebinding changes it is "
                                                     "not known")
                score = sum(fact.status != "proven" for fact in facts)
                if best is None or score < best[0]:
                    best = (score, StaleRead(f, body, read, owner, b, call, wrap, facts))
            if best is not None and best[0] == 0:
                break
        if best is not None:
            out.append(best[1])
    return out


_STRUCTURE_ATTRS = frozenset({"shape", "ndim", "dtype", "size"})


def _structural_reads(bodies: list) -> dict:
    """id of a Name node -> how its structure alone is read (``len(x)``, ``x.shape``) in the traced
    bodies: what the trace keeps of such a read is the length, shape or dtype, not the values."""
    out: dict = {}
    for g in bodies:
        for n in ast.walk(g.node):
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "len" and len(n.args) == 1 \
                    and isinstance(n.args[0], ast.Name):
                out[id(n.args[0])] = f"`len({n.args[0].id})`"
            elif isinstance(n, ast.Attribute) and n.attr in _STRUCTURE_ATTRS and isinstance(n.value, ast.Name):
                out[id(n.value)] = f"`{n.value.id}.{n.attr}`"
    return out


def _rebound_near(m, calls: list) -> bool:
    """Whether some name may be rebound after a call of the compiled function, where a stale read
    needs it (:func:`_facts`: in the scope of a call): a name bound there twice or in a loop, or a
    ``global``/``nonlocal`` declaration in the module. A cheap test before the trace's reads are listed."""
    if m.decls:
        return True
    for call, _ in calls:
        ctx = m.ctx.get(id(call))
        if ctx is None:
            return True
        if any(len(evs) > 1 or evs[0].loops for evs in ctx.scope.events.values() if evs):
            return True
    return False


def _facts(m, f, read: ast.Name, b: Binding, call: ast.Call, wrap: JitWrap, calls: list) -> Optional[list]:
    """The proof of one (rebinding, call) pair, or None when the pair is no case at all (the
    rebinding is not after a call in the same scope)."""
    cctx = m.ctx.get(id(call))
    bctx = _binding_ctx(m, b)
    if cctx is None or cctx.scope is not b.scope:
        return None
    name = read.id
    fname = f.name
    shared: Optional[Loop] = None
    for lp in reversed(cctx.loops):
        if lp.kind != "comprehension" and lp in _loops_of(m, b):
            shared = lp
            break
    bpos = b.pos
    if shared is not None:
        it = loops.loop_iterable(shared.node)
        trips = loops.known_trips(m, it, cctx.scope) if it is not None else None
        if trips is not None and trips <= 1:
            return None  # ``for lr in [0.001]:``: one iteration, the rebinding is never after a call (fresh AX)
        line = shared.node.lineno
        after = proven("rebound-after-call", f"the loop on line {line} calls `{fname}` and rebinds `{name}` "
                                             "(line {0}): every call after the first runs the first trace".format(
                                                 b.node.lineno))
        once = _compiled_once(m, f, wrap, shared)
    else:
        before = [c for c, _ in calls if m.ctx.get(id(c)) is not None and m.ctx[id(c)].scope is b.scope
                  and _pos(c) < bpos and not _exclusive(m.ctx[id(c)], bctx)]
        later = [c for c, _ in calls if m.ctx.get(id(c)) is not None and m.ctx[id(c)].scope is b.scope
                 and _pos(c) > bpos and not _exclusive(m.ctx[id(c)], bctx)]
        if call not in before or not later:
            return None
        after = proven("rebound-after-call", f"`{fname}` is called on line {call.lineno}, `{name}` rebound on line "
                                             f"{b.node.lineno} and `{fname}` called again on line {later[0].lineno}")
        once = _compiled_once(m, f, wrap, None)
    return [once, after, _new_value(m, b, shared)]


def _compiled_once(m, f: FunctionInfo, wrap: JitWrap, loop: Optional[Loop]) -> Fact:
    """Whether the calls reuse one trace: the traced function (and, for a wrapper made around a
    new callable, the callable) is made once, not anew in ``loop``, where the call is repeated."""
    if loop is not None:
        if repetition.created_inside(m, f.node, (loop,)):
            return disproven("compiled-once", f"`{f.name}` is defined anew in each iteration of the loop on line "
                                              f"{loop.node.lineno}: each new function is traced again")
        if not wrap.decorator and repetition.created_inside(m, wrap.node, (loop,)) \
                and repetition.rebuilt_callable(m, wrap, (loop,)) is not None:
            return disproven("compiled-once", f"`{wrap.spelling}` wraps a new callable in each iteration of the loop "
                                              f"on line {loop.node.lineno}: each is traced again")
    how = "decorated with" if wrap.decorator else "wrapped once by"
    return proven("compiled-once", f"`{f.name}` is {how} `{wrap.spelling}`: later calls reuse the program "
                                   "traced by the first (JAX caches the trace per function and argument shapes)")


def _new_value(m, b: Binding, loop: Optional[Loop]) -> Fact:
    """Whether the rebinding gives the variable a value other than the one traced."""
    name = b.node.id if isinstance(b.node, ast.Name) else getattr(getattr(b.node, "target", None), "id", "")
    if b.kind == "for":
        return proven("new-value", f"`{name}` is the loop's item: a new value each iteration")
    if b.kind == "aug":
        return proven("new-value", f"`{name}` is updated in place (`{name} op= ...`)")
    value = b.value if b.path is None else repetition.element_at(b.value, b.path)
    if b.path is not None and value is None:
        value = b.value  # unpacked from a call: ``key, sub = split(key)``
    if value is None:
        return unknown("new-value", f"the new value of `{name}` is not known")
    if any(isinstance(n, ast.Name) and n.id == name for n in ast.walk(value)):
        return proven("new-value", f"`{name}` is recomputed from its own value")
    if loop is not None:
        loops = _binding_ctx(m, b).loops
        found = repetition.churn(m, value, loops, b.scope)
        if found is None and isinstance(value, ast.Call):
            for arg in [*value.args, *(k.value for k in value.keywords)]:
                found = repetition.churn(m, arg, loops, b.scope)
                if found is not None:
                    break
        if found is not None:
            return proven("new-value", f"the value of `{name}` is computed from `{found.name}`, which changes every "
                                       "iteration")
        fresh = _per_iteration_argument(m, value, b.scope, loop) if isinstance(value, ast.Call) else None
        if fresh is not None:
            return proven("new-value", f"the value of `{name}` is computed in each iteration from `{fresh}`, bound "
                                       f"in the loop on line {loop.node.lineno}")
    elif isinstance(value, ast.Constant):
        prior = [e for e in b.scope.events.get(name, ()) if e.pos < b.pos and e.plain_assign]
        if prior and isinstance(prior[-1].value, ast.Constant) and prior[-1].value.value != value.value:
            return proven("new-value", f"`{name}` goes from {prior[-1].value.value!r} to {value.value!r}")
    return unknown("new-value", f"the new value of `{name}` may equal the one traced")


def _per_iteration_argument(m, call: ast.Call, scope: Scope, loop: Loop) -> Optional[str]:
    """A name an argument of ``call`` reads that is bound in ``loop`` from the iteration's work
    (``next_obs, ... = envs.step(np.array(action))`` with ``action`` from this iteration's call):
    the call gets this iteration's input. None when every argument is loop-invariant."""
    for arg in [*call.args, *(k.value for k in call.keywords)]:
        for n in ast.walk(arg):
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load):
                found = m._lookup(n.id, scope, _pos(n))
                if found is not None and found[0].scope is scope and found[0].kind in _REBINDS \
                        and loop in _loops_of(m, found[0]) and not _same_each_iteration(m, found[0], loop):
                    return n.id
    return None


def _same_each_iteration(m, b: Binding, loop: Loop, depth: int = 0) -> bool:
    """``lr = args.lr`` in the loop: a plain assignment of names, attributes, items and arithmetic of
    values no statement of the loop binds (or that are themselves such assignments): the same value in
    every iteration, however often it is bound. Calls may return something new each time: not this."""
    if depth > 3 or not b.plain_assign or b.value is None:
        return False
    for n in ast.walk(b.value):
        if isinstance(n, ast.Call):
            return False
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load):
            inside = [e for e in b.scope.events.get(n.id, ()) if loop in _loops_of(m, e)]
            if any(not _same_each_iteration(m, e, loop, depth + 1) for e in inside):
                return False
    return True
