"""Keys made once as a parameter's default: ``def dropout_layer(x, p, key=jax.random.PRNGKey(0))``.

Python evaluates a default when the ``def`` runs, once: every call that does not pass the
parameter gets the same key object, and JAX's random functions are pure in the key, so every
such call draws the same numbers (d2l's dropout layer: the same mask in both layers and at every
step). Three facts make the finding (:func:`default_key_draws`):

* the parameter holds a key: its default is ``jax.random.PRNGKey(...)``/``jax.random.key(...)``,
  or any call when the function hands the parameter to a ``jax.random`` draw (a key or an error);
* the function draws from it (:func:`~jaxlint.model.facts.keyhandoffs.parameter_draw`, proven);
* it runs more than once without it: two calls of this module that do not pass it, or one in a
  loop or in a function that runs again and again (:func:`~jaxlint.model.facts.frequency.repeats`).

A call that passes ``**kwargs`` may pass the key, and does not count. Functions of the model
(``m``), imported explicitly: JAX503 (jaxlint_rules/rng.py) asks them.
"""

from __future__ import annotations

import ast
from typing import Optional

from . import frequency, keyhandoffs
from .keys import KEY_MAKERS


class DefaultKey:
    """``func``'s parameter ``param`` with the default ``default`` (a call), drawn from by ``draw``
    (a :class:`~jaxlint.model.facts.keyhandoffs.Draw`) and not passed by ``calls`` (why it repeats: ``why``)."""

    __slots__ = ("func", "param", "default", "draw", "calls", "why", "named")

    def __init__(self, func, param: str, default: ast.Call, draw, calls: list, why: str, named: bool = False):
        self.func, self.param, self.default, self.draw, self.calls, self.why = func, param, default, draw, calls, why
        self.named = named  # only a naming convention says the one caller runs again and again


def default_key_draws(m) -> list:
    """Every :class:`DefaultKey` of the module (see the module docstring)."""
    out: list = []
    for f in m.functions:
        node = f.node
        if isinstance(node, ast.Lambda):
            continue
        a = node.args
        positional = [*a.posonlyargs, *a.args]
        pairs = list(zip(positional[len(positional) - len(a.defaults):], a.defaults))
        pairs += [(p, d) for p, d in zip(a.kwonlyargs, a.kw_defaults) if d is not None]
        for arg, default in pairs:
            if not isinstance(default, ast.Call):
                continue
            found = _default_key(m, f, arg.arg, positional.index(arg) if arg in positional else None, default)
            if found is not None:
                out.append(found)
    return out


def _default_key(m, f, param: str, index: Optional[int], default: ast.Call) -> Optional[DefaultKey]:
    draw = keyhandoffs.parameter_draw(m, f, param, 0)
    if draw is None or not draw.proven:
        return None
    scope = f.scope.parent if f.scope.parent is not None else m.module_scope
    maker = m.resolve(default.func, scope)
    if maker not in KEY_MAKERS and (draw.chain != [f] or draw.call is None):
        return None  # a key only through a draw of another function: the default may be something else
    shift = 1 if f.is_method else 0
    omitted = []
    for call, caller in frequency.callers(m, f):
        if any(isinstance(x, ast.Starred) for x in call.args) or any(k.arg is None for k in call.keywords):
            continue  # ``*args``/``**kwargs``: the key may be in them
        passed = any(k.arg == param for k in call.keywords) or (
            index is not None and len(call.args) + shift > index)
        if not passed:
            omitted.append((call, caller))
    if not omitted:
        return None
    if len(omitted) >= 2:
        why = f"the calls on lines {', '.join(str(c.lineno) for c, _ in omitted[:6])} pass no `{param}`"
    else:
        call, caller = omitted[0]
        ctx = m.context(call)
        if ctx is not None and ctx.loops:
            why = f"the call on line {call.lineno}, in the loop on line {ctx.loops[-1].node.lineno}, passes no `{param}`"
        else:
            rep = frequency.repeats(m, caller) if caller is not None else None
            if rep is None:
                return None
            why = f"the call on line {call.lineno} passes no `{param}`, and `{caller.name}` runs again and again"
            return DefaultKey(f, param, default, draw, [call], why, named=rep.kind in ("step_name", "step_param"))
    return DefaultKey(f, param, default, draw, [c for c, _ in omitted], why)
