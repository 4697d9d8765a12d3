"""JAX3xx: shapes and Python control flow that tracing cannot express, or unrolls."""

from __future__ import annotations

import ast
from typing import Iterator, Optional

from jaxlint import names as N
from jaxlint.model import FunctionInfo, Loop, ModuleModel, Scope, call_arg
from jaxlint.rule import Finding, Rule, unparse

# --------------------------------------------------------------------------- staged tracing

# Transforms that trace with concrete primal values: Python control flow and value-dependent
# shapes work under them (checked on jax 0.10.2 for grad, jacfwd, jacrev, hessian, jvp, vjp,
# linearize). Everything else the model marks as traced (jit, pmap, vmap, checkpoint, lax bodies,
# eval_shape, shard_map...) stages the function out with abstract values.
CONCRETE_TRANSFORMS = frozenset({
    "jax.grad", "jax.value_and_grad", "jax.jacfwd", "jax.jacrev", "jax.hessian", "jax.jvp", "jax.vjp",
    "jax.linearize", "equinox.filter_grad", "equinox.filter_value_and_grad", "flax.nnx.grad",
    "flax.nnx.value_and_grad",
})
_CALLED_FROM = "called from "


class Staging:
    """Which traced functions see abstract tracers (jit, vmap, lax bodies, ...), as opposed to
    functions traced only by autodiff outside any jit, where values stay concrete."""

    def __init__(self, model: ModuleModel):
        self.m = model
        self._memo: dict = {}
        self._by_qual: Optional[dict] = None
        self._arg_parent: Optional[dict] = None
        self._partial_bound: Optional[dict] = None

    def staged(self, f: Optional[FunctionInfo]) -> bool:
        if f is None or not f.traced:
            return False
        key = id(f)
        if key in self._memo:
            return self._memo[key]
        self._memo[key] = False  # cycle guard
        result = False
        for reason in f.trace_reasons:
            if reason.startswith(_CALLED_FROM):
                callers = self._qualnames().get(reason[len(_CALLED_FROM):], ())
                if any(self.staged(g) for g in callers):
                    result = True
            elif reason.lstrip("@") in CONCRETE_TRANSFORMS:
                if not reason.startswith("@") and self._grad_site_staged(f, reason):
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
            elif ev.kind in ("assign", "for", "aug") and depth < 4:
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
        lax_only = bool(f.trace_reasons) and all(r in N.LAX_BODIES for r in f.trace_reasons)
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

    def _qualnames(self) -> dict:
        if self._by_qual is None:
            self._by_qual = {}
            for g in self.m.functions:
                self._by_qual.setdefault(g.qualname, []).append(g)
        return self._by_qual

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
        if depth > 6:
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
                if ev.kind != "assign" or ev.path is not None or ev.value is not expr:
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


def _describe_if(node: ast.AST) -> tuple[str, str]:
    if isinstance(node, ast.While):
        return "`while`", "use jax.lax.while_loop (or fori_loop)"
    if isinstance(node, ast.IfExp):
        return "a conditional expression", "use jnp.where or jax.lax.cond"
    if isinstance(node, ast.Assert):
        return "`assert`", "use jax.experimental.checkify or jax.debug checks, or assert on shapes only"
    return "`if`", "use jax.lax.cond or jnp.where, or make the value static"


# --------------------------------------------------------------------------- JAX301


# Functions whose output size depends on the data unless ``size=`` is given:
# name -> positions of the arguments whose values decide the size.
_SIZE_FUNCS = {
    "jax.numpy.nonzero": (0,), "jax.numpy.argwhere": (0,), "jax.numpy.flatnonzero": (0,),
    "jax.numpy.unique": (0,), "jax.numpy.unique_values": (0,), "jax.numpy.unique_counts": (0,),
    "jax.numpy.unique_inverse": (0,), "jax.numpy.unique_all": (0,),
    "jax.numpy.compress": (0,), "jax.numpy.extract": (0,),
    "jax.numpy.union1d": (0, 1), "jax.numpy.intersect1d": (0, 1), "jax.numpy.setdiff1d": (0, 1),
    "jax.numpy.setxor1d": (0, 1),
}
_MASK_FUNCS = frozenset("jax.numpy." + n for n in (
    "isnan", "isinf", "isfinite", "isneginf", "isposinf", "isreal", "iscomplex", "signbit", "isclose",
    "logical_and", "logical_or", "logical_not", "logical_xor", "equal", "not_equal", "greater",
    "greater_equal", "less", "less_equal", "isin", "in1d",
))
_BOOL_DTYPES = frozenset({"builtins.bool", "jax.numpy.bool_", "jax.numpy.bool", "numpy.bool_", "numpy.bool"})


def _is_mask(model: ModuleModel, e: ast.AST, scope: Scope, depth: int = 0) -> bool:
    """Whether ``e`` is certainly a boolean JAX array: a comparison involving a JAX value, ``~m``,
    ``m1 & m2``, ``jnp.isnan(...)``/``logical_*``, ``.astype(bool)``, or a name bound to one."""
    if depth > 8:
        return False
    if isinstance(e, ast.Compare):
        if any(isinstance(op, (ast.Is, ast.IsNot, ast.In, ast.NotIn)) for op in e.ops):
            return False
        return model.is_jax(e, scope)
    if isinstance(e, ast.UnaryOp) and isinstance(e.op, ast.Invert):
        return _is_mask(model, e.operand, scope, depth + 1)
    if isinstance(e, ast.BinOp) and isinstance(e.op, (ast.BitAnd, ast.BitOr, ast.BitXor)):
        return _is_mask(model, e.left, scope, depth + 1) or _is_mask(model, e.right, scope, depth + 1)
    if isinstance(e, ast.Call):
        qn = model.resolve(e.func, scope)
        if qn in _MASK_FUNCS:
            return True
        f = e.func
        if (qn is None and isinstance(f, ast.Attribute) and f.attr == "astype" and e.args
                and model.is_jax(f.value, scope) and model.resolve(e.args[0], scope) in _BOOL_DTYPES):
            return True
        return False
    if isinstance(e, ast.Name):
        ev = model.binding(e.id, scope, (e.lineno, e.col_offset))
        if ev is not None and ev.kind == "assign" and ev.path is None:
            return _is_mask(model, ev.value, ev.scope, depth + 1)
    return False


class DataDependentShape(Rule):
    code = "JAX301"
    name = "data-dependent-shape"
    summary = ("Finds boolean-mask indexing (`x[x > 0]`, `x[mask]`, `x.at[mask]`), `jnp.nonzero`/`argwhere`/"
               "`flatnonzero`/`unique*`/`compress`/`extract`/set operations and one-argument `jnp.where(c)` "
               "without `size=`, and `jnp.repeat` with traced repeats, inside traced code.")
    rationale = ("XLA programs have static shapes. An operation whose output size depends on the values in an "
                 "array cannot be compiled: under `jax.jit`, `vmap` or a `lax` body it raises "
                 "NonConcreteBooleanIndexError/ConcretizationTypeError. Keep the shape fixed: "
                 "`jnp.where(mask, x, 0)` or a masked reduction instead of `x[mask]`, and `size=`/`fill_value=` "
                 "for `jnp.nonzero`, `jnp.unique` and friends.")
    bad = """
        import jax
        import jax.numpy as jnp

        @jax.jit
        def positive_mean(x):
            return jnp.mean(x[x > 0])
    """
    good = """
        import jax
        import jax.numpy as jnp

        @jax.jit
        def positive_mean(x):
            mask = x > 0
            return jnp.sum(jnp.where(mask, x, 0.0)) / jnp.maximum(jnp.sum(mask), 1)
    """

    def check(self, model: ModuleModel) -> Iterator[Finding]:
        staging = Staging(model)
        for f in model.functions:
            if not staging.staged(f):
                continue
            for sub in f.subscripts:
                scope = model.scope_at(sub)
                if not model.is_jax(sub.value, scope):
                    continue
                parts = sub.slice.elts if isinstance(sub.slice, ast.Tuple) else [sub.slice]
                if any(_is_mask(model, p, scope) and not staging.suspect(f, p, scope) for p in parts):
                    yield self.finding(sub, f"boolean-mask indexing `{unparse(sub, 30)}` has a data-dependent "
                                            "shape and fails under jit; use jnp.where(mask, x, fill) or a "
                                            "masked reduction")
            for call in f.calls:
                scope = model.scope_at(call)

                def traced(e, scope=scope, f=f) -> bool:
                    return model.is_jax(e, scope) and not staging.suspect(f, e, scope)

                what = self._sized_call(model, call, scope, traced)
                if what is not None and not _size_is_none_branch(model.context(call)):
                    yield self.finding(call, what)

    def _sized_call(self, model: ModuleModel, call: ast.Call, scope: Scope, traced) -> Optional[str]:
        func = call.func
        qn = model.resolve(func, scope)
        has = {kw.arg for kw in call.keywords}
        if None in has:
            return None  # **kwargs may carry size=
        if any(isinstance(a, ast.Starred) for a in call.args):
            return None
        if qn in _SIZE_FUNCS:
            if "size" in has or not any(traced(call_arg(call, i, None)) for i in _SIZE_FUNCS[qn]):
                return None
            return (f"`{unparse(func)}(...)` without `size=` has a data-dependent shape and fails under jit; "
                    "pass size= (and fill_value=)")
        if qn == "jax.numpy.where":
            if len(call.args) == 1 and not has & {"x", "y", "size"} and traced(call.args[0]):
                return ("one-argument `jnp.where(cond)` without `size=` has a data-dependent shape and fails "
                        "under jit; use jnp.where(cond, x, y) or pass size=")
            return None
        if qn == "jax.numpy.repeat":
            repeats = call_arg(call, 1, "repeats")
            if (repeats is not None and "total_repeat_length" not in has and traced(repeats)):
                return ("`jnp.repeat` with traced `repeats` has a data-dependent shape and fails under jit; "
                        "pass total_repeat_length=")
            return None
        if (qn is None and isinstance(func, ast.Attribute) and func.attr == "nonzero" and "size" not in has
                and traced(func.value)):
            return (f"`{unparse(func)}()` without `size=` has a data-dependent shape and fails under jit; "
                    "pass size= (and fill_value=)")
        return None


def _size_is_none_branch(ctx) -> bool:
    """Inside ``if size is None:`` -- an implementation that takes the unsized path only when
    its caller made sure the input is concrete (jnp.unique's own code)."""
    for test, _ in ctx.guards if ctx is not None else ():
        for node in ast.walk(test):
            if (isinstance(node, ast.Compare) and isinstance(node.left, ast.Name) and node.left.id == "size"
                    and isinstance(node.ops[0], ast.Is) and isinstance(node.comparators[0], ast.Constant)
                    and node.comparators[0].value is None):
                return True
    return False


# --------------------------------------------------------------------------- JAX302


class TracedControlFlow(Rule):
    code = "JAX302"
    name = "traced-control-flow"
    summary = ("Finds Python `if`/`while`/`assert`, conditional expressions and `and`/`or`/`not` applied to a "
               "traced value inside jitted (or vmapped, or lax-body) code.")
    rationale = ("Inside `jax.jit` a value is an abstract tracer: Python cannot decide which branch to take, so "
                 "converting it to bool raises TracerBoolConversionError. Branch on device with "
                 "`jnp.where`/`jax.lax.cond`/`jax.lax.switch`, loop with `jax.lax.while_loop`, or make the value "
                 "a static argument. Tests on shapes, dtypes, static arguments and `is None` are fine.")
    bad = """
        import jax
        import jax.numpy as jnp

        @jax.jit
        def relu(x):
            if x.sum() > 0:
                return x
            return jnp.zeros_like(x)
    """
    good = """
        import jax
        import jax.numpy as jnp

        @jax.jit
        def relu(x):
            return jax.lax.cond(x.sum() > 0, lambda v: v, jnp.zeros_like, x)
    """

    def check(self, model: ModuleModel) -> Iterator[Finding]:
        staging = Staging(model)
        covered: set = set()
        for node in model.ifs:
            test = node.test
            anchor = test if isinstance(node, ast.While) else node
            ctx = model.context(anchor)
            f = model.function_at(anchor)
            if ctx is None or not staging.staged(f):
                continue
            _cover(test, covered)
            culprit = self._culprit(model, staging, f, ctx, test, True)
            if culprit is not None:
                kind, fix = _describe_if(node)
                yield self.finding(test, f"{kind} on the traced value `{unparse(culprit, 30)}` raises "
                                         f"TracerBoolConversionError under jit; {fix}")
        for node in model.bool_nodes:
            if id(node) in covered:
                continue
            ctx = model.context(node)
            f = model.function_at(node)
            if ctx is None or not staging.staged(f):
                continue
            _cover(node, covered)
            culprit = self._culprit(model, staging, f, ctx, node, False)
            if culprit is None:
                continue
            if isinstance(node, ast.UnaryOp):
                what, fix = "`not`", "use jnp.logical_not (or ~)"
            else:
                op = "and" if isinstance(node.op, ast.And) else "or"
                what, fix = f"`{op}`", f"use jnp.logical_{op} (or {'&' if op == 'and' else '|'}) or jnp.where"
            yield self.finding(node, f"{what} on the traced value `{unparse(culprit, 30)}` raises "
                                     f"TracerBoolConversionError under jit; {fix}")

    def _culprit(self, model: ModuleModel, staging: Staging, f: FunctionInfo, ctx, e: ast.AST, tested: bool):
        """The first operand that Python converts to bool and that is a tracer. ``tested``: the
        value of ``e`` itself is converted (an ``if`` test, a ``not`` operand, a non-last operand
        of ``and``/``or``)."""
        if isinstance(e, ast.BoolOp):
            last = len(e.values) - 1
            for i, v in enumerate(e.values):
                found = self._culprit(model, staging, f, ctx, v, tested or i < last)
                if found is not None:
                    return found
            return None
        if isinstance(e, ast.UnaryOp) and isinstance(e.op, ast.Not):
            return self._culprit(model, staging, f, ctx, e.operand, True)
        if (tested and _truthy_tracer(model, e, ctx.scope) and not staging.suspect(f, e, ctx.scope)
                and not staging.narrowed(ctx, e) and not _from_internal(model, e, ctx.scope)):
            return e
        return None


def _cover(e: ast.AST, covered: set) -> None:
    """Mark the ``and``/``or``/``not`` nodes of one boolean expression: one finding per expression."""
    if isinstance(e, ast.BoolOp):
        covered.add(id(e))
        for v in e.values:
            _cover(v, covered)
    elif isinstance(e, ast.UnaryOp) and isinstance(e.op, ast.Not):
        covered.add(id(e))
        _cover(e.operand, covered)


def _internal(qn: Optional[str]) -> bool:
    """A private or utility helper of a JAX library (``jax._src.lax.lax._ndim``,
    ``jax._src.numpy.util._arraylike``): the model's array-producer prefixes cover them, but they
    mostly return Python values (dtypes, ranks, flags)."""
    if not qn or not qn.startswith(("jax.", "flax.", "equinox.")):
        return False
    parts = qn.split(".")[1:]
    return any(p.startswith("_") or p in ("util", "utils", "dtypes", "core", "config") for p in parts)


def _from_internal(model: ModuleModel, e: ast.AST, scope: Scope, depth: int = 0) -> bool:
    """Whether ``e`` reads the result of such a helper, directly or through a name bound to one."""
    for n in ast.walk(e):
        if isinstance(n, ast.Call) and _internal(model.resolve(n.func, scope)):
            return True
        if isinstance(n, ast.Name) and depth < 1:
            ev = model.binding(n.id, scope, (n.lineno, n.col_offset))
            if ev is not None and ev.kind == "assign" and ev.value is not None and ev.scope is scope:
                if _from_internal(model, ev.value, ev.scope, depth + 1):
                    return True
    return False


def _truthy_tracer(model: ModuleModel, e: ast.AST, scope: Scope) -> bool:
    if isinstance(e, (ast.Tuple, ast.List, ast.Dict, ast.Set, ast.ListComp, ast.DictComp, ast.SetComp)):
        return False  # a container's truth is its length
    if isinstance(e, ast.Name):
        ev = model.binding(e.id, scope, (e.lineno, e.col_offset))
        if ev is not None and ev.kind == "param":
            args = ev.node.args
            if (args.vararg is not None and args.vararg.arg == e.id) or (
                    args.kwarg is not None and args.kwarg.arg == e.id):
                return False  # *args / **kwargs are a tuple / dict
    return model.is_jax(e, scope)


# --------------------------------------------------------------------------- JAX303

_NP = "jax.numpy."
_R = "jax.random."
_L = "jax.lax."
# name -> the (position, keyword) of every argument that decides an output shape.
_SHAPE_ARGS: dict = {
    **{_NP + n: [(0, "shape")] for n in ("zeros", "ones", "empty", "full")},
    _NP + "arange": [(0, "start"), (1, "stop"), (2, "step")],
    **{_NP + n: [(2, "num")] for n in ("linspace", "logspace", "geomspace")},
    _NP + "eye": [(0, "N"), (1, "M")],
    _NP + "tri": [(0, "N"), (1, "M")],
    _NP + "identity": [(0, "n")],
    _NP + "tril_indices": [(0, "n"), (2, "m")],
    _NP + "triu_indices": [(0, "n"), (2, "m")],
    _NP + "reshape": [(1, "shape"), (None, "newshape")],
    _NP + "broadcast_to": [(1, "shape")],
    **{_NP + n: [(2, "shape")] for n in ("zeros_like", "ones_like", "empty_like")},
    _NP + "full_like": [(3, "shape")],
    _L + "full": [(0, "shape")],
    _L + "iota": [(1, "size")],
    _L + "broadcast": [(1, "sizes")],
    _L + "broadcast_in_dim": [(1, "shape")],
    _L + "reshape": [(1, "new_sizes")],
    _L + "full_like": [(3, "shape")],
    _L + "dynamic_slice": [(2, "slice_sizes")],
    _L + "dynamic_slice_in_dim": [(2, "slice_size")],
    _R + "split": [(1, "num")],
    # jax.random samplers: the position of `shape` in each signature (jax 0.10.2).
    **{_R + n: [(1, "shape")] for n in ("normal", "uniform", "randint", "bits", "cauchy", "exponential",
                                         "gumbel", "laplace", "logistic", "maxwell", "rademacher")},
    **{_R + n: [(2, "shape")] for n in ("bernoulli", "gamma", "loggamma", "chisquare", "dirichlet",
                                         "generalized_normal", "geometric", "lognormal", "pareto", "poisson",
                                         "rayleigh", "t", "wald", "choice")},
    **{_R + n: [(3, "shape")] for n in ("ball", "beta", "binomial", "categorical", "double_sided_maxwell", "f",
                                         "multinomial", "multivariate_normal", "truncated_normal",
                                         "weibull_min")},
    _R + "triangular": [(4, "shape")],
    _R + "orthogonal": [(1, "n"), (2, "shape"), (4, "m")],
}


class TracedShapeArgument(Rule):
    code = "JAX303"
    name = "traced-shape-argument"
    summary = ("Finds array constructors (`jnp.zeros/ones/full/empty/arange/linspace/eye/tri/identity`), "
               "`reshape`, `broadcast_to`, `lax.dynamic_slice` sizes and `jax.random` `shape=`/`num=` given a "
               "size computed from a traced value inside traced code.")
    rationale = ("Shapes are part of the compiled program and must be known when tracing. A size read from "
                 "a tracer's value (`jnp.zeros(n)` with a traced `n`, `x.reshape(k, -1)` with `k = jnp.sum(m)`) "
                 "raises ConcretizationTypeError or a TypeError about shapes under jit. Derive sizes from "
                 "`x.shape`, or pass them as static arguments (`static_argnames=`).")
    bad = """
        import jax
        import jax.numpy as jnp

        @jax.jit
        def pad_to(x, length):
            return jnp.concatenate([x, jnp.zeros(length - x.shape[0])])
    """
    good = """
        from functools import partial
        import jax
        import jax.numpy as jnp

        @partial(jax.jit, static_argnames="length")
        def pad_to(x, length):
            return jnp.concatenate([x, jnp.zeros(length - x.shape[0])])
    """

    def check(self, model: ModuleModel) -> Iterator[Finding]:
        staging = Staging(model)
        for f in model.functions:
            if not staging.staged(f):
                continue
            for call in f.calls:
                scope = model.scope_at(call)
                for arg in self._size_args(model, call, scope):
                    parts = arg.elts if isinstance(arg, (ast.Tuple, ast.List)) else [arg]
                    parts = [p.value if isinstance(p, ast.Starred) else p for p in parts]
                    bad = [p for p in parts if model.is_jax(p, scope) and not staging.suspect(f, p, scope)]
                    if bad:
                        yield self.finding(bad[0], f"size `{unparse(bad[0], 30)}` of `{unparse(call.func)}` is "
                                                   "computed from a traced value; shapes must be static under jit: "
                                                   "derive it from `.shape` or make it a static argument")
                        break

    def _size_args(self, model: ModuleModel, call: ast.Call, scope: Scope) -> list:
        func = call.func
        qn = model.resolve(func, scope)
        if qn in _SHAPE_ARGS:
            out = []
            for idx, kw in _SHAPE_ARGS[qn]:
                arg = call_arg(call, idx, kw)
                if arg is not None:
                    out.append(arg)
            return out
        if (qn is None and isinstance(func, ast.Attribute) and func.attr == "reshape"
                and model.is_jax(func.value, scope)):
            return list(call.args) + [kw.value for kw in call.keywords if kw.arg in ("shape", "newshape")]
        return []


# --------------------------------------------------------------------------- JAX304


def _polynomial(e: Optional[ast.AST], atoms: dict) -> Optional[dict]:
    """A slice bound as a polynomial: {(atom key, ...): coefficient}, where an atom is any
    sub-expression other than int literals, ``+``, ``-`` and ``*``, keyed by its dump (``atoms``
    maps keys back to nodes). None for non-int literals."""
    if isinstance(e, ast.Constant):
        if isinstance(e.value, int) and not isinstance(e.value, bool):
            return {(): e.value} if e.value else {}
        return None
    if isinstance(e, ast.UnaryOp) and isinstance(e.op, (ast.USub, ast.UAdd)):
        inner = _polynomial(e.operand, atoms)
        if inner is None:
            return None
        return {k: -v for k, v in inner.items()} if isinstance(e.op, ast.USub) else inner
    if isinstance(e, ast.BinOp) and isinstance(e.op, (ast.Add, ast.Sub, ast.Mult)):
        left, right = _polynomial(e.left, atoms), _polynomial(e.right, atoms)
        if left is None or right is None:
            return None
        if isinstance(e.op, ast.Mult):
            out: dict = {}
            for ka, va in left.items():
                for kb, vb in right.items():
                    key = tuple(sorted(ka + kb))
                    out[key] = out.get(key, 0) + va * vb
            return {k: v for k, v in out.items() if v}
        return _combine(left, right, 1 if isinstance(e.op, ast.Add) else -1)
    key = ast.dump(e)
    atoms[key] = e
    return {(key,): 1}


def _combine(a: dict, b: dict, sign: int) -> dict:
    out = dict(a)
    for k, v in b.items():
        out[k] = out.get(k, 0) + sign * v
    return {k: v for k, v in out.items() if v}


class _Churn:
    """What takes a new value in each iteration of the loops around one call."""

    def __init__(self, model: ModuleModel, scope: Scope, loops: tuple, bounded_iters: set):
        self.m = model
        self.scope = scope
        self.loops = loops
        self.bounded_iters = bounded_iters  # ids of the iterables of loops over a few literal options
        self._memo: dict = {}

    def name_varies(self, name: str, depth: int = 0) -> bool:
        if name in self._memo:
            return self._memo[name]
        self._memo[name] = True  # a name defined from itself in the loop (t = t + 1) varies
        result = self._name_varies(name, depth)
        self._memo[name] = result
        return result

    def _name_varies(self, name: str, depth: int) -> bool:
        if any(name in lp.target_names() for lp in self.loops):
            return True
        for ev in self.scope.events.get(name, ()):
            if not any(lp in self.loops for lp in ev.loops):
                continue
            if ev.kind == "for" and id(ev.value) in self.bounded_iters:
                continue  # a nested loop over a few literal options: each shape compiles once
            if ev.kind in ("aug", "for"):
                return True
            if ev.kind == "assign" and depth < 6 and self.expr_varies(ev.value, depth + 1):
                return True
        return False

    def expr_varies(self, e: ast.AST, depth: int = 0) -> bool:
        for n in ast.walk(e):
            if isinstance(n, ast.Name) and self.name_varies(n.id, depth):
                return True
            if isinstance(n, ast.Call):
                qn = self.m.resolve(n.func, self.scope)
                if qn is None or not qn.startswith("builtins."):
                    return True  # recomputed every iteration by code we cannot see
        return False

    def atom_varies(self, atom: ast.AST) -> bool:
        """Whether a slice-bound atom changes per iteration. Clamps (`min(i + b, n)`) change only
        at the end of a sweep and are not counted."""
        if isinstance(atom, ast.Call):
            qn = self.m.resolve(atom.func, self.scope)
            if qn != "builtins.len":
                return False
        return any(isinstance(n, ast.Name) and self.name_varies(n.id) for n in ast.walk(atom))

    def width_varies(self, sl: ast.Slice) -> bool:
        atoms: dict = {}
        lower = _polynomial(sl.lower, atoms) if sl.lower is not None else {}
        # An open upper bound is the (fixed) length of the sliced axis.
        upper = _polynomial(sl.upper, atoms) if sl.upper is not None else {("<end>",): 1}
        if lower is None or upper is None:
            return False
        width = _combine(upper, lower, -1)
        return any(any(k in atoms and self.atom_varies(atoms[k]) for k in key) for key in width)

    def churning(self, e: ast.AST) -> bool:
        if not isinstance(e, ast.Subscript):
            return False
        parts = e.slice.elts if isinstance(e.slice, ast.Tuple) else [e.slice]
        return any(isinstance(p, ast.Slice) and self.width_varies(p) for p in parts)


def _iterable(node: ast.AST) -> Optional[ast.AST]:
    if isinstance(node, (ast.For, ast.AsyncFor)):
        return node.iter
    generators = getattr(node, "generators", None)
    return generators[0].iter if generators else None


def _static_positions(wrap, call: ast.Call) -> tuple[set, set]:
    """(positions, keyword names) of the call's static arguments, as JAX103 numbers them."""
    params = wrap.positional_params()
    shift = 0
    if wrap.func is not None and wrap.func.is_method and params and params[0] in ("self", "cls"):
        if wrap.decorator and isinstance(call.func, ast.Attribute):
            shift = 1
        elif not wrap.decorator:
            params = params[1:]
    static_pos = {i if i >= 0 else i + len(params) for i in wrap.static_argnums}
    names = set(wrap.static_argnames) | {params[i] for i in static_pos if 0 <= i < len(params)}
    positions = {i - shift for i in static_pos}
    for i, p in enumerate(params):
        if p in names:
            positions.add(i - shift)
    return positions, names


class ShapeChurn(Rule):
    code = "JAX304"
    confirmed_by = "compiles"
    name = "shape-churn"
    summary = ("Finds calls, in a loop, of a jitted function with an argument sliced to a width that changes "
               "every iteration (`f(x[:i])`, `f(x[:, :t])`, `f(x[i:j])` with `j` recomputed in the loop).")
    rationale = ("A jitted function is compiled once per input shape. Passing a slice whose length follows "
                 "the loop (a growing prefix, a ragged window) gives a new shape, and a new trace and XLA "
                 "compile, every iteration. Pad to a fixed length (or a few bucket sizes) and pass the valid "
                 "length or a mask as an array.")
    bad = """
        import jax
        import jax.numpy as jnp

        @jax.jit
        def prefix_energy(x):
            return jnp.sum(x ** 2)

        def energies(x):
            return [prefix_energy(x[:t]) for t in range(1, x.shape[0])]
    """
    good = """
        import jax
        import jax.numpy as jnp

        @jax.jit
        def prefix_energy(x, t):
            return jnp.sum(jnp.where(jnp.arange(x.shape[0]) < t, x ** 2, 0.0))

        def energies(x):
            return [prefix_energy(x, t) for t in range(1, x.shape[0])]
    """

    def check(self, model: ModuleModel) -> Iterator[Finding]:
        bounded_iters = None
        for call in model.calls:
            ctx = model.context(call)
            if ctx is None or not ctx.loops or model.in_traced_code(call):
                continue
            loops = tuple(lp for lp in ctx.loops if not lp.bounded)
            if not loops:
                continue
            wrap = model.callable_info(call.func, ctx.scope)
            if wrap is None or wrap.kind not in ("jit", "pmap", "filter_jit"):
                continue
            if model.in_timing_harness(ctx):
                continue
            if bounded_iters is None:
                bounded_iters = {id(_iterable(lp.node)) for lp in model.loops if lp.bounded}
            churn = _Churn(model, ctx.scope, loops, bounded_iters)
            static_pos, static_names = _static_positions(wrap, call)
            args = []
            for i, arg in enumerate(call.args):
                if isinstance(arg, ast.Starred):
                    break
                if i not in static_pos:
                    args.append(arg)
            args += [kw.value for kw in call.keywords if kw.arg is not None and kw.arg not in static_names]
            for arg in args:
                if self._churning_arg(model, churn, arg, loops):
                    yield self.finding(arg, f"`{unparse(arg, 30)}` changes shape from one iteration to the next, so "
                                            f"`{unparse(call.func)}` retraces and recompiles each time; pad to a "
                                            "fixed size and pass the length or a mask")

    def _churning_arg(self, model: ModuleModel, churn: _Churn, arg: ast.AST, loops: tuple) -> bool:
        if churn.churning(arg):
            return True
        if isinstance(arg, ast.Name):
            ev = model.binding(arg.id, churn.scope, (arg.lineno, arg.col_offset))
            if (ev is not None and ev.kind == "assign" and ev.path is None and ev.scope is churn.scope
                    and any(lp in loops for lp in ev.loops)):
                return churn.churning(ev.value)
        return False


# --------------------------------------------------------------------------- JAX305

UNROLL_TRIPS = 100


def _const_int(model: ModuleModel, e: ast.AST, scope: Scope, depth: int = 0) -> Optional[int]:
    """An int literal, a foldable expression of them, or a name bound once to one (a module
    constant or a local literal)."""
    if depth > 6:
        return None
    if isinstance(e, ast.Constant):
        return e.value if isinstance(e.value, int) and not isinstance(e.value, bool) else None
    if isinstance(e, ast.UnaryOp) and isinstance(e.op, ast.USub):
        v = _const_int(model, e.operand, scope, depth + 1)
        return -v if v is not None else None
    if isinstance(e, ast.BinOp) and isinstance(e.op, (ast.Add, ast.Sub, ast.Mult, ast.FloorDiv, ast.Pow)):
        a = _const_int(model, e.left, scope, depth + 1)
        b = _const_int(model, e.right, scope, depth + 1)
        if a is None or b is None:
            return None
        try:
            if isinstance(e.op, ast.Pow):
                return a ** b if 0 <= b <= 64 else None
            return {ast.Add: a + b, ast.Sub: a - b, ast.Mult: a * b}.get(type(e.op)) if not isinstance(
                e.op, ast.FloorDiv) else (a // b if b else None)
        except (OverflowError, ZeroDivisionError):
            return None
    if isinstance(e, ast.Name):
        ev = model.binding(e.id, scope, (e.lineno, e.col_offset))
        if ev is None or ev.kind != "assign" or ev.path is not None:
            return None
        if len(ev.scope.events.get(e.id, ())) != 1:
            return None  # rebound somewhere: not a constant
        return _const_int(model, ev.value, ev.scope, depth + 1)
    return None


def _rank_derived(model: ModuleModel, e: ast.AST, scope: Scope, depth: int = 0) -> bool:
    """``x.ndim``, ``np.ndim(x)``, ``len(x.shape)``, or a name bound to one."""
    for n in ast.walk(e):
        if isinstance(n, ast.Attribute) and n.attr == "ndim":
            return True
        if isinstance(n, ast.Call):
            qn = model.resolve(n.func, scope) or ""
            if qn.endswith(".ndim"):
                return True
            if qn == "builtins.len" and n.args and isinstance(n.args[0], ast.Attribute) and n.args[0].attr == "shape":
                return True
        if isinstance(n, ast.Name) and depth < 3:
            ev = model.binding(n.id, scope, (n.lineno, n.col_offset))
            if ev is not None and ev.kind == "assign" and ev.value is not None and ev.scope is scope:
                if _rank_derived(model, ev.value, scope, depth + 1):
                    return True
    return False


def _loop_calls(loop: Loop) -> Iterator[ast.Call]:
    yield from loop.calls
    for child in loop.children:
        yield from _loop_calls(child)


def _traces_jax_ops(model: ModuleModel, loop: Loop, f: FunctionInfo) -> bool:
    """Whether the loop body records JAX operations (a JAX call, a name or an item of a pytree
    assigned a JAX value in it), as opposed to Python bookkeeping that tracing runs but does not
    record."""
    for call in _loop_calls(loop):
        scope = model.scope_at(call)
        if model.is_jax(call, scope) or model.callable_info(call.func, scope) is not None:
            return True
    for evs in f.scope.events.values():
        for ev in evs:
            if loop not in ev.loops:
                continue
            if ev.kind == "assign" and ev.value is not None and model.is_jax(ev.value, ev.scope):
                return True
            if ev.kind == "aug" and (model.is_jax(ev.node.value, ev.scope) or model.is_jax(ev.node.target, ev.scope)):
                return True
    for target, kind in model.stores:
        ctx = model.context(target)
        if kind != "del" and ctx is not None and loop in ctx.loops and model.is_jax(target.value, ctx.scope):
            return True  # params["w"] = ... on a pytree of tracers
    return False


def _range_call(model: ModuleModel, it: ast.AST, scope: Scope) -> Optional[ast.Call]:
    while isinstance(it, ast.Call) and it.args:
        qn = model.resolve(it.func, scope)
        if qn == "builtins.range":
            return it
        if qn in ("builtins.enumerate", "builtins.reversed"):
            it = it.args[0]
            continue
        return None
    return None


class UnrolledLoopInTracedCode(Rule):
    code = "JAX305"
    confirmed_by = "unroll"
    name = "unrolled-loop-in-traced-code"
    summary = ("Finds Python `for` loops inside traced code that run at least 100 times (a literal or "
               "module-constant `range`) or that call a jitted step function every iteration.")
    rationale = ("Tracing runs the Python loop and records every iteration: `for _ in range(1000)` inside jit "
                 "becomes a program with a thousand copies of the body, which takes minutes to compile and "
                 "grows the executable. `jax.lax.fori_loop` or `jax.lax.scan` record the body once and compile "
                 "in seconds. Short loops over layers or pytree leaves are fine.")
    bad = """
        import jax
        import jax.numpy as jnp

        @jax.jit
        def simulate(x, v):
            for _ in range(1000):
                v = v - 0.01 * x
                x = x + 0.01 * v
            return x, v
    """
    good = """
        import jax
        import jax.numpy as jnp

        @jax.jit
        def simulate(x, v):
            def step(_, state):
                x, v = state
                v = v - 0.01 * x
                return x + 0.01 * v, v
            return jax.lax.fori_loop(0, 1000, step, (x, v))
    """

    def check(self, model: ModuleModel) -> Iterator[Finding]:
        staging = Staging(model)
        for f in model.functions:
            if not f.loops or not staging.staged(f):
                continue
            for loop in f.loops:
                msg = self._unrolled(model, loop, f)
                if msg is not None:
                    yield self.finding(loop.node, msg)

    def _unrolled(self, model: ModuleModel, loop: Loop, f: FunctionInfo) -> Optional[str]:
        if loop.kind != "for" or loop.bounded:
            return None
        node = loop.node
        scope = model.context(node).scope
        rng = _range_call(model, node.iter, scope)
        if rng is None:
            return None
        vals = [_const_int(model, a, scope) for a in rng.args]
        if rng.keywords or any(isinstance(a, ast.Starred) for a in rng.args):
            vals = [None]
        if all(v is not None for v in vals):
            try:
                trips = len(range(*vals))
            except (TypeError, ValueError, OverflowError):
                return None
            if trips >= UNROLL_TRIPS and _traces_jax_ops(model, loop, f):
                return (f"Python `for` loop of {trips} iterations in traced code is unrolled into {trips} copies "
                        "of its body, which compile slowly; use jax.lax.fori_loop or jax.lax.scan")
            return None
        if any(_rank_derived(model, a, scope) for a in rng.args):
            return None  # a loop over the axes of an array: a handful of iterations
        for call in loop.calls:
            call_scope = model.scope_at(call)
            qn = model.resolve(call.func, call_scope)
            if qn is not None and qn.split(".")[0] in ("jax", "flax", "equinox", "optax", "haiku"):
                continue  # library functions jit themselves; they are not the user's step function
            wrap = model.callable_info(call.func, call_scope)
            if wrap is not None and wrap.kind in ("jit", "pmap", "filter_jit"):
                return (f"Python `for` loop in traced code calls the jitted `{unparse(call.func)}` every "
                        "iteration, unrolling one copy per step into the program; use jax.lax.fori_loop or "
                        "jax.lax.scan")
        return None


RULES = [DataDependentShape, TracedControlFlow, TracedShapeArgument, ShapeChurn, UnrolledLoopInTracedCode]
