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
from typing import TYPE_CHECKING, Optional

from .. import names as N
from . import limits as L
from .records import FunctionInfo, Scope
from .syntax import call_arg

if TYPE_CHECKING:  # annotations only: the model imports this module
    from .module import ModuleModel

# Transforms that trace with concrete primal values: Python control flow and value-dependent
# shapes work under them (checked on jax 0.10.2 for grad, jacfwd, jacrev, hessian, jvp, vjp,
# linearize). Everything else the model marks as traced (jit, pmap, vmap, checkpoint, lax bodies,
# eval_shape, shard_map...) stages the function out with abstract values.
CONCRETE_TRANSFORMS = frozenset({
    "jax.grad", "jax.value_and_grad", "jax.jacfwd", "jax.jacrev", "jax.hessian", "jax.jvp", "jax.vjp",
    "jax.linearize", "equinox.filter_grad", "equinox.filter_value_and_grad", "flax.nnx.grad",
    "flax.nnx.value_and_grad",
})


class Staging:
    """Which traced functions see abstract tracers (jit, vmap, lax bodies, ...), as opposed to
    functions traced only by autodiff outside any jit, where values stay concrete."""

    def __init__(self, model: ModuleModel):
        self.m = model
        self._memo: dict = {}
        self._arg_parent: Optional[dict] = None
        self._partial_bound: Optional[dict] = None

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
                for g in m.local_functions(call.args[0], scope):
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
        Python values (see :meth:`_shaky`), and no other tracer."""
        found: set = set()
        self._sources(expr, scope, found, 0)
        return "shaky" in found and "real" not in found

    def _sources(self, expr: ast.AST, scope: Scope, found: set, depth: int) -> None:
        m = self.m
        for n in ast.walk(expr):
            if not isinstance(n, ast.Name):
                continue
            ev = m.binding(n.id, scope, (n.lineno, n.col_offset))
            if ev is None or not m.is_jax(n, scope):
                continue  # not a JAX value: it cannot be what makes ``expr`` one
            g = ev.scope.func
            if ev.kind == "param" and g is not None:
                if n.id in self._shaky(g):
                    found.add("shaky")
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
        out |= {p for p in positional + f.kwonly if p == "dtype" or p.endswith("_dtype")}
        if _opaque_statics(f):
            out |= set(positional) | set(f.kwonly)
        self._memo[key] = out
        return out

    def narrowed(self, ctx, expr: ast.AST) -> bool:
        """An enclosing ``if isinstance(name, str/int/...)`` makes a name in ``expr`` a Python value."""
        names = {n.id for n in ast.walk(expr) if isinstance(n, ast.Name)}
        if not names:
            return False
        for test, _ in ctx.guards:
            for node in ast.walk(test):
                if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "isinstance"
                        and len(node.args) == 2 and isinstance(node.args[0], ast.Name)
                        and node.args[0].id in names and _python_types(self.m, node.args[1], ctx.scope)):
                    return True
        return False

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
        for call in m.calls:
            if not call.args and not call.keywords:
                continue
            scope = m.scope_at(call)
            if m.resolve(call.func, scope) != qn:
                continue
            target = call_arg(call, 0, "fun")
            if target is not None and f in m.local_functions(target, scope) and self._site_staged(call, 0):
                return True
        return False

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


_PY_TYPES = frozenset("builtins." + t for t in ("str", "int", "float", "bool", "complex", "tuple", "list", "dict",
                                                "set", "frozenset", "bytes", "type"))


def _python_types(model: ModuleModel, e: ast.AST, scope: Scope) -> bool:
    elts = e.elts if isinstance(e, ast.Tuple) else [e]
    for t in elts:
        qn = model.resolve(t, scope)
        if qn is None or not (qn in _PY_TYPES or qn.startswith("numpy.")):
            return False
    return bool(elts)
