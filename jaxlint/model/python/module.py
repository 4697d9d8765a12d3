"""The module model's Python core: the records of one module (python/records.py) and its name,
scope, binding and call-graph queries. It knows nothing of JAX: the facts layer extends it
(facts/model.py: ``JaxModel``, with the facts' caches) and builds it (``build_model``). The walk
that fills the records is builder.py.
"""

from __future__ import annotations

import ast
import builtins
from typing import Optional

from ... import names as N
from . import limits as L
from .limits import Work
from .records import Binding, ClassInfo, Context, FunctionInfo, Loop, Scope, runs_as_test
from .syntax import _end, _pos
from .testdiscovery import collects_tests

_BUILTINS = frozenset(dir(builtins))


class ModuleModel:
    """The Python records and queries of one module. The rules see it as a ``JaxModel``
    (facts/model.py), built with :func:`~jaxlint.model.facts.model.build_model`."""

    def __init__(self, tree: ast.Module):
        self.tree = tree
        self.module_scope = Scope(tree, "module", None)
        self.scopes: list[Scope] = [self.module_scope]  # every scope, for dispose()
        self.functions: list[FunctionInfo] = []
        self.func_of_node: dict[int, FunctionInfo] = {}
        self.classes: dict[int, ClassInfo] = {}
        self.loops: list[Loop] = []
        self.calls: list[ast.Call] = []
        self.loop_calls: list[ast.Call] = []  # calls with a loop around them in their function (context(c).loops)
        self.ifs: list[ast.AST] = []  # If / While / IfExp / Assert nodes whose test is evaluated as bool
        self.joined_strs: list[ast.JoinedStr] = []
        self.percent_formats: list[ast.BinOp] = []
        self.module_loop_subscripts: list[ast.Subscript] = []  # x[...] reads in loops outside functions
        self.stores: list[tuple] = []  # (Subscript or Attribute target, "assign" | "aug" | "del")
        self.expr_values: set[int] = set()  # ids of expressions evaluated as statements (results unused)
        self.bool_nodes: list[ast.AST] = []  # BoolOp and ``not`` nodes: they call bool() on operands
        self.decls: list[ast.AST] = []  # Global / Nonlocal statements
        self.calls_by_name: dict[str, list] = {}  # last name of the callee (``np.asarray`` -> asarray) -> calls
        self.attr_names: set[str] = set()  # every attribute name read in the module
        self.ctx: dict[int, Context] = {}  # id(node) -> Context for calls, statements, defs, lambdas
        self.stmt_of: dict[int, ast.stmt] = {}  # id(Assign/AugAssign target, Expr value) -> the statement
        self.import_roots: set[str] = set()  # the top-level packages of absolute imports, in any scope
        self.watched_calls: list[ast.Call] = []  # calls the walk was asked to list (builder.walk_module)
        self.watched_attrs: list[ast.Attribute] = []  # attributes the walk was asked to list, by name
        self.import_nodes: list[ast.stmt] = []  # every import statement, in any scope
        self.with_nodes: list[ast.stmt] = []  # every with / async with statement, in any scope
        self.timed_magics: list = []  # a notebook's (magic, first, last line) that %time/%timeit time
        self.notebook = False  # the module is a notebook's cells (set by the engine)
        self.path: Optional[str] = None
        self._collected: Optional[bool] = None  # tests_collected, once the path is known
        self._import_bindings: dict = {}  # (id(scope), name) -> imported_binding's answer
        self._called_globals: dict = {}  # (id(function), name) -> the module binding its calls see
        self.project = None  # a ProjectResolver, for names imported from the project's modules
        self._resolve_memo: dict[int, Optional[str]] = {}
        self._rebinding_memo: dict = {}
        self._calls_memo: dict[tuple, tuple] = {}  # calls_named / calls_resolvable_to, per set of names
        self._test_refs_memo: dict = {}
        self._imported_memo: dict = {}  # (id(scope), name) -> what the project resolver found
        self._loads_memo: Optional[dict] = None
        self._if_memo: Optional[dict] = None  # id(If) -> the If, for the arms a binding is in
        self.work = Work()  # the inference work budget, sized by build_model() once the walk has counted nodes

    @property
    def is_test_module(self) -> bool:
        """Whether the module is test code by its path: the convention ``test-files`` (the file
        names test runners collect, handed in with the model's conventions); False when the path is
        unknown, and for a notebook (test runners do not collect notebooks)."""
        conventions = getattr(self, "conventions", None)
        if self.path is None or conventions is None or not self.importable:
            return False
        return conventions.matches("test-files", self.path)

    @property
    def tests_collected(self) -> bool:
        """Whether pytest may collect this module's top-level ``test*`` functions
        (:func:`.testdiscovery.collects_tests`), found once."""
        found = self._collected
        if found is None:
            found = self._collected = collects_tests(self.path, self.is_test_module)
        return found

    @property
    def importable(self) -> bool:
        """Whether other modules may import this module's names: not a notebook's cells (a notebook
        is run, not imported)."""
        return not (self.path or "").lower().endswith(".ipynb")

    def in_test_code(self, node: ast.AST) -> bool:
        """Whether a node runs as part of a test: in a test module, or in a function named
        ``test*`` (or a method of a ``Test*`` class), nested functions included. Syncs there check
        results on purpose, and their inputs only need to exist."""
        if self.is_test_module:
            return True
        return self._test_function(self.function_at(node), 0)

    def _test_function(self, f: Optional[FunctionInfo], depth: int) -> bool:
        """Whether ``f`` runs as part of a test: named as pytest and unittest discover tests
        (``test*``, a method of a ``Test*`` class), nested in such a function, or, by the module's
        call graph, used (called or handed on) only from such functions: a fixture helper
        ``get_fake_batch`` that only ``test_trace`` reaches."""
        g = f
        while g is not None:
            if runs_as_test(g):  # named as a test: its purpose, whether or not a runner collects it
                return True
            g = g.parent
        if f is None or depth > 3 or isinstance(f.node, ast.Lambda) or f.cls is not None:
            return False
        uses = self._references(f)
        return bool(uses) and all(u is not None and u is not f and self._test_function(u, depth + 1) for u in uses)

    def _references(self, f: FunctionInfo) -> list:
        """The functions (None: module level) in which ``f``'s name is read as ``f``: calls of it and
        places it is handed on (``benchmark(get_apply_fn_and_args, ...)``)."""
        memo = self._test_refs_memo
        if id(f) in memo:
            return memo[id(f)]
        out = []
        for n in self._name_loads().get(f.name, ()):
            scope = self.scope_at(n)
            ev = self.binding(f.name, scope, (n.lineno, n.col_offset))
            if ev is not None and ev.kind == "def" and self.func_of_node.get(id(ev.node)) is f:
                out.append(self.function_at(n) if self.ctx.get(id(n)) is not None else _enclosing(self, n))
        memo[id(f)] = out
        return out

    def _name_loads(self) -> dict:
        """name -> the ``ast.Name`` loads of it that are a call's callee or argument, found once."""
        if self._loads_memo is None:
            table: dict = {}
            for c in self.calls:
                for e in [c.func, *c.args, *(k.value for k in c.keywords)]:
                    if isinstance(e, ast.Name):
                        table.setdefault(e.id, []).append(e)
            self._loads_memo = table
        return self._loads_memo

    def resolve(self, expr: ast.AST, scope: Optional[Scope] = None) -> Optional[str]:
        """The canonical qualified name an expression refers to, or None.

        ``jnp.zeros`` -> ``jax.numpy.zeros`` after ``import jax.numpy as jnp``; a local
        variable that shadows the import resolves to None; an unshadowed builtin resolves to
        ``builtins.<name>``.
        """
        key = id(expr)
        memo = self._resolve_memo
        if key in memo:
            return memo[key]
        if scope is None:
            scope = self.scope_at(expr)
        result = self._resolve(expr, scope, 0)
        memo[key] = result
        return result

    def _resolve(self, expr: ast.AST, scope: Scope, depth: int) -> Optional[str]:
        if depth > L.ALIAS_CHAIN or not self.work.spend():
            return None
        if isinstance(expr, ast.Attribute):
            base = self._resolve(expr.value, scope, depth + 1)
            return N.canonical(base + "." + expr.attr) if base else None
        if not isinstance(expr, ast.Name):
            return None
        name = expr.id
        s = self.binding_scope(name, scope, "imports")
        if s is None:
            return "builtins." + name if name in _BUILTINS else None
        if name in s.imports:
            return s.imports[name] or None
        evs = s.events[name]
        # ``jit = jax.jit`` style aliases: every binding is the same resolvable name.
        if all(ev.plain_assign and isinstance(ev.value, (ast.Name, ast.Attribute)) for ev in evs):
            targets = {self._resolve(ev.value, ev.scope, depth + 1) for ev in evs}
            if len(targets) == 1:
                return targets.pop()
        return None

    def binding_scope(self, name: str, scope: Scope, imports: str = "imports") -> Optional[Scope]:
        """The scope whose binding of ``name`` a read in ``scope`` sees, by Python's rules (class
        bodies are not seen from the functions in them; ``global`` goes to the module): the first
        whose ``imports`` table (``"imports"`` or ``"import_src"``) or bindings hold it; None when
        none does (a builtin, or unbound)."""
        s: Optional[Scope] = scope
        first = True
        while s is not None:
            if s.kind == "class" and not first:
                s = s.parent
                continue
            first = False
            if name in s.globals and s is not self.module_scope:
                s = self.module_scope
                continue
            if name in getattr(s, imports) or s.events.get(name):
                return s
            s = s.parent
        return None

    def scope_at(self, node: ast.AST) -> Scope:
        """The scope a node is evaluated in. Calls, statements, defs and lambdas have it recorded;
        for any other node it is found from its position (the innermost function around it)."""
        ctx = self.ctx.get(id(node))
        if ctx is not None:
            return ctx.scope
        pos = (getattr(node, "lineno", 0), getattr(node, "col_offset", 0))
        best: Optional[FunctionInfo] = None
        for f in self.functions:
            fn = f.node
            start = (fn.lineno, fn.col_offset)
            if start < pos <= _end(fn) and (best is None or start >= (best.node.lineno, best.node.col_offset)):
                best = f
        return best.scope if best is not None else self.module_scope

    def context(self, node: ast.AST) -> Optional[Context]:
        return self.ctx.get(id(node))

    def function_at(self, node: ast.AST) -> Optional[FunctionInfo]:
        """The innermost function a (recorded) node runs in, or None at module/class level."""
        ctx = self.ctx.get(id(node))
        if ctx is None:
            return None
        s: Optional[Scope] = ctx.scope
        while s is not None and s.kind == "class":
            s = s.parent
        return s.func if s is not None else None

    def dispose(self) -> None:
        """Break the model's reference cycles (scopes <-> functions, loops <-> children) so that
        reference counting frees it at once; left to the cyclic GC, freeing hundreds of thousands
        of objects per file cost a quarter of a corpus run."""
        for f in self.functions:
            f.__dict__.clear()
        for scope in getattr(self, "scopes", ()):  # class scopes too: their events point back
            scope.events.clear()
            scope.defs.clear()
            scope.func = scope.cls = scope.parent = scope.node = None
        for loop in self.loops:
            loop.children = []
            loop.parent = None
        for cls in self.classes.values():
            cls.__dict__.clear()
        self.__dict__.clear()

    def spellings(self, names) -> set:
        """The names a reference to an API function whose own name is in ``names`` can end in,
        in this module: those names plus local aliases (``from jax.random import normal as N``,
        ``sample = jax.random.normal``)."""
        out = set(names)
        for scope in [self.module_scope] + [f.scope for f in self.functions]:
            for local, qn in scope.imports.items():
                if qn and qn.rsplit(".", 1)[-1] in names:
                    out.add(local)
        # Aliases by assignment are looked for at module level only (``sample = jax.random.normal``).
        for local, evs in self.module_scope.events.items():
            for ev in evs:
                v = ev.value if ev.kind == "assign" else None
                if isinstance(v, (ast.Attribute, ast.Name)) and \
                        (v.attr if isinstance(v, ast.Attribute) else v.id) in out:
                    out.add(local)
        return out

    def calls_named(self, names) -> tuple:
        """Calls whose callee is spelled with one of ``names`` or a local alias of one: a cheap
        pre-filter before resolving (the caller still checks the qualified name). Found once per
        set of names (the key rules ask for the same ones three times)."""
        key = ("named", frozenset(names))
        memo = self._calls_memo
        found = memo.get(key)
        if found is None:
            found = memo[key] = self._calls_spelled(self.spellings(names))
        return found

    def calls_resolvable_to(self, names) -> tuple:
        """Every call whose callee may resolve (:meth:`resolve`) to a qualified name whose last
        part is one of ``names``, in source order: spelled with one of them (or with a name
        :func:`~jaxlint.names.canonical` renames to one: ``pjit`` -> ``jit``), or with a name some
        scope binds to such a spelling: an import alias, or a plain assignment (``g = jax.grad``)
        in a function or class too, transitively. Unlike :meth:`calls_named` (module-level and
        import aliases only) it misses none, so a caller may resolve these calls instead of all."""
        key = ("resolvable", frozenset(names))
        memo = self._calls_memo
        if key in memo:
            return memo[key]
        out = set(names)
        for old, new in (*N.CANONICAL_NAMES.items(), *((o[:-1], n[:-1]) for o, n in N.CANONICAL_PREFIXES)):
            if new.rsplit(".", 1)[-1] in out:
                out.add(old.rsplit(".", 1)[-1])
        grew = True
        while grew:  # aliases of aliases
            grew = False
            for scope in self.scopes:
                for local, qn in scope.imports.items():
                    if local not in out and qn and qn.rsplit(".", 1)[-1] in out:
                        out.add(local)
                        grew = True
                for local, evs in scope.events.items():
                    if local in out:
                        continue
                    for ev in evs:
                        v = ev.value if ev.kind == "assign" else None
                        if isinstance(v, (ast.Attribute, ast.Name)) and \
                                (v.attr if isinstance(v, ast.Attribute) else v.id) in out:
                            out.add(local)
                            grew = True
                            break
        calls = memo[key] = self._calls_spelled(out)
        return calls

    def _calls_spelled(self, spellings) -> tuple:
        """The calls whose callee's last name is one of ``spellings``, in source order."""
        by_name = self.calls_by_name
        return tuple(sorted((c for name in spellings for c in by_name.get(name, ())), key=_pos))

    def binding(self, name: str, scope: Scope, pos: tuple) -> Optional[Binding]:
        """The binding event of ``name`` that reaches position ``pos`` in ``scope`` (None for
        imports and unbound names)."""
        found = self._lookup(name, scope, pos)
        return found[0] if found is not None else None

    def imported_binding(self, name: str, scope: Scope) -> Optional[Binding]:
        """A binding of kind ``import`` for a name that ``from module import name`` binds in the scope a
        read in ``scope`` sees, where no statement of that scope binds it too: one object at every read
        (:meth:`binding` answers None for imports). None for a module import or ``import *``."""
        s = self.binding_scope(name, scope)
        src = s.import_src.get(name) if s is not None and not s.events.get(name) else None
        if src is None or src[1] is None:
            return None
        memo = self._import_bindings
        if (id(s), name) not in memo:
            node = next((n for n in self.import_nodes if isinstance(n, ast.ImportFrom) and self.scope_at(n) is s
                         and any((a.asname or a.name) == name for a in n.names)), None)
            memo[(id(s), name)] = None if node is None else Binding(_pos(node), "import", None, None, node, s)
        return memo[(id(s), name)]

    def binding_over_import(self, name: str, scope: Scope, pos: tuple) -> Optional[Binding]:
        """The binding of ``name`` that reaches ``pos`` in ``scope`` itself where the name is also
        imported there (:meth:`binding` answers None for an imported name): the last binding
        before ``pos``, when every import of the name in the scope comes before it (``from lib
        import df``, then a later notebook cell's ``df = grad(f)``). None otherwise."""
        if name not in scope.imports:
            return None
        before = [e for e in scope.events.get(name, ()) if e.pos < pos]
        if not before:
            return None
        last = max(before, key=lambda e: e.pos)
        for node in self.import_nodes:
            at = (node.lineno, node.col_offset)
            if at < last.pos or self.scope_at(node) is not scope or not any(
                    (a.asname or a.name.split(".")[0]) == name for a in node.names):
                continue
            ctx = self.ctx.get(id(node))
            if at < pos or (ctx is not None and ctx.loops):
                return None  # imported again before the read, or in a loop (that may run it before the read)
        return last

    def _lookup(self, name: str, scope: Scope, pos: tuple):
        """The binding of ``name`` that reaches ``pos`` in ``scope``, with the bindings after it in
        the same scope: ``(event, later)``; None when the name is an import or unbound. In the
        node's own scope this is the last binding before ``pos`` (the first use before any binding
        sees the last one, as a loop would); in enclosing scopes, their last binding."""
        s: Optional[Scope] = scope
        own = True
        while s is not None:
            if s.kind == "class" and not own:
                s = s.parent
                continue
            if name in s.globals:
                s, own = self.module_scope, False
                continue
            if name in s.imports:
                return None
            evs = s.events.get(name)
            if evs:
                if own:
                    for i, cand in enumerate(evs):
                        if cand.pos > pos:
                            return (self._reaching(evs, i, pos) if i else evs[-1]), evs[i:]
                    return self._reaching(evs, len(evs), pos), ()
                if s is self.module_scope and len(evs) > 1:
                    return self._global_at_calls(name, evs, scope), ()
                return evs[-1], ()
            s, own = s.parent, False
        return None

    def _global_at_calls(self, name: str, evs: list, scope: Scope):
        """The module binding of ``name`` that a function (in ``scope``) sees when the module binds the
        name more than once: the one reaching the module-level calls of the top-level function around
        ``scope``, made before the module rebinds that function's own name, when all of them see the same
        one (a notebook's NumPy ``solve_model`` called in its cell, before a later cell redefines ``T``
        with ``jax.jit``); the last binding otherwise, as a call after the module ran sees."""
        top = scope
        while top.parent is not None and top.parent is not self.module_scope:
            top = top.parent
        f = top.func if top.kind == "function" else None
        if f is None or top.parent is not self.module_scope or isinstance(f.node, ast.Lambda):
            return evs[-1]
        key = (id(f), name)
        if key not in self._called_globals:
            start = _pos(f.node)
            own = [e.pos for e in self.module_scope.events.get(f.name, ()) if e.pos > start]
            end = min(own) if own else None
            seen, found = set(), None
            for call in self.calls_by_name.get(f.name, ()):
                ctx = self.ctx.get(id(call))
                at = _pos(call)
                if ctx is None or ctx.scope is not self.module_scope or not isinstance(call.func, ast.Name):
                    continue
                if at < start or (end is not None and at > end):
                    continue
                before = [e for e in evs if e.pos < at]
                seen.add(id(before[-1]) if before else None)
                found = before[-1] if before else None
            self._called_globals[key] = found if len(seen) == 1 and found is not None else evs[-1]
        return self._called_globals[key]

    def _reaching(self, evs: list, i: int, pos: tuple):
        """The last of ``evs[:i]`` (bindings before ``pos``) not in the other arm of an ``if`` whose
        arm holds ``pos``: ``if c: x = f(x) else: x[m] = 0`` reads the ``x`` bound before the ``if``.
        ``evs[i - 1]`` when every one of them is."""
        for j in range(i - 1, -1, -1):
            if not self._other_arm(evs[j], pos):
                return evs[j]
        return evs[i - 1]

    def _other_arm(self, ev, pos: tuple) -> bool:
        """Whether ``pos`` lies in the other arm of an ``if`` one arm of which holds binding ``ev``."""
        node = ev.node
        ctx = self.ctx.get(id(node))
        if ctx is None:
            stmt = self.stmt_of.get(id(node))  # an assignment's target: its statement's context
            ctx = self.ctx.get(id(stmt)) if stmt is not None else None
        if ctx is None or not ctx.branches:
            return False
        table = self._if_memo
        if table is None:
            table = self._if_memo = {id(n): n for n in self.ifs if isinstance(n, ast.If)}
        for if_id, side in ctx.branches:
            node = table.get(if_id)
            other = (node.orelse if side == 0 else node.body) if node is not None else None
            if other and (other[0].lineno, other[0].col_offset) <= pos <= (other[-1].end_lineno,
                                                                           other[-1].end_col_offset):
                return True
        return False

    def _class_of(self, scope: Scope) -> Optional[ClassInfo]:
        s: Optional[Scope] = scope
        while s is not None:
            if s.kind == "class":
                return s.cls
            if s.kind == "function" and s.func is not None and s.func.cls is not None:
                return s.func.cls
            s = s.parent
        return None

    def _imported(self, name: str, scope: Scope):
        """``(model, name)`` for a name imported from one of the project's modules, ``(model, None)``
        for an imported project module; None otherwise or without a project resolver."""
        if self.project is None or self.path is None:
            return None
        s: Optional[Scope] = scope
        while s is not None:
            if name in s.import_src:
                # asked again for every use of the name: the lookup (files located, summaries
                # built and recorded for the result cache) is done once per import
                memo = self._imported_memo
                key = (id(s), name)
                if key not in memo:
                    module, attr, level = s.import_src[name]
                    memo[key] = self.project.imported(self.path, module, attr, level)
                return memo[key]
            if name in s.events:
                return None
            s = s.parent
        return self._star_imported(name)

    def star_imports(self) -> list:
        """``(module, level)`` of every ``from X import *`` run at module level, in source order."""
        memo = self._imported_memo.get("*")
        if memo is None:
            memo = self._imported_memo["*"] = [
                (n.module, n.level) for n in self.import_nodes
                if isinstance(n, ast.ImportFrom) and any(a.name == "*" for a in n.names)
                and self.scope_at(n) is self.module_scope]
        return memo

    def _star_imported(self, name: str):
        """``(model, name)`` when a ``from X import *`` of one of the project's modules brings in ``name``:
        a compiled callable it exports (``@jax.jit def loss_fn``) or a top-level name its summary lists;
        the last such import wins, as in Python. None when no star import of the project binds it (a
        library's, or a module whose names are not known)."""
        stars = self.star_imports()
        if not stars:
            return None
        key = ("*", name)
        if key not in self._imported_memo:
            found = None
            for module, level in reversed(stars):
                other = self.project.imported(self.path, module, None, level)
                if other is not None and (other[0].exported_callable(name) is not None
                                          or name in (getattr(other[0], "names", None) or ())):
                    found = (other[0], name)
                    break
            self._imported_memo[key] = found
        return self._imported_memo[key]


    def star_plain(self, name: str) -> Optional[str]:
        """Why ``name``, bound nowhere in the module, is no compiled callable: every ``from X import *`` of
        the module is of a project module that exports no compiled ``name`` (the name comes from one
        of them, or the code raises NameError). None when a star import is a library's or unreadable."""
        stars = self.star_imports()
        if not stars or self.project is None or self.path is None:
            return None
        for module, level in stars:
            other = self.project.imported(self.path, module, None, level)
            if other is None or other[0].exported_callable(name) is not None:
                return None
        spelled = ", ".join(f"`from {'.' * level}{module or ''} import *`" for module, level in stars)
        return f"`{name}` comes from {spelled}: a module of the project that compiles no `{name}`"


def _enclosing(m: "ModuleModel", node: ast.AST) -> Optional[FunctionInfo]:
    """The innermost function around a node without a recorded context, by position."""
    scope = m.scope_at(node)
    while scope is not None and scope.kind == "class":
        scope = scope.parent
    return scope.func if scope is not None else None


def module_import_sources(tree: ast.Module) -> dict:
    """``{local name: (module, name, level)}`` for the imports run at module level (those in
    ``if``/``try``/``with``/loop bodies too, not in functions or classes), as the walk records
    them in the module scope's ``import_src`` (builder.py), without building a model."""
    out: dict = {}
    _collect_imports(tree.body, out)
    return out


def _collect_imports(stmts, out: dict) -> None:
    for stmt in stmts:
        t = type(stmt)
        if t is ast.Import:
            for alias in stmt.names:
                if alias.asname:
                    out[alias.asname] = (alias.name, None, 0)
                else:
                    top = alias.name.split(".")[0]
                    out[top] = (top, None, 0)
        elif t is ast.ImportFrom:
            for alias in stmt.names:
                if alias.name != "*":
                    out[alias.asname or alias.name] = (stmt.module, alias.name, stmt.level)
        elif t not in (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef) and isinstance(stmt, ast.AST):
            # compound statements: their bodies, handlers and match cases, in source order
            _collect_imports([c for c in ast.iter_child_nodes(stmt)
                              if isinstance(c, (ast.stmt, ast.excepthandler, ast.match_case))], out)
