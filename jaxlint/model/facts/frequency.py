"""Frequency: how often a function runs, from the module's call graph first (a call in a loop, a
caller that repeats, every call made once), then what the language says (constructors, cached
builders), then, only where the module shows no call, the naming conventions
(jaxlint/conventions.py). :func:`jaxlint.model.roles.frequency` puts these facts in order for the
rules, with the evidence.

Functions of the model (``m``), not a mixin: they call the model's Python-semantics queries
(``m.context``, ``m.local_functions``, ``m.calls_by_name``) and each other explicitly.
"""

from __future__ import annotations

import ast
from typing import Optional

from ... import names as N
from . import callables, deviceloops
from ..python import limits as L
from ..python.instances import class_named
from ..python.records import FunctionInfo, runs_as_test
from .jaxrecords import Repetition
from ..python.syntax import statement_walk, walk


def called_once(f: Optional[FunctionInfo], m) -> bool:
    """Entry points and tests (and functions nested in them) run once per process or test: what
    the test frameworks run (``records.runs_as_test``, where they collect the module ``m``), and
    the conventions (``m.conventions``) ``entry-points`` and ``demo-functions``."""
    return once_by_name(f, m) is not None


def once_by_name(f: Optional[FunctionInfo], m) -> Optional[str]:
    """Why ``f`` (a function of the module ``m``) is taken to run once per process or test by a
    name, or None: a test (the test frameworks' discovery rules), or an entry point or demo by the
    conventions, itself or a function it is nested in."""
    cur = m.conventions
    collected = getattr(m, "tests_collected", True)
    while f is not None:
        name = f.name
        if runs_as_test(f, collected):
            return f"`{name}` runs as a test (pytest's and unittest's discovery rules)"
        for key in ("entry-points", "demo-functions"):
            if cur.matches(key, name):
                return f"`{name}` matches the convention `{key}`: taken to run once per program"
        f = f.parent
    return None




# Python's and unittest's own constructors and fixtures: run once per object or test by the language
_CONSTRUCTORS = frozenset({"__init__", "__post_init__", "__new__", "__init_subclass__", "setUp", "setUpClass",
                           "setup_method", "setup_class"})


def step_name(name: str, cur) -> bool:
    """``step``, ``update``, ``__call__``, ``train_step``, ``step_env``: a per-step method name
    (the ``step-methods`` convention)."""
    return cur.matches("step-methods", name) or cur.matches("step-affixes", name)


def setup_name(name: str, cur) -> bool:
    """``__init__``, ``setUp``, ``initialize_model``, ``load_params``, ``train``: a function that
    runs once per program or per run (per-step names excepted: ``train_step`` runs every step)."""
    if step_name(name, cur):
        return False
    if name in ("__init__", "__post_init__", "setUp", "setUpClass", "set_up"):
        return True
    return cur.matches("setup-exact", name) or cur.matches("setup-functions", name)


def _project_loop_caller(m, f: FunctionInfo) -> Optional[Repetition]:
    """``Repetition("elsewhere")`` when another module of the project calls ``f`` (a top-level
    function of this module, or a method of a top-level class on an instance made there) inside
    a loop: the project's call graph, before any name."""
    if f.parent is not None or isinstance(f.node, ast.Lambda):
        return None
    if m.project is None or m.path is None:
        return None
    cls = None
    if f.cls is not None:
        if not any(stmt is f.cls.node for stmt in m.tree.body):
            return None
        cls = f.cls.node.name
    found = m.project.loop_caller(m.path, f.name, cls)
    if found is None:
        return None
    other, line, ranged = found
    return Repetition("elsewhere", f, name=m.project.cite(other, line), loop=None, call=None,
                      inner=Repetition("ranged", f) if ranged else None)


def _inherited_loop_caller(m, f: FunctionInfo) -> Optional[Repetition]:
    """``Repetition("inherited")`` when ``f`` is a method of a top-level class whose base class,
    imported from another module of the project, calls ``self.<f's name>(...)`` inside a loop of
    a method the class does not override (a workload's evaluation loop in the base class, the
    per-batch ``_eval_model`` in the subclass): Python's method lookup runs ``f`` there."""
    if f.parent is not None or f.cls is None or m.project is None or m.path is None \
            or isinstance(f.node, ast.Lambda) or not any(stmt is f.cls.node for stmt in m.tree.body):
        return None
    overridden = frozenset(f.cls.methods)
    for base in f.cls.node.bases:
        where = _base_class_file(m, base)
        if where is None:
            continue
        found = m.project.inherited_loop_caller(where[0], where[1], f.name, overridden)
        if found is not None:
            other, line, ranged = found
            return Repetition("inherited", f, name=f"{other}:{line}", loop=None, call=None,
                              inner=Repetition("ranged", f) if ranged else None)
    return None


def _base_class_file(m, base: ast.AST) -> Optional[tuple]:
    """``(file, class name)`` of a base class imported from another module of the project:
    ``Base`` with ``from pkg.mod import Base``, or ``mod.Base`` with ``from pkg import mod`` /
    ``import pkg.mod as mod``; None otherwise."""
    src = m.module_scope.import_src
    if isinstance(base, ast.Name) and base.id in src:
        module, imported, level = src[base.id]
        if imported is None:
            return None
        path = m.project.locate(m.path, module, level)
        return (path, imported) if path is not None and path != m.path else None
    if isinstance(base, ast.Attribute) and isinstance(base.value, ast.Name) and base.value.id in src:
        module, imported, level = src[base.value.id]
        full = module if imported is None else (f"{module}.{imported}" if module else imported)
        path = m.project.locate(m.path, full, level)
        return (path, base.attr) if path is not None and path != m.path else None
    return None


def per_step(rep: Optional[Repetition]) -> bool:
    """Whether the evidence says the function runs at the steps of a loop (a per-step name, the
    training step as a parameter, a call in a ``range``/``while`` loop, or a call from such a
    function), rather than once per item of a loop over configurations or datasets."""
    while rep is not None:
        if rep.kind in ("step_name", "step_param"):
            return True
        if rep.kind in ("elsewhere", "inherited"):
            return rep.inner is not None  # called in a loop over steps in another module
        if rep.kind == "loop":
            return rep.loop is not None and rep.loop.ranged
        rep = rep.inner if rep.kind == "caller" else None
    return False


def cached(f: FunctionInfo) -> bool:
    return any(d in N.CACHE_DECORATORS for d in f.decorators)


def escaping_names(f: FunctionInfo, m=None) -> frozenset:
    """The names that leave ``f``: read (not called) in what it returns, or assigned whole to an
    attribute or an item (``self.step = step``, ``fns[k] = step``), in its body or nested code.
    A function a lax loop of the return traces (``return lax.scan(body, ...)``) is run there, not
    returned. Found in one walk of ``f``, for all the functions nested in it (see ``escapes``)."""
    out = set()
    for r in f.returns:
        nodes = list(walk(r))
        called = {id(n.func) for n in nodes if isinstance(n, ast.Call)}
        if m is not None:
            called |= {id(b) for n in nodes if isinstance(n, ast.Call) for b in deviceloops.traced_bodies(m, n)}
            # ``return jax.vmap(f)(x)``: the transform runs ``f`` right there, it does not hand it out
            called |= {id(n.func.args[0]) for n in nodes if isinstance(n, ast.Call) and isinstance(n.func, ast.Call)
                       and n.func.args and m.resolve(n.func.func, m.scope_at(n)) in N.TRANSFORMS}
        out.update(n.id for n in nodes if isinstance(n, ast.Name) and id(n) not in called)
    for stmt in statement_walk(f.node):  # every statement of it, nested ones too
        if isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Name) and \
                any(isinstance(t, (ast.Attribute, ast.Subscript)) for t in stmt.targets):
            out.add(stmt.value.id)
    return frozenset(out)


def callers(m, f: FunctionInfo) -> list:
    """``(call, caller)`` for every call of ``f`` in this module (``caller`` the function the
    call is in, None at module or class level): ``f(...)``, ``self.f(...)``, a name bound to it,
    and the device loop that runs it as its body (its Python code runs once per call of the loop)."""
    memo = m.facts.callers_memo
    if id(f) in memo:
        return memo[id(f)]
    out: list = []
    if not isinstance(f.node, ast.Lambda):
        for call in m.calls_by_name.get(f.name, ()):
            if any(g is f for g in callables.local_functions(m, call.func, m.scope_at(call))):
                out.append((call, m.function_at(call)))
        loop = deviceloops.loop_running(m, f)
        if loop is not None:  # ``lax.scan(f, ...)`` traces ``f`` once per call of the scan
            out.append((loop, m.function_at(loop)))
    memo[id(f)] = out
    return out

def loop_running_via(m, f: FunctionInfo) -> Optional[tuple]:
    """``(device loop, chain)`` when ``f``'s compiled code runs at every iteration of a device loop
    of this module: ``f`` is the loop's body (chain ``[]``), or a body calls it, directly or through
    functions it calls (chain: those functions, the body first; ``self._loss_input(...)`` from a
    method ``lax.fori_loop`` runs). A call inside the body runs once per iteration of the compiled
    loop, whatever Python does at trace time. None when no chain of at most
    ``REPETITION_CHAIN`` calls of this module reaches a device loop's body (a short literal loop
    does not count). Memoized per function."""
    memo = m.facts.callers_memo
    key = ("loop_running_via", id(f))
    if key not in memo:
        memo[key] = _loop_running_via(m, f, 0)  # a cycle of calls ends at the chain's length limit
    return memo[key]


def _loop_running_via(m, f: FunctionInfo, depth: int) -> Optional[tuple]:
    loop = deviceloops.loop_running(m, f)
    if loop is not None:
        return loop, []
    if depth >= L.REPETITION_CHAIN:
        return None
    for call, g in [*callers(m, f), *_inherited_self_calls(m, f)]:
        if g is None or g is f or isinstance(g.node, ast.Lambda):
            continue
        inner = _loop_running_via(m, g, depth + 1)
        if inner is not None:
            return inner[0], [*inner[1], g]
    return None


def _inherited_self_calls(m, f: FunctionInfo) -> list:
    """``(call, caller)`` for each ``self.<f's name>(...)`` in a method of a base class of ``f``'s class
    (classes of this module) that the class does not override: on an instance of ``f``'s class, Python's
    method lookup runs ``f`` there (an abstract ``_loss_input`` in the base, its override in the
    subclass)."""
    if f.cls is None or f.parent is not None or isinstance(f.node, ast.Lambda):
        return []
    own = f.cls.methods
    bases, seen, out = list(f.cls.node.bases), {id(f.cls.node)}, []
    while bases:
        base = class_named(m, bases.pop(), f.cls.scope.parent if f.cls.scope is not None else None)
        if base is None or id(base.node) in seen:
            continue
        seen.add(id(base.node))
        bases.extend(base.node.bases)
        for call in m.calls_by_name.get(f.name, ()):
            g = m.function_at(call)
            func = call.func
            if g is not None and g.cls is base and g.name not in own and isinstance(func, ast.Attribute) \
                    and isinstance(func.value, ast.Name) and func.value.id == "self" and g.params[:1] == ["self"]:
                out.append((call, g))
    return out


def repeats(m, f: FunctionInfo, depth: int = 0, project: bool = True) -> Optional[Repetition]:
    """Evidence that ``f`` runs again and again, or None. In order: a per-step method name
    (``step``, ``update``, ``act``, ``__call__``, ``sample``, ``insert``, ``*_step``); a call
    of it in a loop of this module (a loop over a few literal options or over the parts of one
    structure does not count: it runs a fixed few times per call of its own function); a
    closure its enclosing function returns or stores (a factory's product, kept and called by
    its user); a call from a function that itself repeats; or, for functions not named like
    set-up code, a parameter that hands it the training step (``step``, ``global_step``).
    Without evidence the answer is None: a function whose callers live in other modules is
    not known to repeat. ``project=False`` leaves out the project's other modules (their call
    graphs are the costly part), for a caller whose finding is opt-in whatever they show; its
    answers have their own memo, so neither kind of question changes the other's answers."""
    memo = m.facts.repeats_memo if project else m.facts.repeats_local_memo
    if id(f) in memo:
        return memo[id(f)]
    memo[id(f)] = None  # a cycle of calls is no evidence
    result = _repeats(m, f, depth, project)
    memo[id(f)] = result
    return result

def _repeats(m, f: FunctionInfo, depth: int, project: bool = True) -> Optional[Repetition]:
    sites = callers(m, f)
    for call, _ in sites:
        ctx = m.context(call)
        for loop in reversed(ctx.loops if ctx is not None else ()):
            if not loop.bounded and loop.steplike:
                return Repetition("loop", f, call=call, loop=loop)
    if f.parent is not None and not isinstance(f.node, ast.Lambda) and escapes(m, f.parent, f.name):
        return Repetition("factory", f, via=f.parent)
    if depth < L.REPETITION_CHAIN:
        for call, g in sites:
            if g is None or g is f or isinstance(g.node, ast.Lambda) or not m.work.spend():
                continue
            inner = repeats(m, g, depth + 1, project)
            if inner is not None:
                return Repetition("caller", f, call=call, via=g, inner=inner)
    if sites and depth < L.REPETITION_CHAIN and all(
            not m.context(call).loops and (g is None or (g is not f and _runs_once(m, g, depth + 1)))
            for call, g in sites):
        return None  # the call graph shows every call, each made once: the name says nothing more
    elsewhere = (_project_loop_caller(m, f) or _inherited_loop_caller(m, f)) if project else None  # other modules
    if elsewhere is not None:
        return elsewhere
    if step_name(f.name, m.conventions):
        return Repetition("step_name", f)  # no caller in sight: the conventions' step-methods
    if setup_name(f.name, m.conventions) or called_once(f, m):
        return None
    called = {c.func.id for c in f.calls if isinstance(c.func, ast.Name)}
    for p in list(f.params) + list(f.kwonly):
        if m.conventions.matches("step-params", p) and p not in called and not _float_default(f.node, p):
            return Repetition("step_param", f, name=p)
    return None


def _float_default(node: ast.AST, name: str) -> bool:
    """Whether the parameter ``name`` defaults to a float (``step=1.0 / 16``): a step size, not the
    number of a training step (fresh C's annotated S4: a test's discretisation step)."""
    args = getattr(node, "args", None)
    if args is None:
        return False
    positional = list(args.posonlyargs) + list(args.args)
    pairs = list(zip(positional[len(positional) - len(args.defaults):], args.defaults))
    pairs += [(a, d) for a, d in zip(args.kwonlyargs, args.kw_defaults) if d is not None]
    for arg, default in pairs:
        if arg.arg == name:
            return isinstance(_number(default), float)
    return False


def _number(node: ast.AST):
    """The value of an arithmetic expression of number literals (``1.0 / 16``, ``-1e-3``), else None."""
    if isinstance(node, ast.Constant):
        return node.value if type(node.value) in (int, float) else None
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        v = _number(node.operand)
        return None if v is None else (-v if isinstance(node.op, ast.USub) else v)
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub, ast.Mult, ast.Div)):
        a, b = _number(node.left), _number(node.right)
        if a is None or b is None or (isinstance(node.op, ast.Div) and b == 0):
            return None
        return {ast.Add: a + b, ast.Sub: a - b, ast.Mult: a * b}.get(type(node.op), a / b if b else None)
    return None

def escapes(m, f: FunctionInfo, name: str) -> bool:
    """Whether ``name`` (a wrapper or function made in ``f``) leaves ``f``: returned, stored on
    an object or in a container (:func:`escaping_names`, once per function)."""
    memo = m.facts.escaping_memo
    found = memo.get(id(f))
    if found is None:
        found = memo[id(f)] = escaping_names(f, m)
    return name in found

def runs_once(m, f: FunctionInfo) -> bool:
    """Whether ``f`` is known to run once per program, run or test: an entry point or test (or
    nested in one), a function named like set-up code (``__init__``, ``setup``,
    ``initialize_model``, ``load_params``, ``train``), a cached builder, or one whose every
    call in this module is made once (at module level or from a function that runs once,
    outside loops)."""
    return _runs_once(m, f, 0)

def runs_once_by_facts(m, f: FunctionInfo) -> bool:
    """:func:`runs_once` without the names the conventions read (``setup-functions``,
    ``entry-points``, ``demo-functions``): a constructor (``__init__``, ``setUp``), a cached
    builder, or a function every call of which in this module is made once."""
    return _runs_once(m, f, 0, names=False)

def _runs_once(m, f: FunctionInfo, depth: int, names: bool = True) -> bool:
    if cached(f) or f.name in _CONSTRUCTORS:
        return True
    if names and (called_once(f, m) or setup_name(f.name, m.conventions)):
        return True
    if f.parent is not None and not isinstance(f.node, ast.Lambda) and _runs_once(m, f.parent, depth + 1, names) \
            and not escapes(m, f.parent, f.name) and depth < L.REPETITION_CHAIN:
        return True  # a helper defined inside set-up code runs with it
    sites = callers(m, f)
    if not sites or depth >= L.REPETITION_CHAIN:
        return False
    for call, g in sites:
        ctx = m.context(call)
        if ctx is None or ctx.loops:
            return False
        if g is not None and (g is f or not _runs_once(m, g, depth + 1, names)):
            return False
    return True

def compute_helper(m, f: FunctionInfo, uses: list) -> bool:
    """Whether ``f`` is a small helper whose result is one of the calls ``uses`` (a compiled
    call): at most a few statements, no loop, the call in its ``return``, and a name not of
    set-up code. Such a helper is used like an array function, once per batch wherever its
    callers are, and every call of it pays for the compile. A primitive's eager rule
    (``p.def_impl``) runs only when the primitive is bound outside jit, and is not one."""
    if isinstance(f.node, ast.Lambda) or f.loops or setup_name(f.name, m.conventions) or called_once(f, m):
        return False
    if "def_impl" in _decorator_names(f):
        return False
    body = list(f.node.body)
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
            and isinstance(body[0].value.value, str):
        body = body[1:]  # the docstring
    if not body or len(body) > L.HELPER_STATEMENTS or not isinstance(body[-1], ast.Return):
        return False
    ret = body[-1]
    inside = {id(n) for n in walk(ret)}
    return any(id(c) in inside for c in uses)

def _decorator_names(f: FunctionInfo) -> list:
    out = []
    for dec in getattr(f.node, "decorator_list", ()):
        target = dec.func if isinstance(dec, ast.Call) else dec
        if isinstance(target, ast.Attribute):
            out.append(target.attr)
        elif isinstance(target, ast.Name):
            out.append(target.id)
    return out


def looped_by_parent(model, outer, rep) -> bool:
    """``outer`` is nested in a function that calls it in a loop (``rep``: a call in a loop, made inside a
    function ``outer`` is nested in): whatever names say about the parent running once, each of its calls
    runs ``outer`` again and again."""
    if rep is None or rep.kind != "loop" or rep.call is None or outer.parent is None:
        return False
    f = model.function_at(rep.call)
    parents = set()
    p = outer.parent
    while p is not None:
        parents.add(id(p))
        p = p.parent
    return f is not None and id(f) in parents
