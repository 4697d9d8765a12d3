"""Callable queries: what calling an expression runs (jit wrappers, transforms, local functions,
functions and compiled names imported from the project's other modules).

Functions of the model (``m``), not a mixin.
"""

from __future__ import annotations

import ast
from typing import Optional

from ... import names as N
from ..python import limits as L
from ..python.records import ClassInfo, Context, FunctionInfo, Scope
from .jaxrecords import JitWrap
from .replaced import replaced_field
from ..python.syntax import _pos, returned_nodes, returned_values  # noqa: F401 (used by other modules)
from ..python.instances import (class_named as _class_named, instance_class, method_kind as _method_kind,
                                overridden as _overridden)


def callable_info(m, func: ast.AST, scope: Optional[Scope] = None) -> Optional[JitWrap]:
    """If calling ``func`` runs compiled/transformed JAX code, the wrapper that made it: ``jax.jit(f)(x)``,
    names bound to ``jax.jit(...)``/``jax.grad(...)`` (or its ``.lower(...).compile()``), functions decorated
    with a jit wrapper or transform, ``partial`` of those, ``self.attr`` set to one in a method of the class."""
    key = id(func)
    if key in m.facts.callables:
        return m.facts.callables[key]  # type: ignore[return-value]
    m.facts.callables[key] = None
    if scope is None:
        scope = m.scope_at(func)
    result = _callable(m, func, scope, 0)
    m.facts.callables[key] = result
    return result


def _callable(m, func: ast.AST, scope: Scope, depth: int) -> Optional[JitWrap]:
    if depth > L.CALLABLE_CHAIN or not m.work.spend():
        return None
    if isinstance(func, ast.Call):
        qn = m.resolve(func.func, scope)
        if qn in N.JIT_WRAPPERS or qn in N.TRANSFORMS:
            return _wrap_for_call(m, func)
        if qn == N.PARTIAL and func.args:
            return _callable(m, func.args[0], scope, depth + 1)
        # partial(jax.jit, static_argnums=...)(f)
        if isinstance(func.func, ast.Call) and _jit_factory(m, func.func, scope):
            return _wrap_for_call(m, func)
        low = func.func.value if isinstance(func.func, ast.Attribute) and func.func.attr == "compile" else None
        if isinstance(low, ast.Call) and isinstance(low.func, ast.Attribute) and low.func.attr == "lower":
            return _callable(m, low.func.value, scope, depth + 1)  # ``jax.jit(f).lower(x).compile()``: f, AOT
        return _factory_result(m, func, scope, depth)
    if isinstance(func, ast.Name):
        ev = m.binding(func.id, scope, _pos(func)) or m.binding_over_import(func.id, scope, _pos(func))
        if ev is None:
            other = m._imported(func.id, scope)
            if other is not None and other[1] is not None:
                return other[0].exported_callable(other[1])
            return None
        if ev.kind == "def":
            # Only a decorator makes the name itself compiled: after ``g = jax.jit(f)``,
            # calling ``f`` still runs the Python function.
            f = m.func_of_node.get(id(ev.node))
            if f is not None and f.jit_entry is not None and f.jit_entry.decorator:
                return f.jit_entry
            if f is not None and f.traced and any(c.decorator for c in f.trace_causes):
                return _TRANSFORMED
            return None
        if ev.plain_assign:
            return _callable(m, ev.value, ev.scope, depth + 1)
        if ev.kind == "assign" and ev.path is not None and len(ev.path) == 1 and isinstance(ev.value, ast.Call):
            return _factory_element(m, ev.value, ev.scope, depth, ev.path[0])  # ``step, metrics = make(...)``
        if ev.kind == "param":
            # ``def train(step_fn, ...)``: compiled when every call of ``train`` passes a compiled one
            args = param_arguments(m, ev)
            infos = [_callable(m, a, s, depth + 1) for a, s in args or ()]
            if infos and all(i is not None for i in infos):
                return infos[0]
        return None
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "self":
        for cls in local_mro(m, m._class_of(scope)):
            for value in cls.self_attrs.get(func.attr, ()):
                info = _callable(m, value, m.scope_at(value), depth + 1)
                if info is not None:
                    return info
            meth = cls.methods.get(func.attr)
            if meth is not None and meth.jit_entry is not None and meth.jit_entry.decorator:
                return meth.jit_entry
            if func.attr in cls.self_attrs or meth is not None:
                break  # defined here: a base's definition is overridden
    elif isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
        # mod.train_step(...) with ``from . import mod`` / ``import pkg.mod as mod``
        other = m._imported(func.value.id, scope)
        if other is not None and other[1] is None:
            return other[0].exported_callable(func.attr)
        replaced = replaced_field(m, func.value, func.attr, scope)
        if replaced is not None:
            return _callable(m, replaced[0], replaced[1], depth + 1)
    return None


def param_arguments(m, ev) -> Optional[list]:
    """``(argument, scope)`` for parameter ``ev`` (a "param" binding) from every call of its
    function in this module; None when one call does not spell it out (a default, ``*args``) or
    when nothing calls the function here. What the module's callers pass is what is known of a
    parameter: a fact drawn from them holds on those calls' paths (calls from other modules are
    not seen, and are not needed for it to hold there)."""
    memo = m.facts.param_args_memo
    key = id(ev)
    if key in memo:
        return memo[key]
    memo[key] = None
    f = m.func_of_node.get(id(ev.node))
    if f is None or isinstance(f.node, ast.Lambda):
        return None
    out: list = []
    for call in m.calls_by_name.get(f.name, ()):
        cscope = m.scope_at(call)
        if not any(g is f for g in local_functions(m, call.func, cscope)):
            continue
        arg = passed_argument(f, call, ev.value)
        if arg is None:
            return None
        out.append((arg, cscope))
    if not out:
        return None
    memo[key] = out
    return out


def passed_argument(f: FunctionInfo, call: ast.Call, name: str) -> Optional[ast.AST]:
    """The argument ``call`` (a call of ``f``) passes for parameter ``name``, if it spells it out."""
    params = f.params[1:] if isinstance(call.func, ast.Attribute) and f.is_method else f.params
    for i, arg in enumerate(call.args):
        if isinstance(arg, ast.Starred):
            break
        if i < len(params) and params[i] == name:
            return arg
    for kw in call.keywords:
        if kw.arg == name:
            return kw.value
    return None


def local_mro(m, cls: Optional[ClassInfo]) -> list:
    """``cls`` and the classes of this module it derives from, depth first, in base order (a
    base from another module ends the walk there): where ``self.attr`` is looked up."""
    out: list = []
    stack = [cls] if cls is not None else []
    while stack and len(out) < 8:
        c = stack.pop(0)
        if c in out:
            continue
        out.append(c)
        outer = c.scope.parent if c.scope is not None else None
        stack[:0] = [b for b in (_class_named(m, base, outer) for base in c.node.bases) if b is not None]
    return out


def _factory_result(m, call: ast.Call, scope: Scope, depth: int) -> Optional[JitWrap]:
    """The wrapper a function or method of this module returns, for the value of a call of it:
    ``step = make_step(lr)`` with ``def make_step(lr): return jax.jit(...)``, ``self.p_step =
    self.trainer.get_train_step()`` with the method returning a jitted closure, or a factory of
    another module of the project (``from .steps import make_step``). Every ``return`` of the
    function must give a compiled callable; None otherwise."""
    # another module's factory; not while summarizing a module for others (a factory returning
    # another module's factory's product is not followed: each lookup would parse that module)
    calls = m.facts.factory_call_memo
    key = id(call)
    if key not in calls:
        calls[key] = None  # a cycle sees "not one" meanwhile
        calls[key] = _factory_of_call(m, call, scope, depth)
    return calls[key]


def _factory_of_call(m, call: ast.Call, scope: Scope, depth: int) -> Optional[JitWrap]:
    found = imported_function(m, call.func, scope) \
        if m.project is not None and not m.facts.summarizing else None
    if found is not None:
        return found[0].factory_callable(found[1])
    funcs = local_functions(m, call.func, scope)
    if not funcs and isinstance(call.func, ast.Attribute):
        cls = instance_class(m, call.func.value, scope)
        meth = cls.methods.get(call.func.attr) if cls is not None else None
        funcs = [meth] if meth is not None and _method_kind(meth.node) == "plain" else []
    if len(funcs) != 1 or not isinstance(funcs[0].node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return None
    f = funcs[0]
    memo = m.facts.factory_memo
    if id(f) in memo:
        return memo[id(f)]
    memo[id(f)] = None  # a recursive factory sees "not one" meanwhile
    found = None
    for ret in returned_values(f.node):
        info = _callable(m, ret, m.scope_at(ret), depth + 1)
        if info is None:
            found = None
            break
        found = found or info
    memo[id(f)] = found
    return found


def imported_result(m, func: ast.AST, scope: Scope) -> bool:
    """Whether calling ``func`` calls a function of another module of the project that
    certainly returns one JAX array (:meth:`~jaxlint.model.ModuleSummary.returns_array`):
    ``accuracy(logits, y)`` after ``from .metrics import accuracy``, or ``metrics.accuracy(...)``
    after ``from . import metrics``."""
    if m.project is None or not m.work.spend():
        return False
    found = imported_function(m, func, scope)
    return found is not None and found[0].returns_array(found[1])


def imported_function(m, func: ast.AST, scope: Scope) -> Optional[tuple]:
    """``(summary, name)`` when calling ``func`` calls the top-level function ``name`` of another
    module of the project: ``f(...)`` after ``from .mod import f``, ``mod.f(...)`` after ``from .
    import mod``; None otherwise (a local name, a library, no project resolver)."""
    if m.project is None or m.path is None:
        return None
    if isinstance(func, ast.Name):
        if m.binding(func.id, scope, _pos(func)) is not None:
            return None
        other = m._imported(func.id, scope)
        return other if other is not None and other[1] is not None else None
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
        if m.binding(func.value.id, scope, _pos(func.value)) is not None:
            return None
        other = m._imported(func.value.id, scope)
        return (other[0], func.attr) if other is not None and other[1] is None else None
    return None


def exported_callable(m, name: str) -> Optional[JitWrap]:
    """What calling this module's top-level ``name`` runs (see :func:`callable_info`)."""
    key = ("export", name)
    if key in m.facts.callables:
        return m.facts.callables[key]  # type: ignore[return-value]
    m.facts.callables[key] = None
    probe = ast.Name(id=name, ctx=ast.Load(), lineno=10 ** 9, col_offset=0)
    result = _callable(m, probe, m.module_scope, 0)
    m.facts.callables[key] = result
    return result


def exported_factory(m, name: str, index: Optional[int] = None) -> Optional[JitWrap]:
    """The compiled callable this module's top-level function ``name`` returns (see
    :func:`_factory_result`), or element ``index`` of the tuple it returns, for other modules."""
    probe = ast.Call(func=ast.Name(id=name, ctx=ast.Load(), lineno=10 ** 9, col_offset=0), args=[], keywords=[],
                     lineno=10 ** 9, col_offset=0)
    if index is not None:
        return _factory_element(m, probe, m.module_scope, 0, index)
    return _factory_of_call(m, probe, m.module_scope, 0)  # not memoized: the probe is a new node each time


def _factory_element(m, call: ast.Call, scope: Scope, depth: int, index: int) -> Optional[JitWrap]:
    """Element ``index`` of the tuple a factory returns (``step, metrics = get_step(cfg)``), when
    every ``return`` of it is a tuple whose element there is a compiled callable."""
    found = imported_function(m, call.func, scope) if m.project is not None and not m.facts.summarizing else None
    if found is not None:
        return found[0].factory_callable(f"{found[1]}[{index}]")
    funcs = local_functions(m, call.func, scope)
    if len(funcs) != 1 or not isinstance(funcs[0].node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return None
    out = None
    for ret in returned_values(funcs[0].node):
        info = _callable(m, ret.elts[index], m.scope_at(ret), depth + 1) \
            if isinstance(ret, ast.Tuple) and index < len(ret.elts) else None
        if info is None:
            return None
        out = out or info
    return out


def _jit_factory(m, call: ast.Call, scope: Scope) -> Optional[str]:
    """``partial(jax.jit, ...)`` or ``jax.jit(static_argnums=...)``: a decorator that jits."""
    qn = m.resolve(call.func, scope)
    if qn == N.PARTIAL and call.args:
        inner = m.resolve(call.args[0], scope)
        if inner in N.JIT_WRAPPERS:
            return inner
    if qn in N.JIT_WRAPPERS and not call.args:
        return qn
    return None


def _wrap_for_call(m, call: ast.Call) -> JitWrap:
    for w in m.facts.wraps_by_call.get(id(call), ()):
        return w
    return _TRANSFORMED


def local_functions(m, expr: ast.AST, scope: Scope, depth: int = 0, instances: bool = True) -> list[FunctionInfo]:
    """The functions of this module an expression names: a def in scope, ``self.method``,
    a lambda, ``partial(f, ...)``, or the function inside ``jax.jit(f)``/``jax.grad(f)``; with
    ``instances``, also ``obj.method`` of an instance of a class of this module. The trace analysis
    (facts/tracing.py) asks without: "traced" is a fact of the whole function, and a method an
    instance hands to a transform is often also called directly (``jax.vmap(trainer.run)`` beside
    ``Trainer(...).run(key)``), where its loops run eagerly (fresh set Q: marking it traced hid a
    JAX803 there)."""
    if depth > L.CALLABLE_CHAIN or not m.work.spend():
        return []
    if isinstance(expr, ast.Lambda):
        f = m.func_of_node.get(id(expr))
        return [f] if f else []
    if isinstance(expr, ast.Name):
        ev = m.binding(expr.id, scope, _pos(expr))
        if ev is None:
            return []
        if ev.kind == "def":
            f = m.func_of_node.get(id(ev.node))
            return [f] if f else []
        if ev.plain_assign:
            return local_functions(m, ev.value, ev.scope, depth + 1, instances)
        return []
    if isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name) and expr.value.id in ("self", "cls"):
        cls = m._class_of(scope)
        if cls is not None and expr.attr in cls.methods:
            return [cls.methods[expr.attr]]
        return []
    if instances and isinstance(expr, ast.Attribute) and isinstance(expr.value, (ast.Name, ast.Attribute)):
        # ``trainer.update(...)``, ``self.model.step(...)``: a method of the instance's class of this module
        cls = instance_class(m, expr.value, scope, depth + 1)
        meth = cls.methods.get(expr.attr) if cls is not None else None
        return [meth] if meth is not None and not _overridden(m, cls, expr.attr) else []
    if isinstance(expr, ast.Call):
        qn = m.resolve(expr.func, scope)
        if (qn == N.PARTIAL or qn in N.JIT_WRAPPERS or qn in N.TRANSFORMS) and expr.args:
            return local_functions(m, expr.args[0], scope, depth + 1, instances)
    return []


def _wrapper_chain(m, expr: ast.AST, scope: Scope) -> Optional[tuple]:
    """``(bound, target, scope)`` on the way from ``expr`` through names bound once by a plain assignment and
    jit/transform/``functools.partial`` wrappers: how many leading positionals ``partial`` binds, and the
    innermost callable expression; None past the chain limit."""
    bound = 0
    for _ in range(L.CALLABLE_CHAIN + 1):
        if isinstance(expr, ast.Name):
            ev = m.binding(expr.id, scope, _pos(expr))
            if ev is None or not ev.plain_assign or ev.kind == "def":
                return bound, expr, scope
            expr, scope = ev.value, ev.scope
            continue
        if isinstance(expr, ast.Call) and expr.args:
            qn = m.resolve(expr.func, scope)
            if qn == N.PARTIAL:
                if any(isinstance(a, ast.Starred) for a in expr.args[1:]):
                    return None
                bound += len(expr.args) - 1
            elif qn not in N.JIT_WRAPPERS and qn not in N.TRANSFORMS:
                return bound, expr, scope
            expr = expr.args[0]
            continue
        return bound, expr, scope
    return None


def bound_positionals(m, expr: ast.AST, scope: Scope, depth: int = 0) -> int:
    """How many leading positional parameters ``partial`` binds on the way from ``expr`` to the function
    :func:`local_functions` finds (``vmap(partial(f, a))``: 1, the call's first argument is f's second)."""
    chain = _wrapper_chain(m, expr, scope)
    return chain[0] if chain is not None else 0


def bound_self(m, expr: ast.AST, scope: Scope) -> Optional[int]:
    """1 when the callable ``expr`` names is, through names and jit/transform/``partial`` wrappers, an
    attribute giving a bound method (``update_fn = jax.jit(algo.update_n_times)``: the instance, or the class
    of a classmethod, binds the first parameter), 0 when it is not an attribute at all or a stored function,
    None when the attribute's kind is not shown (fresh AG: JAX-CORL's jitted classmethod read one argument off)."""
    chain = _wrapper_chain(m, expr, scope)
    if chain is None:
        return None
    _, target, where = chain
    if not isinstance(target, ast.Attribute):
        return 0
    kind = attribute_callable(m, target, where)
    return 1 if kind == "bound_method" else 0 if kind == "stored" else None

# ------------------------------------------------------------------ bound methods vs stored functions


def attribute_callable(m, expr: ast.AST, scope: Scope) -> Optional[str]:
    """What evaluating the attribute ``expr`` gives: "bound_method" when it looks a function up
    on an instance through its class (``self.step``, ``self.env.step`` with ``self.env =
    Env(...)``, ``env.step`` with ``env = Env(...)``, ``super().update``; a classmethod, on an
    instance or its class): Python makes a new bound-method object at every evaluation, equal
    to the last one but not the same object. "stored" when it returns a function object kept
    somewhere, the same one each time: an instance attribute assigned in a method
    (``self.loss_fn = loss_fn``), a dataclass or NamedTuple field, a staticmethod, a function
    looked up on its class (``Cls.f``) or on an imported module (``mod.func``). None when this
    module cannot tell: an object made elsewhere (``self.env = make_env()``, a parameter), a
    property, a class attribute of unknown kind, a method a base class from another module may
    define."""
    if not isinstance(expr, ast.Attribute) or not m.work.spend():
        return None
    base, attr = expr.value, expr.attr
    if isinstance(base, ast.Name) and _module_import(m, base.id, scope):
        return "stored"
    if isinstance(base, ast.Call) and isinstance(base.func, ast.Name) and base.func.id == "super" \
            and m.binding("super", scope, _pos(base)) is None:
        cls = m._class_of(scope)
        if cls is None:
            return None
        return _bases_member(m, cls, attr, True, 0)
    cls = _class_named(m, base, scope)
    if cls is not None:
        return _member(m, cls, attr, False, 0)
    cls = instance_class(m, base, scope)
    if cls is not None:
        return _member(m, cls, attr, True, 0)
    if library_instance(m, base, scope) is not None or _library_method(m, base, attr, scope):
        return "bound_method"
    return None


def _library_method(m, base: ast.AST, attr: str, scope: Scope) -> bool:
    """``strategy.ask`` with ``strategy`` bound once to a call of a library class whose ``ask`` is a
    method (``names.LIBRARY_BOUND_METHODS``: evosax's strategies, gymnax's ``RolloutWrapper``)."""
    qn = plain_maker(m, base, scope)
    return qn is not None and any((qn.startswith(k) if k.endswith(".") else qn == k) and attr in methods
                                  for k, methods in N.LIBRARY_BOUND_METHODS.items())


def plain_maker(m, name: ast.AST, scope: Scope) -> Optional[str]:
    """The qualified name of the callable whose call the name ``name`` is bound to by a plain
    assignment reaching it (``envs = gym.vector.SyncVectorEnv(...)``), or None."""
    if not isinstance(name, ast.Name):
        return None
    ev = m.binding(name.id, scope, _pos(name))
    if ev is None or not ev.plain_assign or not isinstance(ev.value, ast.Call):
        return None
    return m.resolve(ev.value.func, ev.scope)


def library_instance(m, expr: ast.AST, scope: Scope, depth: int = 0) -> Optional[str]:
    """The library factory (``names.ENV_FACTORIES``) that made the environment ``expr`` is: a
    name bound to its result (``env = brax.envs.create(...)``, ``env, params = gymnax.make(...)``
    at the environment's index), or ``self.attr`` every assignment of which is such a result.
    None otherwise."""
    if depth > L.CALLABLE_CHAIN or not m.work.spend():
        return None
    if isinstance(expr, ast.Name):
        ev = m.binding(expr.id, scope, _pos(expr))
        if ev is None or ev.kind != "assign" or not isinstance(ev.value, ast.Call):
            return None
        qn = m.resolve(ev.value.func, ev.scope)
        if qn not in N.ENV_FACTORIES:
            return None
        index = N.ENV_FACTORIES[qn]
        return qn if ev.path == (None if index is None else (index,)) else None
    if isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name) and expr.value.id == "self":
        owner = instance_class(m, expr.value, scope, depth + 1)
        values = owner.self_attrs.get(expr.attr, ()) if owner is not None else ()
        found = {m.resolve(v.func, m.scope_at(v)) if isinstance(v, ast.Call) else None for v in values}
        if len(found) == 1:
            qn = next(iter(found))
            if qn in N.ENV_FACTORIES and N.ENV_FACTORIES[qn] is None:
                return qn
    return None


def _module_import(m, name: str, scope: Scope) -> bool:
    """``name`` is a module: ``import mod`` / ``import pkg.mod as mod``, or ``from pkg import
    mod`` naming a module of the project."""
    s: Optional[Scope] = scope
    while s is not None:
        if name in s.events and s.kind != "class":
            return False
        if name in s.import_src:
            if s.import_src[name][1] is None:
                return True
            other = m._imported(name, scope)
            return other is not None and other[1] is None
        s = s.parent
    return False


def _member(m, cls: ClassInfo, attr: str, on_instance: bool, depth: int) -> Optional[str]:
    """``attr`` looked up on an instance of ``cls`` (``on_instance``) or on ``cls`` itself."""
    if depth > L.CALLABLE_CHAIN or not m.work.spend():
        return None
    if on_instance and attr in cls.self_attrs:
        return "stored"  # an instance attribute: the instance's dict comes before the class's
    evs = cls.scope.events.get(attr) if cls.scope is not None else None
    if evs:
        ev = evs[-1]
        if isinstance(ev.node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            kind = _method_kind(ev.node)
            if kind == "static":
                return "stored"
            if kind == "class":
                return "bound_method"
            if kind == "plain":
                return "bound_method" if on_instance else "stored"
            return None  # a property or a decorated method: whatever its decorator returns
        if ev.plain_assign and isinstance(ev.value, ast.Call) and isinstance(ev.value.func, ast.Name) \
                and ev.value.func.id == "staticmethod":
            return "stored"
        return "stored" if on_instance and _annotated(cls, attr) else None
    if on_instance and _annotated(cls, attr):
        return "stored"  # a dataclass or NamedTuple field declared without a default
    return _bases_member(m, cls, attr, on_instance, depth)


def _bases_member(m, cls: ClassInfo, attr: str, on_instance: bool, depth: int) -> Optional[str]:
    """``attr`` looked up on the bases of ``cls``, in order: None as soon as a base is not a
    class of this module (it may define ``attr``)."""
    outer = cls.scope.parent if cls.scope is not None else None
    for b in cls.node.bases:
        base = _class_named(m, b, outer)
        if base is None:
            return None
        found = _member(m, base, attr, on_instance, depth + 1)
        if found is not None:
            return found
    return None


def wrapper_qualname(m, wrap: JitWrap) -> Optional[str]:
    """The qualified name of the jit wrapper that made ``wrap`` (``jax.jit``, ``flax.nnx.jit``)."""
    def name_of(expr: ast.AST, scope) -> Optional[str]:
        if isinstance(expr, ast.Call):
            qn = m.resolve(expr.func, scope)
            if qn == N.PARTIAL and expr.args:
                return m.resolve(expr.args[0], scope)
            return qn
        return m.resolve(expr, scope)

    if wrap.decorator and wrap.func is not None:
        scope = wrap.func.scope.parent
        for dec in wrap.func.node.decorator_list:
            qn = name_of(dec, scope)
            if qn in N.JIT_WRAPPERS:
                return qn
        return None
    if isinstance(wrap.node, ast.Call):
        func = wrap.node.func
        scope = wrap.ctx.scope
        return name_of(func, scope) if isinstance(func, ast.Call) else m.resolve(func, scope)
    return None


def _annotated(cls: ClassInfo, attr: str) -> bool:
    """``attr: T`` (with or without a default) in the class body: a dataclass, NamedTuple or
    struct field, set per instance."""
    return any(isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name) and st.target.id == attr
               for st in cls.node.body)


class _Transformed(JitWrap):
    pass


# Stands for "a callable made by a transform whose wrapper we did not record" (e.g. jax.grad(f)).
_TRANSFORMED = _Transformed(node=ast.Pass(), kind="transform", spelling="", target=None, func=None,
                            ctx=Context(scope=Scope(ast.Module(body=[], type_ignores=[]), "module", None)))


def dispatches_compiled(m, call: ast.Call, depth: int = 0) -> bool:
    """A call of a plain function of this module whose body calls a compiled function once per
    call, in no loop of its own (``train_step(params, batch)`` running the jitted update), directly
    or through one more such function. A helper that loops over its own steps (``train_epoch``)
    is an epoch, not one step: not counted."""
    if isinstance(call.func, ast.Lambda) or depth > 1:
        return False
    for g in local_functions(m, call.func, m.scope_at(call)):
        if isinstance(g.node, ast.Lambda) or g.traced:
            continue
        for c in g.calls:
            if not m.work.spend():
                return False
            ctx = m.context(c)
            if ctx is None or ctx.loops:
                continue
            if callable_info(m, c.func, m.scope_at(c)) is not None or dispatches_compiled(m, c, depth + 1):
                return True
    return False
