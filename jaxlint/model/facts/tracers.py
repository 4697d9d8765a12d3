"""The tracer fact and the traced-path fact, each *proven*, *disproven* or *unknown* (jaxlint/model/proof.py):
what the rules about staged code (JAX203, JAX301-JAX303) need before they call a value a tracer.

A configuration object, a static field, a shape or a Python int is not a tracer until shown to be
one: a value is *proven* a tracer only when it comes from JAX operations, compiled calls or the
traced inputs used as arrays (:meth:`~jaxlint.model.staging.Staging.array_valued`); it is
*disproven* when it reads only static or concrete values; otherwise it is *unknown*, with the
reason. Code is on the traced path unless an ``if`` decided at trace time by a Python value may skip
it (jax-md's ``allocate`` branch, taken only in eager calls).

Functions of a :class:`~jaxlint.model.staging.Staging` (``st``), imported explicitly.
"""

from __future__ import annotations

import ast
from typing import Optional

from ... import names as N
from . import callables, frequency, hostvalues, repetition, statics
from ..python import limits as L
from . import values as V
from .proof import Fact, disproven, proven, unknown
from ..python.records import FunctionInfo, Scope
from ..python.syntax import _end, _pos, unparse, walk



def tracer(st, f: Optional[FunctionInfo], expr: ast.AST, scope: Scope, ctx=None, autodiff: bool = False) -> Fact:
    """Whether ``expr``, read in staged ``f``, is a tracer: *proven* when its value comes from
    JAX operations, compiled calls or the traced inputs used as arrays (:meth:`array_valued`);
    *disproven* when it is no JAX value, or reads only static arguments, ``partial``-bound,
    closed-over or static-field values (:meth:`suspect`), a value narrowed by ``isinstance``
    (``ctx``), or a JAX library helper's Python result; *unknown* otherwise (a field of a traced
    argument whose class is not known, a parameter with a default no call overrides, the
    result of a call the model cannot follow), with the reason. ``autodiff``: code traced by
    autodiff alone counts too (its values are JVP tracers, concrete but still tracers)."""
    m = st.m
    text = unparse(expr, 30)
    if not (f is not None and f.traced if autodiff else st.staged(f)):
        return disproven("tracer", f"`{text}` is not in traced code")
    if not V.is_jax(m, expr, scope):
        return disproven("tracer", f"`{text}` is not a JAX value")
    if st.suspect(f, expr, scope):
        return disproven("tracer", f"`{text}` reads only static arguments, `partial`-bound, closed-over or "
                                   "static-field values: Python values when traced")
    if ctx is not None and st.narrowed(ctx, expr):
        return disproven("tracer", f"an `isinstance` test around it makes `{text}` a Python value")
    if hostvalues.reads_internal_helper(m, expr, scope):
        return disproven("tracer", f"`{text}` reads a JAX library helper's Python result")
    if st.array_valued(f, expr, scope):
        how = st.how_staged(f) if st.staged(f) else "under autodiff"
        return proven("tracer", f"`{text}` is computed from `{f.name}`'s traced inputs, {how}")
    return unknown("tracer", _unproven(st, f, expr, scope))

def traced_path(st, f: Optional[FunctionInfo], node: ast.AST, depth: int = 0) -> Fact:
    """Whether code of staged ``f`` at ``node`` is on the path JAX traces. An ``if P is None``
    (or ``is not None``) around it in its function, on a ``P`` that is a Python value when
    traced, is decided at trace time (:meth:`_decided_when_traced`): *disproven* when the value
    every staged entry gives ``P`` skips the branch; *unknown* when the entries may give None or
    not (a static argument defaulting to None, a ``functools.partial`` binding of a value not
    known, a variable of an untraced enclosing function: jax-md's ``allocate`` path takes the
    branch eagerly, the jitted ``update`` does not); *proven* otherwise. A function traced only
    because traced code calls it is on the path where one of those calls is."""
    for node_if, branch in _branches(st, f, node):
        tested, truth = _none_test(node_if.test), False
        if tested is None:  # ``if not for_jit:`` with every traced call passing ``for_jit=True`` (fresh AG)
            tested, truth = _truth_test(node_if.test), True
        if tested is None:
            continue
        name, taken_for = tested
        ev = st.m.binding(name, f.scope, _pos(node_if.test))
        if ev is None or ev.scope.func is None:
            continue
        g = ev.scope.func
        if g is not f and not g.traced:
            none = "unknown" if _may_be_none(ev, name) else None  # closed over: concrete when traced
        elif ev.kind == "param":
            none = _decided_when_traced(st, g, name, 0, truth)
        else:
            continue
        if truth:  # a truth test: only a value every traced call fixes decides it
            if none in (True, False) and taken_for(none) != (branch == 0):
                return disproven("traced-path", f"`{name}` is {none} whenever `{f.name}` is traced (every traced "
                                                f"call passes it so), so the `if` on line {node_if.lineno} skips it")
            continue
        if none is None:
            continue  # not a Python value decided at trace time: the branch is traced as written
        if none == "unknown":
            return unknown("traced-path", f"the `if {unparse(node_if.test, 30)}` on line {node_if.lineno} is decided "
                                          f"at trace time by `{name}`, a Python value there that may or may not be "
                                          "None: the branch may run only in eager calls")
        if taken_for(None if none else 0) != (branch == 0):
            what = "None" if none else "not None"
            return disproven("traced-path", f"`{name}` is {what} whenever `{f.name}` is traced, so the `if` on "
                                            f"line {node_if.lineno} skips it")
    if f is not None and f.traced_by_callers_only and depth < L.KIND_CHAIN:
        facts = [traced_path(st, caller, call, depth + 1) for call, caller in st.staged_calls(f)]
        if facts and not any(x.proven for x in facts):
            gap = next((x for x in facts if x.unknown), None)
            if gap is not None:
                return gap
            return disproven("traced-path", f"every traced call of `{f.name}` is on a path tracing skips")
    return proven("traced-path", "no `if` decided at trace time skips it")

def trace_time(st, f: FunctionInfo) -> Fact:
    """Whether the Python body of traced ``f`` runs only while JAX traces it, once per compilation
    (a store there happens once and keeps a tracer): *proven* when every reason it is traced is a
    jit wrapper or code itself traced per compilation, or it is the body of a lax primitive (traced
    to a program, even outside jit); *unknown* otherwise: under a transform
    applied without jit (``jax.vmap(f)(xs)``, ``jax.grad(loss)(p)``) its Python runs on every call, and
    what it stores is a tracer that fails only if used after the call."""
    if repetition.traced_per_compilation(st.m, f):
        return proven("trace-time", f"`{f.name}` is traced once per compilation ({st.how_staged(f)})")
    lax = next((c for c in f.trace_causes if c.kind == "lax"), None)
    if lax is not None:
        return proven("trace-time", f"`{f.name}` is the body of {lax.name}, which traces it to a program: its Python "
                                    "runs at trace time, with tracers")
    causes = ", ".join(sorted({c.name for c in f.trace_causes})) or "a transform"
    return unknown("trace-time", f"`{f.name}` is traced by {causes} where this module shows no compilation: its "
                                 "Python runs on every call, and a tracer it keeps fails only if used after the call")


def leaks(st, f: FunctionInfo, container: Optional[ast.Name] = None) -> Fact:
    """Whether a tracer that traced ``f`` stores into outside state (``container``, when it is a
    Python container; else a ``self`` attribute or a global) outlives the trace and is read after
    it: *proven* when ``f`` runs only at trace time (:func:`trace_time`: later calls skip the
    store, and what it kept is the first trace's tracer), or when, under a transform applied
    without jit, the container leaves the function that holds it (returned: its reader gets a
    tracer); *unknown* otherwise (the store runs on every call, and its tracer fails only if read
    after the call)."""
    fact = trace_time(st, f)
    if fact.proven or container is None:
        return Fact("leaks", fact.status, fact.why)
    m = st.m
    ev = m.binding(container.id, m.scope_at(container), _pos(container))
    owner = ev.scope.func if ev is not None else None
    if owner is not None and container.id in frequency.escaping_names(owner):
        return proven("leaks", f"`{container.id}` leaves `{owner.name}` in what it returns, holding the tracer "
                               f"that `{f.name}` stored")
    return Fact("leaks", fact.status, fact.why)


def abstract_values(st, f: FunctionInfo) -> Fact:
    """Whether the values in traced ``f`` are abstract tracers (no numbers in them) when its Python
    runs: *proven* when ``f`` is staged (jit, vmap, a lax body: a ``print`` shows shapes only);
    *disproven* under autodiff alone (``jax.grad(loss)(p)`` outside jit: a ``print`` shows the
    primal values, on every call)."""
    if st.staged(f):
        return proven("abstract-values", f"`{f.name}` runs {st.how_staged(f)}, on abstract values")
    return disproven("abstract-values", f"`{f.name}` is traced only by autodiff outside compiled code: its values "
                                        "are concrete, and a print shows them on every call")


def _decided_when_traced(st, g: FunctionInfo, name: str, depth: int, truth: bool = False):
    """Whether parameter ``name`` of ``g`` is None when ``g`` is traced: True (always), False
    (never), "unknown" (it is a Python value there, None in some entries or not known), or None
    when the question does not arise (an argument of a jit entry, traced as given). With ``truth``:
    whether it is true instead, decided only by literals (an expression is "unknown")."""
    def outcome(value):
        return bool(value) if truth else value is None

    if name in st._shaky(g):
        fixed = statics.static_constant(st, g, name)
        return "unknown" if fixed is None else outcome(fixed[0])
    if not g.traced_by_callers_only or depth > L.KIND_CHAIN:
        return None
    outcomes = set()
    m = st.m
    for call, caller in st.staged_calls(g):
        if any(isinstance(a, ast.Starred) for a in call.args) or any(kw.arg is None for kw in call.keywords):
            return "unknown"
        given = callables.passed_argument(g, call, name)
        if given is None:
            given = g.default(name)
        if given is None:
            return None
        if isinstance(given, ast.Constant):
            outcomes.add(outcome(given.value))
            continue
        ev = m.binding(given.id, caller.scope, _pos(given)) if isinstance(given, ast.Name) else None
        if ev is not None and ev.kind == "param" and ev.scope.func is caller:
            inner = _decided_when_traced(st, caller, given.id, depth + 1, truth)
            if inner is None:
                return None
            outcomes.add(inner)
            continue
        outcomes.add("unknown" if truth else False)  # an expression (``arr.size``, ``n + 1``, a call): not None
    if not outcomes:
        return None
    return outcomes.pop() if len(outcomes) == 1 else "unknown"

def _branches(st, f: Optional[FunctionInfo], node: ast.AST) -> list:
    """``(If, 0 for its body / 1 for its else)`` for each ``if`` statement of ``f``'s own body
    around ``node``."""
    if f is None:
        return []
    ifs = st._memo.get(("ifs", id(f)))
    if ifs is None:
        ifs = st._memo[("ifs", id(f))] = [n for n in st.m.ifs if isinstance(n, ast.If)
                                             and st.m.function_at(n) is f]
    pos = _pos(node)
    out = []
    for n in ifs:
        if n.body and _pos(n.body[0]) <= pos <= _end(n.body[-1]):
            out.append((n, 0))
        elif n.orelse and _pos(n.orelse[0]) <= pos <= _end(n.orelse[-1]):
            out.append((n, 1))
    return out

def _unproven(st, f: FunctionInfo, expr: ast.AST, scope: Scope) -> str:
    """Why ``expr`` (a JAX value to the model) is not known to be a tracer, in a sentence that
    names the value the model could not follow."""
    m = st.m
    text = unparse(expr, 30)
    for n in walk(expr):
        if isinstance(n, ast.Attribute) and not isinstance(n.value, ast.Call) and n.attr not in N.METADATA_ATTRS:
            root = n.value
            while isinstance(root, (ast.Attribute, ast.Subscript)):
                root = root.value
            if isinstance(root, ast.Name) and V.is_jax(m, root, scope):
                return (f"`{unparse(n, 30)}` is a field of the traced argument `{root.id}`, whose class is not "
                        "known: it may be a static field or a Python value")
        if not isinstance(n, ast.Name):
            continue
        ev = m.binding(n.id, scope, _pos(n))
        if ev is None or ev.kind != "param" or ev.scope.func is None or not V.is_jax(m, n, scope):
            continue
        g = ev.scope.func
        default = g.default(n.id)
        if default is not None:
            return (f"`{n.id}` has a default (`{unparse(default, 20)}`) that no call in this module is seen to "
                    "override: a Python value unless a caller passes one")
        if g.traced_by_callers_only:
            return (f"`{n.id}` is a parameter of `{g.name}`, whose traced callers pass values not known to be "
                    "arrays")
    return f"nothing shows that `{text}` is an array rather than a Python value"


def _may_be_none(ev, name: str) -> bool:
    """Whether a variable of an enclosing function may hold None: a parameter defaulting to None,
    or some binding of it in that function assigns the literal None."""
    g = ev.scope.func
    default = g.default(name) if ev.kind == "param" else None
    if isinstance(default, ast.Constant) and default.value is None:
        return True
    return any(b.plain_assign and isinstance(b.value, ast.Constant) and b.value.value is None
               for b in ev.scope.events.get(name, ()))


def _truth_test(test: ast.AST) -> Optional[tuple]:
    """``(name, taken)`` for ``if name:`` or ``if not name:``; ``taken(value)`` says whether the test passes."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not) and isinstance(test.operand, ast.Name):
        return test.operand.id, lambda v: not v
    return (test.id, lambda v: bool(v)) if isinstance(test, ast.Name) else None


def _none_test(test: ast.AST) -> Optional[tuple]:
    """``(name, taken)`` for ``name is None`` or ``name is not None`` (``not`` around either);
    ``taken(value)`` says whether the test passes for that value. None for any other test."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        inner = _none_test(test.operand)
        return None if inner is None else (inner[0], lambda v, t=inner[1]: not t(v))
    if (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.left, ast.Name)
            and isinstance(test.comparators[0], ast.Constant) and test.comparators[0].value is None
            and isinstance(test.ops[0], (ast.Is, ast.IsNot))):
        if isinstance(test.ops[0], ast.Is):
            return test.left.id, lambda v: v is None
        return test.left.id, lambda v: v is not None
    return None
