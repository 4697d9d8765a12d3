"""Donation through equinox's ``filter_jit``: ``donate="all"`` donates every array argument (and
``"all-except-first"`` all but those of the first), so the advice for a step whose results rebind
its model and optimizer state (``model, opt_state, loss = make_step(model, opt_state, x, y)``)
must also be safe for the arguments it does not rebind: the batch ``x``, ``y`` is deleted too.
JAX deletes donated buffers under ``filter_jit`` as under ``jax.jit`` (it compiles through it;
measured with equinox 0.13.8 on CPU: reading a donated argument after the call raises).

:func:`donate_option` picks the option (``"all"``, or ``"all-except-first"`` where the first
argument is the one not rebound) and says, as an unknown fact, where an argument that option
would donate is read again after the call (in the rest of the loop's body, or at the top of the
next iteration before it is bound again). Functions of the model (``m``).
"""

from __future__ import annotations

import ast
from . import proof
from .donation import RebindingCall, _first_read, _key, _walk_statements


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
    for a in others:
        name = a.id if isinstance(a, ast.Name) else None
        if name is None or name in rebound:
            continue
        read = _first_read(after, name)
        if read is None and name not in renewed and not _binds(after, name):
            read = _first_read(before, name)  # the next iteration, before anything binds it again
        if read is not None:
            return option, proof.unknown("old-unread", f"equinox's `donate=\"{option}\"` would also donate `{name}`, "
                                                       f"which line {read.lineno} reads after the call")
    return option, None


_COMPOUND = (ast.If, ast.For, ast.AsyncFor, ast.While, ast.With, ast.AsyncWith, ast.Try)


def _binds(stmts: list, name: str) -> bool:
    return any(isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Store)
               for s in stmts for n in ast.walk(s))
