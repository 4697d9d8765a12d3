"""Donation through equinox's ``filter_jit``: ``donate="all"`` donates every array argument (and
``"all-except-first"`` all but those of the first), so the advice for a step whose results rebind
its model and optimizer state (``model, opt_state, loss = make_step(model, opt_state, x, y)``)
must also be safe for the arguments it does not rebind: the batch ``x``, ``y`` is deleted too.
JAX deletes donated buffers under ``filter_jit`` as under ``jax.jit`` (it compiles through it;
measured with equinox 0.13.8 on CPU: reading a donated argument after the call raises).

:func:`donate_option` picks the option (``"all"``, or ``"all-except-first"`` where the first
argument is the one not rebound) and says, as an unknown fact, where an argument that option
would donate is needed again: one the iteration does not bind anew (a whole data set, a key, passed
again at the next call: measured, the second call fails with "Buffer has been deleted or
donated"), or one read after the call (in the rest of the loop's body, or after the loop). Judged on
29 such steps of the review sets: 10 of the first version's advice would have crashed there.
Functions of the model (``m``).
"""

from __future__ import annotations

import ast
from . import proof
from .donation import RebindingCall, _first_read, _key
from ..python.syntax import walk_statements as _walk_statements
from ..python.syntax import unparse


def donate_option(m, r: RebindingCall) -> tuple:
    """``(option, fact)``: the ``donate=`` value to advise for ``r`` (a call of a ``filter_jit``
    function), and a :mod:`.proof` fact ``old-unread`` unknown when that option would also delete
    an argument the loop reads after the call; None when nothing else is read."""
    args = [a for a in r.call.args if not isinstance(a, ast.Starred)]
    rebound = set(r.names)
    first = _key(args[0]) if args else None
    option = "all-except-first" if first is not None and first not in rebound else "all"
    others = [a for i, a in enumerate(args) if not (option == "all-except-first" and i == 0)]
    others += [k.value for k in r.call.keywords]
    flat = [st for st in _walk_statements(getattr(r.loop.node, "body", [])) if not isinstance(st, _COMPOUND)]
    at = next((i for i, st in enumerate(flat) if any(n is r.call for n in ast.walk(st))), None)
    if at is None:
        return option, None
    after, before = flat[at + 1:], flat[:at]
    target = getattr(r.loop.node, "target", None)
    renewed = {n.id for n in ast.walk(target) if isinstance(n, ast.Name)} if target is not None else set()
    renewed |= {n.id for st in before for n in ast.walk(st) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    for a in others:
        if isinstance(a, ast.Constant) or _key(a) in rebound:
            continue
        root = a
        while isinstance(root, (ast.Subscript, ast.Attribute)):
            root = root.value  # ``batch["x"]``: an item of a value the iteration binds anew
        name = root.id if isinstance(root, ast.Name) else None
        if name is None or name not in renewed:
            # the same array again at the next call (a whole data set, a key, a configuration's arrays)
            return option, proof.unknown("old-unread", f"equinox's `donate=\"{option}\"` would also donate "
                                                       f"`{unparse(a, 30)}`, which the next iteration passes again")
        read = _first_read(after, name) or _read_after_loop(m, r.loop.node, name)
        if read is not None:
            return option, proof.unknown("old-unread", f"equinox's `donate=\"{option}\"` would also donate `{name}`, "
                                                       f"which line {read.lineno} reads after the call")
    return option, None


def _read_after_loop(m, loop: ast.AST, name: str):
    """A read of ``name`` after ``loop`` in the block around it, before a statement binds it again."""
    stmt = m.stmt_of.get(id(loop), loop)
    for block in _blocks_holding(m, stmt):
        i = next((k for k, s in enumerate(block) if s is stmt), None)
        if i is not None:
            return _first_read(block[i + 1:], name)
    return None


def _blocks_holding(m, stmt: ast.stmt):
    f = m.function_at(stmt)
    root = f.node if f is not None else m.tree
    for node in ast.walk(root):
        for field in ("body", "orelse", "finalbody"):
            block = getattr(node, field, None)
            if isinstance(block, list) and any(s is stmt for s in block):
                yield block


_COMPOUND = (ast.If, ast.For, ast.AsyncFor, ast.While, ast.With, ast.AsyncWith, ast.Try)
