"""Donated arguments: a compiled function jitted with ``donate_argnums``/``donate_argnames`` may
reuse the buffers of those arguments for its outputs, and JAX deletes them when the call runs
(measured on jax 0.10.2, CPU too: reading one after the call raises "Array has been deleted").
Which arguments a call donates, and reads of a donated variable after the call before it is
bound again (asked by JAX804); and step-loop calls whose results rebind their own arguments
with no donation declared (asked by JAX803). Functions of the model (``m``).
"""

from __future__ import annotations

import ast
from typing import Iterator, Optional

from ... import names as N
from . import callables, donatedparts, proof
from . import values as V
from .jaxrecords import JitWrap
from ..python.syntax import unparse
from ..python.syntax import walk_statements as _walk_statements


class UseAfterDonation:
    """``read`` (a Name) reads ``name`` after ``call`` donated it (``wrap``: the jit that donates)."""

    __slots__ = ("call", "name", "read", "wrap")

    def __init__(self, call: ast.Call, name: str, read: ast.Name, wrap: JitWrap):
        self.call, self.name, self.read, self.wrap = call, name, read, wrap


_DELETING = frozenset({"jax.jit", "jax.pmap", "equinox.filter_jit"})  # filter_jit compiles through jax.jit


def deletes_donated(m, wrap: JitWrap) -> bool:
    """Whether the wrapper is ``jax.jit``/``jax.pmap`` or equinox's ``filter_jit``, which delete a
    donated array. Not flax's ``nnx.jit`` (it writes the new state back into the module object
    passed in). (A step summarized from another module's factory carries the answer.)"""
    if wrap.deletes_donated is not None:
        return wrap.deletes_donated
    node = wrap.node
    exprs = [node.func] if isinstance(node, ast.Call) else list(getattr(node, "decorator_list", ()))
    scope = m.scope_at(node)
    for e in exprs:
        if isinstance(e, ast.Call):
            e = e.args[0] if m.resolve(e.func, scope) == N.PARTIAL and e.args else e.func
        if m.resolve(e, scope) in _DELETING:
            return True
    return False


def _made_by_a_call(m, func: ast.AST, scope) -> bool:
    """``func`` is a name bound, in a plain assignment, to the result of a call."""
    if not isinstance(func, ast.Name):
        return False
    ev = m.binding(func.id, scope, (func.lineno, func.col_offset))
    return ev is not None and ev.plain_assign and isinstance(ev.value, ast.Call)


def donated_names(m, call: ast.Call, wrap: JitWrap) -> list:
    """The plain variables ``call`` passes in donated positions (``f(params, g)`` with
    ``donate_argnums=0``: ``params``) that certainly hold JAX arrays: a donated NumPy batch is
    copied to the device and that copy donated, the host array stays readable. A keyword
    argument of a ``jax.pmap`` function is not donated."""
    if not (wrap.donate_argnums or wrap.donate_argnames) or not deletes_donated(m, wrap):
        return []
    params, shift, _, _ = wrap.static_layout(call)
    positions = {i if i >= 0 else i + len(params) for i in wrap.donate_argnums}
    positions |= {i for i, p in enumerate(params) if p in wrap.donate_argnames}
    names = set(wrap.donate_argnames) | {params[i] for i in positions if 0 <= i < len(params)}
    out = []
    scope = m.scope_at(call)
    for i, arg in enumerate(call.args):
        if isinstance(arg, ast.Starred):
            break
        if i + shift in positions and isinstance(arg, ast.Name) and _holds_jax(m, arg, scope):
            out.append(arg.id)
    if wrap.kind == "pmap":
        return out  # pmap's donate_argnums covers positional arguments only (measured: a keyword one is kept)
    for kw in call.keywords:
        if kw.arg in names and isinstance(kw.value, ast.Name) and _holds_jax(m, kw.value, scope):
            out.append(kw.value.id)
    return out


# Calls whose result has another shape than their array argument: an output so computed cannot reuse
# the donated buffer (JAX deletes a donated array only when an output of its shape and dtype takes it).
_REDUCTIONS = frozenset({"sum", "mean", "max", "min", "prod", "std", "var", "norm", "argmax", "argmin", "all", "any",
                         "vdot", "dot", "size", "shape", "len", "float", "int"})


def donation_used(m, wrap: JitWrap, name: str, param: Optional[str]) -> "proof.Fact":
    """Whether the buffer of the donated argument ``name`` (the wrapped function's parameter
    ``param``) can be reused by an output, which is when JAX deletes it: proven when a ``return``
    of the wrapped def gives a value computed from that parameter (not only through a reduction);
    unknown when the wrapped function is not a def of this module (a library's ``model.apply``
    donating its parameters returns logits: JAX warns "Some donated buffers were not usable" and
    keeps them)."""
    funcs = [wrap.func] if wrap.func is not None else (
        callables.local_functions(m, wrap.target, m.scope_at(wrap.node)) if wrap.target is not None else [])
    spelled = wrap.func.name if wrap.func is not None else (
        unparse(wrap.target, 40) if wrap.target is not None else wrap.spelling)
    if len(funcs) != 1 or param is None:
        return proof.unknown("donation-used", f"`{spelled}` is not a function of this module: whether one of its "
                                              f"outputs can take the buffer of `{name}` (same shape and dtype) is "
                                              "not known, and JAX deletes a donated array only then")
    f = funcs[0]
    node = f.node
    derived = {param}
    if not isinstance(node, ast.Lambda):
        assigns = [n for n in _walk_statements(node.body) if isinstance(n, (ast.Assign, ast.AnnAssign, ast.AugAssign))
                   and n.value is not None]
        for _ in range(3):  # names computed from the parameter, through up to three rounds of assignments
            before = len(derived)
            for stmt in assigns:
                if _from(stmt.value, derived):
                    targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
                    derived |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
            if len(derived) == before:
                break
    rets = [node.body] if isinstance(node, ast.Lambda) else callables.returned_values(node)
    for r in rets:
        parts = r.elts if isinstance(r, (ast.Tuple, ast.List)) else r.values if isinstance(r, ast.Dict) else [r]
        if any(_from(p, derived) for p in parts):
            return proof.proven("donation-used", f"`{f.name}` returns a value computed from `{param}`")
    return proof.unknown("donation-used", f"no output of `{f.name}` is computed from `{param}`: JAX keeps a donated "
                                          "array no output can reuse (\"Some donated buffers were not usable\")")


def _from(expr: ast.AST, names: set) -> bool:
    """Whether ``expr`` reads one of ``names`` other than only through a reduction (``jnp.sum(p)``,
    ``p.mean()``, ``float(p)``, ``p.shape``: values of another shape than ``p``)."""
    stack = [expr]
    while stack:
        n = stack.pop()
        if isinstance(n, ast.Name):
            if n.id in names:
                return True
            continue
        if isinstance(n, ast.Call):
            f = n.func
            attr = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else None
            if attr in _REDUCTIONS:
                continue
        if isinstance(n, ast.Attribute) and n.attr in ("shape", "size", "ndim", "dtype"):
            continue
        stack.extend(ast.iter_child_nodes(n))
    return False


def donated_param(m, call: ast.Call, wrap: JitWrap, name: str) -> Optional[str]:
    """The wrapped function's parameter that ``call`` passes the variable ``name`` as."""
    params, shift, _, _ = wrap.static_layout(call)
    for i, arg in enumerate(call.args):
        if isinstance(arg, ast.Starred):
            break
        if isinstance(arg, ast.Name) and arg.id == name and 0 <= i + shift < len(params):
            return params[i + shift]
    for kw in call.keywords:
        if kw.arg is not None and isinstance(kw.value, ast.Name) and kw.value.id == name:
            return kw.arg
    return None


def _holds_jax(m, name: ast.Name, scope) -> bool:
    """A JAX value, or a name bound to a container display of them (``{"w": jnp.zeros(...)}``)."""
    if V.is_jax(m, name, scope):
        return True
    ev = m.binding(name.id, scope, (name.lineno, name.col_offset))
    return ev is not None and ev.plain_assign and isinstance(ev.value, (ast.Dict, ast.List, ast.Tuple)) and \
        V.holds_jax(m, ev.value, ev.scope)


def uses_after_donation(m) -> list:
    """Every :class:`UseAfterDonation` of the module, found once: in each block of statements, a
    statement that calls a donating function with a variable, and a later statement of the same
    block that reads the variable before any statement binds it again."""
    memo = m.facts.after_donation
    if memo is not None:
        return memo
    out: list = []
    if any(w.donate_argnums or w.donate_argnames for w in m.jit_wraps):
        for block in _blocks(m.tree):
            for i, stmt in enumerate(block):
                for call, name, wrap in _donating_calls(m, stmt):
                    if name in _bound_by(stmt):
                        continue  # ``params = update(params, g)``: the name holds the new value
                    read = _first_read(block[i + 1:], name)
                    if read is not None:
                        out.append(UseAfterDonation(call, name, read, wrap))
    m.facts.after_donation = out
    return out


class RebindingCall:
    """``call`` (in every iteration of ``loop``) passes ``names`` and its results rebind them, and
    ``wrap`` (a ``jax.jit``/``jax.pmap``) declares no donation."""

    __slots__ = ("call", "names", "positions", "keywords", "wrap", "loop")

    def __init__(self, call: ast.Call, names: list, positions: list, keywords: list, wrap: JitWrap, loop):
        self.call, self.names, self.positions, self.keywords = call, names, positions, keywords
        self.wrap, self.loop = wrap, loop


def rebinding_without_donation(m) -> list:
    """Every :class:`RebindingCall`: an assignment ``state = step(state, batch)`` /
    ``params, opt, loss = update(params, opt, batch)`` in a step loop (the innermost loop that
    dispatches JAX work, :func:`loops.hot_loop`; not in traced code, where a Python loop runs once
    while tracing and the inner jit is inlined), where ``step`` is a ``jax.jit``/``jax.pmap``
    function with no ``donate_argnums``/``donate_argnames`` (nor ``**kwargs``) and the plain
    names passed in non-static positions are among the names the assignment binds. Positions
    are those ``donate_argnums`` would take (a decorated method called as ``self.m(...)``
    counts ``self``)."""
    memo = m.facts.rebinding_calls
    if memo is not None:
        return memo
    from . import loops

    out: list = []
    # cheapest tests first: a jit in the module, an assignment of a call in a loop (the model's
    # bindings, no walk of the tree), a name the call is given bound again
    bound_by: dict = {}  # id(call) -> (call, names the assignment binds)
    # without a jit of its own, a module's step can only be another module's factory's product
    # (``step = make_train_step(model)`` before the loop): a name bound to a call's result
    own = bool(m.jit_wraps)
    for scope in (m.scopes if own or m.project is not None else ()):
        for evs in scope.events.values():
            for b in evs:
                if b.loops and b.kind == "assign" and isinstance(b.value, ast.Call) and isinstance(b.node, ast.Name) \
                        and (own or _made_by_a_call(m, b.value.func, scope)):
                    bound_by.setdefault(id(b.value), (b.value, set()))[1].add(b.node.id)
    # ``self.state, metrics = self.p_train_step(self.state, batch)``: attribute targets (a trainer class)
    for loop in (m.loops if m.jit_wraps else ()):
        for stmt in _walk_statements(getattr(loop.node, "body", [])):
            if isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Call):
                keys = {k for k in _target_keys(stmt.targets) if "." in k}
                if keys:
                    bound_by.setdefault(id(stmt.value), (stmt.value, set()))[1].update(keys)
    for call, bound in sorted(bound_by.values(), key=lambda cb: (cb[0].lineno, cb[0].col_offset)):
        given = {_key(a) for a in call.args if _key(a) is not None}
        given |= {_key(k.value) for k in call.keywords if _key(k.value) is not None}
        if not bound & given:
            continue
        ctx = m.context(call)
        if ctx is None:
            continue
        wrap = callables.callable_info(m, call.func, m.scope_at(call))
        if not isinstance(wrap, JitWrap) or wrap.donation_declared or not deletes_donated(m, wrap):
            continue
        loop = loops.hot_loop(m, ctx)
        if loop is None or m.in_traced_code(call):
            continue  # a loop in traced code runs once, at trace time: the call is inlined
        shift = wrap.static_layout(call)[1]
        static_args, static_names = wrap.static_positions(call)
        names, positions, keywords = [], [], []
        for i, arg in enumerate(call.args):
            if isinstance(arg, ast.Starred):
                break
            k = _key(arg)
            if k is not None and k in bound and i not in static_args and k not in names:
                names.append(k)
                positions.append(i + shift)
        for kw in call.keywords:
            k = _key(kw.value)
            if (kw.arg is not None and k is not None and k in bound
                    and kw.arg not in static_names and wrap.kind != "pmap" and k not in names):
                names.append(k)
                keywords.append(kw.arg)
        if names:
            out.append(RebindingCall(call, names, positions, keywords, wrap, loop))
    m.facts.rebinding_calls = out
    return out


def old_values_unread(m, r: RebindingCall) -> "proof.Fact":
    """Whether donating what ``r`` rebinds is safe as far as this module shows: unknown when another name or a
    container keeps one of the values (``best = params``, ``params = avg = init()``, ``target = params`` or both
    bound to one source, ``history.append(params)``), when another call of the step passes one without rebinding
    it, or when a caller of this module reads what it passed after the call; proven otherwise."""
    names = set(r.names)
    f = m.function_at(r.call)
    body = f.node.body if f is not None else m.tree.body
    # ``model_params = params``, ``target_params = params``: one source, shared buffers (fresh AF's target networks)
    sources = {_key(st.value) for st in _walk_statements(body) if isinstance(st, ast.Assign) and len(st.targets) == 1
               and _key(st.targets[0]) in names and _key(st.value) is not None} - names
    for stmt in _walk_statements(body):
        if isinstance(stmt, (ast.Assign, ast.AnnAssign)) and stmt.value is not None:
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            bound, stored = _plain_targets(targets)
            root = _refers(stmt.value, names) or (_refers(stmt.value, sources) if not _target_keys(targets) & names
                                                  else None)
            if ((root is not None and not (root in _target_keys(targets) and len(targets) == 1)) or (
                    root is None and not _target_keys(targets) & names and _may_share(stmt.value, names))) \
                    and _alias_read(m, r, stmt, None if stored else bound - names, body):
                return proof.unknown("old-unread", f"`{unparse(stmt, 50)}` on line {stmt.lineno} keeps what the step "
                                                   "would donate under another name: donating would delete what it holds")
            if (len(targets) > 1 and bound & names and stmt.value is not r.call) or (
                    root is not None and _target_keys(targets) & names - {root} and root in names):
                return proof.unknown("old-unread", f"`{unparse(stmt, 50)}` on line {stmt.lineno} binds the same value to "
                                                   "two names: donating one deletes the other's")
        for c in ast.walk(stmt) if isinstance(stmt, (ast.Expr, ast.Assign)) else ():
            if (isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute) and c.func.attr in _KEEPERS
                    and any(_may_share(a, names) for a in c.args)):
                # ``queue.put(jax.device_put(unreplicate(state.params), dev))``: a value computed from it may
                # share its buffers (another thread reads them while the next call donates them)
                return proof.unknown("old-unread", f"`{unparse(c, 50)}` on line {c.lineno} keeps a value computed "
                                                   "from what the step would donate, which may share its buffers")
        if isinstance(stmt, (ast.Assign, ast.AnnAssign)) and stmt.value is not None and stmt.value is not r.call \
                and _target_keys(stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]) & names:
            twice = _twice(stmt.value)
            if twice is not None:
                return proof.unknown("old-unread", f"`{unparse(stmt, 50)}` on line {stmt.lineno} puts `{twice}` in "
                                                   "twice: JAX refuses to donate the same buffer twice")
    kept = donatedparts.kept_part(m, names, r.loop.node, body)
    if kept is not None:
        return proof.unknown("old-unread", f"`{unparse(kept[0], 50)}` on line {kept[0].lineno} puts `{kept[1]}`, which "
                                           "the loop does not rebind, into what the step would donate: donating "
                                           "would delete it before the next iteration passes it again")
    for c in m.calls_by_name.get(_last(r.call.func), ()):
        if c is r.call or callables.callable_info(m, c.func, m.scope_at(c)) is not r.wrap:
            continue
        shift = r.wrap.static_layout(c)[1]
        passed = {_key(a) for i, a in enumerate(c.args) if _key(a) is not None and i + shift in r.positions}
        passed |= {_key(k.value) for k in c.keywords if k.arg in r.keywords and _key(k.value) is not None}
        if passed and not passed <= _names_bound_by_call(m, c):
            return proof.unknown("old-unread", f"`{unparse(c.func, 30)}` is also called on line {c.lineno} without "
                                               "rebinding what it is given: donating would delete those values there")
    if f is not None and f.parent is None:
        given = [i for i, p in enumerate(f.params) if p in names]
        for c in m.calls_by_name.get(f.name, ()):
            for i in given:
                a = c.args[i] if i < len(c.args) and not any(isinstance(x, ast.Starred) for x in c.args[:i + 1]) else None
                if isinstance(a, ast.Name) and _read_after(m, c, a.id):
                    return proof.unknown("old-unread", f"the call of `{f.name}` on line {c.lineno} passes `{a.id}` and "
                                                       "reads it again afterwards: donating inside deletes it")
    return proof.proven("old-unread", "no other name or container in its function keeps the rebound values, every "
                                      "call of the step rebinds them, and no caller in this module reads what it "
                                      "passed")


_KEEPERS = frozenset({"append", "extend", "insert", "add", "put", "put_nowait", "setdefault"})
# Calls that may give back their argument's own buffers (device_put, a tree map, asarray), or the same leaves in a
# new container (fresh AJ's `hk.data_structures.to_immutable_dict(params)`, AX's `t.replace(params=opt.target.params)`).
_PASS_THROUGH = frozenset({"device_put", "unreplicate", "tree_map", "map", "asarray", "block_until_ready", "dict",
                           "copy", "to_immutable_dict", "to_mutable_dict", "freeze", "unfreeze", "FrozenDict", "replace"})


def _may_share(e: ast.AST, names: set) -> bool:
    """Whether ``e`` may hold the buffers of one of ``names``: the name, an attribute or item of it,
    or one of those through a pass-through call (``jax.device_put(unreplicate(state.params), dev)``).
    Any other computation (``loss_fn(params, x)``) makes new arrays."""
    if isinstance(e, ast.Call):
        f = e.func
        last = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
        return last in _PASS_THROUGH and (any(_may_share(a, names) for a in [*e.args, *(k.value for k in e.keywords)])
                                           or (isinstance(f, ast.Attribute) and _may_share(f.value, names)))
    if isinstance(e, (ast.Tuple, ast.List)):
        return any(_may_share(x, names) for x in e.elts)
    if isinstance(e, ast.Dict):
        return any(_may_share(x, names) for x in e.values)
    return _refers(e, names) is not None


def _key(e: ast.AST) -> Optional[str]:
    """How a rebound value is named: a variable (``params``), or an attribute chain of one
    (``self.state``)."""
    if isinstance(e, ast.Name):
        return e.id
    if isinstance(e, ast.Attribute) and _key(e.value) is not None:
        return unparse(e, 200)
    return None


def _refers(e: ast.AST, keys: set) -> Optional[str]:
    """The key of ``keys`` that ``e`` is, or an attribute or item of (``state.params``,
    ``self.state["opt"]``), else None."""
    while True:
        k = _key(e)
        if k is not None and k in keys:
            return k
        if isinstance(e, (ast.Attribute, ast.Subscript)):
            e = e.value
            continue
        return None


def _target_keys(targets: list) -> set:
    out, stack = set(), list(targets)
    while stack:
        t = stack.pop()
        if isinstance(t, (ast.Tuple, ast.List)):
            stack.extend(t.elts)
        elif isinstance(t, ast.Starred):
            stack.append(t.value)
        elif _key(t) is not None:
            out.add(_key(t))
    return out


def _twice(value: ast.AST) -> Optional[str]:
    """A name given twice among the direct parts of a call, tuple or list
    (``TrainingState(params, params, opt_state)``), else None."""
    parts = value.args + [k.value for k in value.keywords] if isinstance(value, ast.Call) else \
        value.elts if isinstance(value, (ast.Tuple, ast.List)) else []
    seen: set = set()
    for p in parts:
        if isinstance(p, ast.Name):
            if p.id in seen:
                return p.id
            seen.add(p.id)
    return None


def _plain_targets(targets: list) -> tuple:
    """(the plain names assignment targets bind, through tuples and lists; whether a target stores into
    an attribute or an item: ``self.best = params``, ``d["p"] = params``)."""
    names, stored, stack = set(), False, list(targets)
    while stack:
        t = stack.pop()
        if isinstance(t, ast.Name):
            names.add(t.id)
        elif isinstance(t, (ast.Tuple, ast.List)):
            stack.extend(t.elts)
        elif isinstance(t, ast.Starred):
            stack.append(t.value)
        else:
            stored = True
    return names, stored


def _alias_read(m, r: RebindingCall, stmt: ast.stmt, aliases: Optional[set], body: list) -> bool:
    """Whether an alias bound by ``stmt`` can be read after a call donated what it holds
    (:func:`_alias_read_during`). One made after the step loop but inside an epoch loop around it
    (``best = state.params`` when the loss improved) holds what the next epoch's calls donate: a read
    after the epoch loop sees a deleted value, unless the alias is bound in every epoch."""
    loop = r.loop.node
    if stmt.lineno > (loop.end_lineno or loop.lineno):
        ctx = m.context(r.call)
        outer = next((lp.node for lp in reversed(ctx.loops if ctx is not None else ())
                      if lp.node is not loop and lp.node.lineno <= stmt.lineno <= (lp.node.end_lineno or 0)), None)
        if outer is not None:
            if aliases is None or any(stmt is x for x in getattr(outer, "body", ())):
                return aliases is None
            end = outer.end_lineno or outer.lineno
            return any(isinstance(n, ast.Name) and n.id in aliases and isinstance(n.ctx, ast.Load) and n.lineno > end
                       and not _rebound_before(body, n, end) for other in _walk_statements(body) for n in ast.walk(other))
    return _alias_read_during(stmt, aliases, loop, r.call, body)


def _alias_read_during(stmt: ast.stmt, aliases: Optional[set], loop: ast.AST, call: ast.Call, body: list) -> bool:
    """Whether an alias bound by ``stmt`` can be read after a call donated what it holds. Made after
    the loop (a value saved at the end): no. Made in the loop after the call (a checkpoint's copy of
    this step's state): only a read between the call and the alias's binding, in the next iteration,
    sees a donated value, or, when it is bound only now and then, a read after the loop. Made before
    the loop: any read from the loop on. An alias stored in a container or an attribute (``aliases``
    None) is not followed: yes, unless it is made after the loop."""
    end = getattr(loop, "end_lineno", None) or loop.lineno
    if stmt.lineno > end:
        return False
    if aliases is None:
        return True  # stored in a container or an attribute: its reads are not followed
    in_loop_after = loop.lineno <= stmt.lineno and stmt.lineno > call.lineno
    # bound at every iteration (directly in the loop's body): after the loop it holds the last step's
    # value, which no call donated; bound under an ``if`` (``best = params`` when the loss improved): an
    # older step's value, which a later call did donate
    every = in_loop_after and any(stmt is x for x in getattr(loop, "body", ()))
    for other in _walk_statements(body):
        if other is stmt:
            continue
        for n in ast.walk(other):
            if not (isinstance(n, ast.Name) and n.id in aliases and isinstance(n.ctx, ast.Load)):
                continue
            if not in_loop_after:
                if n.lineno >= loop.lineno:
                    return True
            elif call.lineno <= n.lineno < stmt.lineno or (n.lineno > end and not every
                                                           and not _rebound_before(body, n, end)):
                return True
    return False


def _rebound_before(body: list, read: ast.Name, after: int) -> bool:
    """Whether a statement of the block that holds ``read``, before it and after line ``after``,
    binds its name again (``params = unreplicate(state)`` then ``save(params)`` after the loop: the
    read sees that binding, not the alias the loop made)."""
    for block in _blocks_of(body):
        for i, stmt in enumerate(block):
            if stmt.lineno <= read.lineno <= (stmt.end_lineno or stmt.lineno) and any(x is read for x in _own_nodes(stmt)):
                return any(b.lineno > after and read.id in _bound_by(b) for b in block[:i])
    return False


def _last(func: ast.AST) -> str:
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""


def _statement_block(m, node: ast.AST) -> Optional[tuple]:
    """(block, index) of the statement of the enclosing function (or module) that holds ``node``."""
    f = m.function_at(node)
    body = f.node.body if f is not None and not isinstance(f.node, ast.Lambda) else m.tree.body
    for block in _blocks_of(body):
        for i, stmt in enumerate(block):
            if stmt.lineno <= node.lineno <= (stmt.end_lineno or stmt.lineno) and any(n is node for n in ast.walk(stmt)):
                if not isinstance(stmt, (ast.If, ast.For, ast.While, ast.With, ast.Try, ast.AsyncFor, ast.AsyncWith)):
                    return block, i
    return None


def _blocks_of(body: list) -> Iterator[list]:
    yield body
    for stmt in _walk_statements(body):
        for field in ("body", "orelse", "finalbody"):
            block = getattr(stmt, field, None)
            if isinstance(block, list) and block and isinstance(block[0], ast.stmt):
                yield block
        for h in getattr(stmt, "handlers", ()):
            yield h.body


def _names_bound_by_call(m, call: ast.Call) -> set:
    found = _statement_block(m, call)
    if not found:
        return set()
    stmt = found[0][found[1]]
    return _bound_by(stmt) | (_target_keys(stmt.targets) if isinstance(stmt, ast.Assign) else set())


def _read_after(m, call: ast.Call, name: str) -> bool:
    found = _statement_block(m, call)
    if found is None:
        return False
    block, i = found
    if name in _bound_by(block[i]):
        return False
    return _first_read(block[i + 1:], name) is not None


def _blocks(tree: ast.AST) -> Iterator[list]:
    for node in ast.walk(tree):
        for field in ("body", "orelse", "finalbody"):
            block = getattr(node, field, None)
            if isinstance(block, list) and block and isinstance(block[0], ast.stmt):
                yield block
        if isinstance(node, ast.Try):
            for h in node.handlers:
                yield h.body


def _own_nodes(stmt: ast.stmt) -> Iterator[ast.AST]:
    """The nodes of a simple statement, not those of nested defs, lambdas or nested blocks."""
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.If, ast.For, ast.AsyncFor,
                         ast.While, ast.With, ast.AsyncWith, ast.Try)):
        return
    stack = [stmt]
    while stack:
        node = stack.pop()
        yield node
        stack.extend(c for c in ast.iter_child_nodes(node) if not isinstance(c, ast.Lambda))


def _donating_calls(m, stmt: ast.stmt) -> Iterator[tuple]:
    for node in _own_nodes(stmt):
        if isinstance(node, ast.Call):
            wrap = callables.callable_info(m, node.func, m.scope_at(node))
            if isinstance(wrap, JitWrap):
                for name in donated_names(m, node, wrap):
                    yield node, name, wrap


def _bound_by(stmt: ast.stmt) -> set:
    return {n.id for n in _own_nodes(stmt) if isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del))}


def _first_read(stmts: list, name: str) -> Optional[ast.Name]:
    """The first read of ``name``'s data in ``stmts`` (their nested blocks included) before a
    statement of the block binds it again; None when it is bound first or never read. Metadata
    (``x.shape``, ``x.dtype``) is no read: it stays available on a deleted array (measured)."""
    for stmt in stmts:
        metadata = {id(n.value) for n in ast.walk(stmt)
                    if isinstance(n, ast.Attribute) and n.attr in N.METADATA_ATTRS}
        reads = sorted((n for n in ast.walk(stmt) if isinstance(n, ast.Name) and n.id == name
                        and isinstance(n.ctx, ast.Load) and id(n) not in metadata),
                       key=lambda n: (n.lineno, n.col_offset))
        binds = [n for n in ast.walk(stmt) if isinstance(n, ast.Name) and n.id == name
                 and isinstance(n.ctx, (ast.Store, ast.Del))]
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue  # a def runs later, if at all
        if reads:
            return reads[0]
        if binds:
            return None
    return None
