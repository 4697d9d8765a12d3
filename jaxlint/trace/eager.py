"""Eager-dispatch hotspots: JAX operations run one by one outside any trace, per source line.

An eager dispatch is one operation JAX runs on concrete arrays outside any ``jit`` trace
(``lr = base * jnp.cos(jnp.pi * step / n)`` between steps is two: ``cos`` and ``multiply``).
On jax 0.9+ it takes one of two routes, and both are observed:

* a primitive bound on concrete arrays reaches the eval trace's ``process_primitive``
  (``x[1]`` binds ``slice`` and ``squeeze``; ``jax.random.split`` binds ``random_split`` ...);
* most of ``jax.numpy`` (``jnp.cos``, ``jnp.mean``, and the ufuncs behind ``x * y``) is JAX's
  own ``jit``-wrapped functions, which dispatch from C++ without a Python frame on a cache hit:
  they are observed at their Python entry (``jnp.ufunc.__call__``, and a forwarding object put in
  place of each ``jit``-wrapped function in JAX's own module namespaces while jaxlint runs).

Only the outermost dispatch counts: what a counted operation, a jitted call of the user's or a
trace does inside is not counted again, and nothing runs while a trace is in progress (JAX's
trace state is not the top-level one, or jaxlint's trace hook is running). Each dispatch is
attributed to the innermost frame in the user's files, with its wall time (the Python
dispatch, the compile of that operation on its first use with a new shape or dtype, and the
launch; not the device computation, which runs asynchronously).

The reporting half of this module (``rows``, ``text_lines``, ``unpredicted``) imports no JAX.
"""

from __future__ import annotations

import functools
import sys
import threading
import time
from typing import Any

from .forwarding import Forwarding

# A line is shown in the text report when it dispatched at least this often (a line that ran a
# few times during set-up is not a hotspot). JSON lists every line.
MIN_DISPATCHES = 10
# A line is a runtime problem no static finding predicted when it dispatched at least
# UNPREDICTED_EAGER times and at least half as often as the busiest jitted function was called
# (it runs about once a step, as a per-step sync does for transfers); with no jitted call to
# compare with, at least UNPREDICTED_EAGER_NO_STEP times (a loop by any reading).
UNPREDICTED_EAGER = 10
UNPREDICTED_EAGER_NO_STEP = 100

_TLS = threading.local()
# The clock, bound when this module is imported (before any hook is installed): jaxlint wraps
# time.perf_counter while it runs, and the per-operation timing must not pay for that wrapper.
_PERF = time.perf_counter  # .inside: a counted dispatch, a jitted call or a trace is running


def inside() -> bool:
    return getattr(_TLS, "inside", False)


# -- hooks (import JAX lazily) ------------------------------------------------------


def install(inst, patch) -> list:
    """Install the eager-dispatch hooks for ``inst`` (the ``Instrumentation``); returns the notes
    for the report's ``partial`` list (empty when every route is observed)."""
    from .adapters import base

    targets, notes = base.eager_targets()
    token = inst._token
    try:
        from jax._src import core as jcore

        clean = jcore.trace_state_clean
        if set(clean.__code__.co_names) == {"trace_ctx", "is_top_level"}:  # jax 0.5+: one call less per dispatch
            clean = jcore.trace_ctx.is_top_level
    except Exception:
        clean = lambda: True  # noqa: E731
    from . import frames

    tls, perf, getframe, hide = _TLS, _PERF, sys._getframe, frames.hide

    def record(frame, name: str, seconds: float) -> None:
        """Attribute one dispatch to the innermost user frame from ``frame`` outwards (the
        per-filename answers of each collector's ``UserFiles`` are cached)."""
        for c in inst.collectors:
            f = c.user_files.user_frame(frame)
            if f is None:
                continue
            slot = c.eager_slot(f, name)
            slot.n += 1
            slot.seconds += seconds

    def counting(fn, args, kwargs, name):
        """``fn(*args, **kwargs)`` run as one counted eager dispatch named ``name``; the frame
        two levels up (the hook's caller) is where the walk to the user's frame starts."""
        tls.inside = True
        start = perf()
        try:
            out = fn(*args, **kwargs)
        finally:
            tls.inside = False
        if out is NotImplemented:  # an operator method declining the other operand: nothing dispatched
            return out
        seconds = perf() - start
        try:
            record(getframe(2), name, seconds)
        except Exception as e:  # never break the program for a count
            inst._error(e)
        return out

    def jitted_call(real, args, kwargs):
        """A call of one of JAX's jitted functions, from :class:`Jitted` (``inside`` is False)."""
        if not inst.collectors or inst._token is not token or not clean():
            return real(*args, **kwargs)
        return counting(real, args, kwargs, getattr(real, "__name__", "jit"))

    eval_trace = targets.get("eval_trace")
    skip_calls = "ufunc" not in targets
    if eval_trace is not None:
        original = eval_trace.__dict__["process_primitive"]

        def process_primitive(self, primitive, *rest):
            __tracebackhide__ = True  # noqa: F841
            try:
                if (getattr(tls, "inside", False) or not inst.collectors or inst._token is not token or not clean()
                        or (skip_calls and getattr(primitive, "name", None) in CALL_PRIMITIVES)):
                    # Before jnp.ufunc, JAX's array operators hold jitted functions jaxlint cannot
                    # wrap: only their slow first call reaches here (the others run in C++), so a
                    # count of those would be a wrong number; none is made (a partial note says so)
                    return original(self, primitive, *rest)
                return counting(original, (self, primitive, *rest), {}, _primitive_name(primitive, rest))
            except BaseException as e:  # the program's traceback gets no jaxlint frame
                hide(e)
                raise

        patch(eval_trace, "process_primitive", process_primitive)

    ufunc = targets.get("ufunc")
    if ufunc is not None:
        ucall = ufunc.__dict__["__call__"]

        def ufunc_call(self, *args, **kwargs):
            __tracebackhide__ = True  # noqa: F841
            try:
                if getattr(tls, "inside", False) or not inst.collectors or inst._token is not token or not clean():
                    return ucall(self, *args, **kwargs)
                return counting(ucall, (self, *args), kwargs, getattr(self, "__name__", "ufunc"))
            except BaseException as e:
                hide(e)
                raise

        patch(ufunc, "__call__", ufunc_call)

    jitted_type = targets.get("jitted_type")
    operators = targets.get("array_type")
    if jitted_type is not None and operators is not None:
        _patch_operators(operators, jitted_type, patch, counting, tls, inst, token, clean, hide)
    if jitted_type is not None:
        made: dict = {}  # id(JAX's function) -> its forwarding object (one per function)
        for module_name, module in list(sys.modules.items()):
            if module is None or not (module_name == "jax" or module_name.startswith("jax.")):
                continue
            try:
                items = list(vars(module).items())
            except Exception:
                continue
            for attr, value in items:
                if type(value) is not jitted_type and not _one_jit_dispatch(value, jitted_type):
                    continue
                wrapper = made.get(id(value))
                if wrapper is None:
                    wrapper = made[id(value)] = Jitted(value, jitted_call)
                patch(module, attr, wrapper)
    return notes


def _patch_operators(array_type, jitted_type, patch, counting, tls, inst, token, clean, hide) -> None:
    """Array operators whose method is, or holds in its closure, one of JAX's jitted functions
    (``x == y`` calls ``equal``, ``x / y`` ``true_divide`` on jax 0.6 and older; ``x * y`` too
    before ``jnp.ufunc``; ``-x`` is ``negative`` itself on 0.10): the call runs in C++ and no other
    hook sees it, so the operator method of the array type counts it, as one dispatch named by
    that function. Operators that go through a ``jnp.ufunc`` or a Python function are counted
    where those run."""
    for name, method in list(vars(array_type).items()):
        if not (name.startswith("__") and callable(method)):
            continue
        if type(method) is jitted_type:  # the method is itself a jitted function (``-x`` on jax 0.10)
            held = [method]
        else:
            held = [c.cell_contents for c in (getattr(method, "__closure__", None) or ())
                    if _cell_value(c) is not None and type(c.cell_contents) is jitted_type]
        if not held:
            continue
        op_name = getattr(held[0], "__name__", name.strip("_"))

        def operator(self, *args, __real=method, __name=op_name, **kwargs):
            __tracebackhide__ = True  # noqa: F841
            try:
                if getattr(tls, "inside", False) or not inst.collectors or inst._token is not token or not clean():
                    return __real(self, *args, **kwargs)
                return counting(__real, (self, *args), kwargs, __name)
            except BaseException as e:
                hide(e)
                raise

        functools.update_wrapper(operator, method)
        patch(array_type, name, operator)


def _cell_value(cell):
    try:
        return cell.cell_contents
    except ValueError:  # an empty cell
        return None


def _one_jit_dispatch(value, jitted_type) -> bool:
    """A ``custom_jvp``/``custom_vjp`` of JAX's around one of its jitted functions (``jax.nn.relu``,
    ``relu6``: ``custom_jvp(jit(f))``): called on arrays, one compiled dispatch that no other hook
    sees (the jitted call inside runs in C++, and the custom-derivative primitive does not go
    through ``EvalTrace.process_primitive``). Others run their primitives one by one, each counted."""
    cls_name = type(value).__name__
    return cls_name in ("custom_jvp", "custom_vjp") and type(getattr(value, "fun", None)) is jitted_type


class Jitted(Forwarding):
    """What JAX's own ``jit``-wrapped functions (``jnp.cos``) are in JAX's module namespaces while
    jaxlint runs: the function itself plus an eager-dispatch count. Attributes, method binding,
    equality and hashing go to JAX's function, so caches keyed on it behave as without jaxlint."""

    def __init__(self, real: Any, call):
        try:
            self.__dict__.update(getattr(real, "__dict__", {}))
        except Exception:
            pass
        for name in ("__module__", "__name__", "__qualname__", "__doc__"):
            try:
                setattr(self, name, getattr(real, name))
            except Exception:
                pass
        self._jaxlint_real = real
        self._jaxlint_call = call
        self.__wrapped__ = getattr(real, "__wrapped__", real)

    def __call__(self, *args, **kwargs):
        __tracebackhide__ = True  # noqa: F841
        try:
            if getattr(_TLS, "inside", False):  # within a counted dispatch, a jitted call or a trace
                return self._jaxlint_real(*args, **kwargs)
            return self._jaxlint_call(self._jaxlint_real, args, kwargs)
        except BaseException as e:
            from . import frames

            frames.hide(e)
            raise


# Primitives that apply a whole jitted program: compiled calls, not op-by-op dispatch.
CALL_PRIMITIVES = frozenset({"pjit", "jit", "closed_call", "core_call"})


def _primitive_name(primitive: Any, rest: tuple) -> str:
    name = getattr(primitive, "name", None) or str(primitive)
    if name in ("pjit", "jit", "closed_call", "core_call"):  # a jitted function applied eagerly
        params = rest[1] if len(rest) > 1 and isinstance(rest[1], dict) else {}
        inner = params.get("name")
        if inner:
            return f"jit({inner})"
    return name


# -- report (no JAX) -------------------------------------------------------------------


def rows(collector) -> list:
    """``[{file, line, count, seconds, primitives}]`` for every line that dispatched eagerly, most
    dispatches first; ``primitives``: ``{name: count}``, most frequent first."""
    out = []
    eager, eager_seconds, eager_ops = collector.eager_totals()
    for (file, line), n in eager.items():
        ops = eager_ops.get((file, line), {})
        out.append({"file": file, "line": line, "count": n,
                    "seconds": round(eager_seconds.get((file, line), 0.0), 6),
                    "primitives": dict(sorted(ops.items(), key=lambda kv: (-kv[1], kv[0])))})
    out.sort(key=lambda r: (-r["count"], -r["seconds"], str(r["file"]), r["line"]))
    return out


def ops_text(primitives: dict, shown: int = 4) -> str:
    """``cos×200 multiply×200`` (the most frequent first; `` …`` when more)."""
    items = list(primitives.items())
    text = " ".join(f"{k}×{v}" for k, v in items[:shown])
    return text + (" …" if len(items) > shown else "")


def busiest_calls(report: dict) -> int:
    return max((f.get("calls") or 0 for f in report.get("functions", [])), default=0)


def text_lines(report: dict, where, max_rows: int = 20) -> list:
    """The text report's section "Eager dispatch hotspots (outside jit)"."""
    eager = report.get("eager")
    if eager is None:
        return []
    lines = ["", "Eager dispatch hotspots (outside jit)"]
    shown = [e for e in eager if e["count"] >= MIN_DISPATCHES]
    if not eager:
        lines.append("  none counted")
        return lines
    total = sum(e["count"] for e in eager)
    seconds = sum(e["seconds"] for e in eager)
    lines.append(f"  {total} eager dispatches from {len(eager)} line{'s' if len(eager) != 1 else ''} "
                 f"({seconds:.2f} s in dispatch)")
    if not shown:
        lines.append(f"  no line dispatched {MIN_DISPATCHES} times or more")
        return lines
    busiest = busiest_calls(report)
    lines.append(f"  {'count':>8} {'per step':>8} {'seconds':>8}  where")
    for e in shown[:max_rows]:
        per = f"{e['count'] / busiest:.1f}" if busiest else "-"
        lines.append(f"  {e['count']:>8} {per:>8} {e['seconds']:>8.3f}  {where(e['file'], e['line'])}")
        lines.append(f"      {ops_text(e['primitives'])}")
        if e.get("fix"):
            lines.append(f"      fix: {e['fix']}")
    if len(shown) > max_rows:
        lines.append(f"  … {len(shown) - max_rows} more lines (see --format json)")
    if busiest:
        lines.append(f"  per step: dispatches per call of the busiest jitted function ({busiest} calls)")
    return lines


def unpredicted(collector, busiest: int, explained: set, real) -> list:
    """``unpredicted`` entries (kind ``eager``) for lines that dispatch eagerly about every step."""
    floor = max(UNPREDICTED_EAGER, busiest // 2) if busiest else UNPREDICTED_EAGER_NO_STEP
    out = []
    for r in rows(collector):
        file = real(r["file"])
        if r["count"] >= floor and (file, r["line"]) not in explained:
            out.append({"kind": "eager", "name": None, "file": file, "line": r["line"], "count": r["count"],
                        "detail": ops_text(r["primitives"])})
    return out


def html_section(report: dict, escape, where, table) -> str:
    """The HTML report's section of eager-dispatch hotspots (lines shown as in the text report);
    ``where(file, line)`` gives the cell's HTML."""
    eager = report.get("eager")
    if eager is None:
        return ""
    busiest = busiest_calls(report)
    shown = [e for e in eager if e["count"] >= MIN_DISPATCHES]
    rows_ = [[str(e["count"]), f"{e['count'] / busiest:.1f}" if busiest else "-", f"{e['seconds']:.3f}",
              where(e["file"], e["line"]), escape(ops_text(e["primitives"], shown=8))] for e in shown]
    total = sum(e["count"] for e in eager)
    note = (f'<p class="note">{total} eager dispatches from {len(eager)} lines; lines with at least '
            f"{MIN_DISPATCHES} are shown. Per step: dispatches per call of the busiest jitted function"
            f"{f' ({busiest} calls)' if busiest else ' (none was called)'}. Seconds: wall time inside the "
            "dispatches, first-use compiles included.</p>")
    return ('<section id="eager"><h2>Eager dispatch hotspots (outside jit)</h2>' + note
            + table(["count", "per step", "seconds", "where", "operations"], rows_, (0, 1, 2)) + "</section>")
