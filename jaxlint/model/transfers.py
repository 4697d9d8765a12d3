"""Host transfers: which calls copy a JAX value to the host or format it as text, and in which
loops they run every iteration."""

from __future__ import annotations

import ast
from typing import Optional

from .. import names as N
from .records import Context, Loop
from .syntax import unparse

# Every spelling host_fetch or formats_jax can accept ends in one of these (aliases such as
# ``from numpy import asarray as A`` are rarer than the cost of resolving every call is high).
FETCH_OR_FORMAT_NAMES = frozenset(
    {q.rsplit(".", 1)[1] for q in N.HOST_BUILTINS | N.NUMPY_FETCH | N.FORMAT_BUILTINS | {N.DEVICE_GET}}
    | {"item", "tolist", "format"} | N.LOG_METHODS)


class TransferQueries:
    """Device-to-host transfers. Mixed into :class:`~jaxlint.model.ModuleModel`."""

    def host_fetch(self, call: ast.Call) -> Optional[ast.AST]:
        """If the call copies a JAX value to the host, that value: the argument of
        ``float(x)``/``np.asarray(x)``/``jax.device_get(x)``, the receiver of ``x.item()``/``x.tolist()``."""
        scope = self.scope_at(call)
        func = call.func
        qn = self.resolve(func, scope)
        args = [a for a in call.args if not isinstance(a, ast.Starred)]
        if qn in N.HOST_BUILTINS or qn in N.NUMPY_FETCH or qn == N.DEVICE_GET:
            if args and self.is_jax(args[0], scope):
                return args[0]
            return None
        if isinstance(func, ast.Attribute) and func.attr in ("item", "tolist") and qn is None:
            if self.is_jax(func.value, scope):
                return func.value
        return None

    def formats_jax_call(self, call: ast.Call) -> bool:
        """print/str/repr/format/logging/str.format calls that format a JAX value."""
        scope = self.scope_at(call)
        func = call.func
        qn = self.resolve(func, scope)
        is_fmt = qn in N.FORMAT_BUILTINS
        if not is_fmt and isinstance(func, ast.Attribute):
            if func.attr == "format" and isinstance(func.value, ast.Constant) and isinstance(func.value.value, str):
                is_fmt = True
            elif func.attr in N.LOG_METHODS:
                if qn is not None and qn.startswith("logging."):
                    is_fmt = True
                elif qn is None:
                    recv = unparse(func.value, 80).lower()
                    is_fmt = "log" in recv.rsplit(".", 1)[-1]
        if not is_fmt:
            return False
        values = list(call.args) + [kw.value for kw in call.keywords if kw.arg not in ("sep", "end", "file", "flush")]
        return any(self.formats_jax(v, scope) for v in values)

    def per_iteration_loop(self, ctx: Optional[Context]) -> Optional[Loop]:
        """The step loop a host-side node runs in every iteration of: the innermost loop of JAX
        work around it (:meth:`hot_loop`), unless a periodic ``if`` guards the node, one iteration
        of the loop runs a whole program (:meth:`iteration_program`: the sync is once per
        rollout or epoch), the loop walks the points of a sweep (:meth:`sweep_loop`), or its only
        JAX work converts the elements it walks (:meth:`converts_elements`)."""
        if ctx is None or not ctx.loops:
            return None
        f = ctx.scope.func
        if f is not None and f.traced:
            return None
        loop = self.hot_loop(ctx)
        if loop is None or self.periodic_guard(ctx, loop):
            return None
        if self.iteration_program(loop) is not None or self.sweep_loop(loop) or self.converts_elements(loop):
            return None
        return loop
