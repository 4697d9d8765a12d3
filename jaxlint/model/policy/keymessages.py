"""The words of the PRNG key findings (JAX502, JAX503): their messages and evidence, built from
the key records of jaxlint/model/facts/keys.py, keydraws.py and keyhandoffs.py.

Moved here from jaxlint_rules/rng.py: the rule decides whether a key use is a finding; this module
only says it. Each function returns ``(message, evidence)``: the message a sequence of strings and
:class:`~jaxlint.rule.Line` citations (``Rule.finding`` renders it), the evidence short sentences.
"""

from __future__ import annotations

import os

from ...rule import Line
from ..facts import keys
from ..python.syntax import unparse

SPLIT = "split"
FOLD_IN = "fold_in"

# Why a finding in test code is opt-in (Finding.opt_in), in a few words.
TEST_INPUTS = "test inputs from one key"
TEST_LOOP_VARIES = "test loop varies otherwise"
SAME_CASE = ", and the test checks the same case over and over"
# two flax ``init`` calls from one key (facts/keypairs.init_pair): why such a pair is opt-in
MODULE_INITS = {
    "same": ("the same module initialised twice from one key gives the same weights twice, as a target network's "
             "copy is made on purpose: whether these two should differ is not shown"),
    "other": ("flax derives each parameter's key from the key and the parameter's path: whether the two modules "
              "share parameter paths (and so weights) is not shown"),
    "apply-other": ("flax derives each dropout key from the key and the layer's path: whether the two modules share "
                    "layer paths (and so masks) is not shown"),
}


def _draws(fn: str) -> bool:
    return keys.is_draw(fn)


def spelled(use) -> str:
    """How a key use reads in a message: the call, and for a local helper the draw it forwards to."""
    if use.via is not None:
        return f"`{use.spelling}` (which calls `jax.random.{use.fn}`)"
    return f"`{use.spelling}`"


def why_repeats(rep) -> str:
    """The evidence that a function repeats, in a few words."""
    while rep is not None and rep.kind == "caller":
        if rep.inner is None or rep.inner.kind == "caller":
            return f"called from `{rep.via.name}`, which repeats"
        inner = why_repeats(rep.inner)
        return f"called from `{rep.via.name}`, {inner}"
    if rep is None:
        return "it repeats"
    if rep.kind == "step_name":
        return "a per-step method"
    if rep.kind == "loop":
        return f"called in the loop on line {rep.loop.node.lineno}"
    if rep.kind in ("elsewhere", "inherited"):
        base = "of a base class " if rep.kind == "inherited" else ""
        return f"called in a loop {base}in `{os.path.basename(rep.name)}`"
    if rep.kind == "step_param":
        return f"it takes the training step `{rep.name}`"
    return "it repeats"


def _same_each_time(fn: str, what: str) -> str:
    if fn == SPLIT:
        return what + " (`split` returns the same subkeys each time)"
    if fn == FOLD_IN:
        return what + " (`fold_in` with the same data returns the same key each time)"
    return what


def pair(prev, use, bound, seeded, init=None) -> tuple:
    """Two uses of one binding of a key: ``bound`` the line it was bound on (or None), ``seeded``
    the literal-seed key maker it comes from (or None), ``init`` how two flax ``init`` calls relate
    (``facts/keypairs.init_pair``: "same", "class" or "other"; None otherwise)."""
    facts = [f"`{prev.spelling}` on line {prev.call.lineno} and `{use.spelling}` on line "
             f"{use.call.lineno} read the same binding of `{use.shown}`"
             + (f" (line {bound})" if bound else "") + ", and no split rebinds it between them "
             "on every path",
             "the two uses are not exclusive branches, different derivations (`fold_in` with "
             "different data) or index draws meant to pair two arrays"]
    if seeded is not None:
        facts.append(f"`{use.shown}` comes from `{unparse(seeded, 30)}` on line {seeded.lineno} "
                     "with no loop in between: the two draws are correlated, and the same numbers "
                     "on every run")
    return _pair_message(prev, use, init), facts


_INITS = {  # two flax ``init`` calls from one key, by how the modules relate
    "class": "the two modules are instances of one class, and flax derives each parameter's key from this key and the "
             "parameter's path, so they start with the same weights wherever their shapes agree",
    "same": "initialising the same module again from this key gives the same weights again",
    "other": "flax derives each parameter's key from this key and the parameter's path, so the two modules start "
             "with the same weights wherever their parameter paths and shapes coincide",
}


_APPLIES = {  # two flax ``apply`` calls that drop out with one key, by how the modules relate
    "apply-same": "applying the same module again with this dropout key drops the same units again",
    "apply-class": "the two modules are instances of one class, and flax derives each dropout key from this key and "
                   "the layer's path, so both passes drop the same units wherever their shapes agree",
    "apply-other": "flax derives each dropout key from this key and the layer's path, so the two passes drop the "
                   "same units wherever their layer paths and shapes coincide",
}


def _pair_message(prev, use, init=None) -> tuple:
    k = use.shown
    head = (f"PRNG key `{k}` was already used by {spelled(prev)} on ", Line(prev.call.lineno), "; ")
    if init in _APPLIES:  # two flax module applies that drop out (facts/keypairs.init_pair)
        what = (f"{_APPLIES[init]}; split the key (`k1, k2 = jax.random.split({k})`) and give each `apply` its own "
                "subkey")
    elif init in _INITS:  # two flax module inits (facts/keypairs.init_pair)
        what = (f"{_INITS[init]}; split the key (`k1, k2 = jax.random.split({k})`) and initialise each module "
                "from its own subkey")
    elif _draws(prev.fn) and _draws(use.fn):
        what = ("both draws get the same random bits, so their results are identical or correlated; "
                f"split the key (`k1, k2 = jax.random.split({k})`) and draw from each subkey once")
    elif prev.fn == FOLD_IN and use.fn == FOLD_IN:
        what = ("`fold_in` with the same data returns the same key again, so draws from the two keys repeat; "
                "fold in different data")
    elif prev.fn == SPLIT and use.fn == SPLIT:
        what = ("splitting it again returns the same subkeys as there (the first keys of `split(key, n)` are "
                "the same for every n), so draws from them repeat; "
                f"split `{k}` once into all the keys needed, or split a subkey")
    elif not _draws(prev.fn) and not _draws(use.fn):
        what = ("`fold_in(key, i)` is the same key as `split(key, n)[i]` for i < n, so draws from them "
                "repeat; fold in a subkey instead, or data no smaller than the split's count")
    elif _draws(use.fn):
        what = ("this draw uses the random bits the derived keys were made from, so it is correlated with "
                "them; draw from one of the derived keys instead (split one more if needed)")
    else:
        what = ("the keys derived here are made from the same random bits as that draw, so they are "
                f"correlated with it; split `{k}` first and draw from a subkey")
    return head + (what,)


def loop_reuse(use, loop, stepping: bool, tail: str) -> tuple:
    """A key use in a loop that never rebinds the key: ``stepping`` whether the loop runs steps
    (else it keeps each iteration's draw), ``tail`` words added for test code."""
    k = use.shown
    what = _same_each_time(use.fn, "every iteration draws the same random numbers") + tail
    facts = [f"`{use.spelling}` on line {use.call.lineno} reads `{k}`, which no statement of the loop on line "
             f"{loop.node.lineno} rebinds",
             (f"the loop on line {loop.node.lineno} runs steps (not a few literal items)" if stepping else
              f"the loop on line {loop.node.lineno} keeps each iteration's draw beside the others")
             + ", and the key is not folded with data that changes per iteration"]
    split = (f"`{k}, sub = jax.random.split({k})`" if use.index is None else
             f"`key = {k}` before the loop, `key, sub = jax.random.split(key)` in it")
    return ((f"PRNG key `{k}` is never replaced in the loop on ", Line(loop.node.lineno),
             f", so {what}; split it in the loop ({split}) and "
             f"use `sub`, or derive a key per step (`jax.random.fold_in({k}, step)`)"), facts)


def handoff(h, loop, stepping: bool, tail: str) -> tuple:
    """A key the loop never replaces handed to a callee (``h`` a keyhandoffs record): the message,
    the evidence, and whether the callee's drawing is proven."""
    k, callee, line = h.arg.id, f"`{unparse(h.call.func, 30)}`", h.call.lineno
    draw = h.draw
    facts = [f"{callee} on line {line} gets `{k}`, which no statement of the loop on line "
             f"{loop.node.lineno} rebinds (not split with the new key carried, not folded with the step)",
             f"the loop on line {loop.node.lineno} runs steps (not a few literal items)" if stepping
             else f"the loop on line {loop.node.lineno} is timed, and its iterations carry state"]
    if draw is not None and draw.remote is not None:
        path, at, spelling, chain = draw.remote
        where = f"`{spelling}` on line {at} of `{os.path.basename(path)}`"
        does: tuple = (f"{callee} draws from it ({where})",)
        facts.append(f"{callee} runs " + " -> ".join(f"`{g}`" for g in chain) + " of another module of the "
                     f"project, which draws from the key or a key split from it: {where}")
    elif draw is not None and draw.proven:
        via = " -> ".join(f"`{g.name}`" for g in draw.chain)
        does = (f"{callee} draws from it (`jax.random.{draw.fn}`" if draw.fn in keys.SAMPLERS else
                       f"{callee} draws from it (`{unparse(draw.call.func, 30)}`", " on ", Line(draw.call.lineno), ")")
        facts.append(f"{via} draws from the key or a key split from it: `{unparse(draw.call.func, 30)}` "
                     f"on line {draw.call.lineno}")
    else:
        where = (f"{callee} is not a function of this module" if draw is None else
                 f"{callee} hands the key to `{unparse(draw.call.func, 30)}` on line {draw.call.lineno}, "
                 "not a function of this module")
        does = (f"{callee} may draw from it",)
        facts.append(f"unknown: {where}, so whether it draws from `{k}` is not proven")
    what = "every iteration draws the same random numbers" + tail
    return ((f"PRNG key `{k}` is never replaced in the loop on ", Line(loop.node.lineno), " and ") + does +
            (f", so {what}; split it in the loop (`{k}, sub = jax.random.split({k})`) and pass `sub`",), facts)


def fixed_key(draw, method: str) -> tuple:
    """A key made once (at module level, or in ``method`` on ``self``) and drawn from by a function
    that runs more than once (``draw`` a keydraws.FixedKeyDraw)."""
    k = unparse(draw.key)
    where = {"module": "at module level", "default": f"at module level as the default of `{draw.func.name}`'s "
             f"parameter `{k}`, which no call passes"}.get(draw.where, f"in `{method}`")
    how, func, via = draw.how, draw.func, ""
    if how[0] == "via":  # nested and differentiated by ``how[1]`` on every call of it
        func, how = how[1], how[2]
        via = f" and runs `{draw.func.name}` on every call"
    name = f"`{func.name}`"
    if how[0] == "sites":
        every_line = sorted({c.lineno for c in how[1]})
        lines = every_line[:3]
        count = "twice" if len(how[1]) == 2 else f"{len(how[1])} times"
        runs: tuple = (f"{name} is called {count}, on ",)
        for i, n in enumerate(lines):
            runs += ((", " if i else ""), Line(n))
        if len(every_line) > len(lines):
            runs += (f" and {len(every_line) - len(lines)} more",)
    elif how[0] == "loop":
        runs = (f"{name} is called in the loop on ", Line(how[2].node.lineno))
    else:
        runs = (f"{name} runs again and again ({why_repeats(how[1])})",)
    runs += ((via,) if via else ())
    what = _same_each_time(draw.fn, "every call draws the same random numbers")
    if draw.via is not None:
        what += f" (the same masks of `{unparse(draw.via.func, 40)}` on line {draw.via.lineno})"
    fix = ("pass a key in and split it for each call" if draw.where in ("module", "default") else
           f"split it on each call and store one half back (`{k}, sub = jax.random.split({k})`)")
    facts = [f"`{k}` is made once {where} (line {draw.made.lineno}) and no code replaces it",
             f"`{draw.func.name}` draws from it and runs more than once"]
    if draw.via is not None:
        facts.append(f"`{unparse(draw.call.func, 30)}` hands it to the flax module, whose "
                     f"`{unparse(draw.via.func, 40)}` (line {draw.via.lineno}) draws from it: proven "
                     "from the values known along the calls from `apply`")
    return ((f"PRNG key `{k}` is made once ", where, " (", Line(draw.made.lineno), ") and never replaced, and ")
            + runs + (f", so {what}; {fix}",), facts)


def constant_key_in_loop(call, loop, tail: str) -> tuple:
    return (f"`{unparse(call, 30)}` with a constant seed inside the loop on ", Line(loop.node.lineno),
            " makes the same key every iteration, so every "
            f"iteration draws the same random numbers{tail}; create the key once before "
            "the loop and split it per iteration, or derive one with `jax.random.fold_in(key, step)`")


def constant_key_per_step(call, f, why: str) -> str:
    return (f"`{unparse(call, 30)}` with a constant seed in `{f.name}`, which runs at every "
            f"step ({why}), makes the same key on every call, so every step "
            "draws the same random numbers; make the key once, pass it in and split it per "
            "step, or derive one with `jax.random.fold_in(key, step)`")


def device_loop_why(f, loop, chain: list) -> tuple:
    """(why, evidence) of a function whose compiled code runs at every iteration of the device
    loop ``loop``: its body, or called from the body through ``chain`` (the body first)."""
    head = f"`{unparse(loop.func, 30)}` on line {loop.lineno}"
    if not chain:
        return (f"the body of {head}", [f"`{f.name}` is passed as the body of {head}: its compiled code runs "
                                        "at every iteration of that loop"])
    path = " -> ".join(f"`{g.name}`" for g in (*chain, f))
    return (f"called from the body of {head}",
            [f"`{chain[0].name}` is passed as the body of {head}: its compiled code runs at every iteration",
             f"it calls {path}: the call runs in every iteration too"])


def row_key(d) -> tuple:
    """A draw in a vmapped function from a key every row shares (``d`` a keyrows.RowKeyDraw)."""
    k, src, vmap = d.key, d.source, d.vmap
    name = f"`{d.func.name}`" if d.func.name != "<lambda>" else "the mapped lambda"
    why = (f"{name} closes over it, so vmap broadcasts it" if d.how == "closed" else
           "its `in_axes` entry is None, so vmap broadcasts it")
    split = f" (`{k}` is split from `{src}` inside the function: the same subkeys on every row)" if k != src else ""
    facts = [f"`{unparse(d.call.func, 30)}` on line {d.call.lineno} draws from `{k}`{split}",
             f"`{src}` is not mapped by the `{unparse(vmap.func, 30)}` on line {vmap.lineno}: {why}",
             "the draw's result is read"]
    return ((f"PRNG key `{src}` is the same for every row of the `{unparse(vmap.func, 30)}` on ", Line(vmap.lineno),
             f" ({why}), so every row draws the same random numbers; split it into one key per row "
             f"(`jax.random.split({src}, n)`) and map over those keys"), facts)
