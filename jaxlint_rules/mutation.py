"""JAX4xx: in-place mutation of immutable JAX arrays and the removed index-update API."""

from __future__ import annotations

import ast
from typing import Iterator, Optional

from jaxlint import names as N
from jaxlint.fix import FixBuilder
from jaxlint.model import FunctionInfo, ModuleModel, Scope
from jaxlint.rule import Finding, Rule, unparse

# --------------------------------------------------------------------------- "certainly an array"
#
# ``model.is_jax`` answers "a JAX array or a pytree of them": a dict of parameters returned by a
# jitted function is a JAX value to it, and ``params["w"] = w`` on that dict is fine. JAX401 needs
# "certainly one array, not a container", so it asks the narrower question below and stays quiet
# whenever the answer is not clear.

# jax.numpy / jax.scipy / jax.lax functions that return a tuple, list or namedtuple of arrays (or a
# pytree shaped like their input) rather than one array.
_MULTI_RESULT = {
    "jax.numpy." + n for n in (
        "split", "array_split", "hsplit", "vsplit", "dsplit", "unstack", "meshgrid", "broadcast_arrays",
        "nonzero", "unique", "unique_all", "unique_counts", "unique_inverse", "histogram", "histogram2d",
        "histogramdd", "frexp", "modf", "divmod", "tril_indices", "triu_indices", "diag_indices",
        "diag_indices_from", "tril_indices_from", "triu_indices_from", "mask_indices", "unravel_index",
        "ix_", "gradient", "polyfit", "polydiv", "einsum_path", "indices", "linalg.eig", "linalg.eigh",
        "linalg.qr", "linalg.svd", "linalg.slogdet", "linalg.lstsq",
    )
} | {
    "jax.lax." + n for n in (
        "scan", "fori_loop", "while_loop", "cond", "switch", "map", "associative_scan", "custom_root",
        "custom_linear_solve", "psum", "pmean", "pmax", "pmin", "all_gather", "ppermute", "pshuffle",
        "all_to_all", "psum_scatter", "reduce", "reduce_window", "sort", "sort_key_val", "top_k",
        "stop_gradient", "optimization_barrier", "with_sharding_constraint", "platform_dependent",
        "scatter_apply", "approx_max_k", "approx_min_k", "rng_bit_generator", "split", "composite", "pvary",
        "pcast", "pbroadcast",
    )
}
# Families that return one array per call (jax.scipy only where that holds throughout).
_ARRAY_FAMILIES = ("jax.numpy.", "jax.random.", "jax.lax.", "jax.nn.", "jax.scipy.special.",
                   "jax.scipy.stats.", "jax.scipy.fft.")
# jnp functions that return one array only when given one argument (``where``: three).
_ONE_ARG_ARRAY = {"jax.numpy.atleast_1d", "jax.numpy.atleast_2d", "jax.numpy.atleast_3d", "jax.numpy.where"}

# Array methods and attributes that return an array (lists and dicts have none of them).
_ARRAY_METHODS = {
    "reshape", "astype", "transpose", "ravel", "flatten", "squeeze", "swapaxes", "sum", "mean", "max", "min",
    "argmax", "argmin", "prod", "std", "var", "cumsum", "cumprod", "clip", "round", "dot", "conj", "any",
    "all", "block_until_ready",
}
_ARRAY_ATTRS = {"T", "mT", "real", "imag"}
# jnp functions that accept lists/tuples of arrays: an argument passed to them may be a container.
_TAKES_SEQUENCES = {
    "jax.numpy." + n for n in (
        "array", "asarray", "block", "column_stack", "concat", "concatenate", "dstack", "hstack", "vstack",
        "stack", "row_stack", "select", "lexsort", "result_type", "shape", "ndim", "size", "iterable",
        "isscalar", "iscomplexobj", "isrealobj", "array_equal", "array_equiv", "meshgrid", "broadcast_arrays",
        "einsum", "piecewise", "ix_",
    )
}
_SEQUENCES = (ast.List, ast.Tuple, ast.ListComp, ast.GeneratorExp, ast.Set, ast.SetComp, ast.Dict, ast.DictComp)
_MAX_DEPTH = 12
_STARRED = 10 ** 6  # the model's path index for a starred unpacking target


def _pos(node: ast.AST) -> tuple:
    return (node.lineno, node.col_offset)


def _is_str_key(index: ast.AST) -> bool:
    return isinstance(index, ast.JoinedStr) or (isinstance(index, ast.Constant) and isinstance(index.value, str))


def _array_only_index(index: ast.AST) -> bool:
    """An index only an array accepts: ``x[:, 0]``, ``x[..., i]``, ``x[None]``, ``x[i, 1:]``."""
    def special(e: ast.AST) -> bool:
        return isinstance(e, ast.Slice) or (isinstance(e, ast.Constant) and (e.value is Ellipsis or e.value is None))

    if isinstance(index, ast.Tuple):
        return any(special(e) for e in index.elts)
    return isinstance(index, ast.Constant) and (index.value is Ellipsis or index.value is None)


class _Arrays:
    """Answers "does this expression certainly hold one JAX array (not a pytree)?" for one model."""

    def __init__(self, model: ModuleModel):
        self.m = model
        self._param_memo: dict[int, bool] = {}

    def certain(self, e: ast.AST, scope: Scope, depth: int = 0) -> bool:
        if depth > _MAX_DEPTH:
            return False
        t = type(e)
        if t is ast.Name:
            ev = self.m.binding(e.id, scope, _pos(e))
            return ev is not None and self._event(ev, depth + 1)
        if t is ast.Call:
            return self._call(e, scope, depth + 1)
        if t is ast.Attribute:
            return e.attr in _ARRAY_ATTRS and self.certain(e.value, scope, depth + 1)
        if t is ast.Subscript:
            return not _is_str_key(e.slice) and self.certain(e.value, scope, depth + 1)
        if t is ast.BinOp:
            if isinstance(e.op, ast.Mod) and isinstance(e.left, (ast.Constant, ast.JoinedStr)):
                return False
            if isinstance(e.left, _SEQUENCES) or isinstance(e.right, _SEQUENCES):
                return False  # [0] * n, (a,) + rest: a list or tuple
            if isinstance(e.op, ast.MatMult):
                return self.m.is_jax(e, scope)  # containers have no ``@``
            return self.certain(e.left, scope, depth + 1) or self.certain(e.right, scope, depth + 1)
        if t is ast.UnaryOp:
            return not isinstance(e.op, ast.Not) and self.certain(e.operand, scope, depth + 1)
        if t is ast.IfExp:
            return self.certain(e.body, scope, depth + 1) and self.certain(e.orelse, scope, depth + 1)
        if t is ast.NamedExpr:
            return self.certain(e.value, scope, depth + 1)
        return False

    def _call(self, call: ast.Call, scope: Scope, depth: int) -> bool:
        func = call.func
        qn = self.m.resolve(func, scope)
        if qn is not None:
            if qn in _ONE_ARG_ARRAY:
                plain = not any(isinstance(a, ast.Starred) for a in call.args)
                wanted = 3 if qn == "jax.numpy.where" else 1
                return plain and len(call.args) == wanted
            return (qn.startswith(_ARRAY_FAMILIES) and N.produces_array(qn) and qn not in _MULTI_RESULT
                    and not qn.rsplit(".", 1)[-1].startswith("_"))
        if isinstance(func, ast.Attribute):
            # x.at[i].set(v) and friends return a new array
            if func.attr in N.AT_METHODS and isinstance(func.value, ast.Subscript):
                inner = func.value.value
                if isinstance(inner, ast.Attribute) and inner.attr == "at":
                    return True
            if func.attr == "copy":
                return self.certain(func.value, scope, depth + 1)  # dict.copy, list.copy exist too
            if func.attr in _ARRAY_METHODS:
                # containers (dict, list, tuple) have none of these methods: a JAX value they are
                # called on is an array
                return self.m.is_jax(func.value, scope) or self.certain(func.value, scope, depth + 1)
        return False

    def _event(self, ev, depth: int) -> bool:
        kind = ev.kind
        if kind == "assign":
            value, path = ev.value, list(ev.path or ())
            while path and isinstance(value, (ast.Tuple, ast.List)) and not any(
                    isinstance(x, ast.Starred) for x in value.elts) and path[0] < len(value.elts):
                value = value.elts[path.pop(0)]
            if not path:
                return self.certain(value, ev.scope, depth)
            # q, r = jnp.linalg.qr(a); k1, k2 = jax.random.split(key): each part is one array
            if len(path) == 1 and path[0] != _STARRED and isinstance(value, ast.Call):
                qn = self.m.resolve(value.func, ev.scope)
                return qn is not None and qn.startswith(("jax.numpy.", "jax.random.")) and N.produces_array(qn)
            return False
        if kind == "aug":
            # x += v keeps x an array when it was one (a list += array would extend the list)
            node = ev.node
            if not isinstance(node.target, ast.Name):
                return False
            prev = self.m.binding(node.target.id, ev.scope, _pos(node))
            return prev is not None and prev is not ev and self._event(prev, depth + 1)
        if kind == "param":
            return self._param_is_array(ev)
        return False

    # -- tracer parameters

    def _param_is_array(self, ev) -> bool:
        """A tracer parameter of a traced function that the function uses as an array: a
        parameter can be a pytree (a dict or list of arrays), so this needs evidence in the body:
        ``x.reshape(...)``, ``x.at[...]``, ``x.shape[...]``, ``x[:, 0]``, ``jnp.sum(x)``."""
        key = id(ev)
        if key in self._param_memo:
            return self._param_memo[key]
        self._param_memo[key] = False
        f = ev.scope.func
        result = f is not None and f.traced and ev.value in f.tracer_params and self._used_as_array(f, ev)
        self._param_memo[key] = result
        return result

    def _is_param(self, e: ast.AST, f: FunctionInfo, ev) -> bool:
        return isinstance(e, ast.Name) and e.id == ev.value and self.m.binding(e.id, f.scope, _pos(e)) is ev

    def _used_as_array(self, f: FunctionInfo, ev) -> bool:
        m = self.m
        for sub in f.subscripts:
            base = sub.value
            if self._is_param(base, f, ev) and _array_only_index(sub.slice):
                return True
            if isinstance(base, ast.Attribute) and base.attr == "shape" and self._is_param(base.value, f, ev):
                return True
        for call in f.calls:
            func = call.func
            if isinstance(func, ast.Attribute):
                if func.attr in _ARRAY_METHODS and self._is_param(func.value, f, ev):
                    return True
                if (func.attr in N.AT_METHODS and isinstance(func.value, ast.Subscript)
                        and isinstance(func.value.value, ast.Attribute) and func.value.value.attr == "at"
                        and self._is_param(func.value.value.value, f, ev)):
                    return True
            if call.args and self._is_param(call.args[0], f, ev):
                qn = m.resolve(func, f.scope)
                if (qn is not None and qn.startswith("jax.numpy.") and qn not in _TAKES_SEQUENCES
                        and N.produces_array(qn)):
                    return True
        return False


# Augmented assignments whose operator has no ``.at[]`` method (there is no ``.at[].floor_divide``).
_NO_AT_METHOD = {ast.FloorDiv: "//", ast.Mod: "%", ast.MatMult: "@", ast.LShift: "<<", ast.RShift: ">>",
                 ast.BitOr: "|", ast.BitAnd: "&", ast.BitXor: "^"}


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
        arrays: Optional[_Arrays] = None
        fixer: Optional[FixBuilder] = None
        aug_ops: Optional[dict] = None  # id(target of an augmented assignment) -> its operator
        for target, kind in model.stores:
            if not isinstance(target, ast.Subscript) or _is_str_key(target.slice):
                continue
            ctx = model.context(target)
            scope = ctx.scope if ctx is not None else model.scope_at(target)
            if not model.is_jax(target.value, scope):
                continue
            if arrays is None:
                arrays = _Arrays(model)
            if not (arrays.certain(target.value, scope) or self._array_param(arrays, target, scope)):
                continue
            fixer = fixer or FixBuilder(model)
            op = None
            if kind == "aug":
                if aug_ops is None:
                    aug_ops = {id(n.target): n.op for n in ast.walk(model.tree) if isinstance(n, ast.AugAssign)}
                op = aug_ops.get(id(target))
            yield self.finding(target, self._message(target, kind, op), fixer.item_assignment(target, kind))

    @staticmethod
    def _array_param(arrays: _Arrays, target: ast.Subscript, scope: Scope) -> bool:
        """``x[:, 0] = v`` on a tracer parameter: the index itself shows ``x`` is an array."""
        base = target.value
        if not isinstance(base, ast.Name) or not _array_only_index(target.slice):
            return False
        ev = arrays.m.binding(base.id, scope, _pos(base))
        if ev is None or ev.kind != "param":
            return False
        f = ev.scope.func
        return f is not None and f.traced and ev.value in f.tracer_params

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


def _last_name(e: ast.AST) -> str:
    """The most specific name in a receiver: ``o_ref`` in ``o_ref``, ``self.o_ref``, ``o_refs[0]``."""
    while isinstance(e, (ast.Subscript, ast.Call)):
        e = e.value if isinstance(e, ast.Subscript) else e.func
    if isinstance(e, ast.Attribute):
        return e.attr
    return e.id if isinstance(e, ast.Name) else ""


def _looks_like_ref(model: ModuleModel, receiver: ast.AST, scope: Scope) -> bool:
    """Pallas/state refs (``o_ref.at[i].set(v)``) are mutable: there the statement is the write."""
    if model.is_jax(receiver, scope):
        return False
    name = _last_name(receiver).lower()
    return name == "ref" or name.endswith(("_ref", "_refs", "ref", "refs"))


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
            if not (isinstance(func, ast.Attribute) and func.attr in _UPDATE_METHODS
                    and isinstance(func.value, ast.Subscript) and isinstance(func.value.value, ast.Attribute)
                    and func.value.value.attr == "at"):
                continue
            receiver = func.value.value.value
            scope = model.scope_at(call)
            if _looks_like_ref(model, receiver, scope):
                continue
            x = unparse(receiver, 30)
            fixer = fixer or FixBuilder(model)
            yield self.finding(call, f"`.at[].{func.attr}()` returns a new array and leaves `{x}` unchanged "
                                     f"(JAX arrays are immutable); assign it back: `{x} = {unparse(call, 50)}`",
                               fixer.discarded_update(call))


RULES = [InplaceItemAssignment, RemovedIndexUpdateApi, DiscardedFunctionalUpdate]
