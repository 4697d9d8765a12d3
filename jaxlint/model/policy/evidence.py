"""Evidence: the facts (and conventions) a finding's decision rests on, as short sentences.

Rules attach these to their findings (``Finding.evidence``); ``--format json`` lists them and
``jaxlint check --explain-finding PATH:LINE`` prints them, so a user who disagrees with a finding
can see which fact, or which name-based convention (jaxlint/conventions.py), decided it. This
module turns model records into sentences; it decides nothing (the rules ask it, as they ask
the model).
"""

from __future__ import annotations

import ast
from typing import Optional

from ..facts import fetches
from ..python.syntax import unparse


def repetition(rep, cur) -> list:
    """Why a function is taken to run again and again (a ``Repetition`` chain), one sentence per
    link; the last one names the convention when a name decided it."""
    out: list = []
    depth = 0
    while rep is not None and depth < 8:
        name = f"`{rep.func.name}`"
        kind = rep.kind
        if kind == "caller":
            out.append(f"{name} is called from `{rep.via.name}` on line {rep.call.lineno}")
            rep = rep.inner
            depth += 1
            continue
        if kind == "loop":
            out.append(f"{name} is called in the loop on line {rep.loop.node.lineno}")
        elif kind == "elsewhere":
            out.append(f"{name} is called in a loop in another module of the project ({rep.name})")
        elif kind == "inherited":
            out.append(f"{name} is called as `self.{rep.func.name}(...)` in a loop of a base class, in another "
                       f"module of the project ({rep.name}), which the class does not override")
        elif kind == "factory":
            out.append(f"{name} is made and handed out by `{rep.via.name}`: its users call it again and again")
        elif kind == "helper":
            out.append(f"{name} does little but one compiled call: a helper of the kind called once per batch")
        elif kind == "step_name":
            key = "step-methods" if cur.matches("step-methods", rep.func.name) else "step-affixes"
            out.append(f"{name} is called nowhere in this module; its name matches the convention `{key}` "
                       "(a method called once per step)")
        elif kind == "timed":
            first = f"on line {rep.warm.lineno}, then again " if rep.warm is not None else ""
            out.append(f"{name} is called {first}on line {rep.call.lineno} under {rep.name}: the measured call "
                       "runs after a first one (or is repeated by `%timeit`)")
        elif kind == "step_param":
            out.append(f"{name} is called nowhere that says how often; it takes `{rep.name}`, which matches the "
                       "convention `step-params` (the training step)")
        break
    return out


def traced_context(model, line: int) -> list:
    """For a finding on ``line`` whose rule recorded no evidence: the traced function it is in and
    how that function comes to be traced (``under jax.jit``, ``in a jax.lax.scan body``, ``when
    called from `step` under jax.jit``), the fact every traced-code rule rests on."""
    best = None
    for f in model.functions:
        node = f.node
        start, end = getattr(node, "lineno", 0), getattr(node, "end_lineno", 0) or 0
        if start <= line <= end and (best is None or start >= best.node.lineno):
            best = f
    if best is None or not best.traced:
        return []
    how = model.staging.how_staged(best)
    if how == "when traced":
        how = "when a transform traces it"
    return [f"it is in `{best.name}`, which runs {how}: once per trace, on abstract values"]


def logger(model, call: Optional[ast.AST]) -> list:
    """When a log call's receiver was taken for a logger by its name alone (``logger-receivers``)."""
    if not isinstance(call, ast.Call) or not isinstance(call.func, ast.Attribute):
        return []
    recv = call.func.value
    qn = model.resolve(call.func, model.scope_at(call))
    if qn is not None or fetches.bound_logger(model, recv):
        return []
    spelled = unparse(recv, 40).rsplit(".", 1)[-1]
    if model.conventions.matches("logger-receivers", spelled):
        return [f"`{unparse(recv, 40)}` is taken for a logger by its name (convention `logger-receivers`)"]
    return []
