"""Tests of JAX404 (removed-api): names JAX has removed, resolved through the module's imports.

Positive cases mark every line where a finding is expected with ``# expect: CODE`` and compare the
findings of *all* rules with those marks (another rule firing fails the case too). The runtime test
at the end keeps the table honest against the installed jax.
"""

from __future__ import annotations

import ast
import importlib
import json
import subprocess
import sys
import textwrap

import pytest

import jaxlint_rules
from jaxlint import jaxversion
from jaxlint.cli import main
from jaxlint.model import build_model
from jaxlint.model.facts import proof, removedapi
from jaxlint_rules.removed_api import RemovedApi
from ruletools import assert_marked, default_findings, findings, messages, opt_in_findings


@pytest.fixture(autouse=True)
def _no_jax_version():
    """Each test starts with no jax-version in force (the CLI sets it for the process)."""
    jaxversion.configure(None)
    yield
    jaxversion.configure(None)


def assert_clean(src: str) -> None:
    assert findings(src) == [], findings(src)


def test_rule_is_registered_and_declares_its_proof():
    rule = jaxlint_rules.RULES_BY_CODE["JAX404"]
    assert rule is RemovedApi and rule.name == "removed-api"
    assert rule.needs == ("removed",) and "removed" in proof.FACTS
    assert rule.fixable and rule.fails_at_runtime


# --------------------------------------------------------------------------- positives


def test_uses_of_removed_top_level_names():
    assert_marked("""
        import jax
        import jax as J

        def f(params, grads, tree):
            a = jax.tree_map(lambda p, g: p - g, params, grads)  # expect: JAX404
            leaves, treedef = J.tree_flatten(params)  # expect: JAX404
            b = jax.tree_unflatten(treedef, leaves)  # expect: JAX404
            c = jax.tree_leaves(params)  # expect: JAX404
            d = jax.tree_structure(params)  # expect: JAX404
            e = jax.tree_transpose(d, d, tree)  # expect: JAX404
            g = jax.treedef_is_leaf(d)  # expect: JAX404
            h = jax.tree_multimap(lambda p: p, params)  # expect: JAX404
            return a, b, c, e, g, h
    """)


def test_the_other_removed_names():
    assert_marked("""
        import jax
        import jax.sharding

        def f(x, mesh):
            hlo = jax.xla_computation(lambda v: v + 1)(x)  # expect: JAX404
            r = jax.device_put_replicated(x, jax.devices())  # expect: JAX404
            s = jax.device_put_sharded([x], jax.devices())  # expect: JAX404
            with jax.sharding.use_mesh(mesh):  # expect: JAX404
                pass
            jax.experimental.compilation_cache.compilation_cache.initialize_cache("/tmp/c")  # expect: JAX404
            return hlo, r, s
    """)


def test_jax_core_canonicalize_shape_removed_in_0_4_31():
    """Read from jax-ml/jax's tags: deprecated at 0.4.24, None in ``_deprecations`` at 0.4.31 (fresh set L)."""
    assert_marked("""
        import jax
        from jax import core

        class Param:
            def __init__(self, shape):
                self.shape = jax.core.canonicalize_shape(shape)  # expect: JAX404
                self.again = core.canonicalize_shape(shape)  # expect: JAX404
                self.kept = core.ShapedArray(shape, "float32")
    """)
    [msg] = messages("import jax\nx = jax.core.canonicalize_shape((2,))\n", "JAX404")
    assert "removed in JAX 0.4.31" in msg


def test_jax_random_shuffle_removed_in_0_4_31():
    """Read from PyPI's wheels: 0.4.30 imports it with a warning, 0.4.31 maps it to None (fresh set AO)."""
    assert_marked("""
        import random as pyrandom
        from jax import random

        def epoch(i, data, items):
            random.shuffle(random.PRNGKey(i), data, axis=0)  # expect: JAX404
            pyrandom.shuffle(items)
            return random.permutation(random.PRNGKey(i), data, axis=0, independent=True)
    """)
    [msg] = messages("import jax\nx = jax.random.shuffle(jax.random.PRNGKey(0), jax.numpy.ones(3))\n", "JAX404")
    assert "removed in JAX 0.4.31" in msg and "independent=True" in msg


def test_the_jax_api_module_removed_in_0_2_21():
    assert_marked("""
        from jax.api import jit, grad  # expect: JAX404
        import jax

        f = jit(grad(lambda x: x ** 2))
        g = jax.jit(lambda x: x)
    """)
    assert "removed in JAX 0.2.21" in messages("from jax.api import jit\n", "JAX404")[0]


def test_jax_experimental_optix_removed_in_0_2_7():
    """Fresh set AX: haiku/rlax notebooks of 2020 import `jax.experimental.optix`, deleted in 0.2.7 for optax."""
    assert_marked("""
        from jax.experimental import optix  # expect: JAX404
        import jax.experimental.optix as ox  # expect: JAX404
        import optax

        opt = optix.adam(1e-3)
        tx = optax.adam(1e-3)
    """)
    [msg] = messages("from jax.experimental import optix\n", "JAX404")
    assert "removed in JAX 0.2.7" in msg and "`optax`" in msg


def test_jax_partial_removed_in_0_2_21_is_still_read_as_functools_partial():
    # fresh set Z: `from jax import random, partial, jit, lax` (an MCMC benchmark pinned to jax 0.2.5); the
    # `@partial(jit, ...)` kernel it decorates is a jitted function (its per-step call, JAX803 with --pedantic)
    src = """
        from jax import partial, jit  # expect: JAX404
        import jax.numpy as jnp

        @partial(jit, static_argnums=(1,))
        def kernel(x, n):
            return jnp.tanh(x) * n

        def run(x, steps):
            for _ in range(steps):
                x = kernel(x, 2)
            return x
    """
    assert_marked(src)
    assert "removed in JAX 0.2.21" in messages(src, "JAX404")[0] and "`functools.partial`" in messages(src, "JAX404")[0]
    assert [c for _, c, _ in opt_in_findings(src, "JAX803")] == ["JAX803"]  # the wrapper is recognized


def test_the_sharding_classes_removed_in_0_7_0():
    # fresh set E: serl's examples and searchless_chess build a PositionalSharding at module level and name it in
    # annotations, so importing them fails on current JAX
    src = """
        import jax
        from jax.sharding import GSPMDSharding  # expect: JAX404

        sharding = jax.sharding.PositionalSharding(jax.devices())  # expect: JAX404

        def put(x, s: jax.sharding.PositionalSharding):  # expect: JAX404
            return jax.device_put(x, s.replicate())

        def named(x, mesh):
            return jax.device_put(x, jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec("x")))
    """
    assert_marked(src)
    assert all("removed in JAX 0.7.0" in m and "NamedSharding" in m for m in messages(src, "JAX404"))


def test_the_sharding_classes_are_opt_in_where_the_project_pins_a_jax_that_has_them(tmp_path, capsys):
    (tmp_path / ".git").mkdir()
    (tmp_path / "pyproject.toml").write_text('[project]\ndependencies = ["jax==0.6.2"]\n')
    (tmp_path / "train.py").write_text("import jax\n\nsharding = jax.sharding.PositionalSharding(jax.devices())\n")
    assert main(["check", "--no-cache", "--select", "JAX404", str(tmp_path / "train.py")]) == 0
    capsys.readouterr()
    assert main(["check", "--no-cache", "--pedantic", "--format", "json", "--select", "JAX404",
                 str(tmp_path / "train.py")]) == 1
    [f] = json.loads(capsys.readouterr().out)
    assert "pyproject.toml requires jax ==0.6.2: the removal in 0.7.0 does not reach it" in f["opt_in"]


def test_imports_are_reported_at_the_import_once_and_not_again_at_each_use():
    src = """
        from jax import tree_map  # expect: JAX404
        from jax.tree_util import tree_multimap as tmm  # expect: JAX404
        import jax.experimental.host_callback as hcb  # expect: JAX404
        from jax.experimental import maps  # expect: JAX404
        from jax.experimental.maps import xmap, Mesh  # expect: JAX404

        def f(x):
            hcb.id_print(x)
            y = tmm(lambda a: a, tree_map(lambda a: a, x))
            return xmap(f, in_axes=["i"], out_axes=["i"])(y), maps.Mesh, Mesh
    """
    assert_marked(src)
    msgs = messages(src, "JAX404")
    assert "`from jax import tree_map` raises ImportError" in msgs[0]
    assert "importing it raises ImportError" in msgs[2]


def test_a_module_imported_whole_is_reported_at_the_import_and_its_uses_are_that_import():
    assert_marked("""
        import jax
        import jax.experimental.maps  # expect: JAX404

        def f(x):
            return jax.experimental.maps.xmap(f)(x)
    """)


def test_tree_util_imported_then_tree_multimap_is_a_finding_tree_map_is_not():
    assert_marked("""
        from jax import tree_util
        from jax import tree_util as tu

        def f(x):
            a = tree_util.tree_map(lambda v: v, x)
            b = tree_util.tree_multimap(lambda v: v, x)  # expect: JAX404
            return tu.tree_multimap(lambda v: v, a, b)  # expect: JAX404
    """)


def test_an_attribute_of_a_removed_name_is_one_finding():
    src = """
        import jax

        DOC = jax.tree_map.__doc__  # expect: JAX404
    """
    assert_marked(src)


def test_deprecated_names_are_opt_in():
    src = """
        import jax
        from jax.experimental.shard_map import shard_map  # expect: JAX404 (opt-in)
        from jax.experimental import pjit

        def f(g, mesh):
            a = pjit.pjit(g)  # expect: JAX404 (opt-in)
            return a, jax.experimental.pjit.pjit(g)  # expect: JAX404 (opt-in)
    """
    assert_marked(src)
    reasons = {reason for _, _, reason in opt_in_findings(src, "JAX404")}
    assert reasons == {"deprecated, not removed: the code still runs on current JAX"}


def test_the_finding_carries_the_proven_fact():
    from jaxlint.engine import check_source

    res = check_source(b"import jax\ny = jax.tree_map(abs, [1])\n", "t.py", [RemovedApi()])
    (f,) = res.findings
    assert f.facts[0][:2] == ("removed", "proven")
    assert "removed in JAX 0.6.0" in f.facts[0][2]


# --------------------------------------------------------------------------- near misses


@pytest.mark.parametrize("src", [
    # the user's own function named like the removed one
    """
    import jax

    def tree_map(f, x):
        return jax.tree.map(f, x)

    y = tree_map(abs, [1])
    """,
    # an attribute of another object
    """
    import jax

    def f(obj, x):
        return obj.tree_map(abs, x), obj.jax.tree_map(abs, x), obj.experimental.host_callback
    """,
    # a parameter named jax
    """
    import jax

    def f(jax, x):
        return jax.tree_map(abs, x)
    """,
    # the replacements themselves
    """
    import jax
    from jax import tree_util

    def f(x, mesh):
        with jax.set_mesh(mesh):
            return jax.tree.map(abs, x), jax.tree.leaves(x), tree_util.tree_map(abs, x), jax.shard_map
    """,
    # a module that is not JAX's
    """
    import jax
    import mylib.tree_util as tree_util

    y = tree_util.tree_multimap(abs, [1]), jax.numpy.zeros(2)
    """,
    # a string, a comment: no reference
    """
    import jax

    NAME = "jax.tree_map"  # jax.tree_map was removed
    f = getattr(jax, "tree_map", None)
    """,
])
def test_near_misses(src):
    assert_clean(src)


@pytest.mark.parametrize("src", [
    """
    import jax

    if hasattr(jax, "tree_map"):
        tree_map = jax.tree_map
    else:
        tree_map = jax.tree.map
    """,
    """
    import jax

    tree_map = jax.tree_map if hasattr(jax, "tree_map") else jax.tree.map
    """,
    """
    try:
        from jax import tree_map
    except ImportError:
        from jax.tree_util import tree_map

    y = tree_map(abs, [1])
    """,
    """
    import jax

    try:
        hlo = jax.xla_computation(abs)(1.0)
    except (AttributeError, TypeError):
        hlo = jax.jit(abs).lower(1.0).compiler_ir("hlo")
    """,
    """
    try:
        import jax.experimental.host_callback as hcb
    except Exception:
        hcb = None
    """,
    """
    import jax

    if jax.__version_info__ < (0, 4, 25):
        tm = jax.tree_map
    """,
    """
    import jax
    from packaging import version

    JAX_VERSION = version.parse(jax.__version__)

    def f(x):
        if JAX_VERSION < version.parse("0.4.31"):
            from jax.experimental.maps import xmap
            return xmap(abs)(x)
        return jax.shard_map(abs)(x)
    """,
    """
    from typing import TYPE_CHECKING

    if TYPE_CHECKING:
        from jax.experimental.maps import Mesh
    """,
    """
    import jax

    if not hasattr(jax, "tree_map"):
        jax.tree_map = jax.tree.map  # the module restores the alias itself

    y = jax.tree_map(abs, [1])
    """,
])
def test_compatibility_shims_are_not_findings(src):
    assert_clean(src)


def test_a_shim_is_the_quiet_reason_explain_finding_gives(tmp_path, capsys):
    p = tmp_path / "t.py"
    p.write_text("import jax\nif hasattr(jax, 'tree_map'):\n    tm = jax.tree_map\n")
    main(["check", "--no-cache", "--explain-finding", f"{p}:3", str(p)])
    out = capsys.readouterr().out
    assert "JAX404" in out and "removed (disproven)" in out and "hasattr" in out


def test_the_jax_ops_names_stay_jax402():
    src = """
        import jax
        from jax.ops import index_update  # JAX402 reports the call, not the import

        def f(x):
            return index_update(x, 0, 1.0), jax.ops.index_add(x, 0, 1.0)  # expect: JAX402, JAX402
    """
    assert_marked(src)


# --------------------------------------------------------------------------- the model's fact


def test_the_removed_fact_proven_and_disproven():
    tree = ast.parse(textwrap.dedent("""
        import jax
        a = jax.tree_map(abs, [1])
        if hasattr(jax, "tree_leaves"):
            b = jax.tree_leaves([1])
        c = obj.tree_map
    """))
    refs = removedapi.references(build_model(tree))
    assert [(r.node.lineno, r.entry.name, r.kind, r.fact.status) for r in refs] == [
        (3, "jax.tree_map", "use", "proven"), (5, "jax.tree_leaves", "use", "disproven")]
    assert "hasattr" in refs[1].fact.why and "line 4" in refs[1].fact.why


def test_a_module_that_names_no_removed_word_is_not_walked():
    model = build_model(ast.parse("import jax\ny = jax.tree.map(abs, [1])\n"))
    assert removedapi.references(model) == []


def test_entry_for_finds_the_first_missing_part():
    assert removedapi.entry_for("jax.experimental.maps.xmap").name == "jax.experimental.maps"
    assert removedapi.entry_for("jax.tree_map.__doc__").name == "jax.tree_map"
    assert removedapi.entry_for("jax.tree.map") is None
    assert removedapi.entry_for("jax.ops.index_update") is None  # JAX402's


# --------------------------------------------------------------------------- fixes

FIX_SRC = textwrap.dedent("""\
    import jax
    import jax as J
    from jax import tree_util as tu

    def f(x, d):
        a = jax.tree_map(abs, x)
        b = J.tree_leaves(x)
        c = tu.tree_multimap(abs, x)
        e = jax.tree_util.tree_multimap(abs, x)
        g = jax.treedef_is_leaf(d)
        h = jax.tree_multimap(abs, x)
        return jax.device_put_replicated(x, jax.devices()), a, b, c, e, g, h
""")


def _fixed(tmp_path, capsys, src: str, *flags: str) -> tuple:
    p = tmp_path / "t.py"
    p.write_text(src)
    code = main(["check", "--no-cache", "--select", "JAX404", "--fix", *flags, str(p)])
    out = capsys.readouterr().out
    return p.read_text(), out, code


def test_fix_rewrites_the_mechanical_renames(tmp_path, capsys):
    text, out, code = _fixed(tmp_path, capsys, FIX_SRC)
    assert text == FIX_SRC.replace("jax.tree_map(", "jax.tree.map(").replace("J.tree_leaves", "J.tree.leaves") \
        .replace("tu.tree_multimap", "tu.tree_map").replace("jax.tree_util.tree_multimap", "jax.tree_util.tree_map") \
        .replace("jax.treedef_is_leaf", "jax.tree_util.treedef_is_leaf").replace("jax.tree_multimap", "jax.tree.map")
    assert code == 1 and "device_put_replicated" in out  # no one-to-one replacement: reported, not fixed
    text2, _, _ = _fixed(tmp_path, capsys, text)
    assert text2 == text  # idempotent


def test_no_fix_for_an_import(tmp_path, capsys):
    src = "from jax import tree_map\n\ny = tree_map(abs, [1])\n"
    text, out, _ = _fixed(tmp_path, capsys, src)
    assert text == src and "JAX404" in out


def test_jax_version_older_than_the_replacement_keeps_the_finding_without_a_fix(tmp_path, capsys):
    text, out, _ = _fixed(tmp_path, capsys, FIX_SRC, "--jax-version", "0.4.20")
    # jax.tree.* (0.4.25) is not written; the tree_util renames (every version) still are
    assert "jax.tree_map(abs, x)" in text and "J.tree_leaves(x)" in text and "jax.tree_multimap" in text
    assert "tu.tree_map(abs, x)" in text and "jax.tree_util.treedef_is_leaf(d)" in text
    assert ("no automatic fix: `jax.tree.map` is new in JAX 0.4.25 and the project supports JAX 0.4.20 "
            "(jax-version); `jax.tree_util.tree_map` works on every version") in out


def test_jax_version_new_enough_fixes(tmp_path, capsys):
    text, _, _ = _fixed(tmp_path, capsys, FIX_SRC, "--jax-version", "0.4.25")
    assert "jax.tree.map(abs, x)" in text and "J.tree.leaves(x)" in text


def test_jax_version_from_pyproject_and_the_cli_wins(tmp_path, capsys):
    (tmp_path / "pyproject.toml").write_text('[tool.jaxlint]\njax-version = "0.4.20"\n')
    p = tmp_path / "t.py"
    p.write_text("import jax\ny = jax.tree_map(abs, [1])\n")
    main(["check", "--no-cache", "--select", "JAX404", str(p)])
    assert "supports JAX 0.4.20" in capsys.readouterr().out
    main(["check", "--no-cache", "--select", "JAX404", "--jax-version", "0.5", str(p)])
    out = capsys.readouterr().out
    assert "[*]" in out and "supports JAX" not in out


@pytest.mark.parametrize("value", ['"0.4.x"', "0.4", '"v0.4.30"', '"0.4.30rc1"', '""', '"1.2.3.4"', "true"])
def test_a_malformed_jax_version_in_pyproject_is_a_usage_error(tmp_path, capsys, value):
    (tmp_path / "pyproject.toml").write_text(f"[tool.jaxlint]\njax-version = {value}\n")
    (tmp_path / "t.py").write_text("import jax\n")
    assert main(["check", "--no-cache", str(tmp_path)]) == 2
    assert "jax-version" in capsys.readouterr().err


def test_a_malformed_jax_version_on_the_command_line_is_a_usage_error(tmp_path, capsys):
    (tmp_path / "t.py").write_text("import jax\n")
    assert main(["check", "--jax-version", "latest", str(tmp_path)]) == 2
    assert "jax-version" in capsys.readouterr().err


def test_the_result_cache_keys_on_the_jax_version(tmp_path, capsys):
    p = tmp_path / "t.py"
    p.write_text("import jax\ny = jax.tree_map(abs, [1])\n")
    cache = str(tmp_path / "cache")
    main(["check", "--cache-dir", cache, "--select", "JAX404", str(p)])
    assert "[*]" in capsys.readouterr().out
    main(["check", "--cache-dir", cache, "--select", "JAX404", "--jax-version", "0.4.1", str(p)])
    assert "supports JAX 0.4.1" in capsys.readouterr().out


def test_parse_versions():
    assert jaxversion.parse("0.4.30") == (0, 4, 30) and jaxversion.parse("0.5") == (0, 5, 0)
    assert jaxversion.parse(" 1 ") == (1, 0, 0) and jaxversion.text((0, 4, 30)) == "0.4.30"
    for bad in ("0.4.30rc1", "v0.4", "0.04", "", "0..4", 0.4, None):
        with pytest.raises(ValueError):
            jaxversion.parse(bad)


# --------------------------------------------------------------------------- flake8


def _flake8(tmp_path, *args, select="JAX404"):
    return subprocess.run([sys.executable, "-m", "flake8", "--select", select, *args, "t.py"],
                          capture_output=True, text=True, cwd=tmp_path)


def test_flake8_plugin_reports_and_reads_the_jax_version(tmp_path):
    (tmp_path / "t.py").write_text("import jax\ny = jax.tree_map(abs, [1])\n")
    proc = _flake8(tmp_path)
    assert proc.returncode == 1 and "t.py:2:5: JAX404 `jax.tree_map` was removed in JAX 0.6.0" in proc.stdout
    assert "supports JAX" not in proc.stdout
    proc = _flake8(tmp_path, "--jaxlint-jax-version", "0.4.20")
    assert "supports JAX 0.4.20" in proc.stdout
    (tmp_path / "pyproject.toml").write_text('[tool.jaxlint]\njax-version = "0.4.21"\n')
    assert "supports JAX 0.4.21" in _flake8(tmp_path).stdout
    proc = _flake8(tmp_path, "--jaxlint-jax-version", "0.4.x")
    assert proc.returncode == 2 and "jax-version" in proc.stderr


def test_flake8_with_a_malformed_jax_version_in_pyproject_says_so(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.jaxlint]\njax-version = "0.4.x"\n')
    (tmp_path / "t.py").write_text("import jax\ny = jax.tree_map(abs, [1])\n")
    proc = _flake8(tmp_path, select="JAX")
    assert "JAX000 jaxlint config error" in proc.stdout and "jax-version" in proc.stdout


# --------------------------------------------------------------------------- the table against jax


def _version(text: str) -> tuple:
    parts = []
    for p in text.split(".")[:3]:
        digits = "".join(ch for ch in p if ch.isdigit())
        parts.append(int(digits or 0))
    return tuple(parts + [0] * (3 - len(parts)))


def _lookup(qualname: str):
    """The object ``qualname`` names under the installed jax (its module imported, then attributes)."""
    parts = qualname.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for attr in parts[i:]:
            obj = getattr(obj, attr)
        return obj
    raise ImportError(qualname)


def _exists(qualname: str) -> bool:
    """Whether ``qualname`` can be imported or looked up under the installed jax (a deprecation
    warning is fine: the name is there)."""
    import warnings

    parts = qualname.split(".")
    for i in range(len(parts), 0, -1):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                for attr in parts[i:]:
                    obj = getattr(obj, attr)
        except (AttributeError, NotImplementedError):
            return False
        return True
    return False


def test_the_table_against_the_installed_jax():
    """Every entry JAX removed at or before the installed version is missing; every mechanical
    replacement that version has is there; a deprecated entry is still there."""
    jax = pytest.importorskip("jax")
    installed = _version(jax.__version__)
    checked = 0
    for entry in removedapi.TABLE.values():
        if entry.deprecated:
            assert _exists(entry.name), entry.name
            continue
        if entry.removed <= installed:
            if entry.fails is not None and _exists(entry.name):
                # ``jax.tools.colab_tpu.setup_tpu`` (0.4.7 to 0.9.1): still there, but calling it raises
                with pytest.raises(RuntimeError):
                    _lookup(entry.name)()
            else:
                assert not _exists(entry.name), f"{entry.name} is still in jax {jax.__version__}"
            checked += 1
        if entry.fix is not None and entry.since <= installed:
            assert _exists(entry.fix), entry.fix
        if entry.portable is not None:
            assert _exists(entry.portable), entry.portable
    assert checked >= 1  # jax.tree_util.tree_multimap (0.3.16) is gone from every jax the tests run


def test_the_table_entries_are_complete():
    for name, entry in removedapi.TABLE.items():
        assert name == entry.name and name.startswith("jax.")
        assert entry.replacement and len(entry.removed) == 3
        assert (entry.fix is None) or (entry.since and not entry.deprecated)


def _run(src: str) -> dict:
    ns: dict = {}
    exec(compile(textwrap.dedent(src), "<rule example>", "exec"), ns)
    return ns


def test_runtime_the_example_fails_and_its_fix_runs():
    jax = pytest.importorskip("jax")
    if _version(jax.__version__) < (0, 6, 0):
        pytest.skip("jax.tree_map is only removed from JAX 0.6.0 on")
    params = {"w": jax.numpy.ones(2)}
    with pytest.raises(AttributeError):
        _run(RemovedApi.bad)["scale"](params, 2.0)
    with pytest.raises(ImportError):
        exec("from jax import tree_map", {})
    out = _run(RemovedApi.good)["scale"](params, 2.0)
    assert out["w"].tolist() == [2.0, 2.0]


def test_device_array_and_the_config_submodule_also_in_annotations():
    """Issue 39's fresh sets: `jnp.DeviceArray` in a flax module's field annotations and `from
    jax.config import config` fail on current JAX; an annotation is evaluated where it stands
    (a def's, a class field's) unless annotations are postponed."""
    assert_marked("""
    from jax.config import config  # expect: JAX404
    import jax
    import jax.numpy as jnp

    config.update("jax_enable_x64", True)
    jax.config.update("jax_enable_x64", True)

    class SSM:
        Lambda: jnp.DeviceArray  # expect: JAX404

    def step(x: jnp.DeviceArray) -> jnp.ndarray:  # expect: JAX404
        local: jnp.DeviceArray  # a local's bare annotation is never evaluated
        return x
    """)


def test_the_key_array_annotations_removed_in_0_4_24():
    """Fresh set AV: `PRNGKeyArray` (an alias of `KeyArray`, both gone at jax-v0.4.24) imported, and
    evaluated in a def's annotations at import; the string annotation and the postponed module are not."""
    assert_marked("""
    from jax.random import PRNGKeyArray  # expect: JAX404
    import jax.random as jr

    def make(key: jr.PRNGKeyArray, n: int):  # expect: JAX404
        return jr.normal(key, (n,))

    def older(key: jr.KeyArray):  # expect: JAX404
        return key

    def quoted(key: "jr.PRNGKeyArray"):
        return key

    def body(key):
        k: jr.PRNGKeyArray = key  # a local's annotation is never evaluated, even with a value
        return k
    """)
    [msg] = messages("import jax\ndef f(k: jax.random.PRNGKeyArray):\n    return k\n", "JAX404")
    assert "removed in JAX 0.4.24" in msg and "`jax.Array`" in msg


def test_postponed_annotations_are_not_evaluated():
    assert findings("""
    from __future__ import annotations
    import jax.numpy as jnp

    class SSM:
        Lambda: jnp.DeviceArray

    def step(x: jnp.DeviceArray) -> jnp.DeviceArray:
        return x
    """, "JAX404") == []


# -- a removed name inside a removed module (jax.lib.xla_bridge: its functions went first) --------


def test_entry_for_picks_the_entry_removed_first_among_those_a_name_is_under():
    assert removedapi.entry_for("jax.lib.xla_bridge.get_backend").name == "jax.lib.xla_bridge.get_backend"
    assert removedapi.entry_for("jax.lib.xla_bridge.get_backend").removed == (0, 8, 0)
    assert removedapi.entry_for("jax.lib.xla_bridge").removed == (0, 9, 0)
    assert removedapi.entry_for("jax.lib.xla_bridge.register_backend_factory").name == "jax.lib.xla_bridge"
    assert removedapi.entry_for("jax.experimental.maps.xmap").name == "jax.experimental.maps"
    assert removedapi.entry_for("jax.lib") is None


def test_a_function_of_a_removed_module_is_one_finding_at_its_reference_with_the_earlier_release():
    src = """
        import jax

        def platform():
            return jax.lib.xla_bridge.get_backend().platform  # expect: JAX404

        def register(factory):
            jax.lib.xla_bridge.register_backend_factory("gpu", factory)  # expect: JAX404
    """
    assert_marked(src)
    msgs = messages(src, "JAX404")
    assert "`jax.lib.xla_bridge.get_backend` was removed in JAX 0.8.0" in msgs[0]
    assert "`jax.lib.xla_bridge` was removed in JAX 0.9.0" in msgs[1]


def test_the_removed_module_imported_is_reported_and_a_use_of_a_function_gone_earlier_too():
    src = """
        from jax.lib import xla_bridge  # expect: JAX404
        from jax.lib.xla_bridge import get_compile_options  # expect: JAX404

        def platform():
            return xla_bridge.get_backend().platform  # expect: JAX404

        def devices():
            return xla_bridge.local_devices()
    """
    assert_marked(src)
    msgs = messages(src, "JAX404")
    assert "`jax.lib.xla_bridge` was removed in JAX 0.9.0: on current JAX importing it raises ImportError" in msgs[0]
    assert "`jax.lib.xla_bridge.get_compile_options` was removed in JAX 0.8.0" in msgs[1]
    assert "`jax.lib.xla_bridge.get_backend` was removed in JAX 0.8.0" in msgs[2]


def test_a_local_named_like_the_removed_module_is_not_a_reference():
    assert_clean("""
        import jax

        def f(xla_bridge):
            return xla_bridge.get_backend()

        class Config:
            xla_bridge = None

        def g(cfg: Config):
            return cfg.xla_bridge
    """)


def test_the_example_libraries_under_their_old_experimental_names():
    src = """
        from jax.experimental import stax  # expect: JAX404
        from jax.experimental.optimizers import adam  # expect: JAX404
        import jax.experimental.loops  # expect: JAX404
        from jax.example_libraries import optimizers

        def init(key):
            return stax.serial(stax.Dense(4))[0](key, (1, 3)), adam(0.1), optimizers.sgd(0.1)
    """
    assert_marked(src)
    msgs = messages(src, "JAX404")
    assert "`jax.experimental.stax` was removed in JAX 0.3.16" in msgs[0]
    assert "`jax.example_libraries.stax`" in msgs[0]
    assert "`jax.experimental.optimizers` was removed in JAX 0.3.16" in msgs[1]


def test_the_old_name_as_the_fallback_of_an_import_that_failed_is_a_shim():
    src = """
        import jax

        try:
            from jax.example_libraries import optimizers
        except ModuleNotFoundError:
            from jax.experimental import optimizers

        try:
            tree_map = jax.tree.map
        except AttributeError:
            tree_map = jax.tree_map
    """
    assert_clean(src)
    assert opt_in_findings(src) == []


def test_a_handler_that_does_not_catch_an_import_failure_is_no_shim():
    assert_marked("""
        try:
            x = 1
        except KeyError:
            from jax.experimental import optimizers  # expect: JAX404
    """)


# --------------------------------------------------------------------------- removed configuration options


def test_removed_config_options_set_through_jax_config_update():
    # fresh set E: llama-2-jax's start-up sets jax_spmd_mode (removed in 0.6.1) in every entry point
    src = """
        import jax
        from jax import config
        import jax as J

        jax.config.update("jax_spmd_mode", "allow_all")  # expect: JAX404
        with jax.spmd_mode("allow_all"):  # expect: JAX404
            pass
        config.update("jax_array", True)  # expect: JAX404
        J.config.update("jax_cpu_enable_gloo_collectives", True)  # expect: JAX404

        def setup():
            jax.config.update("jax_dynamic_shapes", True)  # expect: JAX404
    """
    assert_marked(src)
    msgs = messages(src, "JAX404")
    assert msgs[0].startswith("the config option `jax_spmd_mode` was removed in JAX 0.6.1: on current JAX setting "
                              "it raises AttributeError")
    assert any("jax_cpu_collectives_implementation" in m for m in msgs)


@pytest.mark.parametrize("src", [
    # options current JAX still has
    'import jax\njax.config.update("jax_enable_x64", True)\njax.config.update("jax_platform_name", "cpu")\n',
    # another object's update, a name that only reads like an option, an option read from a variable
    'import jax\nd = {}\nd.update("jax_array")\nopts = {"jax_array": 1}\n',
    'import jax\nname = "jax_array"\njax.config.update(name, True)\n',
    # a guard that knows
    'import jax\ntry:\n    jax.config.update("jax_array", True)\nexcept AttributeError:\n    pass\n',
    # a local object named config
    'import jax\n\ndef f(config):\n    config.update("jax_array", True)\n',
])
def test_removed_config_option_near_misses(src):
    assert findings(src) == [] and opt_in_findings(src, "JAX404") == []


def test_removed_config_options_against_the_installed_jax():
    jax = pytest.importorskip("jax")
    installed = _version(jax.__version__)
    checked = 0
    for name, entry in removedapi.OPTIONS.items():
        assert name.startswith("jax_") and len(entry.removed) == 3 and entry.replacement
        if entry.removed <= installed:
            with pytest.raises(AttributeError, match="Unrecognized config option"):
                jax.config.update(name, True)
            checked += 1
    assert checked >= 1  # jax_array (0.4.14) is gone from every jax the tests run


def test_jax404_the_experimental_partition_spec_removed_in_0_4_11():
    """Set I's catalogue: bloom-jax-inference's `from jax.experimental import PartitionSpec` raises
    ImportError on every JAX from 0.4.11 (read from the sdists: 0.4.10 has it, 0.4.11 not)."""
    src = """
        import jax
        from jax.experimental import PartitionSpec as P  # expect: JAX404
        from jax.sharding import PartitionSpec

        spec = jax.experimental.PartitionSpec("data")  # expect: JAX404
        other = PartitionSpec("model")
    """
    assert_marked(src)
    assert "jax.sharding.PartitionSpec" in messages(src, "JAX404")[0]


# --------------------------------------------------------------------------- removed keywords, colab_tpu


def test_jnp_clip_keywords_removed_in_0_10_0():
    """Set AQ's catalogue: a mel filter's `jnp.clip(x, a_min=..., a_max=None)` inside every training loss
    raises TypeError on JAX 0.10 (the 0.9.2 wheel takes the keywords with a warning, 0.10.0's does not)."""
    src = """
        import jax.numpy as jnp
        from jax.numpy import clip as jclip
        import numpy as np

        def loss(x):
            y = jnp.clip(x, a_min=1e-5, a_max=None)  # expect: JAX404
            z = jclip(a=x, max=1.0)  # expect: JAX404
            w = jnp.clip(x, a_max=3.0)  # expect: JAX404
            return y + z + w
    """
    assert_marked(src)
    msgs = messages(src, "JAX404")
    assert msgs[0].startswith("the keywords `a_min=` and `a_max=` of `jax.numpy.clip` were removed in JAX 0.10.0: on "
                              "current JAX the call raises TypeError")
    assert "for `a_min=`, `min=`" in msgs[0] and "for `a_max=`, `max=`" in msgs[0]
    assert msgs[1].startswith("the keyword `a=` of `jax.numpy.clip` was removed") and "positional first" in msgs[1]
    assert msgs[2].startswith("the keyword `a_max=` of `jax.numpy.clip` was removed")


@pytest.mark.parametrize("src", [
    # NumPy's clip keeps the keywords; the new keywords; positional arguments; the array method
    "import numpy as np\nimport jax.numpy as jnp\ny = np.clip(np.ones(3), a_min=0, a_max=1)\n",
    "import jax.numpy as jnp\ny = jnp.clip(jnp.ones(3), min=0, max=1)\nz = jnp.clip(jnp.ones(3), 0, 1)\n",
    "import jax.numpy as jnp\ny = jnp.ones(3).clip(min=0)\n",
    # a local function named clip; a guard that knows
    "import jax.numpy as jnp\n\ndef clip(x, a_min=0):\n    return x\n\ny = clip(jnp.ones(3), a_min=1)\n",
    "import jax.numpy as jnp\ntry:\n    y = jnp.clip(jnp.ones(3), a_min=0)\nexcept TypeError:\n    pass\n"
    "except AttributeError:\n    pass\n",
])
def test_jnp_clip_keyword_near_misses(src):
    assert findings(src) == [] and opt_in_findings(src, "JAX404") == []


def test_jnp_clip_keywords_fixed_to_the_new_names(tmp_path):
    path = tmp_path / "m.py"
    path.write_text("import jax.numpy as jnp\n\n\ndef f(x):\n    return jnp.clip(x, a_min=0.0, a_max=1.0) + "
                    "jnp.clip(x, a_min=0.0, min=1.0)\n")
    assert main(["check", "--no-cache", "--fix", "--select", "JAX404", str(path)]) == 1
    assert path.read_text().endswith("return jnp.clip(x, min=0.0, max=1.0) + jnp.clip(x, a_min=0.0, min=1.0)\n")


def test_jnp_clip_fix_waits_for_a_project_older_than_the_new_keywords(tmp_path):
    (tmp_path / "requirements.txt").write_text("jax>=0.4.20\n")
    path = tmp_path / "m.py"
    path.write_text("import jax.numpy as jnp\n\ny = jnp.clip(jnp.ones(3), a_min=0.0)\n")
    assert main(["check", "--no-cache", "--fix", "--select", "JAX404", str(path)]) == 1
    assert "a_min=0.0" in path.read_text()


def test_jnp_clip_keywords_against_the_installed_jax():
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp

    installed = _version(jax.__version__)
    for (function, keyword), entry in removedapi.KEYWORDS.items():
        assert entry.name == keyword
        if function != "jax.numpy.clip":
            continue
        if entry.removed <= installed:
            with pytest.raises(TypeError):
                jnp.clip(jnp.ones(3), **{keyword: 0.5})
        if entry.fix is not None and entry.since <= installed:
            bound = {"min": 2.0, "max": 0.5}[entry.fix]  # each bites on ones: 3 * bound
            assert float(jnp.clip(jnp.ones(3), **{entry.fix: bound}).sum()) == 3 * bound


def test_pjit_axis_resources_keywords_removed_in_0_4_14():
    """Fresh set AS's catalogue: `pjit(..., in_axis_resources=..., out_axis_resources=...)` raises TypeError
    from JAX 0.4.14 (the 0.4.13 sdist still takes them, deprecated; 0.4.14's signature has neither)."""
    src = """
        from jax.experimental.pjit import pjit
        from jax.experimental import pjit as pjit_module
        from jax.sharding import PartitionSpec as P

        def make(step):
            a = pjit(step, in_axis_resources=(P("dp"),), out_axis_resources=P())  # expect: JAX404
            b = pjit_module.pjit(step, P("dp"), out_axis_resources=None)  # expect: JAX404
            return a, b
    """
    marked = [n for n, line in enumerate(textwrap.dedent(src).splitlines(), 1) if "# expect: JAX404" in line]
    # the import of pjit itself is an opt-in finding (deprecated in 0.8.0, still there): not among these
    assert default_findings(src, "JAX404") == [(n, "JAX404") for n in marked]
    msgs = [m for m in messages(src, "JAX404") if "axis_resources" in m]
    assert msgs[0].startswith("the keywords `in_axis_resources=` and `out_axis_resources=` of "
                              "`jax.experimental.pjit.pjit` were removed in JAX 0.4.14: on current JAX the call "
                              "raises TypeError")
    assert "for `in_axis_resources=`, `in_shardings=`" in msgs[0]
    assert msgs[1].startswith("the keyword `out_axis_resources=` of `jax.experimental.pjit.pjit` was removed")


@pytest.mark.parametrize("src", [
    # the keywords that replaced them; positional specs; a local function named pjit; jax.jit's own keywords
    "from jax.experimental.pjit import pjit\nf = pjit(abs, in_shardings=None, out_shardings=None)\n",
    "from jax.experimental.pjit import pjit\nf = pjit(abs, None, None)\n",
    "def pjit(f, in_axis_resources=None):\n    return f\n\nf = pjit(abs, in_axis_resources=1)\n",
    "import jax\nf = jax.jit(abs, in_shardings=None)\n",
])
def test_pjit_keyword_near_misses(src):
    assert default_findings(src) == []
    assert not [m for m in messages(src, "JAX404") if "axis_resources" in m]  # at most the deprecated import


def test_pjit_keywords_in_a_project_pinned_before_their_removal_are_opt_in(tmp_path):
    (tmp_path / "requirements.txt").write_text("jax==0.4.13\n")
    path = tmp_path / "m.py"
    path.write_text("from jax.experimental.pjit import pjit\n\nf = pjit(abs, in_axis_resources=None)\n")
    assert main(["check", "--no-cache", "--select", "JAX404", str(path)]) == 0
    assert main(["check", "--no-cache", "--pedantic", "--select", "JAX404", str(path)]) == 1


def test_pjit_keywords_fixed_to_the_shardings_keywords(tmp_path):
    path = tmp_path / "m.py"
    path.write_text("from jax.experimental.pjit import pjit\n\n"
                    "f = pjit(abs, in_axis_resources=None, out_axis_resources=None)\n")
    assert main(["check", "--no-cache", "--fix", "--select", "JAX404", str(path)]) == 0  # nothing left
    assert path.read_text().endswith("f = pjit(abs, in_shardings=None, out_shardings=None)\n")


def test_pjit_keywords_against_the_installed_jax():
    jax = pytest.importorskip("jax")
    import warnings

    installed = _version(jax.__version__)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # jax.experimental.pjit.pjit: deprecated in 0.8.0
        from jax.experimental.pjit import pjit
    entries = [e for (function, _), e in removedapi.KEYWORDS.items() if function == "jax.experimental.pjit.pjit"]
    assert {e.name for e in entries} == {"in_axis_resources", "out_axis_resources"}
    for entry in entries:
        if entry.removed <= installed:
            with pytest.raises(TypeError):
                pjit(abs, **{entry.name: None})
        if entry.since <= installed:
            f = pjit(lambda x: x * 2, **{entry.fix: None})
            assert float(f(jax.numpy.ones(2)).sum()) == 4.0


def test_colab_tpu_import_and_setup_call():
    """Set AQ's catalogue: two training scripts `import jax.tools.colab_tpu` at module level (gone in 0.9.2);
    `setup_tpu()` raises RuntimeError from 0.4.7 on."""
    src = """
        import jax
        import jax.tools.colab_tpu  # expect: JAX404

        def main():
            jax.tools.colab_tpu.setup_tpu()  # expect: JAX404
            print(jax.local_devices())
    """
    assert_marked(src)
    msgs = messages(src, "JAX404")
    assert "removed in JAX 0.9.2" in msgs[0] and "importing it raises ImportError" in msgs[0]
    assert "from 0.4.7 on calling it raised RuntimeError" in msgs[1]
    assert_clean("import jax\ntry:\n    import jax.tools.colab_tpu\nexcept ImportError:\n    pass\n")


def test_colab_tpu_under_a_colab_tpu_runtime_test_is_no_finding():
    """The shared dev set (evojax's notebooks): `if 'COLAB_TPU_ADDR' in os.environ:` around the import and the
    call: the branch runs only on Colab's old TPU-node runtime, which current JAX cannot use (judged FALSE)."""
    assert_clean("""
import os
import jax

if 'COLAB_TPU_ADDR' in os.environ:
    import jax.tools.colab_tpu
    jax.tools.colab_tpu.setup_tpu()
""")
    # the module-level import stays a finding (it fails at import on every runtime); the guarded call does not
    assert findings("import os\nimport jax\nimport jax.tools.colab_tpu as ct\n\n"
                    "if os.environ.get('COLAB_TPU_ADDR'):\n    ct.setup_tpu()\n") == [(3, "JAX404")]


def test_a_class_in_a_function_evaluates_its_field_annotations():
    """A class body's annotated fields are evaluated when the class statement runs, also where the
    class is defined inside a function; the function's own annotated locals are not."""
    assert_marked("""
    import jax.numpy as jnp

    def build():
        local: jnp.DeviceArray = jnp.ones(3)

        class Field:
            value: jnp.DeviceArray = None  # expect: JAX404
        return Field, local
    """)
