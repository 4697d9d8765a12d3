"""Lines that never run because a statement before them in their block always raises or ends it.

A finding about code that never runs is false (``POLICY.md``: "the code is dead"). Fresh sets' first
looks had such findings after statements Python is certain to fail on (fresh X, Z: an unfinished
script whose step function reads a name defined nowhere, a loss that reads a local before assigning
it, ``time.time()`` after ``from time import time``, a misspelt ``self.ciritc_params``): the
loops reported never get past that line.

A statement *always raises* when a part of it that Python evaluates every time the statement runs
(not an ``if`` expression's arms, the right of ``and``/``or``, a lambda's or a comprehension's body)
certainly fails:

* a name read that is bound nowhere Python looks (not local, in an enclosing function, at module
  level, or a builtin): ``NameError``. Not asked in a notebook (a kernel may hold names no cell
  binds) or in a module that may bind names out of sight (``from m import *``, ``globals()``,
  ``exec``, ``setattr``, a module ``__getattr__``);
* a local read before any binding of it in its function, outside loops: ``UnboundLocalError``;
* ``self.W`` where the class and its bases (the project's own plain classes, up to ``object``)
  cannot have ``W``: no file of the repository spells ``W`` but as ``self.W`` reads in the class,
  no base outside the project, no metaclass, no ``__getattr__``, no ``__dict__``/``setattr``:
  ``AttributeError``;
* ``t.attr`` where ``t`` is bound only by ``from time import time`` (a standard-library function
  of a few modules) and that function has no ``attr``: ``AttributeError``;
* a call that ends the program: ``sys.exit()``, the builtins ``exit()``/``quit()`` (``SystemExit``),
  ``os._exit()``, ``os.abort()``; a name bound by the user (a parameter ``exit``) is not one;
* a call of a function that always raises: a module-level function called by its name, or the
  class's own method through ``self`` when no class of the repository subclasses it, directly or
  through a JAX transform that calls it (``jax.value_and_grad(self.loss)(...)``), undecorated or
  decorated only by a compiling transform. A function always raises when a statement of its body's
  top level always raises (or is a ``raise``) and no ``return`` comes before it; not a generator
  or coroutine.

The lines after such a statement in its block never run, and nor do the lines after a ``return``,
``raise``, ``continue`` or ``break`` in its block. Nothing is said about the block around it: a
``try`` may catch the error, an ``if`` has another arm, a ``with`` may swallow it. Python
semantics only; the engine makes the findings there opt-in, naming the statement.
"""

from __future__ import annotations

import ast
import builtins
import importlib
import inspect
import re
from typing import Optional

from . import arity
from .constbranches import dead_arm
from .syntax import _TERMINAL, assignment_targets, evaluated_parts

_IPYTHON = frozenset({"get_ipython", "display", "In", "Out", "exit", "quit", "_", "__", "___"})
# names of newer Pythons than the one running, so that a verdict does not depend on it
_NEWER = frozenset({"ExceptionGroup", "BaseExceptionGroup", "EncodingWarning", "aiter", "anext",
                    "PythonFinalizationError"})
_BUILTIN = frozenset(dir(builtins)) | _IPYTHON | _NEWER
# what may bind a name or an attribute out of sight: a namespace written, attribute hooks, a star import
_DYNAMIC = re.compile(r"(?<![\w.])(?:globals|vars|setattr|exec|eval)\s*\(|__(?:getattr|getattribute|dict|builtins)__"
                      r"|\bimport\s+\*|\bbuiltins\.")
_SETS_ATTRIBUTES = re.compile(rb"(?<![\w.])setattr\s*\(|__(?:dict)__|(?<![\w.])vars\s*\(")
# standard-library modules whose functions are looked up (cheap, side-effect-free imports)
_FUNCTION_MODULES = ("time", "math", "random", "copy", "json", "pickle", "glob")
# transforms that call the function they wrap when their result is called
_CALLING = frozenset({"jax.jit", "jax.grad", "jax.value_and_grad", "jax.vmap", "jax.pmap", "jax.checkpoint",
                      "jax.remat", "jax.jacfwd", "jax.jacrev", "jax.hessian", "flax.nnx.jit", "flax.nnx.grad",
                      "flax.nnx.value_and_grad", "equinox.filter_jit", "equinox.filter_grad",
                      "equinox.filter_value_and_grad"})
_PLAIN_BASES = frozenset({"builtins.object", "abc.ABC"})  # bases that give an instance no attribute of a user's name
_COMPILING = frozenset({"jax.jit", "jax.pmap", "flax.nnx.jit", "equinox.filter_jit"})
_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)
# calls that end the program: SystemExit (``sys.exit``, the site builtins ``exit``/``quit``), or no return at all
_EXITS = frozenset({"sys.exit", "builtins.exit", "builtins.quit", "os._exit", "os.abort"})


def never_runs(m, line: int) -> Optional[str]:
    """Why line ``line`` of the module never runs (a sentence for a finding's evidence), or None."""
    state = getattr(m, "_certain_raise", None)
    if state is None:
        state = m._certain_raise = _State(m)
    return state.why(line)


class _Ctx:
    """Where a statement runs: the functions around it (outermost first), its class (for the
    innermost function when it is a method of a module-level class), loops around it in its function."""

    __slots__ = ("chain", "cls", "loops")

    def __init__(self, chain: tuple, cls: Optional[ast.ClassDef], loops: int):
        self.chain, self.cls, self.loops = chain, cls, loops


class _State:
    def __init__(self, m):
        self.m = m
        self.text = getattr(m, "source_text", None) or ""
        self.notebook = bool(getattr(m, "notebook", False))
        self._dynamic: Optional[bool] = None
        self.memo: dict = {}  # line -> why
        self.ended: dict = {}  # id of a statement -> why it always raises or ends its block, or None
        self.raises: dict = {}  # id of a def -> why it always raises, or None
        self.scopes: dict = {}  # id of a def (or the module) -> (bindings: name -> positions, declared)
        self.subclassed: dict = {}
        # found once, when first asked: module-level names, ``global`` names, whether a file of the repository
        # sets attributes by computed names, ``from time import time``s, top-level defs by name
        self.module_bound = self.declared_global = self.sets_attributes = self.function_imports = self.top_defs = None
        self.nonlocals: Optional[set] = None
        self.lines: Optional[list] = None

    def dynamic(self) -> bool:
        """Whether the module may bind names or attributes out of sight (:data:`_DYNAMIC`), asked once."""
        if self._dynamic is None:
            self._dynamic = not self.text or bool(_DYNAMIC.search(self.text))
        return self._dynamic

    # -- where a line is

    def why(self, line: int) -> Optional[str]:
        if line not in self.memo:
            self.memo[line] = self._why(line)
        return self.memo[line]

    def _why(self, line: int) -> Optional[str]:
        tree = self.m.tree
        block, ctx = tree.body, _Ctx((), None, 0)
        top = True
        while block:
            i = next((k for k, s in enumerate(block) if s.lineno <= line <= (s.end_lineno or s.lineno)), None)
            if i is None:
                return None
            if not (top and self.notebook):  # a notebook's cells run on after a failing cell
                for s in block[:i]:
                    why = self._ends(s, ctx)
                    if why is not None:
                        return f"{why}; the lines after it in its block never run"
            s = block[i]
            if isinstance(s, ast.If):
                why = dead_arm(self.m, s, line, self.dynamic)
                if why is not None:
                    return why
            block, ctx = self._inner(s, line, ctx)
            top = False
        return None

    def _inner(self, s: ast.stmt, line: int, ctx: _Ctx):
        """The block of ``s`` that holds ``line``, and its context."""
        if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return s.body, _Ctx(ctx.chain + (s,), None, 0)  # a function nested in a method is no method
        if isinstance(s, ast.ClassDef):
            if ctx.chain or s not in self.m.tree.body:
                return [], ctx
            for t in s.body:
                if isinstance(t, (ast.FunctionDef, ast.AsyncFunctionDef)) and t.lineno <= line <= t.end_lineno:
                    return t.body, _Ctx((t,), s, 0)
            return [], ctx  # a class body's own statements: not asked
        loop = isinstance(s, (ast.For, ast.AsyncFor, ast.While))
        blocks = []
        if isinstance(s, ast.Try) or type(s).__name__ == "TryStar":
            blocks = [s.body, *(h.body for h in s.handlers), s.orelse, s.finalbody]
        elif isinstance(s, (ast.If, ast.For, ast.AsyncFor, ast.While)):
            blocks = [s.body, s.orelse]
        elif isinstance(s, (ast.With, ast.AsyncWith)):
            blocks = [s.body]
        elif type(s).__name__ == "Match":
            blocks = [c.body for c in s.cases]
        for b in blocks:
            if b and b[0].lineno <= line <= (b[-1].end_lineno or b[-1].lineno):
                return b, _Ctx(ctx.chain, ctx.cls, ctx.loops + (1 if loop else 0))
        return [], ctx

    def _ends(self, s: ast.stmt, ctx: _Ctx) -> Optional[str]:
        key = id(s)  # a statement is asked once, whichever line below it is asked about
        if key not in self.ended:
            self.ended[key] = self._ends_now(s, ctx)
        return self.ended[key]

    def _ends_now(self, s: ast.stmt, ctx: _Ctx) -> Optional[str]:
        if isinstance(s, _TERMINAL):  # as :func:`.syntax.unreachable_spans` reads them
            return f"`{type(s).__name__.lower()}` on line {s.lineno} ends the block"
        why = self._stmt_raises(s, ctx)
        return f"line {s.lineno} always raises: {why}" if why is not None else None

    # -- statements and expressions

    def _stmt_raises(self, s: ast.stmt, ctx: _Ctx) -> Optional[str]:
        # an assignment binds its targets after evaluating its value: ``x = x.reshape(...)`` reads first
        later = {(n.lineno, n.col_offset) for t in assignment_targets(s) for n in ast.walk(t)
                 if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
        for node in evaluated_parts(s):
            why = None
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
                why = self._name_fails(node, ctx, later)
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load):
                why = self._attribute_fails(node, ctx)
            elif isinstance(node, ast.Call):
                why = self._call_raises(node, ctx)
            if why is not None:
                return why
        return None

    def _name_fails(self, node: ast.Name, ctx: _Ctx, later: set) -> Optional[str]:
        name = node.id
        if name.startswith("__") and name.endswith("__"):
            return None
        if ctx.chain:
            binds, declared = self._scope(ctx.chain[-1])
            if name in declared:
                return None
            if name in binds:
                if ctx.loops:  # a binding later in the loop may run before this read on a later pass
                    return None
                if all(p >= (node.lineno, node.col_offset) or p in later for p in binds[name]):
                    return f"`{name}` is read before any assignment in `{ctx.chain[-1].name}` (UnboundLocalError)"
                return None
            for f in ctx.chain[:-1]:
                if name in self._scope(f)[0]:
                    return None
        if self.notebook or name in _BUILTIN or name in self._module_bound() or self.dynamic():
            return None
        return f"`{name}` is defined nowhere (NameError)"

    def _attribute_fails(self, node: ast.Attribute, ctx: _Ctx) -> Optional[str]:
        base = node.value
        if not isinstance(base, ast.Name) or node.attr.startswith("__"):
            return None
        if ctx.chain and ctx.cls is not None and _instance_param(ctx.chain[-1]) == base.id:
            return self._missing_attribute(node, ctx)
        if ctx.chain and any(base.id in self._scope(f)[0] or base.id in self._scope(f)[1] for f in ctx.chain):
            return None
        source = self._only_from_import(base.id)
        if source is None:
            return None
        try:
            obj = getattr(importlib.import_module(source[0]), source[1])
        except (ImportError, AttributeError):
            return None
        if (inspect.isbuiltin(obj) or inspect.isfunction(obj)) and not hasattr(obj, node.attr):
            return (f"`{base.id}` is the function `{source[0]}.{source[1]}` (`from {source[0]} import {source[1]}`), "
                    f"which has no attribute `{node.attr}` (AttributeError)")
        return None

    def _call_raises(self, node: ast.Call, ctx: _Ctx) -> Optional[str]:
        func = node.func
        if isinstance(func, (ast.Name, ast.Attribute)) and self.m.resolve(func, self.m.scope_at(node)) in _EXITS:
            return f"`{ast.unparse(func)}()` ends the program"
        if isinstance(func, ast.Call) and func.args and self._resolves(func.func, _CALLING):
            func = func.args[0]  # jax.value_and_grad(loss)(...) calls loss
        wrong = arity.arity_error(self.m, node)  # ``partial(f, a)(x, y, z)`` for ``f(a, x, y)``: TypeError
        if wrong is not None:
            return wrong
        target = self._callee(func, ctx)
        if target is None:
            return None
        why = self._always_raises(target[0], target[1])
        return f"it calls `{ast.unparse(func)[:40]}`, which always raises: {why}" if why is not None else None

    # -- callees

    def _callee(self, func: ast.AST, ctx: _Ctx):
        """``(def, class or None)`` a call certainly reaches, or None."""
        tree = self.m.tree
        if isinstance(func, ast.Name):
            if self.top_defs is None:  # the module's top-level defs by name, found once
                self.top_defs = {}
                for s in tree.body:
                    if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                        self.top_defs.setdefault(s.name, []).append(s)
            defs = self.top_defs.get(func.id, ())
            if (len(defs) != 1 or not isinstance(defs[0], ast.FunctionDef) or func.id in self._globals()
                    or any(func.id in self._scope(f)[0] for f in ctx.chain)):
                return None
            return (defs[0], None) if len(self._scope(tree)[0].get(func.id, ())) == 1 else None
        if (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and ctx.chain
                and ctx.cls is not None and _instance_param(ctx.chain[-1]) == func.value.id
                and func.value.id not in self._rebound(ctx.chain[-1])):
            cls = ctx.cls
            defs = [s for s in cls.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))
                    and s.name == func.attr]
            if len(defs) != 1 or not isinstance(defs[0], ast.FunctionDef) or self._subclassed(cls) is not False:
                return None
            if _instance_param(defs[0]) is None:
                return None
            return defs[0], cls
        return None

    def _always_raises(self, fdef: ast.FunctionDef, cls: Optional[ast.ClassDef]) -> Optional[str]:
        key = id(fdef)
        if key in self.raises:
            return self.raises[key]
        self.raises[key] = None  # a cycle of calls sees "not known"
        why = None
        if all(self._calling_decorator(d) for d in fdef.decorator_list) and not self._generator(fdef):
            ctx = _Ctx((fdef,), cls, 0)
            for s in fdef.body:  # what a statement evaluates first comes before any return in it
                if isinstance(s, ast.Raise):
                    why = f"its `raise` on line {s.lineno}"
                    break
                inner = self._stmt_raises(s, ctx)
                if inner is not None:
                    why = f"on line {s.lineno}, {inner}"
                    break
                if any(isinstance(n, ast.Return) for n in _own_nodes(s)):
                    break
        self.raises[key] = why
        return why

    def _generator(self, fdef: ast.AST) -> bool:
        """Whether a def may be a generator or coroutine (its lines spell ``yield`` or ``await``): calling it
        runs nothing. Read from its text (the cheap, conservative side)."""
        if self.lines is None:
            self.lines = self.text.splitlines()
        body = "\n".join(self.lines[fdef.lineno - 1:fdef.end_lineno])
        return "yield" in body or "await" in body if self.lines else _generator(fdef)

    def _calling_decorator(self, d: ast.AST) -> bool:
        if self._resolves(d, _COMPILING):
            return True
        return (isinstance(d, ast.Call) and self._resolves(d.func, frozenset({"functools.partial"}))
                and bool(d.args) and self._resolves(d.args[0], _COMPILING))

    def _resolves(self, expr: ast.AST, names: frozenset) -> bool:
        if not isinstance(expr, (ast.Name, ast.Attribute)):
            return False
        return self.m.resolve(expr, self.m.module_scope) in names

    # -- classes

    def _missing_attribute(self, node: ast.Attribute, ctx: _Ctx) -> Optional[str]:
        word, cls, param = node.attr, ctx.cls, node.value.id
        # a cost bound, not a decision: a word the module spells more than a few times is not asked about
        # (the walk of the class's methods below is the costly part; a typo is spelled once or twice)
        if self.text.count(word) > 3 or word in dir(object) or param in self._rebound(ctx.chain[-1]) \
                or self.dynamic():
            return None
        # every occurrence of the word in the module is such a read in the class's methods
        spelled = len(re.findall(r"(?<![\w])" + re.escape(word) + r"(?![\w])", self.text))
        reads = 0
        for f in cls.body:
            if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef)) and (p := _instance_param(f)) is not None:
                reads += sum(1 for n in ast.walk(f) if isinstance(n, ast.Attribute) and n.attr == word
                             and isinstance(n.ctx, ast.Load) and isinstance(n.value, ast.Name) and n.value.id == p)
        if spelled == 0 or spelled != reads or not self._plain_chain(cls, self.m, 0):
            return None
        project, path = getattr(self.m, "project", None), getattr(self.m, "path", None)
        if project is None or path is None or project.mentioned_elsewhere(path, word, _spelled) is not False:
            return None
        if self._repository_sets_attributes(project, path):
            return None
        return (f"`{param}.{word}`: `{cls.name}` and its bases (the project's own classes, up to `object`) have no "
                f"`{word}`, and no file of the repository assigns it (AttributeError)")

    def _repository_sets_attributes(self, project, path: str) -> bool:
        """Whether a file of the repository may set attributes by computed names on any object
        (``setattr(agent, k, v)`` for a config's keys, an update of an object's ``__dict__``): then any attribute
        may exist, whatever is spelled."""
        if self.sets_attributes is None:
            files = project.repository_files(path) or ()
            self.sets_attributes = any(_SETS_ATTRIBUTES.search(data) for p, data in files if p.endswith(".py"))
        return self.sets_attributes

    def _plain_chain(self, cls: ast.ClassDef, model, depth: int) -> bool:
        """Whether ``cls`` and its bases are the project's plain classes: no metaclass, no decorator but
        a dataclass's, no attribute hooks, every base ``object`` or such a class."""
        if depth > 6 or cls.keywords or any(not _dataclass(d) for d in cls.decorator_list):
            return False
        if any(isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)) and s.name in ("__getattr__", "__getattribute__")
               for s in cls.body):
            return False
        for b in cls.bases:
            if isinstance(b, (ast.Name, ast.Attribute)) and model.resolve(b, model.module_scope) in _PLAIN_BASES:
                continue
            if not isinstance(b, ast.Name):
                return False
            local = [s for s in model.tree.body if isinstance(s, ast.ClassDef) and s.name == b.id]
            if len(local) == 1 and b.id not in model.module_scope.import_src:
                if not self._plain_chain(local[0], model, depth + 1):
                    return False
                continue
            if not self._imported_plain(model, b.id, depth):
                return False
        return True

    def _imported_plain(self, model, name: str, depth: int) -> bool:
        src = model.module_scope.import_src.get(name)
        if depth > 6:
            return False
        project, path = getattr(model, "project", None), getattr(model, "path", None)
        if src is None or project is None or path is None:
            return False
        module, imported, level = src
        if imported is None:
            return False
        target = project.locate(path, module, level)
        if target is None:
            return False
        data = project.read(target)
        if data is None:
            return False
        text = data.decode("utf-8", "replace")
        if _DYNAMIC.search(text):
            return False

        def ask(other) -> bool:
            found = [s for s in other.tree.body if isinstance(s, ast.ClassDef) and s.name == imported]
            if not found and imported in other.module_scope.import_src:  # a package re-exporting it
                return self._imported_plain(other, imported, depth + 1)
            return len(found) == 1 and self._plain_chain(found[0], other, depth + 1)

        return bool(project.answer(target, ("plain-class", imported), ask, False))

    def _subclassed(self, cls: ast.ClassDef) -> Optional[bool]:
        """Whether a class of the repository names ``cls`` among its bases; None when not known. Other
        files are asked through the project resolver (:func:`derives_from`), which records them for the
        result cache."""
        if cls.name not in self.subclassed:
            project, path = getattr(self.m, "project", None), getattr(self.m, "path", None)
            found: Optional[bool] = derives_from(path, self.text, cls.name, path)
            if not found:
                found = None if project is None or path is None else project.mentioned_elsewhere(
                    path, cls.name, spells=derives_from)
            self.subclassed[cls.name] = found
        return self.subclassed[cls.name]

    # -- scopes

    def _scope(self, node: ast.AST):
        """``(bindings, declared)`` of a function (or the module): name -> sorted positions of its
        bindings in that scope (as the model's walk recorded them: an assignment binds at the end of its
        statement, an import at the scope's start); names declared ``global`` there or ``nonlocal``
        anywhere in the module. A module with ``match`` statements (whose captures the model does not
        record) is read by :func:`_bindings`."""
        key = id(node)
        if key not in self.scopes:
            m = self.m
            scope = m.module_scope if node is m.tree else getattr(m.func_of_node.get(key), "scope", None)
            if scope is None or ("match" in self.text and "case" in self.text):
                self.scopes[key] = _bindings(node, ":=" in self.text or "nonlocal" in self.text)
            else:
                # a comprehension's target is the comprehension's own (``[u * u for u in us]``), not the scope's
                binds = {name: sorted(b.pos for b in evs if not (b.kind == "for" and any(
                    lp.kind == "comprehension" for lp in b.loops))) for name, evs in scope.events.items() if evs}
                binds = {name: ps for name, ps in binds.items() if ps}
                for name in scope.imports:
                    binds.setdefault(name, []).insert(0, (0, 0))
                if self.nonlocals is None:
                    self.nonlocals = {x for d in m.decls if isinstance(d, ast.Nonlocal) for x in d.names}
                self.scopes[key] = binds, set(scope.globals) | self.nonlocals
        return self.scopes[key]

    def _rebound(self, f: ast.AST) -> set:
        binds, _ = self._scope(f)
        return {n for n, ps in binds.items() if len(ps) > 1}

    def _module_bound(self) -> frozenset:
        """Names bound at module level: by its own statements, or in a function that declares them ``global``."""
        if self.module_bound is None:
            self.module_bound = frozenset(self._scope(self.m.tree)[0]) | self._globals()
        return self.module_bound

    def _globals(self) -> frozenset:
        """Names some function of the module declares ``global`` (it may bind them at any time)."""
        if self.declared_global is None:  # as the model's walk recorded them (its ``global`` statements)
            self.declared_global = frozenset(x for d in self.m.decls if isinstance(d, ast.Global) for x in d.names)
        return self.declared_global

    def _only_from_import(self, name: str) -> Optional[tuple]:
        """``(module, function)`` when ``name``'s only binding in the module is ``from module import
        function`` of one of :data:`_FUNCTION_MODULES`."""
        if self.function_imports is None:  # the module's ``from time import time``s, from its imports, once
            counts: dict = {}
            found = {}
            for s in self.m.import_nodes:
                for a in s.names:
                    local = a.asname or a.name.split(".")[0]
                    counts[local] = counts.get(local, 0) + 1
                    if isinstance(s, ast.ImportFrom) and s.level == 0 and s.module in _FUNCTION_MODULES:
                        found[local] = (s.module, a.name)
            self.function_imports = {k: v for k, v in found.items() if counts[k] == 1}
        found = self.function_imports.get(name)
        if found is None or self.m.module_scope.events.get(name) or name in self._globals():
            return None
        return found


def derives_from(other: str, data, name: str, owner: str, files=()) -> bool:
    """Whether a file's text ``data`` derives a class from the class ``name`` (the conservative side:
    any file, and any class of that name). A ``spells`` question of ``mentioned_elsewhere``, asked here
    and by :mod:`.unreferenced`."""
    text = data if isinstance(data, str) else data.decode("utf-8", "replace")
    return re.search(r"\bclass\s+\w+\s*\([^)]*\b" + re.escape(name) + r"\b", text) is not None


def _instance_param(f: ast.AST) -> Optional[str]:
    """The instance parameter of a method (its first), or None for a static or class method."""
    if not isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return None
    if any(isinstance(d, ast.Name) and d.id in ("staticmethod", "classmethod") for d in f.decorator_list):
        return None
    args = f.args.posonlyargs + f.args.args
    return args[0].arg if args else None


def _dataclass(d: ast.AST) -> bool:
    return ast.unparse(d.func if isinstance(d, ast.Call) else d) in ("dataclass", "dataclasses.dataclass")


def _spelled(*_) -> bool:  # ``mentioned_elsewhere``'s question: any spelling in another file may assign it
    return True


def _generator(f: ast.AST) -> bool:
    return any(isinstance(n, (ast.Yield, ast.YieldFrom, ast.Await)) for s in f.body for n in _own_nodes(s))


def _own_nodes(node: ast.AST):
    """``node`` and the nodes under it in its own scope (nested defs, lambdas, classes and
    comprehensions not entered; a def's decorators and defaults are)."""
    stack = [node]
    while stack:
        n = stack.pop()
        yield n
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)):
            stack.extend(n.decorator_list)
            stack.extend(n.args.defaults)
            stack.extend(d for d in n.args.kw_defaults if d is not None)
            continue
        if isinstance(n, ast.ClassDef):
            stack.extend(n.decorator_list)
            stack.extend(n.bases)
            stack.extend(k.value for k in n.keywords)
            continue
        if isinstance(n, ast.Lambda):
            stack.extend(n.args.defaults)
            continue
        if isinstance(n, _COMPREHENSIONS):
            stack.append(n.generators[0].iter)
            continue
        stack.extend(ast.iter_child_nodes(n))


def _bindings(scope: ast.AST, deep: bool = True):
    """Bindings of a function's (or module's) own scope: name -> sorted positions; and the names
    declared ``global``/``nonlocal`` in it or ``nonlocal`` in a function nested in it (``deep``: the
    module's text spells ``:=`` or ``nonlocal``, which the walk of nested code looks for)."""
    binds: dict = {}
    declared: set = set()

    def add(name: str, node: ast.AST) -> None:
        binds.setdefault(name, []).append((getattr(node, "lineno", 0), getattr(node, "col_offset", 0)))

    if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)):
        a = scope.args
        for p in a.posonlyargs + a.args + a.kwonlyargs + [x for x in (a.vararg, a.kwarg) if x is not None]:
            binds.setdefault(p.arg, []).append((0, 0))
    body = scope.body
    for s in body:
        for n in _own_nodes(s):
            if isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del)):
                add(n.id, n)
            elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                add(n.name, n)
            elif isinstance(n, (ast.Import, ast.ImportFrom)):
                for al in n.names:
                    add((al.asname or al.name).split(".")[0], n)
            elif isinstance(n, ast.ExceptHandler) and n.name:
                add(n.name, n)
            elif isinstance(n, (ast.Global, ast.Nonlocal)):
                declared.update(n.names)
            elif type(n).__name__ in ("MatchAs", "MatchStar") and getattr(n, "name", None):
                add(n.name, n)
            elif type(n).__name__ == "MatchMapping" and getattr(n, "rest", None):
                add(n.rest, n)
    # walrus targets in comprehensions bind in this scope; nested functions may declare nonlocal
    for s in body if deep else ():
        for n in ast.walk(s):
            if isinstance(n, ast.NamedExpr) and isinstance(n.target, ast.Name):
                add(n.target.id, n)
            elif isinstance(n, ast.Nonlocal):
                declared.update(n.names)
    for v in binds.values():
        v.sort()
    return binds, declared
