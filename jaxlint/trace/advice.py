"""Every retrace reason of a function, compactly, and the fix that follows from it.

Pure text work on what ``collector.Record`` counted (no JAX import): the report, the budget
gates and ``Audit.assert_compiles`` all speak through here.

A function's miss reasons are ``{(reason, argument, before, after): count}`` in the order each
change was first seen (a ``Counter`` keeps insertion order). ``groups`` folds them per
(reason, argument) into the chain of values that argument took, in the order they first
appeared (``f32[32,8] → f32[17,8] → f32[5,8]``), so no change is hidden; ``fix`` turns the
dominant reasons into one line a user can act on.
"""

from __future__ import annotations

import os
import re
from typing import Iterable, Optional

from .collector import DTYPE, RECREATED, SAME, SHAPE, SHARDING, STATIC, STRUCTURE, WEAK_TYPE

# A chain longer than this shows its first values, "…", and its last one, with the count.
MAX_VALUES_SHOWN = 8
# Above this many (reason, argument) groups per function, the rest are summed per reason.
MAX_GROUPS_SHOWN = 8

_AVAL = re.compile(r"^(?P<dtype>[A-Za-z0-9_]+)\[(?P<dims>[^\]]*)\](?P<weak>\{weak\})?$")


def groups(miss_reasons: Iterable) -> list:
    """``[{reason, argument, count, values}]``, one per (reason, argument), most retraces first
    (ties: first seen first). ``miss_reasons``: ``(key, count)`` pairs or a mapping, in the order
    the changes were first seen; ``values``: every distinct value the argument took across those
    changes, in first-seen order (empty for reasons without an argument)."""
    items = miss_reasons.items() if hasattr(miss_reasons, "items") else miss_reasons
    out: dict = {}
    for (reason, arg, before, after), n in items:
        g = out.setdefault((reason, arg), {"reason": reason, "argument": arg, "count": 0, "values": []})
        g["count"] += n
        if arg is None and reason != STRUCTURE:
            continue
        for v in (before, after):
            if v is not None and v not in g["values"]:
                g["values"].append(v)
    return sorted(out.values(), key=lambda g: -g["count"])  # stable: ties keep first-seen order


def from_rows(rows: Iterable) -> list:
    """``groups`` of a report's ``miss_reasons`` rows (``[{reason, argument, before, after, count}]``)."""
    return groups([((r["reason"], r["argument"], r["before"], r["after"]), r["count"]) for r in rows])


def chain(values: list) -> str:
    if len(values) <= MAX_VALUES_SHOWN:
        return " → ".join(values)
    head = values[: MAX_VALUES_SHOWN - 2]
    return " → ".join(head) + f" → … → {values[-1]} ({len(values)} values)"


def group_text(g: dict) -> str:
    """One group as one line: ``shape of `batch` changed 2×: f32[32,8] → f32[17,8] → f32[5,8]``."""
    reason, arg, n, values = g["reason"], g["argument"], g["count"], g["values"]
    lost = f" ({g['seconds']:.2f} s)" if "seconds" in g else ""  # the time its misses lost
    if reason == RECREATED:
        return f"function object re-created {n}×{lost}"
    if arg is None and not values:
        return f"{reason} {n}×{lost}"
    what = f"{reason} of `{arg}`" if arg is not None else f"{reason} (leaves)"
    return f"{what} changed {n}×{lost}: {chain(values)}" if values else f"{what} changed {n}×{lost}"


def lines(gs: list) -> list:
    """Every group as text; past ``MAX_GROUPS_SHOWN`` the rest are summed per reason, naming
    their arguments, so that nothing is dropped silently."""
    out = [group_text(g) for g in gs[:MAX_GROUPS_SHOWN]]
    rest: dict = {}
    for g in gs[MAX_GROUPS_SHOWN:]:
        r = rest.setdefault(g["reason"], [0, []])
        r[0] += g["count"]
        r[1].append(f"`{g['argument']}`" if g["argument"] is not None else "(leaves)")
    for reason, (n, args) in rest.items():
        named = ", ".join(args[:4]) + (f", … ({len(args)} arguments)" if len(args) > 4 else "")
        out.append(f"{reason} of {len(args)} more argument{'s' if len(args) != 1 else ''} changed {n}×: {named}")
    return out


# -- fixes ------------------------------------------------------------------


def _parse(aval: str):
    """(dtype, dims or None, weak) of ``f32[32,8]{weak}``; None when it is not an aval."""
    m = _AVAL.match(aval or "")
    if not m:
        return None
    dims = m.group("dims")
    try:
        shape = tuple(int(d) for d in dims.split(",")) if dims else ()
    except ValueError:
        shape = None  # symbolic dimensions
    return m.group("dtype"), shape, bool(m.group("weak"))


def _pow2(n: int) -> int:
    return 1 if n <= 1 else 1 << (n - 1).bit_length()


def buckets(sizes: Iterable[int]) -> dict:
    """How to cover the sizes one dimension took: ``{"pad": max, "buckets": [...] or None}``.

    Padding to the largest size seen is one compile for all of them. When the sizes differ by
    more than 2× that wastes up to ``max/min`` of the work on the smallest, so power-of-two
    buckets (each size rounded up to the next power of two, the largest capped at the max
    seen) are offered too: at most 2× padding per call, one compile per bucket. They are
    offered only when they need fewer compiles than the sizes seen, else they save nothing.
    """
    sizes = sorted(set(sizes))
    top = sizes[-1]
    out = {"pad": top, "buckets": None}
    if sizes[0] > 0 and top > 2 * sizes[0]:
        bs = sorted({min(_pow2(s), top) for s in sizes})
        if 1 < len(bs) < len(sizes):
            out["buckets"] = bs
    return out


def _shape_fix(arg: str, values: list) -> str:
    parsed = [_parse(v) for v in values]
    shapes = [p[1] for p in parsed if p is not None and p[1] is not None]
    if len(shapes) != len(values) or not shapes:
        return f"give `{arg}` one fixed shape (pad it) so that one compile serves every call"
    if len({len(s) for s in shapes}) > 1:
        ranks = "/".join(str(r) for r in sorted({len(s) for s in shapes}))
        return f"`{arg}` changes rank ({ranks}): reshape it to one rank before the call"
    pads, bucket_parts, compiles = [], [], 1
    for d in range(len(shapes[0])):
        sizes = [s[d] for s in shapes]
        if len(set(sizes)) == 1:
            continue
        b = buckets(sizes)
        pads.append((d, b["pad"]))
        if b["buckets"]:
            bucket_parts.append(f"dim {d} to buckets {'/'.join(str(x) for x in b['buckets'])}")
            compiles *= len(b["buckets"])
    if not pads:
        return f"give `{arg}` one fixed shape so that one compile serves every call"
    if len(pads) == 1:
        target = f"dim {pads[0][0]} of `{arg}` to {pads[0][1]}"
    else:
        target = f"`{arg}` (" + ", ".join(f"dim {d} to {n}" for d, n in pads) + ")"
    seen = ", ".join(dict.fromkeys(_dims(s) for s in shapes))
    text = (f"pad {target}: one compile for the {len(shapes)} shapes traced ({seen}); mask or slice "
            "off the padding")
    if bucket_parts:
        text += (f"; or, to waste less work, pad {' and '.join(bucket_parts)} ({compiles} compiles, "
                 "at most 2× padding per call)")
    return text


def _dims(shape: tuple) -> str:
    return "[" + ",".join(str(d) for d in shape) + "]"


def _static_fix(arg: str, values: list, partitioned: Optional[str] = None) -> str:
    shown = [v for v in values if v != "(not given)"]
    if partitioned:  # the wrapper, not the user, made the argument static
        listing = ", ".join(shown[:MAX_VALUES_SHOWN]) + (" …" if len(shown) > MAX_VALUES_SHOWN else "")
        if bool(shown) and all(_is_number(v) for v in shown):
            return (f"`{partitioned}` treats Python numbers as static, so each value of `{arg}` ({listing}) "
                    f"is one compile: pass it as an array, `jnp.asarray({arg})`, and one compile serves "
                    "every value")
        return (f"`{partitioned}` treats every argument that is not an array as static, so each value of "
                f"`{arg}` ({listing}) is one compile: pass arrays for what changes, or keep its values few")
    if any(v.endswith("(not equal)") for v in values):
        return (f"static `{arg}` looked the same but was unequal between calls (hashed by identity, "
                "or a value that changes): pass the same object, or give its type value-based "
                "__eq__/__hash__ (a frozen dataclass), or make it a traced argument")
    listing = ", ".join(shown[:MAX_VALUES_SHOWN]) + (" …" if len(shown) > MAX_VALUES_SHOWN else "")
    given = (" (and sometimes not given: pass it the same way every call)"
             if "(not given)" in values else "")
    numeric = bool(shown) and all(_is_number(v) for v in shown)
    if numeric:
        return (f"static `{arg}` took {len(shown)} values ({listing}){given}: if it is only used as a "
                "number, drop it from static_argnames/static_argnums and pass it as an array (one "
                "compile serves every value); if it sets a shape or Python control flow, keep the set "
                "of values small (each value is one compile)")
    return (f"static `{arg}` took {len(shown)} values ({listing}){given}: each value is one compile; "
            "use fewer distinct values, or move the choice out of static_argnames (e.g. "
            "`lax.switch` on an index passed as an array)")


def _is_number(text: str) -> bool:
    if text in ("True", "False"):
        return False
    try:
        complex(text)
    except ValueError:
        return False
    return True


def _where(site) -> str:
    file, line = site
    try:
        rel = os.path.relpath(file)
        if not rel.startswith(".."):
            file = rel
    except (ValueError, TypeError):
        pass
    return f"{file}:{line}"


def group_fix(g: dict, created_at=None, partitioned: Optional[str] = None) -> Optional[str]:
    """The fix for one group; ``created_at``: (file, line) of the ``jax.jit`` call, if known;
    ``partitioned``: the wrapper that chose the static arguments (``Record.static_partition``)."""
    reason, arg, values = g["reason"], g["argument"], g["values"]
    if reason == RECREATED:
        where = f" (`jax.jit` at {_where(created_at)})" if created_at else ""
        return (f"hoist the jit{where} out of the loop or function that runs it: create the jitted "
                "function once and reuse it (a fresh lambda, closure or bound method is a new cache key)")
    if reason == SAME:
        return ("the same signature was traced again: something cleared JAX's caches or changed the "
                "context (jax.clear_caches, a jax.config flag, jax.default_device or "
                "jax.default_matmul_precision around the call); keep those fixed between calls")
    name = f"`{arg}`" if arg is not None else "the arguments"
    if reason == SHAPE:
        return _shape_fix(arg, values) if arg is not None else "keep the arguments' shapes fixed"
    if reason == DTYPE:
        dtypes = list(dict.fromkeys(p[0] for p in map(_parse, values) if p is not None))
        seen = "/".join(dtypes) if dtypes else "several dtypes"
        return (f"{name} arrives as {seen}: cast it once at the boundary to one dtype "
                f"(`{arg or 'x'}.astype(...)` or `jnp.asarray({arg or 'x'}, dtype=...)` before the call)")
    if reason == WEAK_TYPE:
        parsed = [p for p in map(_parse, values) if p is not None]
        dtype = next((p[0] for p in parsed if not p[2]), parsed[0][0] if parsed else None)
        target = {"f32": "jnp.float32", "f64": "jnp.float64", "i32": "jnp.int32", "i64": "jnp.int64",
                  "bf16": "jnp.bfloat16", "f16": "jnp.float16"}.get(dtype, "...")
        return (f"{name} is sometimes weakly typed (a Python scalar, or an array made from one) and "
                f"sometimes not: pass "
                f"`jnp.asarray({arg or 'x'}, dtype={target})` every time")
    if reason == STATIC:
        return _static_fix(arg, values, partitioned)
    if reason == STRUCTURE:  # the structures themselves are on the reason line above
        return (f"keep the pytree structure of {name} fixed: pass zeros instead of None, the same keys "
                "and the same number of leaves every call")
    if reason == SHARDING:
        return (f"{name} arrives with different shardings: `jax.device_put` it with one fixed sharding "
                "before the call (or fix in_shardings)")
    return None


def fix(gs: list, created_at=None, partitioned: Optional[str] = None) -> Optional[str]:
    """One line: the fix of each distinct reason, most retraces first (None: nothing to fix)."""
    out = []
    for g in gs:
        text = group_fix(g, created_at, partitioned)
        if text and text not in out:
            out.append(text)
    if not out:
        return None
    return "; also, ".join(out[:3]) + ("; …" if len(out) > 3 else "")


def created_site(rec) -> Optional[tuple]:
    """Where ``rec``'s function was jitted most often (the ``jax.jit`` call in the loop)."""
    sites = getattr(rec, "created_at", None)
    if not sites:
        return None
    return sites.most_common(1)[0][0]


def describe(rec) -> dict:
    """The report keys for one ``Record``: ``reasons`` (the groups, every value) and ``fix``. A
    function a library traces for you (``via``: diffrax's solver tracing your vector field) is
    retraced by that library's calls, so its fix says where the traces come from."""
    gs = groups(rec.miss_reasons)
    text = fix(gs, created_site(rec), getattr(rec, "static_partition", None))
    via = getattr(rec, "via", None)
    if text and via:
        text = f"these traces are made inside `{via}`, from what your code passes it: {text}"
    return {"reasons": gs, "fix": text}


# -- advice for the other hotspots: syncs, uploads, eager dispatches, host callbacks ------------
# A row is a hotspot, and gets a fix, from these counts on (fewer is rarely worth a change).
MIN_SYNCS, MIN_UPLOADS, MIN_EAGER, MIN_CALLBACKS = 10, 2, 10, 10
_TEST_KINDS = ("bool",)


def transfer_fix(row: dict, steps: int = 0) -> Optional[str]:
    """The fix of a line that copied device values to the host ``row["count"]`` times; ``steps``:
    calls of the busiest jitted function (0: none), for "N syncs in M steps"."""
    n = row["count"]
    if n < MIN_SYNCS:
        return None
    per = f"{n:,} syncs in {steps:,} steps" if steps else f"{n:,} syncs"
    if row["kind"] in _TEST_KINDS:
        return (f"{per}, each waiting for the device to decide a branch: test it every N steps, or branch on "
                "device with `jnp.where`/`lax.cond`")
    return (f"{per}, each waiting for the device: sum or keep the values on device and fetch them every N "
            "steps or once after the loop; a Python loop of jitted steps that reads every step can become "
            "one `lax.scan`")


def upload_fix(row: dict, size: str) -> Optional[str]:
    """The fix of a line that copied host data to the device ``row["count"]`` times (``size``: the
    bytes in all, as the report writes them)."""
    n = row["count"]
    if n < MIN_UPLOADS:
        return None
    if row["kind"] == "jit argument":
        return (f"{n:,} copies of NumPy arguments ({size}): if it is the same data every call, "
                "`jax.device_put` it once before the loop; a new batch each step is a copy you need "
                "(put the next one on the device while this step runs)")
    return (f"{n:,} copies ({size}): if it is the same data every time, upload it once before the loop "
            "(`x = jax.device_put(x)`) and reuse the device array; if it changes each step, make it on the "
            "device (inside the jitted step) instead of on the host")


def eager_fix(row: dict) -> Optional[str]:
    """The fix of a line that dispatched ``row["count"]`` JAX operations one by one."""
    n = row["count"]
    if n < MIN_EAGER:
        return None
    return (f"{n:,} dispatches, one per operation: `jax.jit` the function this line is in (or move the "
            "work into the jitted step), so that they run as one compiled program")


def callback_fix(row: dict) -> Optional[str]:
    """The fix of a line whose host callback ran ``row["count"]`` times."""
    n = row["count"]
    if n < MIN_CALLBACKS:
        return None
    return (f"{n:,} host callbacks, each stopping the device for Python: call it every N iterations "
            "under `lax.cond`, or return the values from the loop and read them once")
