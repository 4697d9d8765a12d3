"""Set-up order: the program's flow through a module's top level and the entry functions it calls
(``main()``, ``if __name__ == "__main__": main()``, absl's ``app.run(main)``), in order, and where in
it ``jax`` is imported, the backend starts (a device query, an array made, a compiled call) and
settings read at those moments are assigned (``os.environ[...] = ...``, ``update``, ``setdefault``,
``os.putenv``). Asked by JAX801/JAX802. Functions of the model (``m``).

Only what the flow certainly ran counts as a start: a statement at the top level or in an entry
function, not under an ``if``/loop/``except`` (the ``__main__`` guard excepted). A call of
something the module cannot see into starts nothing ("unknown is not evidence").
"""

from __future__ import annotations

import ast
from typing import Optional

from ... import names as N
from . import callables
from ..python.records import Scope
from ..python.syntax import call_arg

_MAX_DEPTH = 3


class LateSetting:
    """``node`` (the assignment or call) sets ``key`` after ``started`` (the call that started the
    backend, or the ``import jax``), in ``kind`` "backend" or "import"; ``value``: the literal it
    sets (None when not a literal string); ``config``: a ``jax.config.update`` of JAX's own flag."""

    __slots__ = ("node", "key", "kind", "started", "value", "config")

    def __init__(self, node: ast.AST, key: str, kind: str, started: ast.AST, value: Optional[str] = None,
                 config: bool = False):
        self.node, self.key, self.kind, self.started = node, key, kind, started
        self.value, self.config = value, config

    @property
    def accelerator_default(self) -> bool:
        """It asks for an accelerator platform (``"gpu"``, ``"tpu"``), which JAX starts first anyway
        where the machine has one."""
        return (self.key in N.PLATFORM_SETTINGS and self.value is not None
                and self.value.split(",")[0].strip().lower() in N.ACCELERATOR_PLATFORMS)


class _Flow:
    def __init__(self, m):
        self.m = m
        self.imported: Optional[ast.AST] = None  # the first ``import jax`` the flow certainly ran
        self.started: Optional[ast.AST] = None  # the first call that certainly started the backend
        self.late: list = []
        self.initialize_late: list = []  # (jax.distributed.initialize call, the start before it)
        self.entered: set = set()

    def block(self, stmts: list, scope: Scope, certain: bool, depth: int) -> None:
        for stmt in stmts:
            self.statement(stmt, scope, certain, depth)

    def statement(self, stmt: ast.stmt, scope: Scope, certain: bool, depth: int) -> None:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            return  # runs when called
        if isinstance(stmt, (ast.Import, ast.ImportFrom)):
            names = [a.name for a in stmt.names] if isinstance(stmt, ast.Import) else [stmt.module or ""]
            if certain and self.imported is None and any(n == "jax" or n.startswith("jax.") for n in names):
                self.imported = stmt
            return
        if isinstance(stmt, ast.If):
            main_guard = _is_main_guard(stmt.test)
            self.expressions([stmt.test], scope, certain, depth)
            self.block(stmt.body, scope, certain and main_guard, depth)
            self.block(stmt.orelse, scope, False, depth)
            return
        if isinstance(stmt, (ast.For, ast.AsyncFor, ast.While)):
            head = [stmt.iter] if isinstance(stmt, (ast.For, ast.AsyncFor)) else [stmt.test]
            self.expressions(head, scope, certain, depth)
            self.block(stmt.body, scope, False, depth)
            self.block(stmt.orelse, scope, False, depth)
            return
        if isinstance(stmt, (ast.With, ast.AsyncWith)):
            self.expressions([i.context_expr for i in stmt.items], scope, certain, depth)
            self.block(stmt.body, scope, certain, depth)
            return
        if isinstance(stmt, ast.Try) or type(stmt).__name__ == "TryStar":
            dead = self.started is not None and self._queries_only(stmt.body, scope)
            self.block(stmt.body, scope, certain, depth)
            for h in stmt.handlers:
                if not dead:  # (a backend query after the backend started cannot fail: its handler never runs)
                    self.block(h.body, scope, False, depth)
            self.block(stmt.orelse, scope, False, depth)
            self.block(stmt.finalbody, scope, certain, depth)
            return
        if isinstance(stmt, ast.Assign):
            for t in stmt.targets:
                key = _environ_key(self.m, t, scope)
                if key is not None:
                    self.setting(stmt, key, _string(self.m, stmt.value, scope))
        self.expressions([c for c in ast.iter_child_nodes(stmt) if isinstance(c, ast.expr)], scope, certain, depth)

    def _queries_only(self, body: list, scope: Scope) -> bool:
        """``body`` only queries the backend (``try: jax.devices()``): once the backend started, the
        answer is cached and the query raises nothing."""
        calls = [n for st in body for n in ast.walk(st) if isinstance(n, ast.Call)]
        return bool(calls) and all(self.m.resolve(c.func, scope) in N.BACKEND_QUERIES for c in calls) and all(
            isinstance(st, (ast.Expr, ast.Assign)) for st in body)

    def expressions(self, exprs: list, scope: Scope, certain: bool, depth: int) -> None:
        calls = sorted((n for e in exprs for n in ast.walk(e) if isinstance(n, ast.Call)),
                       key=lambda c: (c.lineno, c.col_offset))
        for call in calls:
            self.call(call, scope, certain, depth)

    def call(self, call: ast.Call, scope: Scope, certain: bool, depth: int) -> None:
        m = self.m
        qn = m.resolve(call.func, scope)
        for key in _set_keys(m, call, qn, scope):
            self.setting(call, key)
        if qn == "jax.config.update" and len(call.args) >= 2 and _literal(call.args[0]) in N.BACKEND_START_FLAGS:
            self.setting(call, _literal(call.args[0]), _string(m, call.args[1], scope), config=True)
        if qn == N.DISTRIBUTED_INITIALIZE and self.started is not None:
            self.initialize_late.append((call, self.started))
        if certain and self.started is None and _starts_backend(m, call, qn, scope):
            self.started = call
        if depth >= _MAX_DEPTH:
            return
        targets = [call.func]
        if qn in N.ENTRY_RUNNERS:
            arg = call_arg(call, N.ENTRY_RUNNERS[qn], "main")
            if arg is not None:
                targets = [arg]
        for f in callables.local_functions(m, targets[0], scope):
            # walked again only when the call comes after a new start or import (a helper called
            # before and after the first array sets its settings late the second time)
            key = (id(f), self.started is not None, self.imported is not None)
            if key in self.entered or isinstance(f.node, ast.Lambda) or f.traced:
                continue
            self.entered.add(key)
            self.block(f.node.body, f.scope, certain, depth + 1)

    def setting(self, node: ast.AST, key: str, value: Optional[str] = None, config: bool = False) -> None:
        if any(late.node is node and late.key == key for late in self.late):
            return  # a function walked twice (before and after a start) sets it once
        if config or key in N.BACKEND_START_SETTINGS or key.startswith(N.BACKEND_START_PREFIXES):
            if self.started is not None:
                self.late.append(LateSetting(node, key, "backend", self.started, value, config))
        elif key in N.IMPORT_TIME_SETTINGS and self.imported is not None:
            self.late.append(LateSetting(node, key, "import", self.imported, value))


def _literal(e: Optional[ast.AST]) -> Optional[str]:
    return e.value if isinstance(e, ast.Constant) and isinstance(e.value, str) else None


def _string(m, e: ast.AST, scope: Scope) -> Optional[str]:
    """A literal string, or a name bound once, plainly, to one (``requested_device = "gpu"``)."""
    if isinstance(e, ast.Name):
        ev = m.binding(e.id, scope, (e.lineno, e.col_offset))
        return _literal(ev.value) if ev is not None and ev.plain_assign else None
    return _literal(e)


def _is_main_guard(test: ast.AST) -> bool:
    return (isinstance(test, ast.Compare) and isinstance(test.left, ast.Name) and test.left.id == "__name__"
            and len(test.comparators) == 1 and isinstance(test.comparators[0], ast.Constant)
            and test.comparators[0].value == "__main__")


def _environ(m, expr: ast.AST, scope: Scope) -> bool:
    return m.resolve(expr, scope) == "os.environ"


def _environ_key(m, target: ast.AST, scope: Scope) -> Optional[str]:
    """``os.environ["KEY"]`` as an assignment target: KEY."""
    if isinstance(target, ast.Subscript) and _environ(m, target.value, scope):
        key = target.slice
        if isinstance(key, ast.Constant) and isinstance(key.value, str):
            return key.value
    return None


def _set_keys(m, call: ast.Call, qn: Optional[str], scope: Scope) -> list:
    """The literal keys ``os.environ.update/setdefault`` and ``os.putenv`` set."""
    func = call.func
    if qn == "os.putenv" or (isinstance(func, ast.Attribute) and func.attr == "setdefault"
                             and _environ(m, func.value, scope)):
        first = call.args[0] if call.args else None
        return [first.value] if isinstance(first, ast.Constant) and isinstance(first.value, str) else []
    if isinstance(func, ast.Attribute) and func.attr == "update" and _environ(m, func.value, scope):
        keys = [kw.arg for kw in call.keywords if kw.arg]
        for a in call.args:
            if isinstance(a, ast.Dict):
                keys += [k.value for k in a.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)]
        return keys
    return []


def _starts_backend(m, call: ast.Call, qn: Optional[str], scope: Scope) -> bool:
    if qn is not None:
        if qn in N.BACKEND_QUERIES or N.produces_array(qn):
            return True
        if qn.startswith(("jax.", "builtins.", "os.", "numpy.")):
            return False
    wrap = callables.callable_info(m, call.func, scope)
    return wrap is not None and wrap.kind in ("jit", "pmap", "filter_jit")


def setup_flow(m) -> _Flow:
    """The module's flow, walked once: its late settings and late ``jax.distributed.initialize``."""
    memo = m.facts.setup_flow
    if memo is None:
        memo = _Flow(m)
        if any(a in m.attr_names for a in ("environ", "putenv", "initialize", "config")):
            memo.block(m.tree.body, m.module_scope, True, 0)
        m.facts.setup_flow = memo
    return memo


def starts_child_process(m) -> bool:
    """Whether the module starts another process (which reads the environment it is given)."""
    for name in ("run", "Popen", "call", "check_call", "check_output", "Process", "Pool", "system",
                 "ProcessPoolExecutor", "popen", "fork"):
        for call in m.calls_by_name.get(name, ()):
            qn = m.resolve(call.func, m.scope_at(call))
            if qn is not None and qn.startswith(N.CHILD_PROCESS_PREFIXES):
                return True
    return any(k.startswith(("execv", "execl", "spawn")) for k in m.calls_by_name)


# JAX's flags that make every computation check its outputs on the host before the call returns (measured on
# jax 0.10.2 CPU: a jitted call 0.8 s against 0.1 ms without `jax_debug_nans`, an eager op 0.14 s against 0.2 ms):
# a clock read after such a call has waited for it.
_HOST_CHECKED_FLAGS = frozenset({"jax_debug_nans", "jax_debug_infs"})
_CONFIG_UPDATES = frozenset({"jax.config.update", "jax.config.config.update"})


def host_checked_lines(m) -> list:
    """``[(first, last)]`` line spans of the module's top level (a script's, a notebook's cells) in which a
    ``jax.config.update("jax_debug_nans", True)`` (or ``jax_debug_infs``) made earlier at the top level is in
    force: every JAX call there waits for its result. Open-ended spans end at the module's last line."""
    spans, start = [], None
    for stmt in m.tree.body:
        call = stmt.value if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call) else None
        if call is None or len(call.args) < 2 or m.resolve(call.func, m.module_scope) not in _CONFIG_UPDATES:
            continue
        if _literal(call.args[0]) not in _HOST_CHECKED_FLAGS or not isinstance(call.args[1], ast.Constant):
            continue
        if call.args[1].value and start is None:
            start = stmt.end_lineno + 1
        elif not call.args[1].value and start is not None:
            spans.append((start, stmt.lineno))
            start = None
    if start is not None:
        spans.append((start, 10 ** 9))
    return spans
