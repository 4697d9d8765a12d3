"""Value kind "certainly one array".

``model.is_jax`` answers "a JAX array or a pytree of them": a dict of parameters returned by a
jitted function is a JAX value to it, and ``params["w"] = w`` on that dict is fine. JAX401 needs
"certainly one array, not a container", so it asks the narrower question below and stays quiet
whenever the answer is not clear.
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from ... import names as N
from ..python import limits as L
from . import returnkinds
from . import values as V
from ..python.records import STARRED, FunctionInfo, Scope
from ..python.syntax import _pos
from .apisyntax import at_update

if TYPE_CHECKING:  # annotations only: the model imports this module
    from ..python.module import ModuleModel

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



def is_str_key(index: ast.AST) -> bool:
    return isinstance(index, ast.JoinedStr) or (isinstance(index, ast.Constant) and isinstance(index.value, str))


def array_only_index(index: ast.AST) -> bool:
    """An index only an array accepts: ``x[:, 0]``, ``x[..., i]``, ``x[None]``, ``x[i, 1:]``."""
    def special(e: ast.AST) -> bool:
        return isinstance(e, ast.Slice) or (isinstance(e, ast.Constant) and (e.value is Ellipsis or e.value is None))

    if isinstance(index, ast.Tuple):
        return any(special(e) for e in index.elts)
    return isinstance(index, ast.Constant) and (index.value is Ellipsis or index.value is None)


class ArrayKinds:
    """Answers "does this expression certainly hold one JAX array (not a pytree)?" for one model
    (``ModuleModel.arrays``, built on first use)."""

    def __init__(self, model: ModuleModel):
        self.m = model
        self._param_memo: dict[int, bool] = {}

    def certain(self, e: ast.AST, scope: Scope, depth: int = 0) -> bool:
        if depth > L.ARRAY_CHAIN or not self.m.work.spend():
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
            return not is_str_key(e.slice) and self.certain(e.value, scope, depth + 1)
        if t is ast.BinOp:
            if isinstance(e.op, ast.Mod) and isinstance(e.left, (ast.Constant, ast.JoinedStr)):
                return False
            if isinstance(e.left, _SEQUENCES) or isinstance(e.right, _SEQUENCES):
                return False  # [0] * n, (a,) + rest: a list or tuple
            if isinstance(e.op, ast.MatMult):
                return V.is_jax(self.m, e, scope)  # containers have no ``@``
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
            if at_update(func) is not None:
                return True
            if func.attr == "copy":
                return self.certain(func.value, scope, depth + 1)  # dict.copy, list.copy exist too
            if func.attr in _ARRAY_METHODS:
                # containers (dict, list, tuple) have none of these methods: a JAX value they are
                # called on is an array
                return V.is_jax(self.m, func.value, scope) or self.certain(func.value, scope, depth + 1)
        return False

    def _returned_element(self, call: ast.Call, scope: Scope, index: int, depth: int) -> bool:
        """Element ``index`` of what calling ``call.func`` (a function of this module, jitted or
        not) returns is one array in every ``return`` of it: ``return stats, jnp.cumsum(x)``."""
        found = returnkinds.returned_elements(self.m, call.func, scope, index)
        return found is not None and all(self.certain(e, f.scope, depth + 1) for f, e in found)

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
            if len(path) == 1 and path[0] != STARRED and isinstance(value, ast.Call):
                qn = self.m.resolve(value.func, ev.scope)
                if qn is not None and qn.startswith(("jax.numpy.", "jax.random.")) and N.produces_array(qn):
                    return True
                # history, losses = run(x): element 1 of every tuple this module's ``run`` returns
                return self._returned_element(value, ev.scope, path[0], depth)
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
            if self._is_param(base, f, ev) and array_only_index(sub.slice):
                return True
            if isinstance(base, ast.Attribute) and base.attr == "shape" and self._is_param(base.value, f, ev):
                return True
        for call in f.calls:
            func = call.func
            if isinstance(func, ast.Attribute):
                if func.attr in _ARRAY_METHODS and self._is_param(func.value, f, ev):
                    return True
                receiver = at_update(func)
                if receiver is not None and self._is_param(receiver, f, ev):
                    return True
            if call.args and self._is_param(call.args[0], f, ev):
                qn = m.resolve(func, f.scope)
                if (qn is not None and qn.startswith("jax.numpy.") and qn not in _TAKES_SEQUENCES
                        and N.produces_array(qn)):
                    return True
        return False

    def item_target(self, target: ast.Subscript, scope: Scope) -> bool:
        """Whether the base of an item-assignment target ``x[...]`` is certainly one array: by
        :meth:`certain`, or ``x[:, 0] = v`` on a tracer parameter, where the index itself shows
        that ``x`` is an array."""
        if self.certain(target.value, scope):
            return True
        base = target.value
        if not isinstance(base, ast.Name) or not array_only_index(target.slice):
            return False
        ev = self.m.binding(base.id, scope, _pos(base))
        if ev is None or ev.kind != "param":
            return False
        f = ev.scope.func
        return f is not None and f.traced and ev.value in f.tracer_params
