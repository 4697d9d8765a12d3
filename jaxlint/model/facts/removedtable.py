"""The names, configuration options and keyword arguments JAX has removed, as data: each entry with the
release that removed it, what to write instead and, where the rewrite is mechanical, the fix and the
first release that has it (the **removed** fact reads them: :mod:`.removedapi`)."""

from __future__ import annotations

from typing import Optional


class Removed:
    """One entry: ``name`` (qualified, as JAX spelled it), ``removed`` (the JAX release that removed
    it, a version tuple; for an opt-in entry the release that deprecated it), ``replacement`` (what
    to write instead, for the message), ``fix`` (the qualified name a reference may be rewritten to
    mechanically, or None), ``since`` (the first JAX release that has ``fix``), ``portable`` (a
    replacement that exists in every JAX version, for projects older than ``since``), ``module``
    (the name is a module: importing it fails) and ``deprecated`` (still present in current JAX:
    reported only on request)."""

    __slots__ = ("name", "removed", "replacement", "fix", "since", "portable", "module", "deprecated", "fails")

    def __init__(self, name: str, removed: tuple, replacement: str, fix: Optional[str] = None,
                 since: tuple = (0, 0, 0), portable: Optional[str] = None, module: bool = False,
                 deprecated: bool = False, fails: Optional[str] = None):
        self.name = name
        self.removed = removed
        self.replacement = replacement
        self.fix = fix
        self.since = since
        self.portable = portable
        self.module = module
        self.deprecated = deprecated
        self.fails = fails  # how a use fails where it is not a missing name (a function that raises)

    def __repr__(self) -> str:
        return f"Removed({self.name!r}, {self.removed!r})"


_TREE = (0, 4, 25)  # jax.tree (map, flatten, leaves, structure, transpose, unflatten, ...) is new in 0.4.25


def _tree(old: str, new: str) -> Removed:
    return Removed(f"jax.{old}", (0, 6, 0), f"`jax.tree.{new}`", f"jax.tree.{new}", _TREE,
                   f"jax.tree_util.{old}")


# Every version below was read from JAX's CHANGELOG.md (jax-ml/jax at cec06d1, August 2026) and
# checked against JAX's source at the release tags (the name present at the tag before, absent or
# raising at the tag given); "0.10.2" is the pinned jax of bench/corpus.py, where each is absent.
#
# - jax.tree_map, tree_flatten, tree_leaves, tree_structure, tree_transpose, tree_unflatten,
#   treedef_is_leaf: removed in 0.6.0 (changelog 0.6.0, "From `jax`: `jax.treedef_is_leaf`,
#   `jax.tree_flatten`, `jax.tree_map`, ..."; jax/__init__.py at jax-v0.5.3 maps each to a function in
#   ``_deprecations``, at jax-v0.6.0 to None). Their jax.tree replacements exist from 0.4.25
#   (jax/tree.py first at jax-v0.4.25) with the same parameters (jax/_src/tree.py there); the
#   jax.tree_util functions they aliased exist in every version (JAX's own deprecation message says
#   so). jax.tree_reduce and jax.tree_all were never top-level names (no tag's jax/__init__.py has
#   them): not in the table.
# - jax.tree_multimap and jax.tree_util.tree_multimap: removed in 0.3.16 (changelog 0.3.16 for
#   tree_util; jax/__init__.py at jax-v0.3.15 still has ``tree_multimap``, at jax-v0.3.16 not);
#   jax.tree_util.tree_map takes several trees since 0.3.5 (changelog 0.3.5, "tree_multimap is
#   deprecated. Use tree_map instead").
# - jax.experimental.maps (and xmap in it): removed in 0.4.31 (changelog 0.4.31, "xmap has been
#   deleted"; jax/experimental/maps.py at jax-v0.4.30, not at jax-v0.4.31).
# - jax.xla_computation: removed in 0.4.34 (changelog 0.4.34; ``_deprecations`` entry None at jax-v0.4.34).
# - jax.sharding.use_mesh: removed in 0.7.1 (changelog 0.7.1, "Removed `jax.sharding.use_mesh` in
#   favor of `jax.set_mesh`"; in jax/sharding.py at jax-v0.7.0, not at jax-v0.7.1).
# - jax.experimental.host_callback: removed in 0.8.0 (changelog 0.8.0; the module at jax-v0.7.2, not
#   at jax-v0.8.0; its functions raise NotImplementedError since 0.4.35, changelog 0.7.1).
# - jax.experimental.compilation_cache.compilation_cache.initialize_cache and is_initialized: removed
#   in 0.8.0 (changelog 0.8.0; ``_deprecations`` entries None at jax-v0.8.0).
# - jax.device_put_replicated, jax.device_put_sharded: removed in 0.10.0 (changelog 0.10.0,
#   "removed from the public API and now raise an `AttributeError`"; entries None at jax-v0.10.0).
# - jax.numpy.DeviceArray: removed in 0.4.14 (changelog 0.4.14, "The following APIs have been removed
#   after previous deprecation: ... `jax.numpy.DeviceArray`: use jax.Array"; in jax/numpy/__init__.py at
#   jax-v0.4.13, not at jax-v0.4.14).
# - jax.config.config (``from jax.config import config``): the submodule's ``config`` became a deprecation at
#   0.4.24 and is gone at 0.4.25 (jax/config.py at jax-v0.4.25 only warns on import; changelog 0.4.25,
#   "the jax.config.config object" removed); the submodule itself is gone at 0.4.29 (changelog 0.4.29,
#   "The deprecated `jax.config` submodule has been removed"; jax/config.py absent at jax-v0.4.29). Only the
#   name inside is in the table: ``jax.config`` after ``import jax`` is the configuration object, valid.
# - jax.experimental.stax, jax.experimental.optimizers: moved to jax.example_libraries in 0.2.25 (changelog
#   0.2.25, "Moved jax.experimental.stax to jax.example_libraries.stax"), the old modules removed in 0.3.16
#   (changelog 0.3.16: "Removed jax.experimental.stax; it has long been a deprecated alias"; the same for
#   optimizers); jax.experimental.loops removed in 0.3.16 (same release notes, #10278). Found on fresh
#   set D's first look (a tutorial's notebooks).
# - jax.random.KeyArray: deprecated in 0.4.16 (JEP 9263: `jax.Array` is the annotation for keys), removed in
#   0.4.24 (changelog 0.4.24; downstream fixes cite it: jax-md PR 299, scib-metrics "JAX 0.4.24 removed
#   random.KeyArray"); absent in 0.10.2. Found on fresh set C (an annotation raising at import).
#   jax.random.PRNGKeyArray, its alias, went with it (changelog 0.4.24, "From jax.random: PRNGKeyArray,
#   KeyArray, ..."; in jax/random.py's ``_deprecations`` at jax-v0.4.23, absent at jax-v0.4.24). Found on
#   fresh set AV's blind catalogue (an import and annotations evaluated at import).
# - jax.lib.xla_bridge.get_backend, get_compile_options: deprecated in 0.4.32 and 0.7.0 (changelog), removed
#   in 0.8.0 (jax commit 66760f71ad, 2025-09-22, between the 0.7.2 and 0.8.0 releases: "Remove deprecated
#   symbols from ... jax.lib.xla_bridge"; changelog 0.8.0, "The deprecated functions in jax.lib.xla_bridge
#   ... were removed"). The module itself went in 0.9.0 (commit 82f02eb976; `from jax.lib import xla_bridge`
#   raises ImportError on 0.10.2, probed). A reference to a function through the module names both entries:
#   it is reported once, as the function's (removed first). Found on fresh set C (dqn_zoo's `main`).
# - jax.sharding.PositionalSharding, jax.sharding.GSPMDSharding: deprecated in 0.6.0, removed in 0.7.0 (read
#   from the release wheels: jax/sharding.py of 0.6.2 maps each to a deprecation warning, of 0.7.0 to None,
#   "was deprecated in JAX v0.6.0 and removed in JAX v0.7.0"). Found on fresh set E's first look (serl's
#   examples and searchless_chess, at module level and in annotations: the import fails).
# - jax.spmd_mode (the context manager of the jax_spmd_mode option): exported by jax/__init__.py of 0.6.0, not
#   of 0.6.1 (the wheels), with the option. Found on the dev set by the reviewer of fresh set E's findings.
# - jax.api (the module; its names moved to jax._src.api and are exported by jax itself): jax/api.py is in the
#   0.2.20 sdist, not in 0.2.21's; `import jax.api` raises ModuleNotFoundError on 0.10.2 (probed). Found by the
#   reviewer of fresh set F's findings (fourier-feature-networks' kernel_spreading notebook).
# - jax.experimental.optix (the optimizer library that became optax): deleted in 0.2.7 (changelog 0.2.7,
#   "`jax.experimental.optix` has been deleted, in favor of the standalone `optax` Python package";
#   jax/experimental/optix.py at jax-v0.2.6, not at jax-v0.2.7). Found on fresh set AX's blind catalogue (two
#   notebooks importing it with haiku and rlax).
# - jax.partial (a re-export of functools.partial, "TODO(phawkins): update callers to use functools.partial"):
#   in jax/__init__.py at jax-v0.2.20, not at jax-v0.2.21 (read from the git tags on 2026-12-06). Found on
#   fresh set Z (an MCMC benchmark's `from jax import random, partial, jit, lax`: the import fails).
# - jax.experimental.PartitionSpec: deprecated in 0.4.1 (changelog 0.4.1, "PartitionSpec and Mesh are now out
#   of experimental ... jax.experimental.PartitionSpec [is] deprecated and will be removed in 3 months"; jax
#   issue 13487). Read from the sdists of PyPI on 2026-12-06: jax/experimental/__init__.py of 0.4.10 still
#   imports it as ``_deprecated_PartitionSpec``, of 0.4.11 no longer. Found on fresh set I's first look by its
#   blind catalogue (bloom-jax-inference's scripts: `from jax.experimental import PartitionSpec` fails at import).
# - jax.core.canonicalize_shape (with dimension_as_value, definitely_equal, symbolic_equal_dim): deprecated in
#   0.4.24 (jax/core.py at jax-v0.4.24 maps it to a deprecation warning; plain at jax-v0.4.23), removed in 0.4.31
#   (changelog 0.4.31, "From jax.core: removed canonicalize_shape, ..."; the ``_deprecations`` entry is None at
#   jax-v0.4.31); read from the git tags of jax-ml/jax on 2026-12-06. Found on fresh set L's blind catalogue
#   (a module's parameter initializers call it on every shape).
# - jax.random.shuffle: deprecated in favour of ``permutation(key, x, axis, independent=True)``; removed in 0.4.31
#   (jax/random.py of the 0.4.31 wheel maps ``shuffle`` to None in ``_deprecations``, "Finalized Jul 26 2024": the
#   lookup raises AttributeError; the 0.4.30 wheel still imports it with a warning); read from PyPI's wheels on
#   2026-12-07. Found on fresh set AO's blind catalogue (an SGLD script and its notebook copy).
# - jax.tools.colab_tpu (the module) and its setup_tpu: read from PyPI's releases on 2026-12-07. setup_tpu
#   raises RuntimeError ("JAX only supports TPU VMs, not the older Colab TPUs") from the 0.4.7 sdist on (0.4.6
#   still connects to the TPU driver); the module is in the 0.9.1 wheel, not in 0.9.2's (`import
#   jax.tools.colab_tpu` raises ModuleNotFoundError on 0.10.2, probed). Found on fresh set AQ's blind
#   catalogue (two training scripts import it at module level).
# - Deprecated, still present in 0.10.2 (opt-in): jax.experimental.shard_map.shard_map and
#   jax.experimental.pjit.pjit, deprecated in 0.8.0 (changelog 0.8.0, Deprecations).
TABLE = {e.name: e for e in (
    _tree("tree_map", "map"),
    _tree("tree_flatten", "flatten"),
    _tree("tree_leaves", "leaves"),
    _tree("tree_structure", "structure"),
    _tree("tree_transpose", "transpose"),
    _tree("tree_unflatten", "unflatten"),
    Removed("jax.treedef_is_leaf", (0, 6, 0), "`jax.tree_util.treedef_is_leaf`", "jax.tree_util.treedef_is_leaf",
            (0, 1, 58)),
    Removed("jax.tree_multimap", (0, 3, 16), "`jax.tree.map`", "jax.tree.map", _TREE, "jax.tree_util.tree_map"),
    Removed("jax.tree_util.tree_multimap", (0, 3, 16), "`jax.tree_util.tree_map`", "jax.tree_util.tree_map",
            (0, 3, 5)),
    Removed("jax.api", (0, 2, 21), "`jax` itself (`from jax import jit, grad, vmap`)", module=True),
    Removed("jax.partial", (0, 2, 21), "`functools.partial`", "functools.partial"),
    Removed("jax.experimental.stax", (0, 3, 16), "`jax.example_libraries.stax` (JAX 0.2.25 and later), or "
            "flax/equinox", module=True),
    Removed("jax.experimental.optimizers", (0, 3, 16), "`jax.example_libraries.optimizers` (JAX 0.2.25 and "
            "later), or optax", module=True),
    Removed("jax.experimental.optix", (0, 2, 7), "`optax` (the same transformations: `optax.adam`, "
            "`optax.chain`, ...)", module=True),
    Removed("jax.experimental.loops", (0, 3, 16), "`jax.lax.fori_loop`, `jax.lax.scan` or `jax.lax.while_loop`",
            module=True),
    Removed("jax.experimental.maps", (0, 4, 31), "`jax.shard_map` (or `jax.vmap` with `spmd_axis_name`) for "
            "`xmap`, `jax.sharding.Mesh` for `maps.Mesh`", module=True),
    Removed("jax.experimental.PartitionSpec", (0, 4, 11), "`jax.sharding.PartitionSpec` (JAX 0.4.1 and later)",
            "jax.sharding.PartitionSpec", (0, 4, 1)),
    Removed("jax.xla_computation", (0, 4, 34), "the AOT API: `jax.jit(f).lower(*args).compiler_ir('hlo')`"),
    Removed("jax.sharding.use_mesh", (0, 7, 1), "`jax.set_mesh` (a context manager too)"),
    Removed("jax.sharding.PositionalSharding", (0, 7, 0), "`jax.sharding.NamedSharding` over a "
            "`jax.sharding.Mesh` (`NamedSharding(Mesh(devices, ('x',)), PartitionSpec('x'))`)"),
    Removed("jax.sharding.GSPMDSharding", (0, 7, 0), "`jax.sharding.NamedSharding`"),
    Removed("jax.spmd_mode", (0, 6, 1), "the `with` block's body without `jax.spmd_mode(...)` (multi-process "
            "computations run without it)"),
    Removed("jax.experimental.host_callback", (0, 8, 0), "`jax.pure_callback`, `jax.debug.callback` or "
            "`jax.experimental.io_callback`", module=True),
    Removed("jax.experimental.compilation_cache.compilation_cache.initialize_cache", (0, 8, 0),
            "`jax.config.update('jax_compilation_cache_dir', path)`"),
    Removed("jax.experimental.compilation_cache.compilation_cache.is_initialized", (0, 8, 0),
            "`jax.config.jax_compilation_cache_dir` (the cache is set up when it is set)"),
    Removed("jax.device_put_replicated", (0, 10, 0), "`jax.device_put` with a sharding (docs.jax.dev, "
            "migrate_pmap.html#drop-in-replacements)"),
    Removed("jax.device_put_sharded", (0, 10, 0), "`jax.device_put` with a sharding (docs.jax.dev, "
            "migrate_pmap.html#drop-in-replacements)"),
    Removed("jax.numpy.DeviceArray", (0, 4, 14), "`jax.Array`", "jax.Array", (0, 4, 1)),
    Removed("jax.random.KeyArray", (0, 4, 24), "`jax.Array`", "jax.Array", (0, 4, 1)),
    Removed("jax.random.PRNGKeyArray", (0, 4, 24), "`jax.Array`", "jax.Array", (0, 4, 1)),
    Removed("jax.random.shuffle", (0, 4, 31), "`jax.random.permutation(key, x, axis, independent=True)`"),
    Removed("jax.core.canonicalize_shape", (0, 4, 31), "a tuple of Python ints (`tuple(int(d) for d in shape)`)"),
    Removed("jax.lib.xla_bridge.get_backend", (0, 8, 0), "`jax.extend.backend.get_backend()` "
            "(`jax.default_backend()` for its `.platform`)"),
    Removed("jax.lib.xla_bridge.get_compile_options", (0, 8, 0), "`jax.extend.backend.get_compile_options`"),
    Removed("jax.lib.xla_bridge", (0, 9, 0), "`jax.extend.backend` (`get_backend`, `backends`, ...) or "
            "`jax.default_backend()`", module=True),
    Removed("jax.tools.colab_tpu", (0, 9, 2), "`jax.devices()` as it is: JAX finds a TPU VM's chips without a "
            "set-up call (Colab's old TPU nodes are unsupported since JAX 0.4); drop the import and the "
            "`setup_tpu()` call", module=True),
    Removed("jax.tools.colab_tpu.setup_tpu", (0, 4, 7), "`jax.devices()` as it is: JAX finds a TPU VM's chips "
            "without a set-up call (Colab's old TPU nodes are unsupported since JAX 0.4); drop the call",
            fails="it is gone with its module (0.9.2), and from 0.4.7 on calling it raised RuntimeError (\"JAX "
                  "only supports TPU VMs\")"),
    Removed("jax.config.config", (0, 4, 25), "`from jax import config` (the configuration object is `jax.config`)"),
    Removed("jax.experimental.shard_map.shard_map", (0, 8, 0), "`jax.shard_map` (JAX 0.6.1 and later)",
            deprecated=True),
    Removed("jax.experimental.pjit.pjit", (0, 8, 0), "`jax.jit`", deprecated=True),
)}
# Configuration options JAX has removed: ``jax.config.update("jax_array", True)`` raises AttributeError
# ("Unrecognized config option") from the release given. Each release is the first whose wheel (sdist
# for the oldest) no longer spells the option's name quoted anywhere in the jax package, the release
# before it still defining it (``name='jax_...'``); every one raises on 0.10.2 (probed). Read from the
# release wheels of PyPI on 2026-12-06. Found on fresh set E's first look (llama-2-jax's start-up sets
# jax_spmd_mode in every entry point).
OPTIONS = {e.name: e for e in (
    Removed("jax_array", (0, 4, 14), "`jax.Array` is always on since then: drop the call"),
    Removed("jax_jit_pjit_api_merge", (0, 4, 14), "`jit` and `pjit` are one since then: drop the call"),
    Removed("jax_coordination_service", (0, 4, 16), "the coordination service is always used: drop the call"),
    Removed("jax_parallel_functions_output_gda", (0, 4, 26), "`pjit` and `pmap` return `jax.Array`: drop the call"),
    Removed("jax_host_callback_inline", (0, 4, 35), "drop the call, and use `jax.pure_callback` or "
            "`jax.debug.callback` instead of `host_callback`"),
    Removed("jax_host_callback_outfeed", (0, 4, 35), "drop the call, and use `jax.pure_callback` or "
            "`jax.debug.callback` instead of `host_callback`"),
    Removed("jax_enable_memories", (0, 5, 1), "memory kinds are always enabled: drop the call"),
    Removed("jax_eager_pmap", (0, 6, 0), "drop the call"),
    Removed("jax_spmd_mode", (0, 6, 1), "multi-process computations run without it: drop the call"),
    Removed("jax_cpu_enable_gloo_collectives", (0, 8, 0), "use "
            "`jax.config.update('jax_cpu_collectives_implementation', 'gloo')`"),
    Removed("jax_dynamic_shapes", (0, 8, 2), "drop the call, and keep shapes static (pad to a few bucket sizes)"),
)}
# Keyword arguments JAX has removed from a function that is still there: ``jnp.clip(x, a_min=0)`` raises
# TypeError (an unexpected keyword argument) from the release given. ``fix`` is the keyword to write
# instead, ``since`` the first release that takes it; positional arguments work on every version.
# - jax.numpy.clip's a, a_min, a_max: deprecated in 0.4.27 (its signature gains ``min``/``max`` and the
#   old names become ``DeprecatedArg`` keywords: the 0.4.26 and 0.4.27 wheels), removed in 0.10.0 (the
#   0.9.2 wheel still takes them, with a warning; 0.10.0's signature is ``clip(arr, /, min, max)``), read
#   from PyPI's wheels on 2026-12-07; ``jnp.clip(x, a_min=1.0)`` raises TypeError on 0.10.2 (probed). The
#   array method ``x.clip`` took only ``min``/``max`` in both. Found on fresh set AQ's blind catalogue (a
#   mel filter inside every training loss, a board game's step).
KEYWORDS = {("jax.numpy.clip", e.name): e for e in (
    Removed("a_min", (0, 10, 0), "`min=` (JAX 0.4.27 and later; a positional argument on every version)",
            "min", (0, 4, 27), "positional arguments (`jnp.clip(x, lo, hi)`)"),
    Removed("a_max", (0, 10, 0), "`max=` (JAX 0.4.27 and later; a positional argument on every version)",
            "max", (0, 4, 27), "positional arguments (`jnp.clip(x, lo, hi)`)"),
    Removed("a", (0, 10, 0), "a positional first argument (`jnp.clip(x, ...)`)"),
)}
# - jax.experimental.pjit.pjit's in_axis_resources, out_axis_resources: the 0.4.3 sdist has only these; 0.4.4
#   adds ``in_shardings``/``out_shardings`` before them; 0.4.13 still takes them (deprecated: setting both
#   raises); 0.4.14's signature has neither (read from PyPI's sdists and wheels on 2026-12-07). Positional
#   specs mean the same on every version. ``pjit(f, in_axis_resources=None)`` raises TypeError on 0.4.30 and
#   0.10.2 (probed). Seen in fresh set AS's blind catalogue (kept out of its first look).
KEYWORDS.update({("jax.experimental.pjit.pjit", e.name): e for e in (
    Removed("in_axis_resources", (0, 4, 14), "`in_shardings=` (JAX 0.4.4 and later; the same specs)",
            "in_shardings", (0, 4, 4), "positional specs (`pjit(f, in_specs, out_specs)`)"),
    Removed("out_axis_resources", (0, 4, 14), "`out_shardings=` (JAX 0.4.4 and later; the same specs)",
            "out_shardings", (0, 4, 4), "positional specs (`pjit(f, in_specs, out_specs)`)"),
)})
