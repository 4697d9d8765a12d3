"""JAX4xx: in-place mutation of immutable JAX arrays (the removed-API rules, JAX402 and JAX404, are in
removed_api.py)."""

from __future__ import annotations

import ast
import functools
from typing import TYPE_CHECKING, Iterator, Optional

if TYPE_CHECKING:  # the edit library is imported where a fix is built: a plain check never needs it
    from jaxlint.edits import Fix
from jaxlint.model import ModuleModel, at_update, is_str_key
from jaxlint.model.python import rebinding
from jaxlint.model.python.syntax import catching_handler
from jaxlint.model.facts import immutablestate, refs
from jaxlint.rule import Finding, Rule, unparse
from jaxlint.model.facts import values as V


# Augmented assignments whose operator has no ``.at[]`` method (there is no ``.at[].floor_divide``).
_NO_AT_METHOD = {ast.FloorDiv: "//", ast.Mod: "%", ast.MatMult: "@", ast.LShift: "<<", ast.RShift: ">>",
                 ast.BitOr: "|", ast.BitAnd: "&", ast.BitXor: "^"}


def _at(target: ast.Subscript) -> str:
    """``x.at[i]`` for the target ``x[i]``."""
    expr = ast.Subscript(value=ast.Attribute(value=target.value, attr="at", ctx=ast.Load()), slice=target.slice,
                         ctx=ast.Load())
    return unparse(expr, 50)


# --------------------------------------------------------------------------- safe fixes
#
# The rule decides *whether* a statement is a finding; its ``_fix`` decides from the syntax and the
# model's rebinding facts whether the rewrite is certain, and builds it from jaxlint.edits. For
# JAX401/JAX403 ``x`` must be a plain name already local to the statement's scope (not global,
# nonlocal or a closure variable) and read again afterwards; one target, no walrus, no tuple value,
# and for ``x[f()] = g()`` not two calls whose order would swap. Every subexpression keeps its
# original spelling.

# ``-=`` becomes ``.add(-v)``: ``.at[].subtract`` is missing from jax 0.4.30 (present from 0.4.38 on).
_AUG_METHODS = {ast.Add: "add", ast.Sub: "add", ast.Mult: "multiply", ast.Div: "divide", ast.Pow: "power"}
# Values that negate without parentheses: ``-v``, ``-2``, ``-self.lr``, ``-g[0]``, ``-f(x)``.
_ATOMS = (ast.Name, ast.Constant, ast.Attribute, ast.Subscript, ast.Call)
_EFFECTS = (ast.Await, ast.Yield, ast.YieldFrom, ast.NamedExpr)
# Calls whose order against another call cannot matter: pure builtins and JAX's functional API.
_PURE_BUILTINS = frozenset("builtins." + n for n in (
    "len", "int", "float", "bool", "complex", "abs", "min", "max", "round", "range", "slice", "tuple",
    "divmod", "pow", "sum", "isinstance",
))
_PURE_FAMILIES = ("jax.numpy.", "jax.lax.", "jax.random.", "jax.nn.", "jax.scipy.")
_PRIMARY = (ast.Name, ast.Attribute, ast.Subscript, ast.Call)  # ``<expr>.at`` needs no parentheses


def _has(node: ast.AST, kinds) -> bool:
    return any(isinstance(n, kinds) for n in ast.walk(node))


def _never_raises(build):
    """A fix is optional: whatever goes wrong while building one, the finding stays, unfixed."""
    @functools.wraps(build)
    def wrapper(*args, **kwargs):
        try:
            return build(*args, **kwargs)
        except Exception:  # RecursionError included
            return None
    return wrapper


def _effects(model: ModuleModel, e: ast.AST, stmt: ast.stmt) -> bool:
    """Whether evaluating ``e`` may have an effect another expression could observe: a call
    of anything but a pure builtin or a JAX function, ``await``, ``yield``, ``:=``."""
    scope = None
    for node in ast.walk(e):
        if isinstance(node, _EFFECTS):
            return True
        if isinstance(node, ast.Call):
            if scope is None:
                scope = model.scope_at(stmt)
            qn = model.resolve(node.func, scope)
            if qn is None or not (qn in _PURE_BUILTINS or qn.startswith(_PURE_FAMILIES)):
                return True
    return False


def _rebinding_is_safe(model: ModuleModel, name: str, stmt: ast.stmt) -> bool:
    """``name = ...`` at ``stmt`` rebinds the variable the statement reads, and the new value is
    seen (otherwise the rewrite would turn a loud TypeError into an update silently dropped, e.g.
    a parameter "modified in place" for the caller)."""
    return rebinding.rebinds_local(model, name, stmt) and rebinding.rebinding_seen(model, name, stmt)


# --------------------------------------------------------------------------- JAX401


class InplaceItemAssignment(Rule):
    code = "JAX401"
    needs = ("immutable-array",)
    fails_at_runtime = True  # TypeError (del x[i]: AttributeError), traced or not
    short = "In-place item assignment (x[i] = v) on an immutable JAX array."
    name = "inplace-item-assignment"
    fixable = True
    summary = ("Finds `x[i] = v`, `x[i] += v` (and other augmented operators) and `del x[i]` where `x` is "
               "certainly a JAX array.")
    rationale = ("JAX arrays are immutable: item assignment raises `TypeError: JAX arrays are immutable` "
                 "(`del x[i]` an AttributeError), in traced code and outside it. Write the update "
                 "functionally and rebind the name: `x = x.at[i].set(v)`, `x = x.at[i].add(v)`, `.multiply`, "
                 "`.divide`, `.min`, `.max`. Under jit the copy is optimized into an in-place update.")
    opt_in_cases = ("An assignment inside a `try` whose `except` catches the error it raises (`TypeError`, "
                    "`Exception`, a bare `except`): code that shows the error on purpose, as tutorials do.")
    bad = """
        import jax.numpy as jnp

        def one_hot(labels, num_classes):
            out = jnp.zeros((labels.shape[0], num_classes))
            for i, label in enumerate(labels):
                out[i, label] = 1.0
            return out
    """
    good = """
        import jax.numpy as jnp
        import numpy as np

        def one_hot(labels, num_classes):
            out = jnp.zeros((labels.shape[0], num_classes))
            return out.at[jnp.arange(labels.shape[0]), labels].set(1.0)

        def one_hot_host(labels, num_classes):
            out = np.zeros((len(labels), num_classes))
            out[np.arange(len(labels)), labels] = 1.0
            return out
    """

    def check(self, model: ModuleModel) -> Iterator[Finding]:
        for target, kind in model.stores:
            if not isinstance(target, ast.Subscript) or is_str_key(target.slice):
                continue
            ctx = model.context(target)
            scope = ctx.scope if ctx is not None else model.scope_at(target)
            if not V.is_jax(model, target.value, scope):
                continue
            if not model.arrays.item_target(target, scope):
                continue
            fact = refs.immutable_array(model, target, scope)
            if self.proof(model, target, fact) is None:
                continue
            stmt = rebinding.statement_of(model, target) if kind == "aug" else None
            op = stmt.op if isinstance(stmt, ast.AugAssign) else None
            error = "AttributeError" if kind == "del" else "TypeError"
            handler = catching_handler(model.tree, target, frozenset({error}))
            # a tutorial showing the error it catches (6 such findings on 29 review sets and AA, all HARMLESS)
            quiet = None if handler is None else (
                f"the `{error}` it raises is caught (`except` on line {handler.lineno}): code that shows the error")
            yield self.finding(target, self._message(target, kind, op), self._fix(model, target, kind),
                               opt_in=quiet, facts=[fact])

    @staticmethod
    @_never_raises
    def _fix(model: ModuleModel, target: ast.AST, kind: str) -> Optional[Fix]:
        """``x[i] = v`` -> ``x = x.at[i].set(v)``; ``x[i] op= v`` -> ``x = x.at[i].add(v)`` (``-=``
        ``.add(-v)``, ``*=`` ``.multiply``, ``/=`` ``.divide``, ``**=`` ``.power``): a whole
        statement, ``x`` a local plain name."""
        if kind not in ("assign", "aug") or not isinstance(target, ast.Subscript):
            return None
        base = target.value
        stmt = rebinding.statement_of(model, target)
        if not isinstance(base, ast.Name) or stmt is None:
            return None
        if isinstance(stmt, ast.Assign):
            if len(stmt.targets) != 1 or stmt.targets[0] is not target:
                return None  # a = x[i] = v
            method = "set"
        elif isinstance(stmt, ast.AugAssign) and stmt.target is target:
            method = _AUG_METHODS.get(type(stmt.op))
            if method is None:
                return None  # //=, %=, @=, <<=, |=, ...: no .at method
        else:
            return None
        value = stmt.value
        if isinstance(value, (ast.Tuple, ast.Starred, ast.Yield, ast.YieldFrom)):
            return None  # x[i] = 1, 2 would become two arguments
        from jaxlint.edits import Edit, Fix, Span, end_of, start_of

        if start_of(stmt) != start_of(target):
            return None  # (x[i]) = v
        if _has(target.slice, ast.NamedExpr) or _has(value, ast.NamedExpr):
            return None
        if method == "set" and _effects(model, target.slice, stmt) and _effects(model, value, stmt):
            return None  # x[f()] = g(): Python runs g() first, the rewrite f() first
        if not _rebinding_is_safe(model, base.id, stmt):
            return None
        negate = isinstance(stmt, ast.AugAssign) and isinstance(stmt.op, ast.Sub)
        wrap = negate and not isinstance(value, _ATOMS)
        opening = f".{method}(" + ("-(" if wrap else "-" if negate else "")
        return Fix((
            Edit(start_of(stmt), start_of(stmt), (Span(start_of(base), end_of(base)), " = ")),
            Edit(end_of(base), end_of(base), (".at",)),
            # ``= (\n v\n)``: the first parenthesis around the value becomes the call's
            # (``.set(\n v\n)``); the text between the others and the value is kept
            Edit(end_of(target), start_of(value), (opening, Span(end_of(target), start_of(value), after="("))),
            Edit(end_of(value), end_of(stmt), (Span(end_of(value), end_of(stmt), before=")"), "))" if wrap else ")")),
        ))

    @staticmethod
    def _message(target: ast.Subscript, kind: str, op: Optional[ast.operator] = None) -> str:
        x = unparse(target.value, 30)
        item = unparse(target, 40)
        if kind == "aug" and type(op) in _NO_AT_METHOD:  # //=, %=, ...: `.at[]` has no such method
            sign = _NO_AT_METHOD[type(op)]
            return (f"JAX arrays are immutable: `{item} {sign}= ...` raises TypeError, and `.at[]` has no "
                    f"method for `{sign}`; compute the new value and set it: `{x} = {_at(target)}.set({item} "
                    f"{sign} v)`")
        if kind == "del":
            return (f"JAX arrays are immutable: `del {item}` raises AttributeError and has no functional "
                    f"`.at[]` form; build a new array, e.g. `{x} = jnp.delete({x}, ...)` or a mask")
        if kind == "aug":
            return (f"JAX arrays are immutable: augmented assignment to `{item}` raises TypeError; use "
                    f"`{x} = {_at(target)}.add(v)` for +=, `.add(-v)` for -=, `.multiply(v)`, `.divide(v)`, "
                    "`.power(v)` for *=, /=, **=")
        return (f"JAX arrays are immutable: `{item} = ...` raises TypeError; use "
                f"`{x} = {_at(target)}.set(...)`")


# --------------------------------------------------------------------------- JAX403

_UPDATE_METHODS = {"set", "add", "subtract", "multiply", "mul", "divide", "power", "min", "max", "apply"}
# jax.numpy functions called for what they do besides their result, or that make no array (a
# bare call checks its arguments: ``jnp.broadcast_shapes(a, b)`` raises when they do not fit)
_NUMPY_EFFECTS = frozenset({"save", "savez", "load", "set_printoptions", "printoptions", "get_printoptions",
                            "broadcast_shapes", "result_type", "promote_types", "can_cast", "issubdtype", "isdtype",
                            "iinfo", "finfo", "dtype", "ndim", "shape", "size"})


class DiscardedFunctionalUpdate(Rule):
    code = "JAX403"
    short = "A functional update x.at[i].set(v) whose result is thrown away."
    name = "discarded-functional-update"
    fixable = True
    summary = ("Finds `x.at[i].set(v)` (or `.add`, `.multiply`, ...) used as a statement, its result unused; and a "
               "`jax.numpy` function called as a statement inside a function (`jnp.nan_to_num(x, copy=False)`), "
               "whose result is the only thing it makes; and `state.replace(...)` as a statement on a flax "
               "`TrainState` or struct dataclass the module shows (the result of `apply_gradients`, "
               "`TrainState.create`, or a parameter annotated with such a class).")
    rationale = ("JAX arrays are immutable: `x.at[i].set(v)` returns a new array and leaves `x` unchanged. As a "
                 "statement on its own the update does nothing (and under jit is removed as dead code). Assign "
                 "the result: `x = x.at[i].set(v)`. The same holds for NumPy's in-place habits ported to "
                 "`jax.numpy`: `jnp.nan_to_num(x, copy=False)` and `jnp.fill_diagonal(x, v, inplace=False)` return "
                 "the new array and leave `x` as it was; flax's `TrainState` and struct dataclasses are frozen, and "
                 "`state.replace(rngs=new_keys)` returns a new state. (At a notebook's top level a bare expression "
                 "may be its cell's displayed value: not reported there.)")
    bad = """
        import jax.numpy as jnp

        def mask_padding(logits, lengths):
            for row, n in enumerate(lengths):
                logits.at[row, n:].set(-jnp.inf)
            return logits
    """
    good = """
        import jax.numpy as jnp

        def mask_padding(logits, lengths):
            for row, n in enumerate(lengths):
                logits = logits.at[row, n:].set(-jnp.inf)
            return logits
    """

    def check(self, model: ModuleModel) -> Iterator[Finding]:
        unused = model.expr_values
        for call in model.calls_named(_UPDATE_METHODS):  # ``<x>.at[i].set(...)``, ...
            if id(call) not in unused:
                continue
            func = call.func
            receiver = at_update(func, _UPDATE_METHODS)
            if receiver is None:
                continue
            scope = model.scope_at(call)
            if refs.looks_like_ref(model, receiver, scope):
                continue
            if getattr(model, "notebook", False) and scope is model.module_scope:
                continue  # a notebook cell's bare expression may be its displayed value (fresh AS: a demo's output)
            x = unparse(receiver, 30)
            yield self.finding(call, f"`.at[].{func.attr}()` returns a new array and leaves `{x}` unchanged "
                                     f"(JAX arrays are immutable); assign it back: `{x} = {unparse(call, 50)}`",
                               self._fix(model, call))
        yield from self._discarded_numpy(model, unused)
        yield from self._discarded_replace(model, unused)

    def _discarded_replace(self, model: ModuleModel, unused: set) -> Iterator[Finding]:
        """``state.replace(rngs=...)`` as a statement on a flax ``TrainState`` (or another flax struct):
        it returns a new object and leaves ``state`` as it was, so the update is lost."""
        for call in model.calls_named({"replace"}):
            func = call.func
            if id(call) not in unused or not isinstance(func, ast.Attribute) or func.attr != "replace" \
                    or not isinstance(func.value, ast.Name) or call.args:
                continue
            scope = model.scope_at(call)
            if getattr(model, "notebook", False) and scope is model.module_scope:
                continue  # a notebook cell's bare expression may be its displayed value
            why = immutablestate.immutable_state(model, func.value, scope)
            if why is None:
                continue
            x = func.value.id
            facts = [why, "flax's struct dataclasses are frozen: `.replace(...)` returns a new object and changes "
                          "nothing", "the call is a statement of its own: its result is not used"]
            yield self.finding(call, f"`{x}.replace(...)` returns a new object and leaves `{x}` unchanged (flax's "
                                     f"`TrainState` and struct dataclasses are immutable), so the update is lost; "
                                     f"assign it: `{x} = {unparse(call, 50)}`", self._fix_replace(model, call),
                               evidence=facts)

    @staticmethod
    @_never_raises
    def _fix_replace(model: ModuleModel, call: ast.Call) -> Optional[Fix]:
        """``state.replace(...)`` as an expression statement -> ``state = state.replace(...)``."""
        return _assign_back(model, call, call.func.value)

    def _discarded_numpy(self, model: ModuleModel, unused: set) -> Iterator[Finding]:
        """``jnp.nan_to_num(x, copy=False)`` as a statement in a function, on a variable (the NumPy
        habit of changing it in place): its result is dropped. Not in tests (``pytest.raises``)."""
        for call in model.calls:
            if id(call) not in unused or not call.args or not isinstance(call.args[0], ast.Name):
                continue  # ``jnp.zeros(1)`` to start the backend: no variable it could have meant to change
            scope = model.scope_at(call)
            if scope is model.module_scope:
                continue
            qn = model.resolve(call.func, scope)
            if qn is None or not qn.startswith("jax.numpy.") or qn.count(".") != 2 \
                    or qn.rsplit(".", 1)[1] in _NUMPY_EFFECTS or model.in_test_code(call):
                continue  # a test may expect it to raise
            if scope.func is not None and any(
                    isinstance(n, ast.Try) and n.handlers and n.body[0].lineno <= call.lineno <= n.body[-1].end_lineno
                    for n in ast.walk(scope.func.node)):
                continue  # ``try: jnp.f(x) except ValueError:``: called to see whether it raises
            first = call.args[0]
            x = first.id
            assign = f"`{x} = {unparse(call, 50)}`"
            facts = [f"`{qn}` is a function of `jax.numpy`: it returns its result and changes no argument",
                     "the call is a statement of its own inside a function: its result is not used"]
            yield self.finding(call, f"`{unparse(call.func, 30)}(...)` returns a new array and leaves `{x}` unchanged "
                                     f"(JAX arrays are immutable), so this statement does nothing; use its result: "
                                     f"{assign}", evidence=facts)

    @staticmethod
    @_never_raises
    def _fix(model: ModuleModel, call: ast.Call) -> Optional[Fix]:
        """``x.at[i].set(v)`` as an expression statement -> ``x = x.at[i].set(v)``, ``x`` a local
        plain name."""
        return _assign_back(model, call, call.func.value.value.value)  # ``<receiver>.at[...].<method>(...)``


def _assign_back(model: ModuleModel, call: ast.Call, receiver: ast.AST) -> Optional[Fix]:
    """The fix that assigns an expression statement's result back to its receiver (``x.at[i].set(v)`` ->
    ``x = x.at[i].set(v)``), where the receiver is a plain local name that may be rebound there."""
    stmt = rebinding.statement_of(model, call)
    if not isinstance(stmt, ast.Expr) or stmt.value is not call:
        return None
    if not (isinstance(receiver, ast.Name) and _rebinding_is_safe(model, receiver.id, stmt)):
        return None
    from jaxlint.edits import Edit, Fix, Span, end_of, start_of

    return Fix((Edit(start_of(stmt), start_of(stmt), (Span(start_of(receiver), end_of(receiver)), " = ")),))


RULES = [InplaceItemAssignment, DiscardedFunctionalUpdate]
