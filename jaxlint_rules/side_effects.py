"""JAX6xx: Python side effects inside traced code, which run once at trace time."""

from __future__ import annotations

import ast
from typing import Iterator, Optional

from jaxlint.model import FunctionInfo, ModuleModel
from jaxlint.rule import Finding, Line, Rule, unparse
from jaxlint.model.facts import callables, closures, containers, guards, repetition, staleattrs, tracers
from jaxlint.model.facts import values as V

# Container methods that change the container they are called on.
MUTATORS = frozenset({"append", "extend", "update", "add", "insert", "pop", "setdefault", "clear", "remove",
                      "discard"})
# Wrappers whose compiled methods must not assign to ``self``; flax.nnx.jit and equinox.filter_jit
# carry module state in and out of the compiled function, so assignments there are their job.
_PLAIN_JIT = frozenset({"jax.jit", "jax.pmap"})
# Mutators that return None: called for their effect, as a statement.
_STATEMENT_MUTATORS = MUTATORS - {"pop", "setdefault"}
_OWNER = {"module": "module-level", "function": "enclosing function's",
          "parameter": "enclosing function's parameter"}  # where a container lives
def _when(model: ModuleModel, f: FunctionInfo) -> str:
    """How often a traced function's Python body runs, for the messages: once per compilation under
    jit; each time it is traced otherwise (on every call of an un-jitted ``vmap``, with tracers)."""
    if repetition.traced_per_compilation(model, f):
        return "once, at trace time"
    return "each time JAX traces the function"


def _pos(node: ast.AST) -> tuple:
    return (node.lineno, node.col_offset)


class SideEffectInTracedCode(Rule):
    code = "JAX601"
    needs = ("leaks",)
    short = "Traced code that stores values into state that outlives the call, which runs only at trace time."
    confirmed_by = "trace_time"
    name = "side-effect-in-traced-code"
    summary = ("Finds traced code that stores JAX values into state that outlives the call: appending to or "
               "updating a module-level or enclosing container, assigning into one by subscript, rebinding a "
               "`global`/`nonlocal` name, or assigning to `self` in a method compiled with `jax.jit`/`jax.pmap`.")
    rationale = ("A jitted function's Python body runs once, while JAX traces it; later calls run the compiled "
                 "program and skip every Python side effect. The list gets one entry however many calls are made, "
                 "and that entry is a tracer, which raises an UnexpectedTracerError when used outside the trace. "
                 "Return the values instead (or use `jax.debug.callback`/`io_callback` for real host effects).")
    opt_in_cases = ("An assignment to `self` in a compiled method of a value not shown to be a JAX value (an "
                    "optimizer built from the config, a counter loaded from a state argument the model cannot "
                    "follow): whether a tracer is kept is not known.")
    bad = """
        import jax
        import jax.numpy as jnp

        losses = []

        @jax.jit
        def train_step(w, x, y):
            loss = jnp.mean((x @ w - y) ** 2)
            losses.append(loss)
            return w - 0.1 * jax.grad(lambda w: jnp.mean((x @ w - y) ** 2))(w)
    """
    good = """
        import jax
        import jax.numpy as jnp

        @jax.jit
        def train_step(w, x, y):
            loss, grad = jax.value_and_grad(lambda w: jnp.mean((x @ w - y) ** 2))(w)
            return w - 0.1 * grad, loss

        def train(w, batches):
            losses = []
            for x, y in batches:
                w, loss = train_step(w, x, y)
                losses.append(loss)
            return w, losses
    """

    def check(self, model: ModuleModel) -> Iterator[Finding]:
        yield from self._mutating_calls(model)
        yield from self._stores(model)
        yield from self._decls(model)

    def _mutating_calls(self, model: ModuleModel) -> Iterator[Finding]:
        for call in model.calls_named(MUTATORS):  # spelled ``<x>.append(...)``, ...
            func = call.func
            if not (isinstance(func, ast.Attribute) and func.attr in MUTATORS and isinstance(func.value, ast.Name)):
                continue
            if func.attr in _STATEMENT_MUTATORS and id(call) not in model.expr_values:
                continue  # its result is used: a functional ``update`` (optax), not list.append
            f = model.function_at(call)
            if f is None or not f.traced:
                continue
            scope = model.scope_at(call)
            owner = _OWNER.get(containers.outliving_container(model, f, func.value, scope))
            if owner is None:
                continue
            values = list(call.args) + [kw.value for kw in call.keywords]
            if not any(V.holds_jax(model, v, scope) for v in values):
                continue  # trace-time bookkeeping of static values (shapes, names, trace counters)
            fact = tracers.leaks(model.staging, f, func.value)
            yield self.finding(call, f"`{unparse(func)}(...)` stores a tracer in the {owner} `{func.value.id}` "
                                     f"{_when(model, f)}; return the value from the traced function instead",
                               facts=[fact])

    def _stores(self, model: ModuleModel) -> Iterator[Finding]:
        for target, kind in model.stores:
            f = model.function_at(target)
            if f is None or not f.traced:
                continue
            scope = model.scope_at(target)
            if isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name) and kind in ("assign", "aug"):
                # The model records store targets without their values: a helper that only ever sees
                # static arguments, or a memo filled under ``if key not in cache:``, stores static
                # values (a trace-time cache), not tracers.
                if not f.tracer_params or guards.membership_guarded(model, target):
                    continue
                if kind == "aug":
                    # ``tot[0] += x``: reported when what is added is a JAX value (a counter bumped by
                    # a constant is trace-time bookkeeping: a trace counter)
                    stmt = model.stmt_of.get(id(target))
                    if not isinstance(stmt, ast.AugAssign) or not V.holds_jax(model, stmt.value, scope):
                        continue
                owner = _OWNER.get(containers.outliving_container(model, f, target.value, scope))
                if owner == _OWNER["function"] and f.jit_entry is None:
                    # Transform and lax bodies commonly hand their output tree structure (static) to
                    # the caller through a closure dict: reported only when what is stored is a JAX
                    # value (``store["x"] = x`` in a vmapped function keeps a BatchTracer)
                    stmt = model.stmt_of.get(id(target))
                    if kind != "assign" or not isinstance(stmt, ast.Assign) or not V.holds_jax(model, stmt.value, scope):
                        continue
                if owner is not None:
                    fact = tracers.leaks(model.staging, f, target.value)
                    op = "= ..." if kind == "assign" else "+= ..." if isinstance(
                        getattr(model.stmt_of.get(id(target)), "op", None), ast.Add) else "op= ..."
                    yield self.finding(target, f"`{unparse(target)} {op}` writes into the {owner} "
                                               f"`{target.value.id}` {_when(model, f)}; return the value from "
                                               "the traced function instead", facts=[fact])
            elif (isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name)
                  and f.is_method and f.params and target.value.id == f.params[0] and scope is f.scope
                  and "builtins.staticmethod" not in f.decorators):
                wrap = f.jit_entry
                if wrap is None or wrap.kind not in ("jit", "pmap") or callables.wrapper_qualname(model, wrap) not in _PLAIN_JIT:
                    continue
                stmt = model.stmt_of.get(id(target))
                # what every trace assigns alike (an optimizer built from the config, a shape) leaks no tracer
                # and loses nothing on a cache hit (fresh AA's first look: `self.opt = adam(lr)`, FALSE)
                unknown = None if kind != "assign" or not isinstance(stmt, ast.Assign) or V.holds_jax(
                    model, stmt.value, scope) else (f"what `{unparse(target)}` is given is not shown to be a JAX "
                                                    "value: whether a tracer is kept is not known")
                yield self.finding(target, f"assigning `{unparse(target)}` in a method compiled with "
                                           f"`{wrap.spelling}` happens once, at trace time; return the new state "
                                           "instead", opt_in=unknown, facts=[tracers.leaks(model.staging, f)])

    def _decls(self, model: ModuleModel) -> Iterator[Finding]:
        for decl in model.decls:
            f = model.function_at(decl)
            if f is None or not f.traced:
                continue
            for name in decl.names:
                if isinstance(decl, ast.Nonlocal) and f.traced_by_callers_only:
                    owner = self._nonlocal_owner(f, name)
                    if owner is not None and owner.traced:
                        continue
                for ev in f.scope.events.get(name, ()):
                    if ev.kind == "assign":
                        # unpacked (``key, sub = jax.random.split(key)``): a part of a JAX value is one
                        value, node = ev.value, ev.node
                        if ev.path is not None and isinstance(value, (ast.Tuple, ast.List)):
                            value = repetition.element_at(value, ev.path) or value
                    elif ev.kind == "aug":
                        value, node = ev.node.value, ev.node
                    else:
                        continue
                    if not V.holds_jax(model, value, ev.scope):
                        continue
                    fact = tracers.leaks(model.staging, f)
                    kw = "global" if isinstance(decl, ast.Global) else "nonlocal"
                    yield self.finding(node, f"rebinding the {kw} `{name}` to a traced value happens "
                                             f"{_when(model, f)}, and leaks a tracer; return the value instead",
                                       facts=[fact])
                    break

    @staticmethod
    def _nonlocal_owner(f: FunctionInfo, name: str) -> Optional[FunctionInfo]:
        s = f.scope.parent
        while s is not None:
            if s.kind == "function" and name in s.events:
                return s.func
            s = s.parent
        return None


_PRINT_OPTIONS = ("sep", "end", "file", "flush")




class PrintInTracedCode(Rule):
    code = "JAX602"
    needs = ("abstract-values",)
    short = "A print() of a traced value inside traced code, which prints a tracer once, at trace time."
    confirmed_by = "trace_time"
    name = "print-in-traced-code"
    summary = "Finds `print()` of a traced value (directly, in an f-string or `%`/`.format`) inside traced code."
    rationale = ("`print` is Python: inside `jax.jit` it runs once, while the function is traced, and shows an "
                 "abstract Tracer (shape and dtype, no numbers); later calls print nothing. "
                 "`jax.debug.print(\"x = {}\", x)` prints the runtime value on every call.")
    bad = """
        import jax
        import jax.numpy as jnp

        @jax.jit
        def step(x):
            y = jnp.tanh(x)
            print("y =", y)
            return y * 2.0
    """
    good = """
        import jax
        import jax.numpy as jnp

        @jax.jit
        def step(x):
            y = jnp.tanh(x)
            print("tracing step for shape", y.shape)
            jax.debug.print("y = {}", y)
            return y * 2.0
    """

    def check(self, model: ModuleModel) -> Iterator[Finding]:
        for f, call in model.traced_calls():
            scope = f.scope
            if model.resolve(call.func, scope) != "builtins.print":
                continue
            values = list(call.args) + [kw.value for kw in call.keywords if kw.arg not in _PRINT_OPTIONS]
            if any(V.formats_jax(model, v, scope, deep=True) for v in values):
                fact = tracers.abstract_values(model.staging, f)
                if self.proof(model, call, fact) is None:
                    continue  # autodiff outside jit: the print runs, with its values, on every call
                if repetition.traced_per_compilation(model, f):
                    what = ("runs once, when JAX compiles the function: it shows a Tracer (shape and dtype, no "
                            "values), and later calls print nothing")
                else:
                    what = ("runs only while JAX traces the function, so it shows a Tracer (shape and dtype), "
                            "never the values")
                yield self.finding(call, f"`print()` of a traced value {what}; use `jax.debug.print(\"{{}}\", x)`, "
                                         "which prints the values on every call", facts=[fact])


_WHERE = {"module": "module-level", "function": "enclosing function's"}


class StaleClosure(Rule):
    code = "JAX603"
    needs = ("compiled-once", "rebound-after-call", "new-value")
    confirmed_by = "stale"
    short = "A compiled function reads a global that code rebinds after its first call: it keeps the first value."
    name = "stale-closure"
    summary = ("Finds a module-level or enclosing function's variable read inside a compiled function "
               "(`jax.jit`/`jax.pmap`, decorated or wrapped once, with the functions its trace runs) that code "
               "rebinds after a call of the compiled function and before another: a learning rate "
               "`lr = schedule(step)` rebound in the loop that calls the jitted step, which reads `lr` as a global.")
    rationale = ("JAX reads a free variable once, while it traces the function, and bakes its value into the "
                 "compiled program as a constant; later calls with arguments of the same shapes reuse that program "
                 "and never look at the variable again. Rebinding it changes nothing the compiled function computes: "
                 "a silent wrong result (a learning-rate schedule that never moves). Pass the value as an argument: "
                 "traced (an array or a Python number), or static (`static_argnames`) if it must stay a Python "
                 "value.")
    bad = """
        import jax
        import jax.numpy as jnp

        lr = 0.1

        @jax.jit
        def step(w, g):
            return w - lr * g

        def train(w, grads):
            global lr
            for i, g in enumerate(grads):
                lr = 0.1 / (1 + i)
                w = step(w, g)
            return w
    """
    good = """
        import jax
        import jax.numpy as jnp

        @jax.jit
        def step(w, g, lr):
            return w - lr * g

        def train(w, grads):
            for i, g in enumerate(grads):
                lr = 0.1 / (1 + i)
                w = step(w, g, lr)
            return w
    """

    def check(self, model: ModuleModel) -> Iterator[Finding]:
        for f in model.functions:
            if f.jit_entry is None:
                continue
            for stale in closures.stale_reads(model, f):
                facts = self.proof(model, stale.read, *stale.facts)
                if facts is None:
                    continue
                name, rebind = stale.read.id, stale.rebinding.node.lineno
                where = _WHERE.get(stale.owner.kind, "outer")
                inner = "" if stale.body is f else f" (traced as part of `{f.name}`)"
                yield self.finding(stale.read, [
                    f"`{name}` is the {where} variable read at trace time by the compiled `{f.name}`{inner}, and ",
                    Line(rebind), f" rebinds it after a call of `{f.name}`: the compiled program keeps the value of "
                    f"the first trace; pass `{name}` as an argument (traced, or static if it must stay a Python value)",
                ], facts=facts)
            for stale in staleattrs.stale_attribute_reads(model, f):
                facts = self.proof(model, stale.read, *stale.facts)
                if facts is None:
                    continue
                attr = f"self.{stale.attr}"
                yield self.finding(stale.read, [
                    f"`{attr}` is read at trace time by `{f.name}`, compiled once per instance as "
                    f"`self.{stale.wrapper}` in `__init__`, and `{stale.method.name}` rebinds it on ",
                    Line(stale.rebinding.lineno), f" before calling `self.{stale.wrapper}`: the compiled program "
                    f"keeps the value of the first trace; pass `{attr}` to `self.{stale.wrapper}` as an argument "
                    "(traced, or static if it must stay a Python value)",
                ], facts=facts)


RULES = [SideEffectInTracedCode, PrintInTracedCode, StaleClosure]
