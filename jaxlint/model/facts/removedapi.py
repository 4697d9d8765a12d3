"""Names JAX has removed (a table, as data) and the **removed** fact: a reference in the module is to
one of them, proven through the module's imports, and no compatibility check guards it.

Where each reference fails, and so where it is reported (one place per use):

* an import statement that names a removed name or module (``from jax import tree_map``,
  ``import jax.experimental.host_callback as hcb``, ``from jax.experimental import maps``) fails
  itself (ImportError): reported there, and the names it binds are not reported again at their uses;
* an attribute chain (``jax.tree_map``, ``tree_util.tree_multimap`` after ``from jax import
  tree_util``) fails at the lookup (AttributeError): reported at each use.

Disproven (no finding) where the code shows that it knows: the reference is in the body of a
``try`` whose handlers catch ImportError, AttributeError (or a base of them, or everything), in
either branch of an ``if``/conditional expression that tests ``hasattr``/``getattr`` on a JAX
object or JAX's version (``jax.__version__``, ``jax.__version_info__``, ``jaxlib.__version__``,
``importlib.metadata.version("jax")``, or a name bound to one of them), under ``if TYPE_CHECKING:``,
or the module assigns the name itself (``jax.tree_map = jax.tree.map``).
"""

from __future__ import annotations

import ast
from typing import Optional

from . import proof
from .removedtable import KEYWORDS, OPTIONS, TABLE, Removed


_KEYWORD_FUNCTIONS = frozenset(f.rsplit(".", 1)[1] for f, _ in KEYWORDS)
# what the model's names resolve those functions to, where that is another function (names.CANONICAL_NAMES)
_CANONICAL_KEYWORD_FUNCTIONS = frozenset({"jax.jit"})
_CONFIG_CALLS = frozenset({"jax.config.update", "jax.config.config.update", "jax._src.config.config.update"})

# The last part of every name: a reference spells it (an attribute chain reaches the removed name; an
# import names it, or its module, as ``from jax.experimental.maps import xmap`` does), so a module
# that spells none of them has no reference to look at.
WORDS = frozenset(name.rsplit(".", 1)[1] for name in TABLE)
# The names of types among them (``DeviceArray``): only these are looked for in annotations as well.
TYPE_WORDS = frozenset(w for w in WORDS if w[:1].isupper())
# Every dotted tail of every name (``tree_map``, ``jax.tree_map``, ``tree_util.tree_multimap``, ...):
# an attribute chain reaches a name only if the attributes after its base, up to some point, are one.
_TAILS = frozenset(".".join(parts[i:]) for parts in (name.split(".") for name in TABLE) for i in range(1, len(parts)))


class Reference:
    """A reference to a table entry: ``node`` (where it is reported: the import alias, or the
    attribute chain of the use), ``entry``, ``kind`` ("import" or "use"), ``fact`` (the removed
    fact, proven or disproven), and for a use ``chain`` (the attribute whose name is the entry's),
    ``base`` (the name the chain starts from) and ``base_name`` (what that name imports)."""

    __slots__ = ("node", "entry", "kind", "fact", "chain", "base", "base_name", "statement")

    def __init__(self, node, entry: Removed, kind: str, fact: proof.Fact, chain=None, base=None,
                 base_name: str = "", statement=None):
        self.node = node
        self.entry = entry
        self.kind = kind
        self.fact = fact
        self.chain = chain
        self.base = base
        self.base_name = base_name
        self.statement = statement


def entry_for(name: str) -> Optional[Removed]:
    """The entry ``name`` is, or is under (``jax.experimental.maps.xmap``). Where it is under
    several (``jax.lib.xla_bridge.get_backend``: the function went in 0.8.0, its module in 0.9.0),
    the one removed first, the release from which the name fails; the outer one on a tie."""
    parts = name.split(".")
    best = None
    for i in range(2, len(parts) + 1):
        hit = TABLE.get(".".join(parts[:i]))
        if hit is not None and (best is None or hit.removed < best.removed):
            best = hit
    return best


_CATCHES = frozenset("builtins." + n for n in (
    "ImportError", "ModuleNotFoundError", "AttributeError", "Exception", "BaseException"))
_VERSIONS = frozenset({"jax.__version__", "jax.__version_info__", "jax.version.__version__", "jax.version._version",
                       "jax.version.__version_info__", "jaxlib.__version__", "jaxlib.version.__version__",
                       "jax.lib.__version__", "jax.lib.version"})
_METADATA = frozenset({"importlib.metadata.version", "importlib_metadata.version", "pkg_resources.get_distribution"})
_CHECKS = frozenset({"builtins.hasattr", "builtins.getattr"})


def _spelled(model, func, scope) -> Optional[str]:
    """The qualified name a call's function is spelled as, through the module's imports but not JAX's
    aliases (``pjit`` after ``from jax.experimental.pjit import pjit`` is ``jax.experimental.pjit.pjit``,
    which the model's names resolve to ``jax.jit``), or None."""
    attrs = []
    while isinstance(func, ast.Attribute):
        attrs.append(func.attr)
        func = func.value
    if not isinstance(func, ast.Name):
        return None
    base = _import_source(model, func.id, scope)
    return ".".join([base, *reversed(attrs)]) if base else None


def _import_source(model, name: str, scope) -> Optional[str]:
    """What the plain name ``name`` imports where it is read, spelled as the import statement
    spells it (``from jax import tree_util as tu`` -> ``jax.tree_util``), or None when it is not an
    import there (a local variable, a parameter, a relative import)."""
    s = model.binding_scope(name, scope, "import_src")
    if s is None or name not in s.import_src:
        return None  # a local variable, a parameter, or nothing
    module, attr, level = s.import_src[name]
    if level or not module:
        return None
    return module if attr is None else f"{module}.{attr}"


class _Walk:
    """The candidate references the model's walk listed (attributes named like a table entry, import
    statements), each with the guard around it, found from its position."""

    def __init__(self, model):
        self.model = model
        self.refs: list = []
        self.imported_modules: set = set()  # entries a module import names: their uses are that import's
        self.assigned: dict = {}  # entry name -> line where the module assigns it (its own shim)
        self._guards: dict = {}  # id(Try/If/IfExp) -> its guard sentence or None

    def run(self) -> list:
        for node in self.model.import_nodes:
            self._import(node)
        for node in self.model.watched_attrs:
            self._attribute(node)
        for call in self.model.calls_by_name.get("update", ()):
            self._option(call)
        lasts = set(_KEYWORD_FUNCTIONS)  # and the names a module-level import binds them to (clip as jclip)
        lasts.update(name for name, (_, attr, _) in self.model.module_scope.import_src.items()
                     if attr in _KEYWORD_FUNCTIONS)
        for last in lasts:
            for call in self.model.calls_by_name.get(last, ()):
                self._keywords(call)
        out = []
        # an attribute chain inside another reported one (``jax.lib.xla_bridge`` of
        # ``jax.lib.xla_bridge.get_backend``): the outer reference is the one reported
        inner = set()
        for ref in self.refs:
            if ref.kind == "use":
                n = ref.node.value
                while isinstance(n, ast.Attribute):
                    inner.add(id(n))
                    n = n.value
        for ref in self.refs:
            if ref.kind == "use" and id(ref.node) in inner:
                continue
            if ref.kind == "use" and any((ref.entry.name == m or ref.entry.name.startswith(m + "."))
                                         and not ref.entry.removed < TABLE[m].removed
                                         for m in self.imported_modules):
                continue  # ``import jax.experimental.maps`` is reported; ``jax.experimental.maps.xmap`` is its use
            line = self.assigned.get(ref.entry.name)
            if line is not None and ref.fact.proven:
                ref.fact = proof.disproven("removed", f"the module assigns `{ref.entry.name}` itself on line {line}")
            out.append(ref)
        out.sort(key=lambda r: (r.node.lineno, r.node.col_offset))
        return out

    # -- the guard around a node, from its position

    def guard_at(self, node) -> Optional[str]:
        """The sentence of the innermost shim around ``node`` (a ``try`` catching ImportError or
        AttributeError, an ``if`` or conditional expression testing ``hasattr`` or the JAX version,
        ``if TYPE_CHECKING:``), or None. Descends the statements whose span holds the node."""
        span = _span(node)
        guard, body, stmt = None, self.model.tree.body, None
        while body:
            stmt = next((st for st in body if _holds(st, span)), None)
            if stmt is None:
                return guard
            inner = None
            if isinstance(stmt, _TRY):
                if any(_holds(st, span) for st in stmt.body):
                    guard = guard or self._cached(stmt, self._try_guard)
                    inner = stmt.body
                else:
                    handler = next((h for h in stmt.handlers if any(_holds(st, span) for st in h.body)), None)
                    if handler is not None:  # try: new API / except ImportError: the old one, for old JAX
                        guard = guard or self._cached(handler, self._handler_guard)
                    lists = [h.body for h in stmt.handlers] + [stmt.orelse, stmt.finalbody]
                    inner = next((lst for lst in lists if any(_holds(st, span) for st in lst)), None)
            elif isinstance(stmt, ast.If) and not _holds(stmt.test, span):
                guard = guard or self._cached(stmt, self._if_guard)
                inner = stmt.body if any(_holds(st, span) for st in stmt.body) else stmt.orelse
            else:
                lists = [getattr(stmt, f, None) for f in ("body", "orelse", "finalbody")]
                lists += [c.body for c in getattr(stmt, "cases", ())]
                inner = next((lst for lst in lists if isinstance(lst, list) and lst
                              and isinstance(lst[0], ast.stmt) and any(_holds(st, span) for st in lst)), None)
            if inner is None:
                break
            body = inner
        if guard is None and stmt is not None:  # x = jax.tree_map if hasattr(jax, "tree_map") else ...
            heads = [c for c in ast.iter_child_nodes(stmt) if not isinstance(c, (ast.stmt, ast.excepthandler))]
            for head in heads:
                for n in ast.walk(head):
                    if (isinstance(n, ast.IfExp) and not _holds(n.test, span) and _holds(n, span)
                            and self._cached(n, self._if_guard)):
                        return self._cached(n, self._if_guard)
        return guard

    def _cached(self, node, compute) -> Optional[str]:
        key = id(node)
        if key not in self._guards:
            self._guards[key] = compute(node)
        return self._guards[key]

    # -- references

    def _import(self, node) -> None:
        if isinstance(node, ast.ImportFrom):
            if node.level or not node.module:
                return
            whole = entry_for(node.module)
            names = [entry_for(f"{node.module}.{a.name}") if a.name != "*" else None for a in node.names]
            if whole is not None and not any(e is not None and e.removed < whole.removed for e in names):
                # from jax.experimental.maps import xmap: the module import fails
                self.imported_modules.add(whole.name)
                self._add(node, whole, "import", node, statement=node)
                return
            for alias in node.names:
                entry = entry_for(f"{node.module}.{alias.name}") if alias.name != "*" else None
                if entry is not None:
                    if entry.module:
                        self.imported_modules.add(entry.name)
                    self._add(alias if hasattr(alias, "lineno") else node, entry, "import", node, statement=node)
            return
        for alias in node.names:
            entry = entry_for(alias.name)
            if entry is not None:
                self.imported_modules.add(entry.name)
                self._add(alias if hasattr(alias, "lineno") else node, entry, "import", node, statement=node)

    def _attribute(self, node: ast.Attribute) -> bool:
        """Whether ``node`` (an attribute chain) is a reference to an entry; recorded if so."""
        parts, base = [], node
        while isinstance(base, ast.Attribute):
            parts.append(base.attr)
            base = base.value
        if not isinstance(base, ast.Name) or WORDS.isdisjoint(parts):
            return False
        parts.reverse()  # from the base outwards: jax.tree_util.tree_map -> tree_util, tree_map
        if not any(".".join(parts[:i]) in _TAILS for i in range(1, len(parts) + 1)):
            return False  # jax.tree_util.tree_map: no name of the table ends in tree_util(.tree_map)
        scope = self.model.scope_at(node)
        if self.model.resolve(base, scope) is None:
            return False  # not an import where it is read (a local or a parameter named alike)
        source = _import_source(self.model, base.id, scope)
        if source is None:
            return False
        name = ".".join([source, *parts])
        entry = entry_for(name)
        if entry is None or entry is entry_for(source):
            return False  # the import itself is reported (from jax import tree_map)
        chain = node
        for _ in range(name.count(".") - entry.name.count(".")):
            chain = chain.value  # the attribute that names the entry: jax.tree_map of jax.tree_map.__doc__
        if isinstance(node.ctx, (ast.Store, ast.Del)) and chain is node:
            self.assigned.setdefault(entry.name, node.lineno)
            return True
        self._add(node, entry, "use", node, chain=chain, base=base, base_name=source)
        return True

    def _option(self, call: ast.Call) -> None:
        """``jax.config.update("jax_array", True)``: a removed configuration option."""
        arg = call.args[0] if call.args else None
        if not (isinstance(arg, ast.Constant) and isinstance(arg.value, str) and arg.value in OPTIONS):
            return
        if self.model.resolve(call.func, self.model.scope_at(call)) in _CONFIG_CALLS:
            self._add(arg, OPTIONS[arg.value], "option", call, statement=call)

    def _keywords(self, call: ast.Call) -> None:
        """``jnp.clip(x, a_min=0.0)``: a keyword argument JAX has removed from the function called."""
        if not call.keywords:
            return
        qn = None
        found = []
        for kw in call.keywords:
            if kw.arg is None:
                continue
            if qn is None:
                scope = self.model.scope_at(call)
                qn = self.model.resolve(call.func, scope) or ""
                if qn in _CANONICAL_KEYWORD_FUNCTIONS:  # pjit resolves to jax.jit, which never took them
                    qn = _spelled(self.model, call.func, scope) or qn
            entry = KEYWORDS.get((qn, kw.arg))
            if entry is not None:
                found.append((kw, entry))
        if found:  # one reference per call, at its first removed keyword: ``chain`` lists them all
            self._add(found[0][0], found[0][1], "keyword", call, statement=call, base_name=qn, chain=found)

    def _add(self, node, entry: Removed, kind: str, where, **more) -> None:
        guard = self.guard_at(where)
        if guard is not None:
            fact = proof.disproven("removed", guard)
        else:
            what = "deprecated" if entry.deprecated else "removed"
            name = f"{more.get('base_name')}({entry.name}=...)" if kind == "keyword" else entry.name
            fact = proof.proven("removed", f"`{name}` is JAX's (through the module's imports), {what} in "
                                           f"JAX {'.'.join(map(str, entry.removed))}, and no compatibility check "
                                           "guards the reference")
        self.refs.append(Reference(node, entry, kind, fact, **more))

    # -- guards

    def _caught(self, handler) -> Optional[str]:
        """What an ``except`` clause catches that a missing JAX name raises: None (bare: everything),
        ``"ImportError"``, ``"AttributeError"``, ...; ``""`` when it catches none of these."""
        if handler.type is None:
            return None
        types = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
        scope = self.model.scope_at(handler)
        for t in types:
            qn = self.model.resolve(t, scope)
            if qn in _CATCHES:
                return qn[len("builtins."):]
        return ""

    def _try_guard(self, node) -> Optional[str]:
        for h in node.handlers:
            caught = self._caught(h)
            if caught is None:
                return f"the `try` on line {node.lineno} catches every exception: the code expects it may fail"
            if caught:
                return f"the `try` on line {node.lineno} catches {caught}: a compatibility shim for JAX versions"
        return None

    def _handler_guard(self, handler) -> Optional[str]:
        """An ``except`` catching ImportError or AttributeError (or everything): its body runs only
        when the ``try`` body failed, a fallback for the JAX versions that lack what it tried."""
        caught = self._caught(handler)
        if caught is None:
            return f"the bare `except` on line {handler.lineno} runs only when the `try` above fails: a fallback"
        if caught:
            return (f"the `except {caught}` on line {handler.lineno} runs only when the `try` above fails: "
                    "a fallback for older JAX versions")
        return None

    def _if_guard(self, node) -> Optional[str]:
        test = node.test
        scope = self.model.scope_at(node)
        if self.model.resolve(test, scope) == "typing.TYPE_CHECKING":
            return f"under `if TYPE_CHECKING:` (line {node.lineno}): never runs"
        why = self._checks(test, scope, depth=0)
        if why is not None:
            return f"the test on line {node.lineno} checks {why}: a compatibility shim for JAX versions"
        if any(isinstance(n, ast.Constant) and n.value == "COLAB_TPU_ADDR" for n in ast.walk(test)):
            # set only by Colab's TPU-node runtime, which JAX 0.4 and later cannot use (and Colab retired)
            return (f"the test on line {node.lineno} checks `COLAB_TPU_ADDR`: the branch runs only on Colab's "
                    "old TPU-node runtime, which current JAX does not support")
        return None

    def _checks(self, expr, scope, depth: int) -> Optional[str]:
        """What version or attribute check ``expr`` makes, if any (``hasattr(jax, ...)``,
        ``jax.__version__``, a name bound to one of them)."""
        model = self.model
        for n in ast.walk(expr):
            if isinstance(n, ast.Call):
                qn = model.resolve(n.func, scope)
                if qn in _CHECKS and n.args and (model.resolve(n.args[0], scope) or "").split(".")[0] in ("jax", "jaxlib"):
                    return f"`{qn[len('builtins.'):]}` on `{model.resolve(n.args[0], scope)}`"
                if qn in _METADATA:
                    return "the installed JAX version"
            elif isinstance(n, (ast.Attribute, ast.Name)):
                qn = model.resolve(n, scope)
                if qn in _VERSIONS:
                    return f"`{qn}`"
                if qn is None and isinstance(n, ast.Name) and depth == 0:
                    for ev in model.module_scope.events.get(n.id, ()):  # JAX_VERSION = parse(jax.__version__)
                        value = getattr(ev, "value", None)
                        if value is not None and self._checks(value, model.module_scope, 1) is not None:
                            return f"`{n.id}` (the JAX version)"
        return None


_TRY = (ast.Try, ast.TryStar) if hasattr(ast, "TryStar") else (ast.Try,)


def _span(node) -> tuple:
    return (node.lineno, node.col_offset), (node.end_lineno, node.end_col_offset)


def _holds(outer, span: tuple) -> bool:
    """Whether ``outer``'s source span holds the span ``span`` (of a node inside it)."""
    return (outer.lineno, outer.col_offset) <= span[0] and span[1] <= (outer.end_lineno, outer.end_col_offset)


def references(model) -> list:
    """Every reference to a name of :data:`TABLE` in the module, in source order, each with its
    **removed** fact (disproven where a guard shows the code knows). Reads only what the model's
    walk listed: the attributes named like an entry's last part and the import statements."""
    if not model.watched_attrs and not model.import_nodes and "update" not in model.calls_by_name:
        return []
    return _Walk(model).run()
