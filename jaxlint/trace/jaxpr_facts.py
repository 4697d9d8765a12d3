"""Facts about one traced program, read from its closed jaxpr (no retracing).

The jaxpr is the one JAX built on the function's first trace, so the facts are
those of the avals of its first call, and the user's Python code does not run
again (a second ``jax.make_jaxpr`` would repeat its side effects).
"""

from __future__ import annotations

from typing import Any

LARGE_CONSTANT_BYTES = 1 << 20  # 1 MiB
CALLBACKS = ("pure_callback", "io_callback", "debug_callback", "debug_print")


def _subjaxprs(eqn) -> list:
    """Jaxprs nested in an equation's parameters (jit, cond branches, scan/while bodies)."""
    out = []
    stack = list(eqn.params.values())
    while stack:
        v = stack.pop()
        if isinstance(v, (tuple, list)):
            stack.extend(v)
        elif hasattr(v, "eqns") and hasattr(v, "invars"):
            out.append((v, ()))
        elif hasattr(v, "jaxpr") and hasattr(v, "consts") and hasattr(v.jaxpr, "eqns"):
            out.append((v.jaxpr, v.consts))
    return out


def _site(eqn, user_files) -> tuple:
    from .adapters.base import eqn_site

    return eqn_site(eqn)


def _constant(value: Any):
    nbytes = getattr(value, "nbytes", None)
    if not isinstance(nbytes, int) or nbytes <= LARGE_CONSTANT_BYTES:
        return None
    return {"bytes": nbytes, "shape": list(getattr(value, "shape", ())), "dtype": str(getattr(value, "dtype", "?"))}


def jaxpr_facts(closed_jaxpr: Any, extra_consts: Any, user_files) -> dict:
    """Equations (nested ones included), host callbacks, large constants, float64 ops."""
    equations = 0
    float64 = 0
    callbacks = []
    constants = []
    seen_consts: set = set()

    def consts(values):
        for c in values or ():
            if id(c) in seen_consts:
                continue
            seen_consts.add(id(c))
            fact = _constant(c)
            if fact is not None:
                constants.append(fact)

    consts(extra_consts)
    stack = [(closed_jaxpr.jaxpr, closed_jaxpr.consts)]
    seen = set()
    while stack:
        jaxpr, jconsts = stack.pop()
        if id(jaxpr) in seen:
            continue
        seen.add(id(jaxpr))
        consts(jconsts)
        for eqn in jaxpr.eqns:
            equations += 1
            name = eqn.primitive.name
            if name in CALLBACKS:
                file, line = _site(eqn, user_files)
                callbacks.append({"primitive": name, "file": file, "line": line})
            for v in eqn.outvars:
                if str(getattr(getattr(v, "aval", None), "dtype", "")) == "float64":
                    float64 += 1
                    break
            for literal in eqn.invars:
                fact = _constant(getattr(literal, "val", None))
                if fact is not None and id(literal) not in seen_consts:
                    seen_consts.add(id(literal))
                    constants.append(fact)
            stack.extend(_subjaxprs(eqn))
    constants.sort(key=lambda c: -c["bytes"])
    return {"equations": equations, "callbacks": callbacks, "large_constants": constants, "float64_ops": float64}
