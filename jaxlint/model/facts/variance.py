"""Loop variance of values and shapes: what takes a new value in each iteration of the loops
around a call, and slice widths as polynomials of their bounds."""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Optional

from ... import names as N
from . import callables, collected, rowmasks
from ..python import limits as L
from . import loops as loopfacts
from .loops import loop_iterable
from ..python.records import Scope
from ..python.syntax import _pos, call_arg, walk
from ..python.widths import ShapeSource, SizeDriver, combine, polynomial

if TYPE_CHECKING:  # annotations only: the model imports this module
    from ..python.module import ModuleModel


class ShapeVariance:
    """What takes a new value, or a new slice width, in each iteration of the loops around one
    call (``ModuleModel.shape_variance``)."""

    def __init__(self, model: ModuleModel, scope: Scope, loops: tuple, bounded_iters: set):
        self.m = model
        self.scope = scope
        self.loops = loops
        self.bounded_iters = bounded_iters  # ids of the iterables of loops over a few literal options
        self._memo: dict = {}
        self._call_ctx = None
        self._item_sizes = False  # whether loop items used as sizes count (the elements of a drawn list)

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
            if ev.kind == "assign" and depth < L.VARIANCE_CHAIN and self.m.work.spend() and self.expr_varies(ev.value, depth + 1):
                return True
        return False

    def expr_varies(self, e: ast.AST, depth: int = 0) -> bool:
        for n in walk(e):
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
        return any(isinstance(n, ast.Name) and self.name_varies(n.id) for n in walk(atom))

    def width_varies(self, sl: ast.Slice) -> bool:
        atoms: dict = {}
        lower = polynomial(self._in_loop_values(sl.lower), atoms) if sl.lower is not None else {}
        # An open upper bound is the (fixed) length of the sliced axis.
        upper = polynomial(self._in_loop_values(sl.upper), atoms) if sl.upper is not None else {("<end>",): 1}
        if lower is None or upper is None:
            return False
        width = combine(upper, lower, -1)
        return any(any(k in atoms and self.atom_varies(atoms[k]) for k in key) for key in width)

    def _in_loop_values(self, e: ast.AST, depth: int = 0) -> ast.AST:
        """``e`` with each name bound in the loops by a plain assignment of this scope to arithmetic
        replaced by its value (``start = i * bs; end = (i + 1) * bs``: ``x[start:end]`` is ``bs``
        wide), through arithmetic, up to two levels; loop targets and other names stay. New nodes:
        the tree is not changed."""
        if depth > 1:
            return e
        if isinstance(e, ast.Name):
            ev = self.m.binding(e.id, self.scope, (e.lineno, e.col_offset))
            if (ev is not None and ev.plain_assign and ev.scope is self.scope
                    and isinstance(ev.value, (ast.BinOp, ast.Name)) and any(lp in self.loops for lp in ev.loops)):
                return self._in_loop_values(ev.value, depth + 1)
            return e
        if isinstance(e, ast.BinOp):
            left, right = self._in_loop_values(e.left, depth), self._in_loop_values(e.right, depth)
            return e if left is e.left and right is e.right else ast.BinOp(left=left, op=e.op, right=right)
        if isinstance(e, ast.UnaryOp):
            operand = self._in_loop_values(e.operand, depth)
            return e if operand is e.operand else ast.UnaryOp(op=e.op, operand=operand)
        return e

    def churning(self, e: ast.AST) -> bool:
        if not isinstance(e, ast.Subscript):
            return False
        parts = e.slice.elts if isinstance(e.slice, ast.Tuple) else [e.slice]
        return any(isinstance(p, ast.Slice) and self.width_varies(p) for p in parts)

    def argument_churns(self, arg: ast.AST) -> bool:
        """Whether a call argument is a slice whose width changes per iteration, directly or
        through a name assigned such a slice in the loop."""
        if self.churning(arg):
            return True
        if isinstance(arg, ast.Name):
            ev = self.m.binding(arg.id, self.scope, (arg.lineno, arg.col_offset))
            if (ev is not None and ev.plain_assign and ev.scope is self.scope
                    and any(lp in self.loops for lp in ev.loops)):
                return self.churning(ev.value)
        return False

    # -- where an argument's shape comes from, when it follows the loop

    def shape_source(self, arg: ast.AST, ctx=None) -> Optional[ShapeSource]:
        """Where the shape of a call argument comes from, when it follows the loops: a slice of a
        width that changes (``x[:i]``), an array built with a size from the loop (``jnp.ones(n)``,
        ``jnp.arange(t)``, ``jnp.zeros((n, d))``, ``jax.random.normal(k, (n,))``), a list that
        grows each iteration (``buf.append(x)`` then ``jnp.stack(buf)``, or ``buf`` itself),
        ``jnp.nonzero``/``jnp.unique``/... of per-iteration data without ``size=`` (and what it
        indexes), per-item Python data of varying length made an array (``jnp.array([vocab[w] for w in
        s.split()])``), or an item of a list of arrays built with different sizes (``xs = [f(n)
        for n in (5, 9, 12)]; for x in xs``), directly or through names assigned in the loop.
        Sizes read from ``.shape``/``len()`` vary only where that array's or list's shape does
        (batches from a loader do not); sizes bucketed (``//``, ``%``, a helper's result) do not
        count, nor do the items of a loop over sizes (``for n in sizes: f(jnp.ones(n))``, a sweep
        that compiles each size on purpose). ``ctx``: the call's context, for ``if len(buf) == k`` guards around it. None when
        nothing shows the shape changes."""
        self._call_ctx = ctx
        try:
            return self._source(arg, 0)
        except RecursionError:  # pragma: no cover - depth limits keep chains short
            return None

    def _source(self, e: ast.AST, depth: int) -> Optional[ShapeSource]:
        if depth > L.VARIANCE_CHAIN or not self.m.work.spend():
            return None
        if isinstance(e, ast.Subscript):
            found = self._slice_source(e) or rowmasks.masked_source(self, e)
            if found is None and not isinstance(e.slice, (ast.Tuple, ast.Slice, ast.Constant)):
                found = self._source(e.slice, depth + 1)  # x[idx]: as many rows as idx has entries
            if found is None and isinstance(e.slice, ast.Constant) and isinstance(e.value, ast.Call):
                found = self._source(e.value, depth + 1)  # jnp.nonzero(m)[0]
            return found
        if isinstance(e, ast.Name):
            return self._name_source(e, depth)
        if isinstance(e, ast.Call):
            return self._call_source(e, depth)
        if isinstance(e, ast.BinOp):
            return self._source(e.left, depth + 1) or self._source(e.right, depth + 1)
        if isinstance(e, ast.UnaryOp):
            return self._source(e.operand, depth + 1)
        if isinstance(e, ast.Attribute) and e.attr in ("T", "mT"):
            return self._source(e.value, depth + 1)
        return None

    def _slice_source(self, sub: ast.Subscript) -> Optional[ShapeSource]:
        parts = sub.slice.elts if isinstance(sub.slice, ast.Tuple) else [sub.slice]
        for p in parts:
            if isinstance(p, ast.Slice) and self.width_varies(p):
                names = sorted(self._width_names(p))
                every = bool(names) and all(self._counter(n) for n in names)
                follows = " and ".join(f"`{n}`" for n in names) or "the loop"
                return ShapeSource("slice", f"is sliced to a width that follows {follows}", every, "width")
        return None

    def _width_names(self, sl: ast.Slice) -> set:
        out: set = set()
        for bound in (sl.lower, sl.upper):
            if bound is None:
                continue
            for n in walk(bound):
                if isinstance(n, ast.Name) and self.name_varies(n.id):
                    out.add(n.id)
        return out

    def _loop_of_target(self, name: str):
        for lp in self.loops:
            if name in lp.target_names():
                return lp
        return None

    def _counter(self, name: str, depth: int = 0) -> bool:
        """Whether ``name`` takes a new value in every iteration: the target of a ``range`` loop
        (or the index of ``enumerate``), a name augmented by ``+=``/``-=`` in the loop, or one
        assigned sums and products of those."""
        if depth > L.VARIANCE_CHAIN:
            return False
        lp = self._loop_of_target(name)
        if lp is not None:
            node = lp.node
            it = loop_iterable(node)
            if isinstance(node, (ast.For, ast.AsyncFor)):
                target = node.target
            else:
                gens = getattr(node, "generators", None)
                target = gens[0].target if gens else None
            if it is None or target is None:
                return False
            if isinstance(target, ast.Name):
                return loopfacts.range_call(self.m, it, self.scope) is not None
            if (isinstance(target, ast.Tuple) and len(target.elts) == 2 and isinstance(it, ast.Call) and it.args
                    and self.m.resolve(it.func, self.scope) == "builtins.enumerate"):
                first, second = target.elts
                if isinstance(first, ast.Name) and first.id == name:
                    return True
                return (isinstance(second, ast.Name) and second.id == name
                        and loopfacts.range_call(self.m, it.args[0], self.scope) is not None)
            return False
        evs = [ev for ev in self.scope.events.get(name, ()) if any(lp in self.loops for lp in ev.loops)]
        if not evs:
            return False
        for ev in evs:
            if ev.kind == "aug":
                if not isinstance(ev.node.op, (ast.Add, ast.Sub)):
                    return False
            elif ev.plain_assign:
                atoms: dict = {}
                poly = polynomial(ev.value, atoms)
                if poly is None:
                    return False
                moving = [a for a in atoms.values() if not (isinstance(a, ast.Name) and not self.name_varies(a.id))]
                if not moving or not all(isinstance(a, ast.Name) and self._counter(a.id, depth + 1) for a in moving):
                    return False
            else:
                return False
        return True

    def _name_source(self, name: ast.Name, depth: int) -> Optional[ShapeSource]:
        ev = self.m.binding(name.id, self.scope, _pos(name))
        if ev is None or ev.scope is not self.scope:
            return None
        if ev.kind == "for":
            lp = self._loop_of_target(name.id)
            if lp is not None and ev.path is None and loop_iterable(lp.node) is ev.value:
                return self._drawn(ev.value, depth + 1)
            return None
        if ev.kind == "assign" and any(lp in self.loops for lp in ev.loops):
            found = (self._source(ev.value, depth + 1) if ev.plain_assign else None) or collected.collected_list(
                self, name, ev)
            if found is not None or ev.plain_assign:
                return found
        carried = rowmasks.carried_selection(self, name)
        if carried is not None:
            return carried
        every = self._growing(name)
        if every is not None:
            return ShapeSource("stacked", f"is a list that gets {'an item' if every else 'items'} in the loop (a pytree "
                                          "with more leaves)", every, f"length of `{name.id}`")
        return None

    def _call_source(self, call: ast.Call, depth: int) -> Optional[ShapeSource]:
        qn = self.m.resolve(call.func, self.scope)
        func = ast.unparse(call.func)
        if qn in N.SHAPE_ARGS:
            for idx, kw in N.SHAPE_ARGS[qn]:
                a = call_arg(call, idx, kw)
                d = self._size_driver(a, depth + 1) if a is not None else None
                if d is not None:
                    return ShapeSource("built", f"is built by `{func}` with a size that follows {d.what}", d.every, d.per)
            return None
        if qn in N.LIST_TO_ARRAY and call.args and not isinstance(call.args[0], ast.Starred):
            src = call.args[0]
            if isinstance(src, ast.Name):
                every = self._growing(src)
                if every is not None:
                    return ShapeSource("stacked", f"is `{func}` of `{src.id}`, a list that gets "
                                                  f"{'an item' if every else 'items'} in the loop", every,
                                       f"length of `{src.id}`")
                ev = self.m.binding(src.id, self.scope, _pos(src))
                found = collected.collected_list(self, src, ev, func) if ev is not None else None
                if found is not None:
                    return found
            ragged = self._ragged_list(src, depth + 1)
            if ragged is not None:
                return ShapeSource("converted", f"is `{func}` of a list made from {ragged}, whose length changes from item to item",
                                   False, "length")
            return None
        if qn in N.SIZE_FUNCS or (qn == "jax.numpy.where" and len(call.args) == 1):
            if any(kw.arg in ("size", None) for kw in call.keywords):
                return None
            for i in N.SIZE_FUNCS.get(qn, (0,)):
                a = call_arg(call, i, None)
                if a is not None and any(isinstance(n, ast.Name) and self.name_varies(n.id) for n in walk(a)):
                    return ShapeSource("sized", f"comes from `{func}` without `size=`, whose output size depends on the "
                                                "values, which change per iteration", False, "count")
            return None
        if isinstance(call.func, ast.Attribute) and call.func.attr in ("astype", "copy", "block_until_ready"):
            return self._source(call.func.value, depth + 1)
        return None

    def _size_driver(self, e: ast.AST, depth: int) -> Optional[SizeDriver]:
        """What an integer size (or a tuple of sizes) follows, when it changes per iteration."""
        if depth > L.VARIANCE_CHAIN or not self.m.work.spend():
            return None
        if isinstance(e, (ast.Tuple, ast.List)):
            for elt in e.elts:
                d = self._size_driver(elt.value if isinstance(elt, ast.Starred) else elt, depth + 1)
                if d is not None:
                    return d
            return None
        if isinstance(e, ast.Name):
            if not self.name_varies(e.id):
                return None
            if self._counter(e.id):
                return SizeDriver(f"`{e.id}`", True, f"value of `{e.id}`")
            if self._loop_of_target(e.id) is not None:
                # ``for n in sizes``: a sweep over sizes, each compiled once on purpose (like a
                # sweep over configurations that reuses one seed, JAX503); but the sizes of a
                # list of arrays the loop then walks as data (``_drawn``) count
                return SizeDriver(f"`{e.id}`", False, f"value of `{e.id}`") if self._item_sizes else None
            ev = self.m.binding(e.id, self.scope, _pos(e))
            if ev is not None and ev.plain_assign and ev.scope is self.scope and any(lp in self.loops for lp in ev.loops):
                d = self._size_driver(ev.value, depth + 1)
                if d is not None:
                    return SizeDriver(f"`{e.id}` ({d.what})" if d.what != f"`{e.id}`" else d.what, d.every,
                                   f"value of `{e.id}`")
            return None
        if isinstance(e, ast.BinOp):
            if not isinstance(e.op, (ast.Add, ast.Sub, ast.Mult)):
                return None  # n // 64, n % 4, 2 ** k: bucketed or periodic sizes, a few shapes
            return self._size_driver(e.left, depth + 1) or self._size_driver(e.right, depth + 1)
        if isinstance(e, ast.UnaryOp) and isinstance(e.op, (ast.USub, ast.UAdd)):
            return self._size_driver(e.operand, depth + 1)
        if isinstance(e, ast.Call) and e.args and not e.keywords:
            qn = self.m.resolve(e.func, self.scope)
            if qn == "builtins.len" and len(e.args) == 1:
                return self._length_driver(e.args[0], depth + 1)
            if qn in ("builtins.int", "builtins.abs") and len(e.args) == 1:
                return self._size_driver(e.args[0], depth + 1)
            if qn in ("builtins.max", "builtins.min"):
                for a in e.args:
                    d = self._size_driver(a, depth + 1)
                    if d is not None:
                        return SizeDriver(d.what, False, d.per)  # clamped: the same size past the bound
            return None
        base = e.value if isinstance(e, ast.Subscript) else e
        if isinstance(base, ast.Attribute) and base.attr in ("shape", "size"):
            src = self._source(base.value, depth + 1)
            if src is not None:
                return SizeDriver(f"the shape of `{ast.unparse(base.value)}`", src.every, src.per)
        return None

    def _length_driver(self, x: ast.AST, depth: int) -> Optional[SizeDriver]:
        src = self._source(x, depth)
        if src is not None:
            return SizeDriver(f"the length of `{ast.unparse(x)}`", src.every, src.per)
        ragged = self._ragged_list(x, depth + 1)
        if ragged is not None:
            return SizeDriver(f"the length of {ragged}", False, "length")
        return None

    def _ragged_list(self, e: ast.AST, depth: int) -> Optional[str]:
        """Text naming a Python list whose length changes from one iteration to the next because
        it is made from per-item data: words split from a string, tokens encoded from text, the
        items that pass a test on per-iteration values, ``range`` of a changing count. A list
        comprehension over a loop item (a batch from a loader) is not: its length is unknown."""
        if depth > L.VARIANCE_CHAIN or not self.m.work.spend():
            return None
        if isinstance(e, ast.Name):
            ev = self.m.binding(e.id, self.scope, _pos(e))
            if ev is not None and ev.plain_assign and ev.scope is self.scope and any(lp in self.loops for lp in ev.loops):
                inner = self._ragged_list(ev.value, depth + 1)
                return f"`{e.id}` ({inner})" if inner is not None else None
            return None
        if isinstance(e, (ast.ListComp, ast.GeneratorExp)):
            gen = e.generators[0]
            inner = self._ragged_list(gen.iter, depth + 1)
            if inner is not None:
                return inner
            for test in (t for g in e.generators for t in g.ifs):
                if any(isinstance(n, ast.Name) and self.name_varies(n.id) for n in walk(test)):
                    return f"the items that pass `{ast.unparse(test)}`"
            rng = loopfacts.range_call(self.m, gen.iter, self.scope)
            if rng is not None and rng.args and not rng.keywords:
                d = self._size_driver(rng.args[1] if len(rng.args) > 1 else rng.args[0], depth + 1)
                if d is not None:
                    return f"`{ast.unparse(gen.iter)}`"
            return None
        if isinstance(e, ast.Call):
            f = e.func
            qn = self.m.resolve(f, self.scope)
            if qn in ("builtins.list", "builtins.tuple", "builtins.sorted") and len(e.args) == 1:
                return self._ragged_list(e.args[0], depth + 1)
            if isinstance(f, ast.Attribute) and f.attr in N.RAGGED_METHODS:
                parts = [f.value] + list(e.args)
                if any(isinstance(n, ast.Name) and self.name_varies(n.id) for p in parts for n in walk(p)):
                    return f"`{ast.unparse(e)}`"
        return None

    def _growing(self, name: ast.Name) -> Optional[bool]:
        """Whether a list bound before the loops gets items in them (``append``/``extend``/
        ``insert``) and is never emptied, shortened or rebound there: True when an item is added
        in every iteration, False when under an ``if``. None when the list does not grow, or when
        an ``if len(name) ...`` around the call picks fixed lengths (a buffer flushed when full)."""
        m = self.m
        ev = m.binding(name.id, self.scope, _pos(name))
        if ev is None or ev.scope is not self.scope or any(lp in self.loops for lp in ev.loops):
            return None
        value = ev.value if ev.plain_assign else None
        if not (isinstance(value, ast.List) or (isinstance(value, ast.Call) and not value.args and not value.keywords
                                                  and m.resolve(value.func, self.scope) == "builtins.list")):
            return None
        for other in self.scope.events.get(name.id, ()):
            if other is not ev and any(lp in self.loops for lp in other.loops):
                return None  # rebound in the loop: reset
        ctx = self._call_ctx
        if ctx is not None:
            for test, _depth in ctx.guards:
                for n in walk(test):
                    if (isinstance(n, ast.Call) and m.resolve(n.func, self.scope) == "builtins.len" and n.args
                            and isinstance(n.args[0], ast.Name) and n.args[0].id == name.id):
                        return None
        def uses(method: str):
            for c in m.calls_by_name.get(method, ()):
                f = c.func
                if not (isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == name.id):
                    continue
                cctx = m.context(c)
                if cctx is None or cctx.scope is not self.scope or not any(lp in self.loops for lp in cctx.loops):
                    continue
                if m.binding(name.id, self.scope, _pos(f.value)) is ev:
                    yield c, cctx
        for method in ("pop", "popleft", "clear", "remove"):
            if any(True for _ in uses(method)):
                return None
        for target, kind in m.stores:
            if isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name) and target.value.id == name.id:
                tctx = m.context(target)
                if tctx is None or any(lp in self.loops for lp in tctx.loops):
                    return None
        grows = False
        every = True
        for method in ("append", "extend", "insert"):
            for c, cctx in uses(method):
                grows = True
                first = next(i for i, lp in enumerate(cctx.loops) if lp in self.loops)
                if method == "extend" or any(d > first for _t, d in cctx.guards):
                    every = False
        return every if grows else None

    def _drawn(self, it: ast.AST, depth: int) -> Optional[ShapeSource]:
        """An item of a list of arrays whose sizes differ: a comprehension (bound to a name, or
        iterated directly) whose element's shape follows the comprehension's own variable."""
        if depth > L.VARIANCE_CHAIN:
            return None
        comp, label = it, None
        if isinstance(it, ast.Name):
            ev = self.m.binding(it.id, self.scope, _pos(it))
            if ev is None or not ev.plain_assign or ev.scope is not self.scope:
                return None
            comp, label = ev.value, it.id
        if isinstance(comp, ast.Call) and self.m.resolve(comp.func, self.scope) in ("builtins.list", "builtins.tuple") \
                and len(comp.args) == 1:
            comp = comp.args[0]
        if not isinstance(comp, (ast.ListComp, ast.GeneratorExp)) or len(comp.generators) != 1:
            return None
        loop = next((lp for lp in self.m.loops if lp.node is comp), None)
        if loop is None:
            return None
        inner = ShapeVariance(self.m, self.scope, (loop,), self.bounded_iters)
        inner._item_sizes = True
        elt = comp.elt
        src = inner._source(elt, depth + 1)
        size_expr = None
        if src is None and isinstance(elt, ast.Call):
            size_expr = inner._sized_through_callee(elt)
            d = inner._size_driver(size_expr, depth + 1) if size_expr is not None else None
            if d is not None:
                src = ShapeSource("built", f"is built by `{ast.unparse(elt.func)}` with a size that follows {d.what}",
                                  False, d.per)
        elif isinstance(elt, ast.Call):
            qn = self.m.resolve(elt.func, self.scope)
            if qn in N.SHAPE_ARGS:
                for idx, kw in N.SHAPE_ARGS[qn]:
                    a = call_arg(elt, idx, kw)
                    if a is not None and inner._size_driver(a, depth + 1) is not None:
                        size_expr = a
                        break
        if src is None:
            return None
        gen = comp.generators[0]
        sizes = count = None
        values = self._int_literals(gen.iter)
        if (values is not None and isinstance(size_expr, ast.Name) and isinstance(gen.target, ast.Name)
                and size_expr.id == gen.target.id):
            sizes = tuple(dict.fromkeys(values))
            if len(sizes) < 2:
                return None  # one size: one compilation
        else:
            count = loopfacts.known_trips(self.m, gen.iter, self.scope)
        where = f"`{label}`" if label else "a list"
        return ShapeSource("drawn", f"is drawn from {where}, arrays of different shapes (`{ast.unparse(elt)}` for "
                                    f"`{ast.unparse(gen.target)}` in `{ast.unparse(gen.iter)}`)", False,
                           "shape", sizes, count)

    def _int_literals(self, it: ast.AST) -> Optional[list]:
        if isinstance(it, ast.Name):
            ev = self.m.binding(it.id, self.scope, _pos(it))
            if ev is None or not ev.plain_assign or len(ev.scope.events.get(it.id, ())) != 1:
                return None
            it = ev.value
        if isinstance(it, (ast.Tuple, ast.List)) and it.elts and all(
                isinstance(e, ast.Constant) and isinstance(e.value, int) and not isinstance(e.value, bool)
                for e in it.elts):
            return [e.value for e in it.elts]
        return None

    def _sized_through_callee(self, call: ast.Call) -> Optional[ast.AST]:
        """The argument of a call of a function of this module that uses the matching parameter
        as a size: of an array constructor in its body, or of a slice it returns (``def make(n):
        return jnp.ones(n)``)."""
        for f in callables.local_functions(self.m, call.func, self.scope)[:1]:
            params = list(f.params)
            if f.is_method and params:
                params = params[1:]
            for i, a in enumerate(call.args):
                if isinstance(a, ast.Starred) or i >= len(params):
                    break
                if self._param_is_size(f, params[i]):
                    return a
            for kw in call.keywords:
                if kw.arg is not None and kw.arg in f.params and self._param_is_size(f, kw.arg):
                    return kw.value
        return None

    def _param_is_size(self, f, param: str) -> bool:
        def direct(e) -> bool:
            if isinstance(e, ast.Name):
                return e.id == param
            if isinstance(e, (ast.Tuple, ast.List)):
                return any(direct(x) for x in e.elts)
            if isinstance(e, ast.BinOp) and isinstance(e.op, (ast.Add, ast.Sub, ast.Mult)):
                return direct(e.left) or direct(e.right)
            return False
        for c in f.calls:
            if not self.m.work.spend():
                return False
            qn = self.m.resolve(c.func, f.scope)
            for idx, kw in N.SHAPE_ARGS.get(qn, ()):
                a = call_arg(c, idx, kw)
                if a is not None and direct(a):
                    return True
        for sub in f.subscripts:
            parts = sub.slice.elts if isinstance(sub.slice, ast.Tuple) else [sub.slice]
            if any(isinstance(p, ast.Slice) and (direct(p.upper) or direct(p.lower)) for p in parts if p is not None):
                return True
        return False

    # -- the last batch of a sweep in fixed-size steps, and state fed back through a call

    def feeds_back(self, call: ast.Call) -> bool:
        """Whether the loop binds the call's result to a name it passes the call (``w = step(w, g)``,
        ``state, m = update(state, batch)``): each iteration continues from the last, the shape
        of an iterative algorithm (an optimizer, a simulation, a decoder) rather than a sweep of
        independent calls whose results are collected."""
        args = set()
        for a in list(call.args) + [kw.value for kw in call.keywords]:
            a = a.value if isinstance(a, ast.Starred) else a
            for n in walk(a):
                if isinstance(n, ast.Name):
                    args.add(n.id)
        if not args:
            return False
        for name in args:
            for ev in self.scope.events.get(name, ()):
                if ev.kind not in ("assign", "aug") or not any(lp in self.loops for lp in ev.loops):
                    continue
                value = ev.node.value if ev.kind == "aug" else ev.value
                if value is not None and any(n is call for n in walk(value)):
                    return True
        return False
