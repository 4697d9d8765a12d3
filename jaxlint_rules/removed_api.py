"""JAX4xx: names JAX has removed: the jax.ops index-update API (JAX402) and the others of a table
(JAX404: jax.tree_map, jax.experimental.host_callback, ...)."""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Iterator, Optional

if TYPE_CHECKING:  # the edit library is imported where a fix is built: a plain check never needs it
    from jaxlint.edits import Fix
from jaxlint.model import ModuleModel
from jaxlint.model.facts import jaxrange, proof, removedapi
from jaxlint.model.python.unreferenced import enclosing, unreferenced
from jaxlint.rule import Finding, Rule, unparse

from .mutation import _PRIMARY, _at, _never_raises


# --------------------------------------------------------------------------- JAX402

_REMOVED = {
    "jax.ops.index_update": "set",
    "jax.ops.index_add": "add",
    "jax.ops.index_mul": "multiply",
    "jax.ops.index_min": "min",
    "jax.ops.index_max": "max",
}
_INDEX = "jax.ops.index"
_REMOVED_NAMES = {q.rsplit(".", 1)[1] for q in _REMOVED}
_OPS_IMPORTS = frozenset(_REMOVED_NAMES | {"index"})  # what ``from jax.ops import ...`` may name





def _fails(model: ModuleModel, ref: ast.AST, qn: str, scope) -> str:
    """How a reference to a removed ``jax.ops`` name fails on current JAX: the attribute lookup, or,
    for a name imported from ``jax.ops``, the import itself."""
    if isinstance(ref, ast.Name) and model.binding(ref.id, scope, (ref.lineno, ref.col_offset)) is None:
        return f"on current JAX `from jax.ops import {qn.rsplit('.', 1)[1]}` raises ImportError"
    return "on current JAX looking it up raises AttributeError"


# jax/ops/__init__.py at jax-v0.3.1 still exports index_update and the rest, at jax-v0.3.2 not (read from the tags)
_OPS_REMOVED = (0, 3, 2)


def _reach(model: ModuleModel, qn: str) -> tuple:
    """``(opt_in, evidence)`` of a removed ``jax.ops`` name: reported by default where the project may run on JAX
    0.3.2 or later (its declared range, its configured jax-version, or none declared: current JAX assumed)."""
    reaches = jaxrange.reaches(jaxrange.of_model(model), _OPS_REMOVED, model.jax_version)
    facts = [f"removed (proven): `{qn}` is JAX's (through the module's imports), removed in JAX 0.3.2",
             f"{reaches.name} ({reaches.status}): {reaches.why}"]
    return (f"{reaches.name} {reaches.status}: {reaches.why}" if reaches.status != "proven" else None), facts


class RemovedIndexUpdateApi(Rule):
    code = "JAX402"
    fails_at_runtime = True  # removed in JAX 0.3.2: AttributeError (from jax.ops import: ImportError)
    short = "A call of the removed jax.ops.index_update family."
    name = "removed-index-update-api"
    fixable = True
    summary = ("Finds calls of `jax.ops.index_update`/`index_add`/`index_mul`/`index_min`/`index_max` and uses "
               "of `jax.ops.index[...]`.")
    rationale = ("These functions were deprecated in JAX 0.2.22 and removed in JAX 0.3.2: on any current JAX "
                 "they raise AttributeError (ImportError for `from jax.ops import ...`). The `.at` property "
                 "replaces them: `jax.ops.index_update(x, jax.ops.index[i], v)` is `x.at[i].set(v)`, "
                 "`index_add` is `.at[i].add`, `index_mul` `.at[i].multiply`, `index_min`/`index_max` "
                 "`.at[i].min`/`.max`.")
    bad = """
        import jax
        import jax.numpy as jnp

        @jax.jit
        def reset_first(x):
            return jax.ops.index_update(x, jax.ops.index[0], 0.0)
    """
    good = """
        import jax
        import jax.numpy as jnp

        @jax.jit
        def reset_first(x):
            return x.at[0].set(0.0)
    """

    def check(self, model: ModuleModel) -> Iterator[Finding]:
        covered: set = set()
        for call in model.calls_named(_REMOVED_NAMES):
            scope = model.scope_at(call)
            qn = model.resolve(call.func, scope)
            method = _REMOVED.get(qn or "")
            if method is None:
                continue
            args = call.args
            covered.update(id(a) for a in args)
            covered.update(id(kw.value) for kw in call.keywords)
            if len(args) >= 3 and not any(isinstance(a, ast.Starred) for a in args[:3]):
                idx = args[1]
                if isinstance(idx, ast.Subscript) and model.resolve(idx.value, scope) == _INDEX:
                    idx = idx.slice
                at = ast.Subscript(value=ast.Attribute(value=args[0], attr="at", ctx=ast.Load()), slice=idx,
                                   ctx=ast.Load())
                fix = f"`{unparse(at, 50)}.{method}({unparse(args[2], 20)})`"
                auto = self._fix(call, method, idx)
            else:
                fix = f"`x.at[idx].{method}(v)`"
                auto = None
            fails = _fails(model, call.func, qn, scope)
            opt_in, facts = _reach(model, qn)
            yield self.finding(call, f"`{qn}` was removed in JAX 0.3.2: {fails}; use {fix}", auto, opt_in=opt_in,
                               evidence=facts)
        if "ops" not in model.attr_names and not any(
                qn.startswith("jax.ops") for qn in model.module_scope.imports.values()):
            return  # jax.ops.index is spelled through ``jax.ops`` or imported from it
        for sub, scope in self._subscripts(model):
            if id(sub) in covered:
                continue
            value = sub.value
            if (value.attr if isinstance(value, ast.Attribute) else getattr(value, "id", "")) != "index":
                continue
            if model.resolve(sub.value, scope) == _INDEX:
                covered.add(id(sub))
                at = _at(ast.Subscript(value=ast.Name("x"), slice=sub.slice))
                fails = _fails(model, sub.value, _INDEX, scope)
                opt_in, facts = _reach(model, _INDEX)
                yield self.finding(sub, f"`jax.ops.index` was removed in JAX 0.3.2: {fails}; index through `.at` "
                                        f"instead: `{at}.set(v)`", opt_in=opt_in, evidence=facts)

    @staticmethod
    @_never_raises
    def _fix(call: ast.Call, method: str, index: ast.AST) -> Optional[Fix]:
        """``F(x, idx, v)`` -> ``x.at[idx].method(v)``; ``index`` is ``idx``, or what
        ``jax.ops.index[...]`` wraps when ``idx`` is that helper."""
        if len(call.args) != 3 or call.keywords or any(isinstance(a, ast.Starred) for a in call.args):
            return None
        x, idx, v = call.args
        from jaxlint.edits import Edit, Fix, end_of, start_of

        if not (start_of(x) < start_of(idx) <= start_of(index) and end_of(index) <= end_of(idx) < start_of(v)):
            return None
        wrap = not isinstance(x, _PRIMARY)
        return Fix((
            Edit(start_of(call), start_of(x), ("(",) if wrap else ()),
            Edit(end_of(x), start_of(index), (").at[" if wrap else ".at[",)),
            Edit(end_of(index), start_of(v), (f"].{method}(",)),
            Edit(end_of(v), end_of(call), (")",)),
        ))

    def after_fixes(self, text: str) -> str:
        """Once the calls are rewritten, a module-level ``from jax.ops import index_update, ...`` is
        the only thing left that fails on current JAX: drop the removed names nothing uses any more
        from it (the whole line when nothing else is left; a one-line import keeps its other names)."""
        from jaxlint.edits import drop_unused_from_imports

        return drop_unused_from_imports(text, "jax.ops", _OPS_IMPORTS)

    @staticmethod
    def _subscripts(model: ModuleModel):
        """Subscript reads the model records: in function bodies, plus top-level call arguments and
        module-level assigned values (the model keeps no list of module-level subscripts)."""
        for f in model.functions:
            for sub in f.subscripts:
                yield sub, f.scope
        for call in model.calls:
            for a in list(call.args) + [kw.value for kw in call.keywords]:
                if isinstance(a, ast.Subscript):
                    yield a, model.scope_at(call)
        for evs in model.module_scope.events.values():
            for ev in evs:
                if ev.kind == "assign" and isinstance(ev.value, ast.Subscript):
                    yield ev.value, model.module_scope


# --------------------------------------------------------------------------- JAX404


def _version(v: tuple) -> str:
    return ".".join(map(str, v))


class RemovedApi(Rule):
    code = "JAX404"
    needs = ("removed",)
    fails_at_runtime = True  # AttributeError at the lookup, ImportError at the import
    short = "A reference to a name JAX has removed (jax.tree_map, jax.experimental.host_callback, ...)."
    name = "removed-api"
    fixable = True
    summary = ("Finds references, resolved through the module's imports, to names JAX has removed: the "
               "top-level `jax.tree_*` aliases (0.6.0), `tree_multimap`, `jax.experimental.stax`, "
               "`optimizers` and `loops` (0.3.16), `jax.experimental.maps` "
               "and `xmap` (0.4.31), `jax.xla_computation` (0.4.34), `jax.sharding.use_mesh` (0.7.1), "
               "`jax.experimental.host_callback` and the compilation cache's `initialize_cache` (0.8.0), "
               "`jax.device_put_replicated`/`device_put_sharded` (0.10.0), `jnp.clip`'s `a_min`/`a_max`/`a` "
               "keywords (0.10.0), `pjit`'s `in_axis_resources`/`out_axis_resources` keywords (0.4.14), "
               "`jax.tools.colab_tpu` (`setup_tpu` raises since 0.4.7, the module 0.9.2), "
               "`jax.lib.xla_bridge` (its functions "
               "0.8.0, the module 0.9.0), `jax.sharding.PositionalSharding`/`GSPMDSharding` (0.7.0); and "
               "configuration options JAX has removed, set with `jax.config.update` (`jax_array` 0.4.14, "
               "`jax_spmd_mode` 0.6.1, `jax_cpu_enable_gloo_collectives` 0.8.0, ...). An import of a removed name is "
               "reported at the import, an attribute lookup at each use. Code that checks first (`hasattr`, "
               "a JAX version test, `try`/`except ImportError` or `AttributeError`, and the old name as that "
               "`except`'s fallback) is not a finding. The "
               "project's declared JAX range is read from its packaging files (the nearest folder above the "
               "file with pyproject.toml, setup.cfg, setup.py, requirements*.txt or environment.yml; never "
               "run), capped by the declared Python (the newest JAX that installs on it: Python 3.8 runs JAX "
               "0.4.13 at the newest): a default finding needs a declared version at or after the removal, or no "
               "readable "
               "declaration (current JAX is assumed then). The jax.ops index-update API is JAX402's.")
    rationale = ("The program fails on current JAX: AttributeError where the name is looked up or the option "
                 "set, ImportError where it is imported. Each has a replacement (`jax.tree.map` for `jax.tree_map`, "
                 "`jax.jit(f).lower(...)` for `jax.xla_computation`, `jax.set_mesh` for `use_mesh`, "
                 "`jax.pure_callback`/`jax.debug.callback` for host_callback); the renames are fixed "
                 "automatically, to a replacement the oldest JAX the project supports has "
                 "(`jax-version` in [tool.jaxlint], else the oldest version the packaging files allow: "
                 "`jax.tree.map` needs JAX 0.4.25).")
    opt_in_cases = ("Names JAX has deprecated but still has (`jax.experimental.shard_map.shard_map`, "
                    "`jax.experimental.pjit.pjit`, deprecated in 0.8.0): the code still runs, with a warning. "
                    "Names removed in a release the project's packaging files do not allow (`jax = \"^0.4.8\"` "
                    "under poetry is >=0.4.8,<0.5.0: `jax.tree_map`, removed in 0.6.0, still works there; so "
                    "does an environment pinned to `python=3.8`, where JAX 0.4.13 is the newest release): "
                    "right today, and the evidence names the file and the pin, but it fails once the pin is "
                    "lifted. A `jax-version` at or after the removal (the user's own word) makes it a default "
                    "finding again; one before it says nothing of the newest version, and the pin decides. "
                    "A reference inside a top-level function that nothing in the repository refers to (no call "
                    "or use in its module outside such functions, no other file spelling its name: dead or "
                    "vendored code, or an API only the package's users call): whether its line runs is unknown.")
    bad = """
        import jax
        import jax.numpy as jnp

        def scale(params, factor):
            return jax.tree_map(lambda p: p * factor, params)
    """
    good = """
        import jax
        import jax.numpy as jnp

        def scale(params, factor):
            return jax.tree.map(lambda p: p * factor, params)

        # a shim that knows: not a finding
        tree_map = jax.tree_map if not hasattr(jax, "tree") else jax.tree.map
    """

    def check(self, model: ModuleModel) -> Iterator[Finding]:
        for ref in removedapi.references(model):
            facts = self.proof(model, ref.node, ref.fact)
            if facts is None:
                continue
            entry = ref.entry
            if entry.deprecated:
                message = (f"`{entry.name}` is deprecated since JAX {_version(entry.removed)} (still present, it "
                           f"warns); use {entry.replacement}")
                yield self.finding(ref.node, message, facts=facts,
                                   opt_in="deprecated, not removed: the code still runs on current JAX")
                continue
            # The project's declared JAX range (its packaging files): where every version it allows is
            # older than the removal, the code runs today and fails once the pin is lifted: opt-in.
            reach = jaxrange.reaches(jaxrange.of_model(model), entry.removed, model.jax_version)
            unused = self._unreferenced(model, ref.node)
            fix, note = self._fix(model, ref)
            if ref.kind == "option":
                message = (f"the config option `{entry.name}` was removed in JAX {_version(entry.removed)}: on "
                           f"current JAX {self._fails(ref)}; {entry.replacement}")
            elif ref.kind == "keyword":
                kws = [e for _, e in ref.chain]
                if len(kws) == 1:
                    message = (f"the keyword `{entry.name}=` of `{ref.base_name}` was removed in JAX "
                               f"{_version(entry.removed)}: on current JAX {self._fails(ref)}; use "
                               f"{entry.replacement}{note}")
                else:
                    spelled = " and ".join(f"`{e.name}=`" for e in kws)
                    uses = "; ".join(f"for `{e.name}=`, {e.replacement}" for e in kws)
                    message = (f"the keywords {spelled} of `{ref.base_name}` were removed in JAX "
                               f"{_version(entry.removed)}: on current JAX {self._fails(ref)}; {uses}{note}")
            else:
                message = (f"`{entry.name}` was removed in JAX {_version(entry.removed)}: on current JAX "
                           f"{self._fails(ref)}; use {entry.replacement}{note}")
            opt_in = reach.why if reach.disproven else (f"whether it runs is unknown: {unused}" if unused else None)
            yield self.finding(ref.node, message, fix, facts=facts, opt_in=opt_in,
                               evidence=(proof.sentence(reach),) + ((f"runs (unknown): {unused}",) if unused else ()))

    @staticmethod
    def _unreferenced(model: ModuleModel, node) -> Optional[str]:
        """Why the top-level function around ``node`` may never run (nothing in the project refers
        to it), or None: a removed name fails only where its line runs."""
        f = enclosing(model, node)
        return unreferenced(model, f) if f is not None else None

    @staticmethod
    def _fails(ref) -> str:
        if ref.kind == "use":
            return ref.entry.fails or "looking it up raises AttributeError"
        if ref.kind == "keyword":
            return "the call raises TypeError (an unexpected keyword argument)"
        if ref.kind == "option":
            return "setting it raises AttributeError (an unrecognized config option)"
        stmt = ref.statement
        if isinstance(stmt, ast.Import) or ref.entry.module:
            return "importing it raises ImportError"
        alias = ref.node if isinstance(ref.node, ast.alias) else None
        what = f"from {stmt.module} import {alias.name}" if alias is not None else "the import"
        return f"`{what}` raises ImportError"

    @staticmethod
    def _fix(model: ModuleModel, ref) -> tuple:
        """(the fix or None, a note for the message): ``jax.tree_map`` -> ``jax.tree.map`` at a use,
        the base name kept as the user spelled it, when the entry's rewrite is mechanical and the
        replacement exists in the oldest JAX the project supports."""
        entry = ref.entry
        if entry.fix is None or ref.kind not in ("use", "keyword"):
            return None, ""
        oldest, source = getattr(model, "jax_version", None), "jax-version"
        if oldest is None:  # the configured jax-version wins; else the oldest the packaging files allow
            found = jaxrange.of_model(model)
            if found.range is not None and found.range.oldest() is not None:
                oldest, source = found.range.oldest(), found.where
        if oldest is not None and tuple(oldest) < entry.since:
            other = f"; `{entry.portable}` works on every version" if entry.portable else ""
            return None, (f" (no automatic fix: `{entry.fix}` is new in JAX {_version(entry.since)} and the "
                          f"project supports JAX {_version(oldest)} ({source}){other})")
        return RemovedApi._edit(ref), ""

    @staticmethod
    @_never_raises
    def _edit(ref) -> Optional[Fix]:
        entry, base = ref.entry, ref.base_name
        if ref.kind == "keyword":  # jnp.clip(x, a_min=0) -> jnp.clip(x, min=0): the keywords' names only
            from jaxlint.edits import Edit, Fix

            edits = []
            for kw, e in ref.chain:
                if e.fix is None or any(k.arg == e.fix for k in ref.statement.keywords):
                    return None  # ``a=`` (no keyword replaces it), or renaming would repeat a keyword
                edits.append(Edit((kw.lineno, kw.col_offset), (kw.lineno, kw.col_offset + len(e.name)), (e.fix,)))
            return Fix(tuple(edits))
        if not (entry.name.startswith(base + ".") and entry.fix.startswith(base + ".")):
            return None  # the user's import does not reach the replacement (from jax import tree_util)
        from jaxlint.edits import Edit, Fix, end_of

        return Fix((Edit(end_of(ref.base), end_of(ref.chain), (entry.fix[len(base):],)),))


RULES = [RemovedIndexUpdateApi, RemovedApi]
