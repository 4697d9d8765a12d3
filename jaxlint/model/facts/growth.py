"""Arrays grown in a loop by eager concatenation: ``x = jnp.concatenate([x, y])`` (``jnp.append``,
``vstack``, ``hstack``, ...) in every iteration of a loop outside traced code, so ``x`` has a new
shape each time. Every eager JAX operation is compiled per input shape, so the concatenation (and
every eager operation on ``x``) compiles again in every iteration, and the copies grow with the
length (measured on CPU, jax 0.10.2: 200 iterations growing five arrays 4.4 s, against 0.19 s for
list appends and one concatenation). Also through a tree map whose function concatenates the
carried leaf (``metrics = jax.tree.map(lambda m, c: jnp.concatenate([m, c]), metrics, new)``).

Asked by JAX304; functions of the model (``m``).
"""

from __future__ import annotations

import ast
from typing import Optional

from ... import names as N
from . import callables, eagerwork, proof
from . import values as V
from ..python.records import Loop
from ..python.syntax import walk

# jax.numpy functions whose result is their array arguments joined: longer than each of them.
_JOINS = frozenset("jax.numpy." + n for n in ("concatenate", "append", "vstack", "hstack", "row_stack",
                                               "column_stack", "dstack", "concat"))


class Growth:
    """``name`` is rebound by ``call`` (a join of itself with more data) in every iteration of ``loop``;
    ``via``: the tree map the join runs under, or None."""

    __slots__ = ("stmt", "call", "name", "loop", "via")

    def __init__(self, stmt: ast.stmt, call: ast.Call, name: str, loop: Loop, via: Optional[ast.Call]):
        self.stmt, self.call, self.name, self.loop, self.via = stmt, call, name, loop, via


def grown_in_loops(m) -> list:
    """Every :class:`Growth` of the module: a statement ``x = <join of x and more>`` directly in a
    loop body (not under an ``if``: a join every N steps or on a condition compiles once per
    occurrence, not per iteration), outside traced code, where no other statement of the loop binds
    ``x`` (a buffer reset in each iteration does not grow across iterations). The join is the
    statement's whole value: ``x = jnp.concatenate([x, y])[-k:]`` keeps a window of fixed size.
    Found once per module (three rules ask)."""
    memo = m.facts.grown_memo
    if memo is not None:
        return memo
    out: list = []
    m.facts.grown_memo = out
    for loop in m.loops:
        node = loop.node
        if not isinstance(node, (ast.For, ast.AsyncFor, ast.While)):
            continue
        for stmt in node.body:
            g = _growth(m, stmt, loop)
            if g is not None and _bound_once(node, g.name, stmt):
                out.append(g)
    return out


def _growth(m, stmt: ast.stmt, loop: Loop) -> Optional[Growth]:
    if not isinstance(stmt, ast.Assign) or len(stmt.targets) != 1 or not isinstance(stmt.targets[0], ast.Name):
        return None
    name = stmt.targets[0].id
    value = stmt.value
    if not isinstance(value, ast.Call) or m.in_traced_code(value):
        return None
    scope = m.scope_at(value)
    qn = m.resolve(value.func, scope)
    if qn in _JOINS and _joins_itself(value, name):
        return Growth(stmt, value, name, loop, None)
    if qn in N.TREE_MAPS and len(value.args) >= 2 and isinstance(value.args[0], ast.Lambda):
        fn = value.args[0]
        params = [a.arg for a in fn.args.args]
        trees = value.args[1:]
        carried = [p for p, t in zip(params, trees) if isinstance(t, ast.Name) and t.id == name]
        body = fn.body
        if carried and isinstance(body, ast.Call) and m.resolve(body.func, scope) in _JOINS \
                and _joins_itself(body, carried[0]):
            return Growth(stmt, body, name, loop, value)
    return None


def _joins_itself(call: ast.Call, name: str) -> bool:
    """``concatenate([name, y])``, ``append(name, y)``, ``vstack((name, y))``: ``name`` is one of the
    joined arrays, beside something else."""
    if not call.args:
        return False
    first = call.args[0]
    if isinstance(first, (ast.List, ast.Tuple)):
        parts = first.elts
    else:  # jnp.append(arr, values)
        parts = call.args[:2]
    return len(parts) >= 2 and any(isinstance(p, ast.Name) and p.id == name for p in parts)


def _bound_once(loop_node: ast.AST, name: str, stmt: ast.stmt) -> bool:
    """No statement of the loop but ``stmt`` binds ``name`` (nor is it a loop target), but for a
    window of itself (``if x.shape[1] > k: x = x[:, -k:]``: it still grows to ``k``, a shape each)."""
    for n in walk(loop_node):
        if n is stmt or _window(n, name):
            continue
        if isinstance(n, (ast.For, ast.AsyncFor, ast.comprehension)) and any(
                isinstance(t, ast.Name) and t.id == name for t in walk(n.target)):
            return False
        if isinstance(n, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.NamedExpr)):
            targets = n.targets if isinstance(n, ast.Assign) else [n.target]
            if any(isinstance(t, ast.Name) and t.id == name for tgt in targets for t in walk(tgt)):
                return False
    return True


def _window(n: ast.AST, name: str) -> bool:
    """``x = x[..., -k:]``: ``x`` rebound to a slice of itself."""
    return isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name) and \
        n.targets[0].id == name and isinstance(n.value, ast.Subscript) and isinstance(n.value.value, ast.Name) \
        and n.value.value.id == name and any(isinstance(e, ast.Slice) for e in walk(n.value.slice))


def eager(m, g: Growth) -> "proof.Fact":
    """Whether the loop of ``g`` runs eagerly (op by op, each operation compiled per input shape):
    proven for module-level code (a script, a notebook) and for a loop that calls a compiled
    function of the module (a driver loop: a step under ``jit`` is not itself re-jitted) or whose
    function is called only from code so proven (``eagerwork.outside_trace``); unknown otherwise
    (a model's method may run under a ``jit`` of its caller, where the loop is unrolled and its
    shapes are static)."""
    scope = m.scope_at(g.stmt)
    if scope.kind == "module":
        return proof.proven("eager", "the loop is module-level code")
    for call in g.loop.all_calls():
        wrap = callables.callable_info(m, call.func, m.scope_at(call))
        if wrap is not None and wrap.kind in ("jit", "pmap", "filter_jit"):
            return proof.proven("eager", f"the loop calls the compiled `{ast.unparse(call.func)[:40]}`: it drives "
                                         "compiled code from Python")
    called = eagerwork.outside_trace(m, g.stmt)  # every caller in this module runs outside any trace
    if called.status == proof.PROVEN:
        return called
    read = _host_read(m, g.loop)
    if read is not None:
        return proof.proven("eager", f"`{ast.unparse(read)[:40]}` (line {read.lineno}) makes a JAX value a Python "
                                     "value in every iteration, which a trace refuses: the loop runs outside any trace")
    return proof.unknown("eager", "whether the function around the loop runs under a trace of its caller (where the "
                                  "loop is unrolled and every shape is static) is not known")


def _host_read(m, loop: Loop) -> Optional[ast.Call]:
    """An ``int(x)``/``float(x)``/``bool(x)`` or ``x.item()`` of a JAX value that every iteration of the
    loop runs (a statement of its body or an ``if``'s test, not under an ``if`` or ``try``): under ``jit``
    it would raise, so the loop runs eagerly."""
    for stmt in loop.node.body:
        if isinstance(stmt, (ast.If, ast.While)):
            stmt = stmt.test  # the test runs every iteration, the body may not
        elif isinstance(stmt, (ast.Try, ast.With, ast.For, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        for c in walk(stmt):
            if not isinstance(c, ast.Call):
                continue
            scope = m.scope_at(c)
            if len(c.args) == 1 and not c.keywords and m.resolve(c.func, scope) in _CONVERSIONS \
                    and V.is_jax(m, c.args[0], scope):
                return c
            if isinstance(c.func, ast.Attribute) and c.func.attr == "item" and not c.args \
                    and V.is_jax(m, c.func.value, scope):
                return c
    return None


_CONVERSIONS = frozenset({"builtins.int", "builtins.float", "builtins.bool"})


class CompiledGrowth:
    """``idx = step(params, idx)`` in a loop, where the compiled ``step`` returns ``idx`` joined with
    more data: the argument is longer at every call. ``stmt``, ``call``, ``name`` (the argument the
    loop rebinds), ``loop``, ``join`` (the join in the compiled function's ``return``)."""

    __slots__ = ("stmt", "call", "name", "loop", "join")

    def __init__(self, stmt, call, name, loop, join):
        self.stmt, self.call, self.name, self.loop, self.join = stmt, call, name, loop, join


def grown_through_compiled(m) -> list:
    """Every :class:`CompiledGrowth` of the module: a statement ``x = f(..., x, ...)`` directly in a
    loop body outside traced code, ``f`` a jitted def of this module every ``return`` of which is a
    join (``jnp.concatenate([p, more])``) of the parameter ``x`` is passed to, and no other statement
    of the loop binding ``x``: a generation step that appends a token and returns the longer array."""
    out: list = []
    for loop in (m.loops if m.jit_wraps else ()):  # only a jitted def of this module can be such a step
        for stmt in getattr(loop.node, "body", ()):
            if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name)
                    and isinstance(stmt.value, ast.Call)) or m.in_traced_code(stmt.value):
                continue
            name, call = stmt.targets[0].id, stmt.value
            wrap = callables.callable_info(m, call.func, m.scope_at(call))
            f = getattr(wrap, "func", None)
            if getattr(wrap, "kind", None) not in ("jit", "pmap") or f is None or not f.returns:
                continue
            params, shift = wrap.static_layout(call)[:2]  # a method called as ``self.step(x)``: after ``self``
            param = next((params[i + shift] for i, a in enumerate(call.args) if isinstance(a, ast.Name)
                          and a.id == name and i + shift < len(params)), None) or next(
                (k.arg for k in call.keywords if isinstance(k.value, ast.Name) and k.value.id == name), None)
            if param is None or param in wrap.static_argnames:
                continue
            joins = [r for r in f.returns if isinstance(r, ast.Call) and m.resolve(r.func, m.scope_at(r)) in _JOINS
                     and _joins_itself(r, param)]
            if len(joins) == len(f.returns) and _bound_once(loop.node, name, stmt):
                out.append(CompiledGrowth(stmt, call, name, loop, joins[0]))
    return out
