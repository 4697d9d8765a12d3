"""Eager updates: the per-step parameter update run op by op outside any compiled function.

``updates, opt_state = tx.update(grads, opt_state, params)`` and ``optax.apply_updates(params,
updates)`` (or a hand-written ``jax.tree.map(lambda p, g: p - lr * g, params, grads)``) called
from Python, not from inside a jitted step, dispatch one small computation per leaf and per
optimizer stage: a few hundred dispatches a step for a small network. A gradient transform's
product called so (``jax.grad(f)(x)``, or ``g(x)`` after ``g = jax.value_and_grad(f)``) does
more: it traces ``f`` again at every call and runs the forward and backward passes op by op
(:func:`eager_gradient`). Functions of the model (``m``), asked by JAX701.
"""

from __future__ import annotations

import ast
import os
from typing import Optional

from ... import names as N
from . import callables, deviceloops, libraryobjects
from . import values as V
from .proof import DISPROVEN, Fact, disproven, proven, unknown
from ..python.records import Scope
from ..python.syntax import _pos, call_arg, last_name


_SPELLED = frozenset({"update", "map", "tree_map", "apply_gradients", "zip"}
                     | {q.rsplit(".", 1)[1] for q in N.EAGER_UPDATE_FUNCTIONS})


class EagerUpdate:
    """One parameter update made outside compiled code: ``call``, ``kind`` ("apply-updates",
    "tree-map" or "optimizer-update"), ``what`` (how a message names it)."""

    __slots__ = ("call", "kind", "what")

    def __init__(self, call: ast.Call, kind: str, what: str):
        self.call = call
        self.kind = kind
        self.what = what


def eager_update(m, call: ast.Call) -> Optional[EagerUpdate]:
    """What parameter update ``call`` makes, when it is one (see the module docstring) and not
    inside traced code; None otherwise. Whether it runs every step is the rule's question."""
    func = call.func
    if last_name(func) not in _SPELLED and not (isinstance(func, ast.Name) and _imports_example_optimizers(m)):
        return None  # a cheap filter: every update this module knows is spelled one of these, or is a name
    if m.in_traced_code(call):
        return None
    scope = m.scope_at(call)
    maker = libraryobjects.example_optimizer_update(m, func, scope)
    if maker is not None and len(call.args) >= 3:
        return EagerUpdate(call, "optimizer-update", f"`{ast.unparse(func)}(...)` of the `{maker}` optimizer")
    qn = m.resolve(func, scope)
    if qn in N.EAGER_UPDATE_FUNCTIONS:
        return EagerUpdate(call, "apply-updates", f"`{ast.unparse(func)}(...)`")
    if qn in N.TREE_MAPS:
        return _arithmetic_tree_map(m, call, scope)
    if qn == "builtins.zip":
        return _arithmetic_comprehension(m, call, scope)
    if isinstance(func, ast.Attribute) and func.attr == "apply_gradients" and qn is None \
            and not any("apply_gradients" in c.methods for c in m.classes.values()):
        # flax's ``TrainState.apply_gradients``: the optimizer's update and ``apply_updates`` in one call
        # (a class of this module with its own ``apply_gradients`` is not flax's)
        return EagerUpdate(call, "optimizer-update", f"`{ast.unparse(func)}(...)` (flax's `TrainState` update: the "
                                                     "optimizer's `update` and `apply_updates`)")
    if isinstance(func, ast.Attribute) and func.attr == "update" and qn is None:
        maker = optimizer_maker(m, func.value, scope)
        if maker is not None:
            return EagerUpdate(call, "optimizer-update", f"`{ast.unparse(func)}(...)` of the `{maker[0]}` optimizer")
    return None


def _imports_example_optimizers(m) -> bool:
    """Whether the module imports JAX's example optimizers (``from jax.example_libraries import optimizers``),
    memoized per module."""
    memo = m.facts.eager_memo
    if "example_optimizers" not in memo:
        memo["example_optimizers"] = any((q + ".").startswith(N.EXAMPLE_OPTIMIZER_MAKERS)
                                         for q in m.module_scope.imports.values())
    return memo["example_optimizers"]


def optimizer_maker(m, expr: ast.AST, scope: Scope):
    """``(qualified name, family)`` of the library call that made the optimizer ``expr``: a name
    or ``self.attr`` bound (every time) to ``optax.adam(...)``, ``optax.chain(...)``,
    ``flax.nnx.Optimizer(...)`` (``names.OPTIMIZER_FAMILIES``). None when not known."""
    qn = libraryobjects.library_maker(m, expr, scope)
    family = _family(qn)
    return (qn, family) if family is not None else None


def _family(qn: Optional[str]) -> Optional[str]:
    if qn is None:
        return None
    for prefix, family in N.OPTIMIZER_FAMILIES:
        if qn == prefix or (prefix.endswith(".") and qn.startswith(prefix)):
            return family
    return None


def _arithmetic_tree_map(m, call: ast.Call, scope: Scope) -> Optional[EagerUpdate]:
    """``jax.tree.map(lambda p, g: p - lr * g, params, grads)``: a lambda or def of this module
    that combines the leaves of two or more JAX trees with arithmetic and nothing else."""
    trees = [a for a in call.args[1:] if not isinstance(a, ast.Starred)]
    if len(trees) < 2 or not any(V.holds_jax(m, t, scope) for t in trees):
        return None
    for f in callables.local_functions(m, call.args[0], scope):
        node = f.node
        body = [node.body] if isinstance(node, ast.Lambda) else [
            s.value for s in node.body if isinstance(s, ast.Return) and s.value is not None]
        if len(body) != 1 or f.calls or len(f.params) < 2:
            return None
        expr = body[0]
        used = {n.id for n in ast.walk(expr) if isinstance(n, ast.Name)}
        if isinstance(expr, ast.BinOp) and len(used & set(f.params[:len(trees)])) >= 2:
            return EagerUpdate(call, "tree-map", f"`{ast.unparse(call.func)}(...)` of an update rule")
    return None


def _arithmetic_comprehension(m, call: ast.Call, scope: Scope) -> Optional[EagerUpdate]:
    """``[p - lr * g for p, g in zip(params, grads)]`` (or ``[(w - lr * dw, b - lr * db) for (w, b), (dw, db)
    in zip(params, grads)]``): a list or generator comprehension whose only generator walks ``call``,
    a ``zip`` of two or more sequences of which one holds JAX values, and whose element combines the
    leaves of two of them with arithmetic and nothing else (the hand-written SGD update of tutorials)."""
    comp = _comprehension_over(m, call)
    trees = [a for a in call.args if not isinstance(a, ast.Starred)]
    if comp is None or len(trees) < 2 or len(trees) != len(call.args) or not any(V.holds_jax(m, t, scope)
                                                                              for t in trees):
        return None
    target = comp.generators[0].target
    if not isinstance(target, ast.Tuple) or len(target.elts) != len(trees):
        return None
    slots = [{n.id for n in ast.walk(t) if isinstance(n, ast.Name)} for t in target.elts]
    parts = comp.elt.elts if isinstance(comp.elt, ast.Tuple) else [comp.elt]
    if not parts or any(not isinstance(p, ast.BinOp) or any(isinstance(n, (ast.Call, ast.Subscript))
                                                            for n in ast.walk(p)) for p in parts):
        return None
    used = {n.id for p in parts for n in ast.walk(p) if isinstance(n, ast.Name)}
    if sum(1 for names in slots if names & used) < 2:
        return None
    return EagerUpdate(call, "tree-map", "a comprehension of an update rule over `zip(...)`")


def _comprehension_over(m, call: ast.Call):
    """The list comprehension or generator expression with one generator, no ``if``, whose iterable is ``call``."""
    for loop in m.loops:
        node = loop.node
        if isinstance(node, (ast.ListComp, ast.GeneratorExp)) and len(node.generators) == 1 \
                and node.generators[0].iter is call and not node.generators[0].ifs:
            return node
    return None


def updated_state(m, upd: EagerUpdate, loop, compiled_calls) -> Fact:
    """Whether an eager update updates state the loop's compiled step consumes: *proven* for an
    optimizer's ``update`` or ``apply_updates`` (state by what they are), and for a tree map whose
    result is passed to one of ``compiled_calls`` (the step takes the new parameters);
    *disproven* for a tree map whose result no compiled call reads (running sums of the step's
    metrics: a few tiny additions, no update of what the step computes with)."""
    if upd.kind != "tree-map":
        return proven("eager-update", f"{upd.what} updates optimizer or parameter state")
    targets = _assigned_names(m, upd.call)
    for c in compiled_calls:
        read = {n.id for a in [*c.args, *(k.value for k in c.keywords)] for n in ast.walk(a) if isinstance(n, ast.Name)}
        hit = sorted(targets & read)
        if hit:
            return proven("eager-update", f"its result `{hit[0]}` is passed to the compiled `{ast.unparse(c.func)}` on "
                                          f"line {c.lineno}: the step computes with the updated tree")
    names = ", ".join(f"`{t}`" for t in sorted(targets)) or "its result"
    return disproven("eager-update", f"{names} is read by no compiled call of the loop: an accumulation (of metrics), "
                                     "not an update of the step's state")


def _assigned_names(m, call: ast.Call) -> set:
    """The names the assignment statement holding ``call`` in its value binds."""
    ctx = m.context(call)
    stmts = []
    node = ctx.scope.node if ctx is not None else None
    for stmt in ast.walk(node) if node is not None else ():
        if isinstance(stmt, (ast.Assign, ast.AnnAssign, ast.AugAssign)) and stmt.value is not None and any(
                n is call for n in ast.walk(stmt.value)):
            stmts.append(stmt)
    out: set = set()
    for stmt in stmts:
        targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
        out |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
    return out


class EagerGradient:
    """A call of a gradient transform's product outside compiled code: ``call`` (the call that
    runs it), ``transform`` (the ``jax.grad(...)`` call that made it), ``what`` (how a message
    names it) and ``fact`` (the "eager-gradient" fact, with its evidence)."""

    __slots__ = ("call", "transform", "what", "fact")

    def __init__(self, call: ast.Call, transform: ast.Call, what: str, fact: Fact):
        self.call = call
        self.transform = transform
        self.what = what
        self.fact = fact


def eager_gradient(m, call: ast.Call) -> Optional[EagerGradient]:
    """The gradient ``call`` computes outside any jitted or transformed function, when calling
    ``call.func`` runs the product of ``jax.grad``/``jax.value_and_grad``
    (``names.EAGER_GRADIENT_TRANSFORMS``): ``jax.grad(f)(x)``, or a name bound to one (also
    through ``functools.partial``, or a parameter every call in this module passes one). None
    otherwise: a name bound to ``jax.jit(jax.grad(f))`` runs a compiled program. The fact is
    disproven when the differentiated function is itself compiled (``jax.grad(jax.jit(f))``:
    its forward and backward passes run as compiled programs)."""
    if not isinstance(call.func, (ast.Call, ast.Name)) or m.in_traced_code(call):
        return None
    found = _gradient_transform(m, call.func, m.scope_at(call), 0)
    if found is None:
        return None
    transform, tscope = found
    spelled, target = ast.unparse(transform.func), transform.args[0]
    what = f"`{spelled}(...)`" if call.func is transform else f"`{ast.unparse(call.func)}`, made by `{spelled}(...)`,"
    wrap = callables.callable_info(m, target, tscope)
    if wrap is not None and wrap.kind in ("jit", "pmap", "filter_jit"):
        fact = disproven("eager-gradient", f"`{ast.unparse(target)}` is compiled (`{wrap.spelling}`): the passes "
                                           "run as compiled programs")
    elif isinstance(target, ast.Name) and m.star_imports() and m.binding(target.id, tscope, _pos(target)) is None \
            and m.binding_over_import(target.id, tscope, _pos(target)) is None and m._imported(target.id, tscope) is None \
            and m.star_plain(target.id) is None:
        module = m.star_imports()[-1][0] or "."
        fact = unknown("eager-gradient", f"`{target.id}` is bound nowhere in this module: it comes from a star import "
                                         f"(`from {module} import *`), which may compile it")
    else:
        fact = proven("eager-gradient", f"{what} differentiates `{ast.unparse(target)}` in no jitted or transformed "
                                        "function of this module: outside a trace, each call traces it again and "
                                        "runs its forward and backward passes op by op")
    return EagerGradient(call, transform, what, fact)


def gradient_through_loop(m, item) -> Optional[tuple]:
    """``(loop call, compiled)``: the device loop the function an eager gradient differentiates runs
    (:func:`deviceloops.loop_under`), for an :class:`EagerGradient` or a local :class:`EagerStep`; None
    otherwise. Such a gradient is the loop's work again, derivative and all, done eagerly at every call."""
    transform = getattr(item, "transform", None)
    if transform is None or not transform.args:
        return None
    scope = m.scope_at(transform)
    for f in callables.local_functions(m, transform.args[0], scope):
        found = deviceloops.loop_under(m, f)
        if found is not None:
            return found
    return None


def runs_compiled(m, call: ast.Call) -> bool:
    """``call`` runs compiled programs: a jit or pmap wrapper's product (``step(params, batch)``), or
    the gradient of one (``jax.value_and_grad(loss_fn)(params, x)`` with ``loss_fn`` jitted: its
    forward and backward passes run as the wrapped function's compiled programs). Not
    ``jax.grad(f)`` of a plain function, which runs op by op."""
    wrap = callables.callable_info(m, call.func, m.scope_at(call))
    if wrap is not None and wrap.kind in ("jit", "pmap", "filter_jit"):
        return True
    grad = eager_gradient(m, call)
    return grad is not None and grad.fact.status == DISPROVEN


def _gradient_transform(m, func: ast.AST, scope: Scope, depth: int):
    """``(the jax.grad(...) call, its scope)`` whose product calling ``func`` runs, else None."""
    if depth > 4:
        return None
    if isinstance(func, ast.Call):
        qn = m.resolve(func.func, scope)
        if qn in N.EAGER_GRADIENT_TRANSFORMS and func.args:
            return func, scope
        if qn in (N.PARTIAL, "jax.vmap") and func.args:
            # ``jax.vmap(jax.grad(f))(xs)`` outside jit: vmap keeps no compiled cache either, so each call traces
            # ``f`` again and runs the batched passes op by op
            return _gradient_transform(m, func.args[0], scope, depth + 1)
        return None
    if not isinstance(func, ast.Name):
        return None
    ev = m.binding(func.id, scope, _pos(func)) or m.binding_over_import(func.id, scope, _pos(func))
    if ev is None:
        return None
    if ev.plain_assign:
        return _gradient_transform(m, ev.value, ev.scope, depth + 1)
    if ev.kind == "param":
        args = callables.param_arguments(m, ev)  # every call in this module passes a gradient
        found = [_gradient_transform(m, a, s, depth + 1) for a, s in args or ()]
        if found and all(f is not None for f in found):
            return found[0]
    return None


def outside_trace(m, node: ast.AST) -> Fact:
    """The "eager" fact of ``node`` (not in traced code of this module): *proven* for module-level
    code (a script, a notebook) and for a function every call of which in this module is made
    from code so proven (``def descend(...)`` called from a notebook cell or from ``main()``
    called under ``if __name__ == "__main__"``); *unknown* for a function this module never calls
    (a library function: another module may call it under ``jit``, where its loop is unrolled
    into one trace)."""
    f = m.function_at(node)
    if f is None:
        return proven("eager", "it is module-level code, run op by op")
    why = _eager_callers(m, f, 0)
    if why is not None:
        return proven("eager", why)
    return unknown("eager", f"whether `{f.name}` runs under a trace of a caller this module does not show (a `jit` "
                            "elsewhere, where its loop is unrolled into one trace) is not known")


def _entry_point(m, f) -> Optional[str]:
    """Why ``f`` runs outside any trace when module-level code hands it to an entry runner
    (``names.ENTRY_RUNNERS``: ``app.run(main)``, ``fire.Fire(main)``), or it is a command-line command
    (:func:`cli_command`), else None."""
    command = cli_command(m, f)
    if command is not None:
        return f"`{f.name}` is a command-line command ({command}), run by its library outside any trace"
    for qn, index in N.ENTRY_RUNNERS.items():
        for c in m.calls_by_name.get(qn.rsplit(".", 1)[1], ()):
            arg = call_arg(c, index, "main")
            if m.function_at(c) is None and m.resolve(c.func, m.scope_at(c)) == qn and arg is not None and any(
                    g is f for g in callables.local_functions(m, arg, m.scope_at(c))):
                return (f"`{f.name}` is the program's entry point (`{ast.unparse(c)}` on line {c.lineno}), run "
                        "outside any trace")
    return None


def cli_command(m, f) -> Optional[str]:
    """The decorator, spelled, that makes the top-level ``f`` a command-line command: ``@click.command()``,
    ``@click.group()``, ``@cli.command()`` of a group ``cli`` made by ``@click.group()`` (a def of this
    module) or ``cli = click.Group(...)``, ``@app.command()`` of ``app = typer.Typer()``; else None (fresh AT:
    a diffusion trainer's click commands, whose eager steps were unknown for want of a caller)."""
    if f.parent is not None or f.cls is not None or isinstance(f.node, ast.Lambda):
        return None
    scope = m.module_scope
    for d in f.node.decorator_list:
        func = d.func if isinstance(d, ast.Call) else d
        if m.resolve(func, scope) in N.CLI_COMMANDS:
            return f"`@{ast.unparse(d)}`"
        if isinstance(func, ast.Attribute) and func.attr in ("command", "group") and isinstance(func.value, ast.Name):
            ev = m.binding(func.value.id, scope, (f.node.lineno, 0))
            if ev is None:
                continue
            if ev.kind == "def":
                g = m.func_of_node.get(id(ev.node))
                if g is not None and cli_command(m, g) is not None:
                    return f"`@{ast.unparse(d)}`"
            elif ev.plain_assign and isinstance(ev.value, ast.Call) and m.resolve(ev.value.func, ev.scope) in N.CLI_APPS:
                return f"`@{ast.unparse(d)}`"
    return None


def _eager_callers(m, f, depth: int) -> Optional[str]:
    """Why every call of ``f`` in this module runs outside any trace, or None when one does not,
    none is seen, or the callers are too deep to follow."""
    if depth > 3 or f.traced or isinstance(f.node, ast.Lambda):
        return None
    calls = [c for c in m.calls_by_name.get(f.name, ())
             if any(g is f for g in callables.local_functions(m, c.func, m.scope_at(c)))]
    if not calls:
        return _entry_point(m, f)
    for c in calls:
        g = m.function_at(c)
        if m.in_traced_code(c) or (g is not None and _eager_callers(m, g, depth + 1) is None):
            return None
    lines = ", ".join(str(c.lineno) for c in calls[:3])
    return (f"every call of `{f.name}` in this module (line {lines}) is made outside any trace: from module-level "
            "code, or from functions called only from there")


class EagerStep:
    """A call, made outside any trace, of a function of this module that is not compiled and whose
    own body computes a gradient (``train_step(state, batch)`` whose body runs
    ``jax.value_and_grad(loss_fn)(state.params)``): ``call``, ``function`` (the one called),
    ``inner`` (the call in its body, or in a function it calls, that runs the gradient's product),
    ``transform`` (the ``jax.grad(...)`` call) and ``fact`` ("eager-gradient", with its evidence)."""

    __slots__ = ("call", "function", "inner", "transform", "fact", "remote")

    def __init__(self, call: ast.Call, function, inner: ast.Call, transform: ast.Call, fact: Fact, remote=None):
        self.call, self.function, self.inner, self.transform, self.fact = call, function, inner, transform, fact
        # a function of another module of the project: ``(name, file, line, transform, target)`` spelled, and
        # ``function``/``inner``/``transform`` are None
        self.remote = remote


def eager_step(m, call: ast.Call) -> Optional[EagerStep]:
    """The :class:`EagerStep` ``call`` makes, else None: ``call`` is not in traced code of this
    module and runs no compiled program (not a jit wrapper's product), names exactly one function
    of this module (a def, a method), and that function's body (or a function of this module it
    calls, one level down) calls a gradient transform's product of a function that is not compiled.
    Called so, the whole body runs op by op, whatever else the module does with the function (one
    also handed to ``jax.pmap`` elsewhere still runs eagerly here)."""
    f = _plain_callee(m, call)
    if f is None:
        return _remote_step(m, call)
    found = _gradient_in(m, f, 0)
    if found is None:
        return None
    inner, transform, tscope = found
    target = transform.args[0]
    wrap = callables.callable_info(m, target, tscope)
    if wrap is not None and wrap.kind in ("jit", "pmap", "filter_jit"):
        return None  # the passes run as the wrapped function's compiled programs
    where = "" if m.function_at(inner) is f else f" (in `{m.function_at(inner).name}`, which it calls)"
    fact = proven("eager-gradient", f"`{f.name}` (line {f.node.lineno}) is called here directly, not through `jit`, "
                                    f"and its body runs `{ast.unparse(transform.func)}({ast.unparse(target)})` on line "
                                    f"{inner.lineno}{where}: each call traces `{ast.unparse(target)}` again and runs its "
                                    "forward and backward passes op by op")
    return EagerStep(call, f, inner, transform, fact)


def _remote_step(m, call: ast.Call) -> Optional[EagerStep]:
    """``image.compute_loss(model, key, t, batch)`` of another module of the project whose top-level function
    is decorated with a gradient transform and nothing that compiles it (:func:`remote_eager_step`, asked of
    that module through the project resolver only where its summary shows a transform on the function: a
    full model of the other file per question costs; fresh AT: a diffusion trainer's loss-and-gradient helper)."""
    if not isinstance(call.func, (ast.Name, ast.Attribute)) or m.in_traced_code(call) or runs_compiled(m, call):
        return None
    wrap = callables.callable_info(m, call.func, m.scope_at(call))
    if wrap is not None and wrap.kind != "transform":
        return None  # compiled there (or another known callable): its passes are not eager
    other = callables.imported_function(m, call.func, m.scope_at(call))
    project = getattr(other[0], "project", None) if other is not None else None
    path = getattr(other[0], "path", None) if other is not None else None
    if project is None or path is None:
        return None
    # a plain function there (its summary shows no transform): asked only of a file that calls a gradient
    # transform (``grad(``): a full model of that file per question costs (fresh AV: a SARSA helper's
    # ``nnx.grad(loss)(...)`` and ``optimizer.update`` run per environment step from another module)
    found = project.eager_gradient_step(path, other[1], plain=wrap is None)
    if found is None:
        return None
    line, transform, target, decorated = found
    name, where = ast.unparse(call.func), os.path.basename(path)
    how = (f"is decorated with `@{transform}` (line {line} there)" if decorated else
           f"body runs `{transform}({target})` (line {line} there)")
    fact = proven("eager-gradient", f"`{other[1]}` of `{where}` is called here directly, not through `jit`, and "
                                    f"{'it' if decorated else 'its'} {how}: each call traces `{target}` again and runs "
                                    "its forward and backward passes op by op")
    return EagerStep(call, None, None, None, fact, remote=(name, where, line, transform, target, decorated))


def remote_eager_step(m, name: str) -> Optional[tuple]:
    """For the project resolver: ``(line, transform, target, decorated)`` spelled when the top-level function
    ``name`` of this module is decorated with a gradient transform and nothing that may compile it
    (``decorated``), or has no such decorator and its body (or a plain function of this module it calls)
    computes the gradient of a function that is not compiled; None otherwise."""
    f = next((g for g in m.functions if g.name == name and g.parent is None and g.cls is None
              and not isinstance(g.node, ast.Lambda)), None)
    if f is None or len(f.node.decorator_list) != len(f.decorators):
        return None
    grads = [d for d in f.decorators if d in N.EAGER_GRADIENT_TRANSFORMS]
    if grads and all(d in N.EAGER_GRADIENT_TRANSFORMS or d in _PLAIN_DECORATORS for d in f.decorators):
        # ``@eqx.filter_value_and_grad def compute_loss(...)``: calling it runs the gradient, outside jit here
        return f.node.lineno, grads[0].rsplit(".", 1)[-1], f.name, True
    if any(d not in _PLAIN_DECORATORS for d in f.decorators):
        return None
    found = _gradient_in(m, f, 0)
    if found is None:
        return None
    inner, transform, tscope = found
    wrap = callables.callable_info(m, transform.args[0], tscope)
    if wrap is not None and wrap.kind in ("jit", "pmap", "filter_jit"):
        return None
    return inner.lineno, ast.unparse(transform.func), ast.unparse(transform.args[0]), False


def _plain_callee(m, call: ast.Call):
    """The one function of this module ``call`` (outside traced code, not a compiled call) runs as
    plain Python: a def or method with no decorator that may compile it, not an instance attribute
    rebound elsewhere (``self.step = jax.jit(self.step)``); else None."""
    memo = m.facts.eager_memo  # asked by two paths (a gradient in the body, an update after a compiled call)
    key = ("plain-callee", id(call))
    if key not in memo:
        memo[key] = _plain_callee_uncached(m, call)
    return memo[key]


def _plain_callee_uncached(m, call: ast.Call):
    if not isinstance(call.func, (ast.Name, ast.Attribute)) or m.in_traced_code(call):
        return None
    fns = callables.local_functions(m, call.func, m.scope_at(call))
    if len(fns) != 1 or isinstance(fns[0].node, ast.Lambda):
        return None
    f = fns[0]
    if any(d not in _PLAIN_DECORATORS for d in f.decorators) or len(f.decorators) != len(f.node.decorator_list):
        return None  # a decorator this module does not show may compile it
    if f.cls is not None and f.name in f.cls.self_attrs:
        return None
    return None if runs_compiled(m, call) else f


class EagerStepUpdate:
    """A call, made outside any trace, of a plain function of this module whose own body runs a
    compiled call (``loss, grads = compute_grads(state, batch)``, jitted) and then an eager update
    (``state.apply_gradients(grads=grads)``): ``call``, ``function``, ``update`` (the
    :class:`EagerUpdate` in its body), ``compiled`` (the compiled call there) and ``fact``."""

    __slots__ = ("call", "function", "update", "compiled", "fact")

    def __init__(self, call, function, update, compiled, fact):
        self.call, self.function, self.update, self.compiled, self.fact = call, function, update, compiled, fact


def eager_step_update(m, call: ast.Call) -> Optional[EagerStepUpdate]:
    """The :class:`EagerStepUpdate` ``call`` makes, else None (a step with a gradient computed eagerly
    is :func:`eager_step`'s: jitting the whole step is that advice)."""
    f = _plain_callee(m, call)
    if f is None or not any(last_name(c.func) in _SPELLED
                            or (isinstance(c.func, ast.Name) and _imports_example_optimizers(m)) for c in f.calls):
        return None  # (eager_update's cheap filter first: no call spelled like an update)
    compiled = next((c for c in f.calls if runs_compiled(m, c)), None)
    if compiled is None:
        return None
    upd = next((u for u in map(lambda c: eager_update(m, c), f.calls) if u is not None), None)
    if upd is None or upd.call.lineno < compiled.lineno:
        return None
    fact = proven("eager-update", f"`{f.name}` (line {f.node.lineno}) is called here directly, not through `jit`, and "
                                  f"its body runs {upd.what} on line {upd.call.lineno} after the compiled "
                                  f"`{ast.unparse(compiled.func)}` (line {compiled.lineno}): each leaf and optimizer "
                                  "stage of the update is a separate device dispatch")
    return EagerStepUpdate(call, f, upd, compiled, fact)


# Decorators that leave a function a plain Python function, run op by op when called.
_PLAIN_DECORATORS = frozenset({"staticmethod", "classmethod", "property", "functools.wraps", "functools.cache",
                               "functools.lru_cache"})


def _gradient_in(m, f, depth: int):
    """``(the call, the jax.grad(...) call, its scope)`` of the first gradient product ``f``'s own
    body calls (not inside its nested functions), looking one level into functions of this module
    it calls directly (not compiled ones)."""
    for c in f.calls:
        if isinstance(c.func, (ast.Call, ast.Name)):
            found = _gradient_transform(m, c.func, m.scope_at(c), 0)
            if found is not None:
                return (c, *found)
    if depth >= 1:
        return None
    for c in f.calls:
        if runs_compiled(m, c):
            continue
        inner = callables.local_functions(m, c.func, m.scope_at(c))
        if len(inner) == 1 and inner[0] is not f and not isinstance(inner[0].node, ast.Lambda):
            found = _gradient_in(m, inner[0], depth + 1)
            if found is not None:
                return found
    return None
