"""Staged tracing: which traced functions see abstract tracers (jit, vmap, lax bodies, ...), as
opposed to functions traced only by autodiff outside any jit, where values stay concrete; and
which parameters the tracer analysis may wrongly count as tracers.

Two notions of "traced code" exist, on purpose: ``FunctionInfo.traced`` (the function runs under
any JAX tracing, autodiff included: trace-time side effects and host RNG draws happen once) and
:meth:`Staging.staged` (its values are abstract: Python control flow and value-dependent shapes
fail). Rules about what runs once at trace time read the first, rules about what cannot be
staged the second. ``ModuleModel.staging`` is the one instance per module.
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Optional, Sequence

from ... import names as N
from . import callables, pytrees
from ..python import limits as L
from . import values as V
from .pythonvalues import _pairs, _python_comparison, _python_types
from ..python.records import FunctionInfo, Scope, _element
from ..python.syntax import _contains, _pos, call_arg, walk
from .apisyntax import at_update

if TYPE_CHECKING:  # annotations only: the model imports this module
    from ..python.module import ModuleModel

# Transforms that trace with concrete primal values: Python control flow and value-dependent
# shapes work under them (checked on jax 0.10.2 for grad, jacfwd, jacrev, hessian, jvp, vjp,
# linearize). Everything else the model marks as traced (jit, pmap, vmap, checkpoint, lax bodies,
# eval_shape, shard_map...) stages the function out with abstract values.
CONCRETE_TRANSFORMS = frozenset({
    "jax.grad", "jax.value_and_grad", "jax.jacfwd", "jax.jacrev", "jax.hessian", "jax.jvp", "jax.vjp",
    "jax.linearize", "equinox.filter_grad", "equinox.filter_value_and_grad", "flax.nnx.grad",
    "flax.nnx.value_and_grad",
})

_TRANSFORM_LAST_NAMES = frozenset(q.rsplit(".", 1)[1] for q in CONCRETE_TRANSFORMS)


class Staging:
    """Which traced functions see abstract tracers (jit, vmap, lax bodies, ...), as opposed to
    functions traced only by autodiff outside any jit, where values stay concrete."""

    def __init__(self, model: ModuleModel):
        self.m = model
        self._memo: dict = {}
        self._arg_parent: Optional[dict] = None
        self._partial_bound: Optional[dict] = None
        self._transform_calls: Optional[dict] = None

    def functions(self):
        """The module's functions that are staged out with abstract tracers, in order."""
        return (f for f in self.m.functions if self.staged(f))

    def staged(self, f: Optional[FunctionInfo]) -> bool:
        if f is None or not f.traced:
            return False
        key = id(f)
        if key in self._memo:
            return self._memo[key]
        self._memo[key] = False  # cycle guard
        result = False
        for cause in f.trace_causes:
            if cause.kind == "caller":
                if self.staged(cause.caller):
                    result = True
            elif cause.kind == "transform" and cause.name in CONCRETE_TRANSFORMS:
                if not cause.decorator and self._grad_site_staged(f, cause.name):
                    result = True
            else:
                result = True
            if result:
                break
        self._memo[key] = result
        return result

    def compiled(self, f: Optional[FunctionInfo], depth: int = 0) -> Optional[bool]:
        """Whether ``f`` is traced into a program XLA compiles: True under a jit/pmap wrapper or as
        a lax primitive's body (directly or through its callers); None when it is traced only by
        a transform (``jax.vmap(f)(x)`` called outside jit runs op by op, each primitive compiled
        alone; whether a jit encloses the transform's call is not recorded); False when not staged."""
        if f is None or not self.staged(f):
            return False
        if depth > 8:
            return None
        found: Optional[bool] = False
        for cause in f.trace_causes:
            if cause.kind in ("jit", "lax"):
                return True
            if cause.kind == "caller" and cause.caller is not f:
                sub = self.compiled(cause.caller, depth + 1)
                if sub:
                    return True
                if sub is None:
                    found = None
            elif cause.kind == "transform":
                found = None
        return found

    def how_staged(self, f: Optional[FunctionInfo], depth: int = 0) -> str:
        """How staged ``f`` comes to see abstract tracers, for messages: "under jax.jit", "under
        jax.vmap", "in a jax.lax.fori_loop body", "when called from `step` under jax.jit"."""
        if f is None or not self.staged(f):
            return "when traced"
        for cause in f.trace_causes:
            if cause.kind == "jit":
                return f"under {cause.name}"
            if cause.kind == "lax":
                return f"in a {cause.name} body"
            if cause.kind == "transform" and cause.name not in CONCRETE_TRANSFORMS:
                return f"under {cause.name}"
        for cause in f.trace_causes:
            if cause.kind == "caller" and self.staged(cause.caller):
                inner = self.how_staged(cause.caller, depth + 1) if depth < 2 else "when traced"
                if inner == "when traced":
                    return f"when called from `{cause.caller.name}`, which is traced"
                return f"when called from `{cause.caller.name}` {inner.removeprefix('when ')}"
        for cause in f.trace_causes:
            if cause.kind == "transform":
                return f"under {cause.name} inside compiled code"
        return "when traced"

    # -- parameters the model may wrongly count as tracers

    def _bound_by_partial(self) -> dict:
        """id(FunctionInfo) -> parameters some ``functools.partial(f, ...)`` in the module binds.
        The model marks every parameter of ``jax.vmap(partial(f, mode=m))`` as a tracer, but the
        bound ones are closed-over Python values."""
        if self._partial_bound is None:
            self._partial_bound = {}
            m = self.m
            for call in m.calls:
                if not call.args:
                    continue
                scope = m.scope_at(call)
                if m.resolve(call.func, scope) != N.PARTIAL:
                    continue
                for g in callables.local_functions(m, call.args[0], scope):
                    params = list(g.params)
                    if g.is_method and isinstance(call.args[0], ast.Attribute) and params:
                        params = params[1:]
                    bound: set = set()
                    rest = call.args[1:]
                    if any(isinstance(a, ast.Starred) for a in rest) or any(kw.arg is None for kw in call.keywords):
                        bound |= set(params) | set(g.kwonly)  # *args/**kwargs: any of them may be bound
                    else:
                        bound |= set(params[:len(rest)])
                    bound |= {kw.arg for kw in call.keywords if kw.arg is not None}
                    self._partial_bound.setdefault(id(g), set()).update(bound)
        return self._partial_bound

    def suspect(self, f: Optional[FunctionInfo], expr: ast.AST, scope: Scope) -> bool:
        """Whether ``expr`` is a JAX value only by the model's over-approximation: it reads (directly
        or through local assignments) parameters the model counts as tracers that may well be
        Python values (see :meth:`_shaky`) or that the function uses as Python values
        (:meth:`_python_evidence`), or arrays bound outside any traced function (computed eagerly,
        then closed over: concrete constants when tracing), and no other tracer."""
        found: set = set()
        self._sources(expr, scope, found, 0)
        return ("shaky" in found or "concrete" in found or "python" in found) and "real" not in found

    def _sources(self, expr: ast.AST, scope: Scope, found: set, depth: int) -> None:
        m = self.m
        static = None
        skip: set = set()
        bases = {id(x.value) for x in walk(expr) if isinstance(x, (ast.Subscript, ast.Attribute))}
        for n in walk(expr):
            if id(n) in skip:
                continue
            if isinstance(n, ast.Attribute):
                if static is None:
                    static = pytrees.static_fields(self.m)
                if n.attr in static or n.attr in N.METADATA_ATTRS:
                    found.add("concrete")  # a static field or metadata of whatever it is read from
                    skip.update(id(x) for x in walk(n))
                continue
            if not isinstance(n, ast.Name):
                continue
            ev = m.binding(n.id, scope, (n.lineno, n.col_offset))
            if ev is None or not V.is_jax(m, n, scope):
                continue  # not a JAX value: it cannot be what makes ``expr`` one
            g = ev.scope.func
            if g is None or not g.traced:
                found.add("concrete")  # bound at module level or in an untraced function: closed over
                continue
            if ev.kind == "param" and g is not None:
                if n.id in self._shaky(g):
                    found.add("shaky")
                elif id(n) not in bases and self._python_evidence(ev, n.id):
                    found.add("python")  # read whole, and used as a Python value elsewhere (``x is None``,
                    # ``x == Mode.A``; its fields or items, ``x["k"]``, may still be arrays)
                elif n.id in g.tracer_params:
                    found.add("real")
            elif ev.kind in ("assign", "for", "aug") and depth < L.TRACER_SOURCE_HORIZON:
                value = ev.node.value if ev.kind == "aug" else ev.value
                if value is not None:
                    self._sources(value, ev.scope, found, depth + 1)
            elif ev.kind in ("assign", "for", "aug"):
                found.add("real")  # too deep to tell: assume a real tracer
            if "real" in found:
                return

    def _shaky(self, f: FunctionInfo) -> set:
        """Parameters of a traced function that may well hold Python values: static arguments of
        its jit, ones bound by ``functools.partial``, ``self``, parameters with a string or
        container default, defaulted parameters of a lax body (the primitive passes only the
        leading ones), dtypes, and every parameter when the jit's static arguments are not literal."""
        key = ("shaky", id(f))
        if key in self._memo:
            return self._memo[key]
        out = set(f.static_names()) | self._bound_by_partial().get(id(f), set())
        node = f.node
        a = node.args
        if f.is_method and f.params and f.params[0] in ("self", "cls"):
            out.add(f.params[0])
        positional = list(f.params)
        defaults = dict(zip(positional[len(positional) - len(a.defaults):], a.defaults))
        defaults.update({p: d for p, d in zip(f.kwonly, a.kw_defaults) if d is not None})
        lax_only = bool(f.trace_causes) and all(c.kind == "lax" for c in f.trace_causes)
        for p, d in defaults.items():
            if lax_only or isinstance(d, (ast.Tuple, ast.List, ast.Dict)) or (
                    isinstance(d, ast.Constant) and isinstance(d.value, str)):
                out.add(p)
        dtypes = self.m.conventions
        out |= {p for p in positional + f.kwonly if dtypes.matches("dtype-params", p)}
        if _opaque_statics(f):
            out |= set(positional) | set(f.kwonly)
        self._memo[key] = out
        return out

    def narrowed(self, ctx, expr: ast.AST) -> bool:
        """An enclosing ``if isinstance(name, str/int/...)`` makes a name in ``expr`` a Python value."""
        names = {n.id for n in walk(expr) if isinstance(n, ast.Name)}
        if not names:
            return False
        for test, _ in ctx.guards:
            for node in walk(test):
                if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "isinstance"
                        and len(node.args) == 2 and isinstance(node.args[0], ast.Name)
                        and node.args[0].id in names and _python_types(self.m, node.args[1], ctx.scope)):
                    return True
        return False

    # -- value kinds under staging: known arrays, static constants

    def array_valued(self, f: Optional[FunctionInfo], expr: ast.AST, scope: Scope) -> bool:
        """Whether ``expr`` (in staged ``f``) is known to be an array, so a tracer: the result of a
        JAX operation or of a compiled function, a comparison or arithmetic with one, a traced
        input compared with a number, or a traced input (a parameter, an element unpacked from
        one) that nothing shows to be anything else.

        Not known: what the model counts as a JAX value only because it is (part of) a traced
        argument, where that argument may as well be None, a container, an object or static
        data, all legal under jit: a parameter with a default that the callers need not pass, one
        tested ``is None``, indexed with a string, read an attribute arrays do not have, called,
        or compared with a string or an enum member; a field read off a traced input
        (``state.dynamic_scale``), which may be None or static aux data (``pytree_node=False``)."""
        return self._array(expr, scope, 0)

    def _array(self, e: ast.AST, scope: Scope, depth: int) -> bool:
        m = self.m
        if e is None or depth > L.KIND_CHAIN or not m.work.spend() or not V.is_jax(m, e, scope):
            return False
        key = ("array", id(e))
        if key in self._memo:
            return self._memo[key]
        self._memo[key] = False  # cycle guard
        result = self._array_uncached(e, scope, depth + 1)
        self._memo[key] = result
        return result

    def _array_uncached(self, e: ast.AST, scope: Scope, d: int) -> bool:
        t = type(e)
        if t is ast.Name:
            return self._name_array(e, scope, d)
        if t is ast.Call:
            return self._call_array(e, scope, d)
        if t is ast.Attribute:
            if e.attr in _ARRAY_ATTRS and self._array(e.value, scope, d):
                return True
            # a field the module's classes declare an array (``x: jax.Array``), read off a traced input
            return e.attr in pytrees.array_fields(self.m) and self._input(e.value, scope, d)
        if t is ast.Subscript:
            return self._array(e.value, scope, d)
        if t is ast.BinOp:
            if self._array(e.left, scope, d) or self._array(e.right, scope, d):
                return True
            # arithmetic of a traced input with a number is a number: a tracer
            return ((_number(e.right) and self._input(e.left, scope, d))
                    or (_number(e.left) and self._input(e.right, scope, d)))
        if t is ast.UnaryOp:
            return self._array(e.operand, scope, d)
        if t is ast.Compare:
            operands = [e.left, *e.comparators]
            if any(self._array(x, scope, d) for x in operands):
                return True
            # an element of a traced argument compared with a number is a number: a tracer
            numeric = any(isinstance(op, (ast.Lt, ast.LtE, ast.Gt, ast.GtE)) for op in e.ops) or any(
                _number(x) for x in operands)
            return numeric and any(self._input(x, scope, d) or (isinstance(x, ast.BinOp) and self._array(x, scope, d))
                                   for x in operands)
        if t is ast.IfExp:
            return self._array(e.body, scope, d) or self._array(e.orelse, scope, d)
        if t is ast.NamedExpr:
            return self._array(e.value, scope, d)
        return False

    def _call_array(self, call: ast.Call, scope: Scope, d: int) -> bool:
        m = self.m
        func = call.func
        qn = m.resolve(func, scope)
        if qn is not None:
            return N.produces_array(qn) or callables.callable_info(m, func, scope) is not None
        if isinstance(func, ast.Attribute):
            if at_update(func) is not None or func.attr in _ARRAY_METHODS:
                return True  # x.at[i].set(v), x.sum(), batch["x"].mean()
            if self._array(func.value, scope, d):
                return True  # any other method of a known array
        if callables.callable_info(m, func, scope) is not None:
            return True  # a compiled or transformed function: its results are arrays
        for g in callables.local_functions(m, func, scope):
            if any(self._array(r, g.scope, d) for r in g.returns):
                return True
        return False

    def _name_array(self, name: ast.Name, scope: Scope, d: int) -> bool:
        found = self.m._lookup(name.id, scope, _pos(name))
        if found is None:
            return False
        ev, later = found
        if self._event_array(ev, name.id, d):
            return True
        pos = _pos(name)
        # a binding later in a loop around the use reaches it on the next iteration
        return any(_contains(lp.node, pos) and ev.pos < _pos(lp.node) and self._event_array(c, name.id, d)
                   for c in later for lp in c.loops)

    def _event_array(self, ev, name: str, d: int) -> bool:
        kind = ev.kind
        if kind == "param":
            return self._param_array(ev, name, d)
        if kind == "assign":
            value, path = _unpacked(ev.value, ev.path)
            if value is None:
                return False
            if path and isinstance(value, (ast.Name, ast.Subscript)) or isinstance(value, ast.Subscript):
                # ``x, err = state``, ``m = batch["mask"]``: an element of a traced input
                if self._input(value, ev.scope, d) and not self._python_evidence(ev, name):
                    return True
            if path and isinstance(value, ast.Call) and callables.callable_info(self.m, value.func, ev.scope) is None:
                local = callables.local_functions(self.m, value.func, ev.scope)
                if local:  # ``arr, name = helper(x)``: each element has its own kind
                    return any(self._array(_element(r, path[0]), g.scope, d) for g in local for r in g.returns)
            return self._array(value, ev.scope, d)
        if kind == "for":
            return self._array(ev.value, ev.scope, d)
        if kind == "aug":
            node = ev.node
            return self._array(node.value, ev.scope, d) or self._array(node.target, ev.scope, d)
        return False

    def _param_array(self, ev, name: str, d: int) -> bool:
        g = ev.scope.func
        if g is None or name not in g.tracer_params or name in self._shaky(g):
            return False
        if self._python_evidence(ev, name):
            return False
        if any(c.kind != "caller" for c in g.trace_causes) and (not _has_default(g, name) or self._passed(g, name)):
            return True  # an argument of the staged function itself: a leaf of it is a tracer
        return any(self._array(arg, s, d) for arg, s in self._caller_args(g, name))

    def _input(self, e: ast.AST, scope: Scope, d: int) -> bool:
        """A traced input or an element of one (``batch``, ``batch["x"][0]``, ``err`` from
        ``x, err = state``), read without a JAX operation or an attribute: a parameter without a
        default, or passed an array by a staged caller, or a name unpacked from one."""
        while isinstance(e, ast.Subscript) or (isinstance(e, ast.Attribute) and e.attr in pytrees.array_fields(self.m)):
            e = e.value  # an element of a traced input, or a field declared an array, is a leaf of it: a
            # tracer (another field, ``state.n``, may be static aux data or a Python value: not known)
        if not isinstance(e, ast.Name) or d > L.KIND_CHAIN or not self.m.work.spend():
            return False
        ev = self.m.binding(e.id, scope, _pos(e))
        if ev is None:
            return False
        if ev.kind == "param":
            g = ev.scope.func
            if g is None or e.id not in g.tracer_params or e.id in self._shaky(g):
                return False
            if any(c.kind != "caller" for c in g.trace_causes) and (not _has_default(g, e.id) or self._passed(g, e.id)):
                return True
            return any(self._array(arg, s, d + 1) or self._input(arg, s, d + 1) for arg, s in self._caller_args(g, e.id))
        if ev.kind == "assign":
            value, _ = _unpacked(ev.value, ev.path)
            if isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and self.m.resolve(
                    value.func, ev.scope) is None:
                value = value.func.value  # ``state = state.replace(...)``: a new one of the same kind
            return isinstance(value, (ast.Name, ast.Subscript, ast.Attribute)) and self._input(value, ev.scope, d + 1)
        return False

    def staged_calls(self, g: FunctionInfo) -> list:
        """``(call, caller)`` for each call of ``g`` made in a staged function."""
        m = self.m
        out = []
        for cause in g.trace_causes:
            caller = cause.caller
            if cause.kind != "caller" or caller is None or not self.staged(caller):
                continue
            out.extend((call, caller) for call in caller.calls
                       if g in callables.local_functions(m, call.func, caller.scope))
        return out

    def _passed(self, g: FunctionInfo, name: str) -> bool:
        """A call of ``g`` through its decorator (``@jax.jit``), outside staged code, passes parameter
        ``name``: the trace gets a tracer, not the default (``step(w, x, inner_steps=k)``)."""
        m, key = self.m, ("passed", id(g), name)
        if key not in self._memo:
            self._memo[key] = any(
                callables.passed_argument(g, c, name) is not None for c in m.calls_by_name.get(g.name, ())
                if not self.staged(m.function_at(c)) and g in callables.local_functions(m, c.func, m.scope_at(c))
                and getattr(callables.callable_info(m, c.func, m.scope_at(c)), "kind", None) in _TRACES_ARGUMENTS)
        return self._memo[key]

    def _caller_args(self, g: FunctionInfo, name: str) -> list:
        """``(argument, caller scope)`` for every call of ``g`` in a staged caller that passes
        parameter ``name``."""
        out = []
        for call, caller in self.staged_calls(g):
            arg = callables.passed_argument(g, call, name)
            if arg is not None:
                out.append((arg, caller.scope))
        return out

    def _python_evidence(self, ev, name: str) -> bool:
        """Whether the function binding ``name`` (at ``ev``) uses it as something other than an
        array: ``x is None``, ``x["key"]``, ``x.field`` (an attribute arrays lack), ``x(...)``,
        ``**x``, ``x or {}``, ``x == "mode"``, ``x == Enum.MEMBER``, ``isinstance(x, str)``."""
        key = ("evidence", id(ev))
        if key in self._memo:
            return self._memo[key]
        m = self.m
        node = ev.scope.node
        found = False

        def ours(n) -> bool:
            return (isinstance(n, ast.Name) and n.id == name
                    and m.binding(name, m.scope_at(n), _pos(n)) is ev)

        for n in walk(node):
            t = type(n)
            if t is ast.Attribute:
                found = ours(n.value) and n.attr not in _ARRAY_NAMES
            elif t is ast.Subscript:
                found = (isinstance(n.slice, ast.Constant) and isinstance(n.slice.value, str) and ours(n.value))
            elif t is ast.Compare:
                operands = [n.left, *n.comparators]
                found = any(ours(x) for x in operands) and any(
                    _python_comparison(m, op, other, ev.scope) for op, other in _pairs(n, ours))
            elif t is ast.BoolOp:
                found = (isinstance(n.op, ast.Or) and any(ours(v) for v in n.values[:-1])
                         and isinstance(n.values[-1], (ast.Dict, ast.List, ast.Tuple, ast.Set, ast.Constant)))
            elif t is ast.Call:
                found = ours(n.func) or any(kw.arg is None and ours(kw.value) for kw in n.keywords) or (
                    isinstance(n.func, ast.Name) and n.func.id == "isinstance" and len(n.args) == 2
                    and ours(n.args[0]) and _python_types(m, n.args[1], ev.scope))
            if found:
                break
        self._memo[key] = found
        return found

    def _parents(self) -> dict:
        """id(argument expression) -> the call it is an argument of."""
        if self._arg_parent is None:
            self._arg_parent = {}
            for c in self.m.calls:
                for a in c.args:
                    self._arg_parent[id(a)] = c
                for kw in c.keywords:
                    self._arg_parent[id(kw.value)] = c
        return self._arg_parent

    def _grad_site_staged(self, f: FunctionInfo, qn: str) -> bool:
        m = self.m
        for call in self._calls_of_transform(qn):
            scope = m.scope_at(call)
            target = call_arg(call, 0, "fun")
            if target is not None and f in callables.local_functions(m, target, scope) and self._site_staged(call, 0):
                return True
        return False

    def _calls_of_transform(self, qn: str) -> Sequence[ast.Call]:
        """The calls with arguments of the concrete transform ``qn`` (``jax.grad(f)``), in source
        order, found once for all the functions it traces: only the calls that may resolve to one
        are resolved (:meth:`~jaxlint.model.ModuleModel.calls_resolvable_to`), not every call of
        the module for each function."""
        if self._transform_calls is None:
            m = self.m
            found: dict = {}
            for call in m.calls_resolvable_to(_TRANSFORM_LAST_NAMES):
                if call.args or call.keywords:
                    name = m.resolve(call.func, m.scope_at(call))
                    if name in CONCRETE_TRANSFORMS:
                        found.setdefault(name, []).append(call)
            self._transform_calls = found
        return self._transform_calls.get(qn, ())

    def _site_staged(self, expr: ast.AST, depth: int) -> bool:
        """Whether the callable made by ``expr`` (a transform call) runs under staged tracing: it is
        made in staged code, wrapped by jit/vmap/..., or bound to a name called in staged code."""
        if depth > L.SITE_CHAIN or not self.m.work.spend():
            return False
        m = self.m
        if isinstance(expr, ast.Call) and self.staged(m.function_at(expr)):
            return True
        parent = self._parents().get(id(expr))
        if parent is not None:
            pq = m.resolve(parent.func, m.scope_at(parent))
            if pq in CONCRETE_TRANSFORMS or pq == N.PARTIAL:
                if self._site_staged(parent, depth + 1):
                    return True
            elif pq in N.JIT_WRAPPERS or pq in N.TRANSFORMS or pq in N.LAX_BODIES:
                return True
            elif parent.func is expr and self.staged(m.function_at(parent)):
                return True  # jax.grad(f)(x) in staged code
        scope = m.scope_at(expr)
        for name, evs in scope.events.items():
            for ev in evs:
                if not ev.plain_assign or ev.value is not expr:
                    continue
                for c in m.calls:
                    used = [c.func] + list(c.args) + [kw.value for kw in c.keywords]
                    for u in used:
                        if not (isinstance(u, ast.Name) and u.id == name):
                            continue
                        if m.binding(name, m.scope_at(c), (u.lineno, u.col_offset)) is not ev:
                            continue
                        if u is c.func:
                            if self.staged(m.function_at(c)):
                                return True
                        elif self._site_staged(u, depth + 1):
                            return True
        return False


def _opaque_statics(f: FunctionInfo) -> bool:
    """The function's jit names its static arguments with a variable (``static_argnums=nums``):
    any parameter may be static."""
    wraps = [f.jit_entry.node] if f.jit_entry is not None and isinstance(f.jit_entry.node, ast.Call) else []
    if not isinstance(f.node, ast.Lambda):
        wraps += [d for d in f.node.decorator_list if isinstance(d, ast.Call)]
    for call in wraps:
        for kw in call.keywords:
            if kw.arg in ("static_argnums", "static_argnames", "static_broadcasted_argnums") and not (
                    isinstance(kw.value, (ast.Constant, ast.Tuple, ast.List, ast.Set))
                    or (isinstance(kw.value, ast.UnaryOp) and isinstance(kw.value.operand, ast.Constant))):
                return True
    return False


# Attributes and methods of a jax.Array: reading one off a traced input is no evidence that
# the input is a container or an object; the methods also give arrays.
_ARRAY_ATTRS = frozenset({"T", "mT", "real", "imag"})
_ARRAY_METHODS = frozenset({
    "sum", "mean", "max", "min", "prod", "any", "all", "std", "var", "argmax", "argmin", "cumsum", "cumprod",
    "astype", "reshape", "ravel", "flatten", "squeeze", "transpose", "swapaxes", "dot", "clip", "round",
    "conj", "conjugate", "sort", "argsort", "take", "repeat", "diagonal", "ptp", "view", "nonzero",
})
_ARRAY_NAMES = _ARRAY_ATTRS | _ARRAY_METHODS | N.METADATA_ATTRS | N.HOST_METHODS | N.NON_ARRAY_METHODS | {
    "at", "block_until_ready", "addressable_data"}


def _number(e: ast.AST) -> bool:
    if isinstance(e, ast.UnaryOp) and isinstance(e.op, (ast.USub, ast.UAdd)):
        e = e.operand
    return isinstance(e, ast.Constant) and isinstance(e.value, (int, float, complex)) and not isinstance(e.value, bool)


def _unpacked(value: Optional[ast.AST], path) -> tuple:
    """The expression an assignment binds (following a tuple-unpacking ``path`` into tuple
    literals) and what is left of the path."""
    path = list(path or ())
    while path and isinstance(value, (ast.Tuple, ast.List)) and path[0] < len(value.elts) and not any(
            isinstance(x, ast.Starred) for x in value.elts):
        value = value.elts[path.pop(0)]
    return value, path


# Wrappers whose call makes every non-static argument a tracer (``jax.named_call`` does not: it names a scope).
_TRACES_ARGUMENTS = frozenset({"jit", "pmap", "filter_jit"})


def _has_default(g: FunctionInfo, name: str) -> bool:
    return g.default(name) is not None
