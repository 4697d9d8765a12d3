"""JAX4xx: in-place mutation of immutable JAX arrays and the removed index-update API."""

from __future__ import annotations

import ast
from typing import Iterator, Optional

from jaxlint.fix import FixBuilder
from jaxlint.model import ModuleModel, at_update, is_str_key
from jaxlint.rule import Finding, Rule, unparse


def _at(target: ast.Subscript) -> str:
    """``x.at[i]`` for the target ``x[i]``."""
    expr = ast.Subscript(value=ast.Attribute(value=target.value, attr="at", ctx=ast.Load()), slice=target.slice,
                         ctx=ast.Load())
    return unparse(expr, 50)


# --------------------------------------------------------------------------- JAX401


class InplaceItemAssignment(Rule):
    code = "JAX401"
    name = "inplace-item-assignment"
    summary = ("Finds `x[i] = v`, `x[i] += v` (and other augmented operators) and `del x[i]` where `x` is "
               "certainly a JAX array.")
    rationale = ("JAX arrays are immutable: item assignment raises `TypeError: JAX arrays are immutable` "
                 "(`del x[i]` an AttributeError), in traced code and outside it. Write the update "
                 "functionally and rebind the name: `x = x.at[i].set(v)`, `x = x.at[i].add(v)`, `.multiply`, "
                 "`.divide`, `.min`, `.max`. Under jit the copy is optimized into an in-place update.")
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
        fixer: Optional[FixBuilder] = None
        for target, kind in model.stores:
            if not isinstance(target, ast.Subscript) or is_str_key(target.slice):
                continue
            ctx = model.context(target)
            scope = ctx.scope if ctx is not None else model.scope_at(target)
            if not model.is_jax(target.value, scope):
                continue
            if not model.arrays.item_target(target, scope):
                continue
            fixer = fixer or FixBuilder(model)
            yield self.finding(target, self._message(target, kind), fixer.item_assignment(target, kind))

    @staticmethod
    def _message(target: ast.Subscript, kind: str) -> str:
        x = unparse(target.value, 30)
        item = unparse(target, 40)
        if kind == "del":
            return (f"JAX arrays are immutable: `del {item}` raises AttributeError and has no functional "
                    f"`.at[]` form; build a new array, e.g. `{x} = jnp.delete({x}, ...)` or a mask")
        if kind == "aug":
            return (f"JAX arrays are immutable: augmented assignment to `{item}` raises TypeError; use "
                    f"`{x} = {_at(target)}.add(v)` for +=, `.add(-v)` for -=, `.multiply(v)`, `.divide(v)`, "
                    "`.power(v)` for *=, /=, **=")
        return (f"JAX arrays are immutable: `{item} = ...` raises TypeError; use "
                f"`{x} = {_at(target)}.set(...)`")


# --------------------------------------------------------------------------- JAX402

_REMOVED = {
    "jax.ops.index_update": "set",
    "jax.ops.index_add": "add",
    "jax.ops.index_mul": "multiply",
    "jax.ops.index_min": "min",
    "jax.ops.index_max": "max",
}
_INDEX = "jax.ops.index"
_REMOVED_NAMES = {q.rsplit(".", 1)[1] for q in _REMOVED}





class RemovedIndexUpdateApi(Rule):
    code = "JAX402"
    name = "removed-index-update-api"
    summary = ("Finds calls of `jax.ops.index_update`/`index_add`/`index_mul`/`index_min`/`index_max` and uses "
               "of `jax.ops.index[...]`.")
    rationale = ("These functions were deprecated in JAX 0.2.22 and removed in JAX 0.3: on any current JAX "
                 "they raise AttributeError (ImportError for `from jax.ops import ...`). The `.at` property "
                 "replaces them: `jax.ops.index_update(x, jax.ops.index[i], v)` is `x.at[i].set(v)`, "
                 "`index_add` is `.at[i].add`, `index_mul` `.at[i].multiply`, `index_min`/`index_max` "
                 "`.at[i].min`/`.max`.")
    bad = """
        import jax
        import jax.numpy as jnp

        @jax.jit
        def reset_first(x):
            return jax.ops.index_update(x, jax.ops.index[0], 0.0)
    """
    good = """
        import jax
        import jax.numpy as jnp

        @jax.jit
        def reset_first(x):
            return x.at[0].set(0.0)
    """

    def check(self, model: ModuleModel) -> Iterator[Finding]:
        covered: set = set()
        fixer: Optional[FixBuilder] = None
        for call in model.calls_named(_REMOVED_NAMES):
            scope = model.scope_at(call)
            qn = model.resolve(call.func, scope)
            method = _REMOVED.get(qn or "")
            if method is None:
                continue
            args = call.args
            covered.update(id(a) for a in args)
            covered.update(id(kw.value) for kw in call.keywords)
            if len(args) >= 3 and not any(isinstance(a, ast.Starred) for a in args[:3]):
                idx = args[1]
                if isinstance(idx, ast.Subscript) and model.resolve(idx.value, scope) == _INDEX:
                    idx = idx.slice
                at = ast.Subscript(value=ast.Attribute(value=args[0], attr="at", ctx=ast.Load()), slice=idx,
                                   ctx=ast.Load())
                fix = f"`{unparse(at, 50)}.{method}({unparse(args[2], 20)})`"
                fixer = fixer or FixBuilder(model)
                auto = fixer.index_update(call, method, idx)
            else:
                fix = f"`x.at[idx].{method}(v)`"
                auto = None
            yield self.finding(call, f"`{qn}` was removed in JAX 0.3 and no longer exists; use {fix}", auto)
        if "ops" not in model.attr_names and not any(
                qn.startswith("jax.ops") for qn in model.module_scope.imports.values()):
            return  # jax.ops.index is spelled through ``jax.ops`` or imported from it
        for sub, scope in self._subscripts(model):
            if id(sub) in covered:
                continue
            value = sub.value
            if (value.attr if isinstance(value, ast.Attribute) else getattr(value, "id", "")) != "index":
                continue
            if model.resolve(sub.value, scope) == _INDEX:
                covered.add(id(sub))
                at = _at(ast.Subscript(value=ast.Name("x"), slice=sub.slice))
                yield self.finding(sub, f"`jax.ops.index` was removed in JAX 0.3 and no longer exists; index "
                                        f"through `.at` instead: `{at}.set(v)`")

    @staticmethod
    def _subscripts(model: ModuleModel):
        """Subscript reads the model records: in function bodies, plus top-level call arguments and
        module-level assigned values (the model keeps no list of module-level subscripts)."""
        for f in model.functions:
            for sub in f.subscripts:
                yield sub, f.scope
        for call in model.calls:
            for a in list(call.args) + [kw.value for kw in call.keywords]:
                if isinstance(a, ast.Subscript):
                    yield a, model.scope_at(call)
        for evs in model.module_scope.events.values():
            for ev in evs:
                if ev.kind == "assign" and isinstance(ev.value, ast.Subscript):
                    yield ev.value, model.module_scope


# --------------------------------------------------------------------------- JAX403

_UPDATE_METHODS = {"set", "add", "subtract", "multiply", "mul", "divide", "power", "min", "max", "apply"}


class DiscardedFunctionalUpdate(Rule):
    code = "JAX403"
    name = "discarded-functional-update"
    summary = "Finds `x.at[i].set(v)` (or `.add`, `.multiply`, ...) used as a statement, its result unused."
    rationale = ("JAX arrays are immutable: `x.at[i].set(v)` returns a new array and leaves `x` unchanged. As a "
                 "statement on its own the update does nothing (and under jit is removed as dead code). Assign "
                 "the result: `x = x.at[i].set(v)`.")
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
        fixer: Optional[FixBuilder] = None
        for call in model.calls:
            if id(call) not in unused:
                continue
            func = call.func
            receiver = at_update(func, _UPDATE_METHODS)
            if receiver is None:
                continue
            scope = model.scope_at(call)
            if model.looks_like_ref(receiver, scope):
                continue
            x = unparse(receiver, 30)
            fixer = fixer or FixBuilder(model)
            yield self.finding(call, f"`.at[].{func.attr}()` returns a new array and leaves `{x}` unchanged "
                                     f"(JAX arrays are immutable); assign it back: `{x} = {unparse(call, 50)}`",
                               fixer.discarded_update(call))


RULES = [InplaceItemAssignment, RemovedIndexUpdateApi, DiscardedFunctionalUpdate]
