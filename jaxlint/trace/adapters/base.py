"""What every supported JAX era shares, and helpers the era modules use."""

from __future__ import annotations

import inspect
from typing import Any, Callable, NamedTuple, Optional

TRACE_EVENT = "/jax/core/compile/jaxpr_trace_duration"
LOWER_EVENT = "/jax/core/compile/jaxpr_to_mlir_module_duration"
COMPILE_EVENT = "/jax/core/compile/backend_compile_duration"


class TraceCall(NamedTuple):
    """What one trace-cache miss of ``jax.jit`` was given.

    ``fun``: the function JAX traces (the user's, or a library wrapper); ``ji``: JAX's
    ``PjitInfo`` (``static_argnums``, ``static_argnames``, ``fun_signature``), or None when
    the miss happened outside a jit call whose arguments jaxlint saw; ``dbg``: JAX's debug
    info (``arg_names`` of the flat leaves), or None; ``avals``: the flat input avals;
    ``args``/``kwargs``: the call's arguments, static ones included.
    """

    fun: Any
    ji: Any
    dbg: Any
    avals: tuple
    args: tuple
    kwargs: dict


def events() -> tuple:
    """(trace, lower, compile) ``jax.monitoring`` duration event names of this JAX."""
    try:
        from jax._src import dispatch

        return (getattr(dispatch, "JAXPR_TRACE_EVENT", TRACE_EVENT),
                getattr(dispatch, "JAXPR_TO_MLIR_MODULE_EVENT", LOWER_EVENT),
                getattr(dispatch, "BACKEND_COMPILE_EVENT", COMPILE_EVENT))
    except Exception:
        return TRACE_EVENT, LOWER_EVENT, COMPILE_EVENT


def params_of(fun: Callable) -> list:
    return list(inspect.signature(fun).parameters)


def positional_params(fun: Any, ji: Any = None) -> tuple:
    """(names of ``fun``'s positional parameters, name of its ``*args`` or None): from JAX's jit
    info ``ji`` when it has the signature, else ``inspect``; ``((), None)`` when neither can tell."""
    sig = getattr(ji, "fun_signature", None)
    if sig is None:
        try:
            sig = inspect.signature(fun)
        except (TypeError, ValueError):
            return (), None
    positional, star = [], None
    for p in sig.parameters.values():
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            positional.append(p.name)
        elif p.kind == p.VAR_POSITIONAL:
            star = p.name
    return tuple(positional), star


def cached_body(memoized: Any, name: str):
    """The closure cell of a ``linear_util.cache``-memoized function that holds the function
    it memoizes (called once per cache miss), or None.

    ``lu.cache`` keeps the memoized function in its closure; replacing that cell's content
    observes exactly the misses, and the cache (its keys, its dict) stays JAX's own.
    """
    for cell in getattr(memoized, "__closure__", None) or ():
        try:
            value = cell.cell_contents
        except ValueError:  # an empty cell
            continue
        if inspect.isfunction(value) and value.__name__ == name:
            return cell
    return None


def flat_avals(in_type: Any) -> tuple:
    """The avals of a trace's ``in_type``: a tuple of avals, or of ``(aval, explicit)``
    pairs under dynamic shapes (only explicit ones are the user's arguments)."""
    out = []
    for t in in_type or ():
        if isinstance(t, tuple) and len(t) == 2 and isinstance(t[1], bool):
            if t[1]:
                out.append(t[0])
        else:
            out.append(t)
    return tuple(out)


class Context:
    """The jit calls whose trace may miss the cache now, innermost last (per thread).

    The era's jit entry point pushes ``(fun, ji, dbg, args, kwargs)``; the memoized trace
    body, when it runs, reads the innermost entry if it is for the same function.
    """

    def __init__(self):
        import threading

        self._tls = threading.local()

    def stack(self) -> list:
        s = getattr(self._tls, "stack", None)
        if s is None:
            s = self._tls.stack = []
        return s

    def innermost(self, fun: Any) -> Optional[tuple]:
        s = self.stack()
        if s and s[-1][0] is fun:
            return s[-1]
        return None


def hook_compiles(patch, on_compile) -> Optional[str]:
    """Route ``pjit._pjit_call_impl_python(*args, jaxpr=..., name=...)`` (where every jit
    call that missed the executable cache lowers and compiles) through
    ``on_compile(run, jaxpr)``; None, or why it cannot be done."""
    try:
        from jax._src import pjit

        original = pjit._pjit_call_impl_python
        if "jaxpr" not in inspect.signature(original).parameters:
            return "jax._src.pjit._pjit_call_impl_python has no jaxpr parameter"
    except Exception as e:
        return repr(e)
    import functools

    @functools.wraps(original)
    def call_impl(*args, **kwargs):
        return on_compile(lambda: original(*args, **kwargs), kwargs.get("jaxpr"))

    patch(pjit, "_pjit_call_impl_python", call_impl)
    return None


def hook_pmap(patch, on_pmap) -> Optional[str]:
    """Route each cache miss of ``pxla.parallel_callable`` (the classic ``jax.pmap``: one
    trace, lowering and compile per miss) through ``on_pmap(run, fun, avals)``, where
    ``fun`` is the function ``jax.pmap`` was given. None, or why not (JAX versions whose
    ``pmap`` runs through ``jit`` are then still covered by the trace hook)."""
    try:
        from jax._src.interpreters import pxla

        cell = cached_body(pxla.parallel_callable, "parallel_callable")
    except Exception as e:
        return repr(e)
    if cell is None:
        return "jax._src.interpreters.pxla.parallel_callable is not a linear_util cache"
    original = cell.cell_contents
    try:  # parallel_callable(fun, backend, axis_name, ..., *avals): the avals come last
        ps = inspect.signature(original).parameters.values()
        named = sum(1 for p in ps if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)) - 1
        if not any(p.kind == p.VAR_POSITIONAL for p in inspect.signature(original).parameters.values()):
            return "jax._src.interpreters.pxla.parallel_callable takes no *avals"
    except Exception as e:
        return repr(e)
    import functools

    @functools.wraps(original)
    def parallel_callable(fun, *args):
        return on_pmap(lambda: original(fun, *args), getattr(fun, "f", fun), tuple(args[named:]))

    patch(cell, "cell_contents", parallel_callable)
    return None


def hook_memoized_trace(patch, on_trace, entry_name: str, entry_call: Callable, body_dbg: Callable) -> None:
    """The eras before ``pjit._trace_for_jit`` (jax 0.4.30 to 0.8): jit traces in the body of
    the ``lu.cache``-memoized ``pjit._create_pjit_jaxpr``, which runs once per trace-cache miss
    and is given only the wrapped function and the avals. The jit call's own arguments come
    from ``pjit.<entry_name>``, the function that calls it, which is wrapped to push them.

    ``entry_call(*args, **kwargs)`` -> ``(fun, ji, dbg, args, kwargs)`` from the entry's
    arguments; ``body_dbg(body_args, wrapped_fun)`` -> the debug info the body was given.
    """
    import functools

    from jax._src import pjit

    context = Context()
    entry = getattr(pjit, entry_name)
    cell = cached_body(pjit._create_pjit_jaxpr, "_create_pjit_jaxpr")
    body = cell.cell_contents

    @functools.wraps(entry)
    def entry_hook(*args, **kwargs):
        stack = context.stack()
        stack.append(entry_call(*args, **kwargs))
        try:
            return entry(*args, **kwargs)
        finally:
            stack.pop()

    @functools.wraps(body)
    def body_hook(fun, *args):
        run = lambda: body(fun, *args)  # noqa: E731
        user = getattr(fun, "f", fun)
        ctx = context.innermost(user)
        avals = flat_avals(args[0] if args else ())
        if ctx is not None:
            f, ji, dbg, a, k = ctx
            call = TraceCall(f, ji, dbg if dbg is not None else body_dbg(args, fun), avals, a, k)
        else:  # traced by a path that jaxlint did not see the arguments of
            call = TraceCall(user, None, body_dbg(args, fun), avals, (), {})
        return on_trace(run, call)

    patch(pjit, entry_name, entry_hook)
    patch(cell, "cell_contents", body_hook)


def memoized_trace_missing(entry_name: str, entry_params: list) -> Optional[str]:
    """None when ``pjit.<entry_name>`` has ``entry_params`` and ``pjit._create_pjit_jaxpr``
    is a ``linear_util`` cache over a body taking ``(fun, in_type, ...)``; else why not."""
    from jax._src import pjit

    entry = getattr(pjit, entry_name, None)
    if entry is None:
        return f"no jax._src.pjit.{entry_name}"
    if params_of(entry) != entry_params:
        return f"jax._src.pjit.{entry_name} changed"
    memo = getattr(pjit, "_create_pjit_jaxpr", None)
    cell = cached_body(memo, "_create_pjit_jaxpr") if memo is not None else None
    if cell is None:
        return "jax._src.pjit._create_pjit_jaxpr is not a linear_util cache"
    if params_of(cell.cell_contents)[:2] != ["fun", "in_type"]:
        return "the body of jax._src.pjit._create_pjit_jaxpr changed"
    return None


def first_of(result: Any) -> Any:
    return result[0] if isinstance(result, tuple) and result else None


def second_of(result: Any) -> Any:
    return result[1] if isinstance(result, tuple) and len(result) > 1 else ()


def eqn_site(eqn: Any) -> tuple:
    """(file, line) of the user's frame that made a jaxpr equation, or (None, None).
    ``source_info_util.user_frame`` takes the equation's ``SourceInfo`` up to jax 0.6
    and its ``traceback`` from 0.7 on."""
    from .. import frames as own_frames

    # jaxlint's own hooks (the wrapper around ``jax.debug.print`` that counts its runs) are not
    # the user's frame: the first frame outside JAX and outside jaxlint is
    for file, line, _ in eqn_frames(eqn):
        if not own_frames.own(file):
            return file, line
    try:
        from jax._src import source_info_util

        takes = params_of(source_info_util.user_frame)[:1]
        info = eqn.source_info
        frame = source_info_util.user_frame(info.traceback if takes == ["traceback"] else info)
        if frame is not None and not own_frames.own(frame.file_name):
            return frame.file_name, frame.start_line
    except Exception:
        pass
    return None, None


_USER_FRAMES_TAKES: list = []  # [True when source_info_util.user_frames takes a traceback (jax 0.7+)]


def eqn_frames(eqn: Any) -> list:
    """``[(file, line, function)]`` of the frames outside JAX that made a jaxpr equation,
    innermost first (empty when unknown). ``source_info_util.user_frames`` takes the
    equation's ``SourceInfo`` up to jax 0.6 and its ``traceback`` from 0.7 on."""
    try:
        from jax._src import source_info_util

        if not _USER_FRAMES_TAKES:
            _USER_FRAMES_TAKES.append(params_of(source_info_util.user_frames)[:1] == ["traceback"])
        info = eqn.source_info
        frames = source_info_util.user_frames(info.traceback if _USER_FRAMES_TAKES[0] else info)
        return [(f.file_name, f.start_line, f.function_name) for f in frames]
    except Exception:
        return []


def shape_dtype_struct(shape: tuple, dtype: Any, weak: bool = False) -> Any:
    """An abstract argument for ``jax.make_jaxpr``: a ``jax.ShapeDtypeStruct``. A weakly typed
    one (``weak_type=``, which jax 0.4.30 lacks and 0.4.38 has) is, on older JAX, a Python scalar of that kind (which JAX
    traces as the same weak aval); None there when no Python scalar has that aval."""
    import jax
    import numpy

    if not weak:
        return jax.ShapeDtypeStruct(tuple(shape), dtype)
    if "weak_type" in inspect.signature(jax.ShapeDtypeStruct).parameters:
        return jax.ShapeDtypeStruct(tuple(shape), dtype, weak_type=True)
    value = {"i": 0, "f": 0.0, "c": 0j}.get(numpy.dtype(dtype).kind)
    if tuple(shape) or value is None:
        return None
    if jax.dtypes.canonicalize_dtype(numpy.asarray(value).dtype) != numpy.dtype(dtype):
        return None  # a Python scalar traces as the default width only (f32/i32, or 64 bits under x64)
    return value


def eager_targets() -> tuple:
    """What the eager-dispatch hooks patch on this JAX, and notes for what is missing:
    ``({"eval_trace": core.EvalTrace (its process_primitive runs each primitive bound on
    concrete arrays), "ufunc": jnp.ufunc (its __call__ runs x * y and jnp.multiply),
    "jitted_type": the type of what jax.jit returns (JAX's own jit-wrapped functions,
    jnp.cos)}, [notes])``. Every era since jax 0.4.30 has an ``EvalTrace.process_primitive``;
    ``jnp.ufunc`` objects arrived later (before them, ``jnp.multiply`` is itself a jitted
    function, which the operators of an array hold in a closure: ``x * y`` is then counted at the
    operator method, ``"array_type"``, see ``eager._patch_operators``)."""
    targets: dict = {}
    notes: list = []
    try:
        from jax._src import core

        cls = core.EvalTrace
        if params_of(cls.__dict__["process_primitive"])[:2] != ["self", "primitive"]:
            raise TypeError("jax._src.core.EvalTrace.process_primitive changed")
        targets["eval_trace"] = cls
    except Exception as e:
        notes.append(f"eager primitives not counted ({e!r})")
    try:
        from jax._src.numpy import ufunc_api

        cls = ufunc_api.ufunc
        if "__call__" not in cls.__dict__:
            raise TypeError("jnp.ufunc has no __call__")
        import jax.numpy as jnp

        if not isinstance(jnp.multiply, cls):  # jax 0.4.x has the class, but not for its operators
            raise TypeError("jnp.multiply is not a jnp.ufunc")
        targets["ufunc"] = cls
    except Exception as e:
        notes.append(f"jax.numpy functions under eager grad/vmap not counted: no jnp.ufunc ({type(e).__name__}); "
                     "array operators (x * y) are counted at the array's operator methods")
    try:
        from jax._src.array import ArrayImpl

        targets["array_type"] = ArrayImpl  # its operator methods (x == y), see eager._patch_operators
    except Exception as e:
        notes.append(f"eager array operators that call a jitted function (x == y) not counted ({e!r})")
    try:
        jitted = jitted_type()
        if not callable(jitted) or jitted.__module__.startswith("jaxlint"):
            raise TypeError(f"unexpected jit wrapper type {jitted!r}")
        targets["jitted_type"] = jitted
    except Exception as e:
        notes.append(f"eager calls of JAX's jitted functions (jnp.cos) not counted ({e!r})")
    return targets, notes


def _identity(x):
    return x


def jitted_type() -> type:
    """The type of what ``jax.jit`` returns (``PjitFunction``): JAX's own jitted functions, and the
    user's made before jaxlint listened."""
    from jax._src import api

    return type(api.jit(_identity))
