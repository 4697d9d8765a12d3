"""The import structure of jaxlint, read from the source (every import statement, function-local
ones included, resolved to the module it loads):

* no import cycle among the modules of ``jaxlint`` and ``jaxlint_rules``;
* only ``jaxlint.registry`` imports ``jaxlint_rules``;
* the rules import from ``jaxlint`` only the model, ``jaxlint.names``, ``jaxlint.rule`` and the
  edit library ``jaxlint.edits``;
* the static path never imports JAX (only ``jaxlint/trace/`` does).

An edge is ``importer -> imported``; a failure names each offending edge with its file and line.
Importing ``a.b.c`` also runs ``a/__init__.py`` and ``a/b/__init__.py``: those implicit parent
imports are not edges (every submodule has them, and a package's ``__init__`` runs first).
``from pkg import name`` is an edge to ``pkg.name`` when that is a module, else to ``pkg``.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from dataclasses import dataclass


ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGES = ("jaxlint", "jaxlint_rules")
# The rules may import these from jaxlint (and their submodules, once the model is a package).
RULE_LAYER = ("jaxlint.model", "jaxlint.names", "jaxlint.rule", "jaxlint.edits")


@dataclass(frozen=True)
class Edge:
    src: str
    dst: str
    file: str
    line: int

    def __str__(self) -> str:
        return f"{self.src} -> {self.dst} ({self.file}:{self.line})"


def _modules() -> dict:
    """{module name: path} for every module of the two packages."""
    out = {}
    for pkg in PACKAGES:
        for folder, dirs, files in os.walk(os.path.join(ROOT, pkg)):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__")
            for name in sorted(files):
                if name.endswith(".py"):
                    path = os.path.join(folder, name)
                    mod = os.path.relpath(path, ROOT)[:-3].replace(os.sep, ".")
                    out[mod[: -len(".__init__")] if mod.endswith(".__init__") else mod] = path
    return out


def _imports(mod: str, path: str, typing_too: bool = False) -> list:
    """(dotted name imported, line) for every import in the file, relative ones resolved;
    ``X.a`` for ``from X import a`` (the caller shortens it to the module it names). Imports under
    ``if TYPE_CHECKING:`` are left out (they never run: annotations only) unless ``typing_too``."""
    with open(path, encoding="utf-8") as fh:
        tree = ast.parse(fh.read(), filename=path)
    package = mod if path.endswith("__init__.py") else mod.rpartition(".")[0]
    typing_only = set() if typing_too else {
        id(n) for node in ast.walk(tree) if isinstance(node, ast.If)
        and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"
        for stmt in node.body for n in ast.walk(stmt)}
    out = []
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.Import):
            out.extend((a.name, node.lineno) for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - (node.level - 1)])
                target = f"{base}.{node.module}" if node.module else base
            else:
                target = node.module
            out.extend((f"{target}.{a.name}", node.lineno) for a in node.names)
    return out


def _graph(typing_too: bool = False) -> list:
    """Every edge between modules of the two packages, and every import of ``jax``/``jaxlib``
    (``dst`` then is that top-level name); ``typing_too``: annotation-only imports as well."""
    modules = _modules()
    edges = []
    for mod, path in modules.items():
        rel = os.path.relpath(path, ROOT)
        for name, line in _imports(mod, path, typing_too):
            top = name.split(".")[0]
            if top in ("jax", "jaxlib"):
                edges.append(Edge(mod, top, rel, line))
                continue
            while name and name not in modules:  # `from X import a`, ``a`` not a module: X
                name = name.rpartition(".")[0]
            if name and name != mod:
                edges.append(Edge(mod, name, rel, line))
    return list(dict.fromkeys(edges))  # `from .x import a, b` is one edge


EDGES = _graph()


def _cycles(edges: list) -> list:
    """The strongly connected components with more than one module (Tarjan), each with its edges."""
    succ: dict = {}
    for e in edges:
        succ.setdefault(e.src, []).append(e)
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for e in succ.get(v, ()):
            if e.dst not in index:
                visit(e.dst)
                low[v] = min(low[v], low[e.dst])
            elif e.dst in on_stack:
                low[v] = min(low[v], index[e.dst])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(str(e) for e in edges if e.src in component and e.dst in component))

    for v in sorted(succ):
        if v not in index:
            visit(v)
    return found


def _internal(edges: list) -> list:
    return [e for e in edges if e.dst.split(".")[0] in PACKAGES]


def test_the_graph_sees_function_local_and_relative_imports():
    """A guard on the parser itself: edges known to exist in the source are found."""
    pairs = {(e.src, e.dst) for e in EDGES}
    assert ("jaxlint.engine", "jaxlint.notebook") in pairs  # function-local `from . import notebook`
    assert ("jaxlint.registry", "jaxlint_rules") in pairs  # function-local
    assert ("jaxlint.trace.report", "jaxlint.registry") in pairs  # `from ..registry import ...`
    assert ("jaxlint.trace.hooks", "jax") in pairs


def test_no_import_cycles():
    # No exemption: the lazy hooks of jaxlint/__init__.py (load_ipython_extension) are edges like
    # any other and close no cycle, since nothing below jaxlint.ipython imports the package itself.
    edges = _internal(EDGES)
    cycles = _cycles(edges)
    assert not cycles, "import cycles (each: the edges among its modules):\n" + "\n\n".join(
        "\n".join(c) for c in cycles)


def test_only_the_registry_imports_the_rules():
    bad = [e for e in EDGES if e.dst.split(".")[0] == "jaxlint_rules"
           and not e.src.startswith("jaxlint_rules") and e.src != "jaxlint.registry"]
    assert not bad, "only jaxlint.registry may import jaxlint_rules:\n" + "\n".join(map(str, bad))


def _in_rule_layer(name: str) -> bool:
    return any(name == m or name.startswith(m + ".") for m in RULE_LAYER)


def _rule_layer_violations() -> list:
    return [e for e in EDGES if e.src.split(".")[0] == "jaxlint_rules"
            and e.dst.split(".")[0] == "jaxlint" and not _in_rule_layer(e.dst)]


def test_rules_import_only_the_model_layer():
    bad = _rule_layer_violations()
    assert not bad, f"jaxlint_rules may import from jaxlint only {', '.join(RULE_LAYER)}:\n" + "\n".join(
        map(str, bad))


def test_the_static_path_never_imports_jax():
    # Rule examples (``bad``/``good``) import jax, but they are strings, not imports of the module.
    bad = [e for e in EDGES if e.dst in ("jax", "jaxlib") and not e.src.startswith("jaxlint.trace")]
    assert not bad, "only jaxlint/trace/ may import jax:\n" + "\n".join(map(str, bad))


def test_the_rules_load_on_first_use_only():
    """The registry is imported by the engine and the flake8 plugin; the rules are not, until a
    rule is asked for. ``import jaxlint`` imports nothing else."""
    code = (
        "import sys\n"
        "import jaxlint\n"
        "assert sorted(m for m in sys.modules if m.startswith(('jaxlint', 'jax', 'IPython'))) == ['jaxlint'], "
        "sorted(m for m in sys.modules if m.startswith(('jaxlint', 'jax', 'IPython')))\n"
        "import jaxlint.flake8_plugin, jaxlint.cli, jaxlint.engine, jaxlint.registry, jaxlint.trace.report\n"
        "assert 'jaxlint_rules' not in sys.modules, 'rules imported early'\n"
        "from jaxlint.flake8_plugin import JaxlintChecker\n"
        "assert JaxlintChecker.rules() and 'jaxlint_rules' in sys.modules\n"
        "assert not [m for m in sys.modules if m.split('.')[0] in ('jax', 'jaxlib', 'IPython')]\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


# What a flake8 run must never load (the editor runs flake8 on every save): the fixer and the
# edit library, notebooks, reporters, the CLI, the result cache, config files, IPython, docs and
# the dynamic mode, and the ``# noqa`` reader (flake8 applies ``# noqa`` itself). The engine, the
# model and the rules load only for a file that may use JAX.
# (jaxlint.config is loaded: the plugin reads the project's [tool.jaxlint], as the CLI does)
NOT_UNDER_FLAKE8 = ("jaxlint.fix", "jaxlint.edits", "jaxlint.notebook", "jaxlint.reporters", "jaxlint.trace",
                    "jaxlint.cli", "jaxlint.cache", "jaxlint.ipython", "jaxlint.docs", "jaxlint.noqa")

_FLAKE8_RUN = """
import sys
from flake8.main.cli import main
try:
    main(sys.argv[1:])
except SystemExit:
    pass
print(",".join(sorted(m for m in sys.modules if m.startswith("jaxlint"))))
"""


def _flake8_modules(path) -> set:
    proc = subprocess.run([sys.executable, "-c", _FLAKE8_RUN, "--isolated", "--select", "JAX", str(path)],
                          cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    return set(proc.stdout.strip().splitlines()[-1].split(","))


def _heavy(mods: set) -> list:
    return sorted(m for m in mods if any(m == h or m.startswith(h + ".") for h in NOT_UNDER_FLAKE8))


def _python(code: str) -> str:
    """What ``code`` prints, run in a fresh interpreter (nothing of this test process imported)."""
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


def test_importing_the_flake8_plugin_loads_nothing_else_of_jaxlint():
    code = ("import sys, jaxlint.flake8_plugin\n"
            "print(sorted(m for m in sys.modules if m.startswith('jaxlint')))\n")
    assert _python(code) == "['jaxlint', 'jaxlint.flake8_plugin']"


def test_flake8_on_a_jax_file_loads_no_fixer_reporter_notebook_or_trace(tmp_path):
    path = tmp_path / "train.py"
    path.write_text("import jax\nimport jax.numpy as jnp\n\n@jax.jit\ndef step(x):\n    return x * 2\n\n"
                    "def run(x, n):\n    for i in range(n):\n        x = step(x)\n        print(float(x))\n"
                    "        x = x.at[0].set(1.0)\n")
    mods = _flake8_modules(path)
    assert "jaxlint_rules" in mods and "jaxlint.model" in mods  # it was checked
    assert _heavy(mods) == []


def test_the_checking_path_loads_no_dataclasses_or_hashlib():
    """What an editor's flake8 loads for a JAX file: the engine, the model and the rules. Their
    records are plain classes, because ``dataclasses`` (about 1 ms a class to create, 15 of them)
    and ``hashlib`` (4 ms loading OpenSSL) were two thirds of its import time (issue 16)."""
    code = ("import sys\n"
            "import jaxlint.engine, jaxlint.registry, jaxlint.flake8_plugin\n"
            "jaxlint.flake8_plugin.JaxlintChecker.rules()\n"
            "jaxlint.flake8_plugin.JaxlintChecker.config_for('tests/test_architecture.py')\n"
            "jaxlint.source.content_hash(b'x')\n"
            "print(sorted(m for m in ('dataclasses', 'hashlib', '_hashlib') if m in sys.modules))\n")
    assert _python(code) == "[]"


def test_the_plugin_loads_the_engine_and_rules_with_the_cyclic_gc_paused():
    """With a collection due at every allocation, loading the checking path collects once, when
    the GC is on again (thousands of times unpaused), and it stays off for a program that turned
    it off."""
    code = ("import gc, sys\n"
            "from jaxlint.flake8_plugin import JaxlintChecker\n"
            "runs = []\n"
            "gc.callbacks.append(lambda phase, info: runs.append(phase))\n"
            "gc.set_threshold(1)\n"
            "JaxlintChecker.rules()\n"
            "gc.set_threshold(700)\n"
            "print(runs.count('start'), gc.isenabled(), 'jaxlint_rules' in sys.modules)\n")
    assert _python(code) == "1 True True"
    off = "import gc\ngc.disable()\nfrom jaxlint.flake8_plugin import JaxlintChecker\nJaxlintChecker.rules()\nprint(gc.isenabled())\n"
    assert _python(off) == "False"


def test_flake8_on_a_file_that_never_mentions_jax_loads_no_model(tmp_path):
    path = tmp_path / "util.py"
    path.write_text("def add(a, b):\n    return a + b\n")
    mods = _flake8_modules(path)
    assert "jaxlint.flake8_plugin" in mods
    assert not [m for m in mods if m.startswith(("jaxlint.engine", "jaxlint.model", "jaxlint_rules"))], mods


def test_a_check_served_from_the_cache_loads_no_model_or_rules(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[tool.jaxlint]\n")
    (tmp_path / "train.py").write_text("import jax\n\ndef run(xs):\n    for x in xs:\n"
                                       "        print(float(jax.numpy.sum(x)))\n")
    code = ("import sys\nfrom jaxlint.cli import main\nrc = main(['check', '.'])\n"
            "print('@@', ','.join(sorted(m for m in sys.modules if m.startswith('jaxlint'))))\n")
    env = dict(os.environ, PYTHONPATH=ROOT)
    first = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, env=env)
    second = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, env=env)
    assert first.stdout.split("@@")[0] == second.stdout.split("@@")[0]  # the same findings
    mods_first = set(first.stdout.split("@@ ")[1].strip().split(","))
    mods_second = set(second.stdout.split("@@ ")[1].strip().split(","))
    assert "jaxlint.model" in mods_first  # the first run checked the file
    assert not [m for m in mods_second if m.startswith(("jaxlint.engine", "jaxlint.model", "jaxlint_rules"))], \
        mods_second


def test_the_registry_spells_out_the_rule_codes_it_declares():
    from jaxlint import registry

    assert registry.RULE_CODES == tuple(r.code for r in registry.ALL_RULES)
    assert registry.FIXABLE_RULE_CODES == registry.FIXABLE_CODES


def test_no_file_is_over_600_lines():
    # issues 26 and 37: each fact in a file a reader can hold in mind; a module that grows splits by concern
    long = {}
    for top in PACKAGES:
        for folder, dirs, files in os.walk(os.path.join(ROOT, top)):
            dirs[:] = [d for d in dirs if d != "__pycache__"]
            for name in files:
                if name.endswith(".py"):
                    path = os.path.join(folder, name)
                    n = sum(1 for _ in open(path, encoding="utf-8"))
                    if n > 600:
                        long[os.path.relpath(path, ROOT)] = n
    assert not long, long


def test_no_import_cycles_even_through_annotation_imports():
    # issue 37: an ``if TYPE_CHECKING:`` import is a dependency a reader must follow too; counted here
    cycles = _cycles(_internal(_graph(typing_too=True)))
    assert not cycles, "import cycles through annotation imports:\n" + "\n\n".join("\n".join(c) for c in cycles)


# The model's layers, lowest first: each may import from the ones before it, never after (issue 37).
# The Python layer may read jaxlint.names for one thing, the canonical spelling of qualified names.
MODEL_LAYERS = ("jaxlint.model.python", "jaxlint.model.facts", "jaxlint.model.policy")


def _layer(mod: str):
    return next((i for i, pkg in enumerate(MODEL_LAYERS) if mod == pkg or mod.startswith(pkg + ".")), None)


def test_the_model_layers_import_only_the_layers_below_them():
    edges = _graph(typing_too=True)
    bad = []
    for e in edges:
        src, dst = _layer(e.src), _layer(e.dst)
        if src is None:
            continue
        if dst is not None and dst > src:
            bad.append(e)
        elif dst is None and e.dst.startswith("jaxlint") and src == 0 and e.dst != "jaxlint.names":
            bad.append(e)  # the Python layer knows nothing of JAX: names' canonical spellings only
        elif dst is None and e.dst.startswith("jaxlint_rules"):
            bad.append(e)
    assert not bad, "a model layer imports from a layer above it:\n" + "\n".join(map(str, bad))
    assert {_layer(m) for m in _modules() if m.startswith("jaxlint.model.")} == {0, 1, 2}


def test_the_model_keeps_no_caches_in_its_dict():
    # issue 37: the facts' memo tables are named slots of one object (facts/factcache.py)
    found = []
    for folder, _, files in os.walk(os.path.join(ROOT, "jaxlint", "model")):
        for name in files:
            if name.endswith(".py"):
                path = os.path.join(folder, name)
                for i, line in enumerate(open(path, encoding="utf-8"), 1):
                    if "__dict__" in line and "__dict__.clear()" not in line and not line.lstrip().startswith(
                            ("#", '"', "``")) and "``__dict__``" not in line:
                        found.append(f"{os.path.relpath(path, ROOT)}:{i}: {line.strip()}")
    assert not found, "\n".join(found)
