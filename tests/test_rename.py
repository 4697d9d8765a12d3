"""bench/rename.py renames every user-chosen identifier of a tree consistently, keeping line
numbers; jaxlint's findings on every fixture folder must not change under that renaming (a finding
that does change is decided from a name the user chose)."""

from __future__ import annotations

import ast
import hashlib
import importlib.util
import re
import sys
import textwrap
import tokenize
from pathlib import Path

import pytest

import jaxlint_rules
from jaxlint.engine import check_path, check_source

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"
FOLDERS = sorted(p for p in FIXTURES.iterdir() if p.is_dir() and re.match(r"JAX\d{3}_", p.name))


def _load():
    spec = importlib.util.spec_from_file_location("jaxlint_bench_rename", ROOT / "bench" / "rename.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


rename = _load()


def N(name: str, digits: int = 6) -> str:
    """The new name the scheme gives ``name``: ``v`` and the first hex digits of its SHA-1, after
    its leading underscores."""
    bare = name.lstrip("_")
    return name[:len(name) - len(bare)] + "v" + hashlib.sha1(name.encode()).hexdigest()[:digits]


def expect(template: str) -> str:
    """The template (dedented) with each ``$name`` replaced by the new name of ``name``."""
    return re.sub(r"\$(\w+)", lambda m: N(m.group(1)), textwrap.dedent(template))


def ren(src: str) -> str:
    """``src`` (dedented) renamed as a tree of one file."""
    text = textwrap.dedent(src)
    info = rename.build_info({"m.py": text})
    return rename.rename_source(text, rename.make_mapping(info), info, "m.py")


# ------------------------------------------------------------------ the renamer on snippets


def test_new_names_follow_the_scheme():
    info = rename.build_info({"m.py": "params = 1\n_cache = 2\n__hidden = 3\n"})
    assert rename.make_mapping(info) == {"params": N("params"), "_cache": N("_cache"), "__hidden": N("__hidden")}
    assert N("_cache").startswith("_v") and N("__hidden").startswith("__v")


def test_a_new_name_never_clashes_with_a_name_of_the_tree():
    # the tree already uses the name x would get: every new name takes two more digits
    text = f"x = 1\n{N('x')} = 2\n"
    mapping = rename.make_mapping(rename.build_info({"m.py": text}))
    assert mapping == {"x": N("x", 8), N("x"): N(N("x"), 8)}
    assert ren(text) == f"{N('x', 8)} = 1\n{N(N('x'), 8)} = 2\n"


def test_locals_and_parameters():
    src = """
        def scale(values, factor=2):
            total = 0
            for v in values:
                total += v * factor
            return total
    """
    assert ren(src) == expect("""
        def $scale($values, $factor=2):
            $total = 0
            for $v in $values:
                $total += $v * $factor
            return $total
    """)


def test_every_binding_form():
    src = """
        import contextlib

        def outer(items, *rest, flag=False, **extra):
            global counter
            counter = 0
            acc: list = []
            first, *others = items
            with contextlib.suppress(ValueError) as ctx:
                pass
            try:
                pass
            except ValueError as err:
                print(err)
            squares = [sq * sq for sq in items if (big := sq) > 1]
            def inner():
                nonlocal acc
                acc += [big]
            pick = lambda a, b=1: a + b
            del first
            return others, ctx, squares, inner, pick, rest, flag, extra
    """
    assert ren(src) == expect("""
        import contextlib

        def $outer($items, *$rest, $flag=False, **$extra):
            global $counter
            $counter = 0
            $acc: list = []
            $first, *$others = $items
            with contextlib.suppress(ValueError) as $ctx:
                pass
            try:
                pass
            except ValueError as $err:
                print($err)
            $squares = [$sq * $sq for $sq in $items if ($big := $sq) > 1]
            def $inner():
                nonlocal $acc
                $acc += [$big]
            $pick = lambda $a, $b=1: $a + $b
            del $first
            return $others, $ctx, $squares, $inner, $pick, $rest, $flag, $extra
    """)


def test_match_captures_and_fstrings():
    src = """
        class Point:
            def __init__(self, px, py):
                self.px, self.py = px, py

        def describe(cmd):
            match cmd:
                case {"op": op, **rest}:
                    return op, rest
                case [head, *tail] if head:
                    return tail
                case Point(px=0, py=yval) as hit:
                    return f"{yval} {hit.px!r} {cmd=}"
                case _:
                    return f"cmd={cmd}"
    """
    # `{cmd=}` prints the expression's text, which is renamed with it
    assert ren(src) == expect("""
        class $Point:
            def __init__(self, $px, $py):
                self.$px, self.$py = $px, $py

        def $describe($cmd):
            match $cmd:
                case {"op": $op, **$rest}:
                    return $op, $rest
                case [$head, *$tail] if $head:
                    return $tail
                case $Point($px=0, $py=$yval) as $hit:
                    return f"{$yval} {$hit.$px!r} {$cmd=}"
                case _:
                    return f"cmd={$cmd}"
    """)


def test_keywords_of_the_trees_functions_are_renamed_and_library_keywords_kept():
    src = """
        import jax.numpy as jnp

        def norm(x, axis=0):
            return jnp.sum(x * x, axis=axis)

        y = norm(jnp.ones(3), axis=0)
        z = dict(axis=1)
        w = jnp.zeros(3, dtype=jnp.float32)
    """
    assert ren(src) == expect("""
        import jax.numpy as jnp

        def $norm($x, $axis=0):
            return jnp.sum($x * $x, axis=$axis)

        $y = $norm(jnp.ones(3), $axis=0)
        $z = dict(axis=1)
        $w = jnp.zeros(3, dtype=jnp.float32)
    """)


def test_static_argnames_strings_follow_their_parameters():
    src = """
        from functools import partial
        import jax

        @partial(jax.jit, static_argnames=("n", 'mode'))
        def power(x, n, mode):
            return x ** n

        fast = jax.jit(power, static_argnames="n", static_argnums=(2,))
        label = "n"
    """
    # a string elsewhere ("n" in label) is data, not a name
    assert ren(src) == expect("""
        from functools import partial
        import jax

        @partial(jax.jit, static_argnames=("$n", '$mode'))
        def $power($x, $n, $mode):
            return $x ** $n

        $fast = jax.jit($power, static_argnames="$n", static_argnums=(2,))
        $label = "n"
    """)


COUNTER = """
    import jax

    class Counter:
        limit = 10

        def __init__(self, start):
            self.total = start

        def bump(self, by=1):
            self.total += by
            return self.total < self.limit

    c = Counter(start=3)
    c.bump(by=2)
    arr = jax.numpy.zeros(3)
    arr.block_until_ready()
"""


def test_methods_and_self_attributes():
    assert ren(COUNTER) == expect("""
        import jax

        class $Counter:
            $limit = 10

            def __init__(self, $start):
                self.$total = $start

            def $bump(self, $by=1):
                self.$total += $by
                return self.$total < self.$limit

        $c = $Counter($start=3)
        $c.$bump($by=2)
        $arr = jax.numpy.zeros(3)
        $arr.block_until_ready()
    """)


def test_attributes_of_library_objects_defined_by_a_tree_class_stay_attributes():
    # a tree class defining `update`, `shape` or `mean` does not rename dict.update, x.shape or
    # x.mean; `shape` is still renamed as a variable, and `Box(shape=...)` (a field) keeps its keyword
    src = """
        import dataclasses
        import jax.numpy as jnp

        @dataclasses.dataclass
        class Box:
            shape: tuple
            scale: float = 1.0

            def update(self, other):
                return self.mean() + other

            def mean(self):
                return jnp.zeros(self.shape).mean() * self.scale

        shape = (2,)
        box = Box(shape=shape, scale=2.0)
        opts = {}
        opts.update(a=1)
        box.update(jnp.ones(shape).mean())
    """
    assert ren(src) == expect("""
        import dataclasses
        import jax.numpy as jnp

        @dataclasses.dataclass
        class $Box:
            shape: tuple
            $scale: float = 1.0

            def update(self, $other):
                return self.mean() + $other

            def mean(self):
                return jnp.zeros(self.shape).mean() * self.$scale

        $shape = (2,)
        $box = $Box(shape=$shape, $scale=2.0)
        $opts = {}
        $opts.update(a=1)
        $box.update(jnp.ones($shape).mean())
    """)


def test_keywords_follow_the_callees_signature_and_slots_follow_attributes():
    # `default` is a parameter of make(), but field() takes it through **kwargs for dataclasses:
    # it keeps its name there; __slots__ names the attributes it declares
    src = """
        import dataclasses

        def field(pytree=True, **kwargs):
            return dataclasses.field(metadata={"p": pytree}, **kwargs)

        def make(default=0):
            return default

        class Pair:
            __slots__ = ("left", "right")

            def __init__(self, left, right):
                self.left, self.right = left, right

        a = field(pytree=False, default=None), make(default=1), Pair(left=1, right=2)
    """
    assert ren(src) == expect("""
        import dataclasses

        def $field($pytree=True, **$kwargs):
            return dataclasses.field(metadata={"p": $pytree}, **$kwargs)

        def $make($default=0):
            return $default

        class $Pair:
            __slots__ = ("$left", "$right")

            def __init__(self, $left, $right):
                self.$left, self.$right = $left, $right

        $a = $field($pytree=False, default=None), $make($default=1), $Pair($left=1, $right=2)
    """)


class _Apply(ast.NodeTransformer):
    """The mapping applied to a tree in the simplest way: every Name, parameter, def and class
    name, and the given attribute and keyword names."""

    def __init__(self, mapping, attrs, keywords):
        self.m, self.attrs, self.keywords = mapping, attrs, keywords

    def visit_Name(self, node):
        node.id = self.m.get(node.id, node.id)
        return node

    def visit_arg(self, node):
        node.arg = self.m.get(node.arg, node.arg)
        return self.generic_visit(node)

    def _named(self, node):
        node.name = self.m.get(node.name, node.name)
        return self.generic_visit(node)

    visit_FunctionDef = visit_ClassDef = _named

    def visit_Attribute(self, node):
        if node.attr in self.attrs:
            node.attr = self.m[node.attr]
        return self.generic_visit(node)

    def visit_keyword(self, node):
        if node.arg in self.keywords:
            node.arg = self.m[node.arg]
        return self.generic_visit(node)


def test_renamed_text_parses_to_the_original_tree_with_the_mapping_applied():
    text = textwrap.dedent(COUNTER)
    info = rename.build_info({"m.py": text})
    mapping = rename.make_mapping(info)
    out = rename.rename_source(text, mapping, info, "m.py")
    want = _Apply(mapping, {"total", "limit", "bump"}, {"start", "by"}).visit(ast.parse(text))
    assert ast.dump(ast.parse(out)) == ast.dump(want)
    assert ast.dump(ast.parse(out)) == ast.dump(rename.renamed_ast(text, mapping, info, "m.py"))


def test_kept_names():
    src = """
        import numpy as np
        import jax
        from jax import numpy as jnp

        def test_shapes(tmp_path):
            arr = np.zeros(3)
            out = jnp.asarray(arr).block_until_ready()
            assert len(out.shape) == 1 and __name__
            print(isinstance(out, jax.Array), tmp_path)

        class TestModel:
            def setUp(self):
                self.width = 2

            def test_width(self):
                assert self.width == 2

        class Model:
            def __call__(self, x):
                return x
    """
    assert ren(src) == expect("""
        import numpy as np
        import jax
        from jax import numpy as jnp

        def test_shapes(tmp_path):
            $arr = np.zeros(3)
            $out = jnp.asarray($arr).block_until_ready()
            assert len($out.shape) == 1 and __name__
            print(isinstance($out, jax.Array), tmp_path)

        class TestModel:
            def setUp(self):
                self.$width = 2

            def test_width(self):
                assert self.$width == 2

        class $Model:
            def __call__(self, $x):
                return $x
    """)


def test_fixtures_and_their_parameters_are_kept_main_and_all_are_renamed():
    src = """
        import pytest

        __all__ = ["main", "data"]

        @pytest.fixture
        def data(tmp_path):
            return [tmp_path]

        def test_data(data, capsys):
            assert data

        def main(argv=None):
            return argv

        if __name__ == "__main__":
            main()
    """
    assert ren(src) == expect("""
        import pytest

        __all__ = ["$main", "data"]

        @pytest.fixture
        def data(tmp_path):
            return [tmp_path]

        def test_data(data, capsys):
            assert data

        def $main($argv=None):
            return $argv

        if __name__ == "__main__":
            $main()
    """)


def test_comments_strings_layout_and_line_numbers_are_kept():
    src = (
        "import jax\n"
        "\n"
        "\n"
        "def train(params,   # the weights\n"
        "          steps):\n"
        "    '''Train params for steps.'''\n"
        "    for i in range(steps):  # expect: JAX201\n"
        "        loss = float(params)  # noqa: JAX201\n"
        "        print(f\"{i}: {loss:.3f}\", \"loss\")\n"
        "    return (params\n"
        "            + 1)\n"
    )
    out = ren(src)
    assert out == expect(
        "import jax\n"
        "\n"
        "\n"
        "def $train($params,   # the weights\n"
        "          $steps):\n"
        "    '''Train params for steps.'''\n"
        "    for $i in range($steps):  # expect: JAX201\n"
        "        $loss = float($params)  # noqa: JAX201\n"
        "        print(f\"{$i}: {$loss:.3f}\", \"loss\")\n"
        "    return ($params\n"
        "            + 1)\n"
    )
    assert [(n.lineno, type(n).__name__) for n in ast.walk(ast.parse(out)) if hasattr(n, "lineno")] == \
           [(n.lineno, type(n).__name__) for n in ast.walk(ast.parse(src)) if hasattr(n, "lineno")]


def test_imports_from_another_module_of_the_tree(tmp_path):
    src, dst = tmp_path / "src", tmp_path / "dst"
    (src / "pkg").mkdir(parents=True)
    (src / "pkg" / "__init__.py").write_text("")
    (src / "pkg" / "model.py").write_text(textwrap.dedent("""
        import jax

        @jax.jit
        def step(x, lr=0.1):
            return x - lr
    """))
    (src / "pkg" / "train.py").write_text(textwrap.dedent("""
        from .model import step
        from . import model as M
        import pkg.model

        def run(x):
            x = step(x, lr=0.5)
            x = M.step(x)
            return pkg.model.step(x)
    """))
    (src / "pkg" / "notes.txt").write_text("step x lr\n")
    (src / "pkg" / "demo.ipynb").write_text('{"cells": [{"source": ["step(x)"]}]}\n')
    (src / "pkg" / "broken.py").write_text("def step(:\n")
    warnings = []
    mapping = rename.rename_tree(str(src), str(dst), warnings)
    assert mapping == {n: N(n) for n in ("step", "x", "lr", "run")}
    assert (dst / "pkg" / "model.py").read_text() == expect("""
        import jax

        @jax.jit
        def $step($x, $lr=0.1):
            return $x - $lr
    """)
    # module and package names (model, pkg) and the alias M are kept
    assert (dst / "pkg" / "train.py").read_text() == expect("""
        from .model import $step
        from . import model as M
        import pkg.model

        def $run($x):
            $x = $step($x, $lr=0.5)
            $x = M.$step($x)
            return pkg.model.$step($x)
    """)
    assert (dst / "pkg" / "__init__.py").read_text() == ""
    for name in ("notes.txt", "demo.ipynb", "broken.py"):  # copied as they are
        assert (dst / "pkg" / name).read_bytes() == (src / "pkg" / name).read_bytes()
    assert warnings == ["pkg/broken.py: does not parse: copied unchanged"]


def test_a_name_imported_from_a_library_is_kept_where_it_is_imported(tmp_path):
    # `zeros` is the tree's in a.py and numpy's in b.py; c.py takes b's, which b keeps
    src, dst = tmp_path / "src", tmp_path / "dst"
    src.mkdir()
    (src / "a.py").write_text("def zeros(n):\n    return [0] * n\n")
    (src / "b.py").write_text("from numpy import zeros\nx = zeros(3)\n")
    (src / "c.py").write_text("from b import zeros\nfrom a import zeros as mine\ny = zeros(2), mine(2)\n")
    rename.rename_tree(str(src), str(dst))
    assert (dst / "a.py").read_text() == expect("def $zeros($n):\n    return [0] * $n\n")
    assert (dst / "b.py").read_text() == expect("from numpy import zeros\n$x = zeros(3)\n")
    assert (dst / "c.py").read_text() == expect(
        "from b import zeros\nfrom a import $zeros as mine\n$y = zeros(2), mine(2)\n")


def test_reexports_star_imports_and_module_attributes(tmp_path):
    # pkg re-exports step; util.py is imported with *; random.py of the tree does not define seed,
    # so `random.seed` stays as it is although `seed` is a parameter elsewhere
    src, dst = tmp_path / "src", tmp_path / "dst"
    (src / "pkg").mkdir(parents=True)
    (src / "pkg" / "__init__.py").write_text("from .model import step\n")
    (src / "pkg" / "model.py").write_text("def step(seed):\n    return seed\n")
    (src / "util.py").write_text("def helper():\n    return 1\n")
    (src / "random.py").write_text("def shuffle(items):\n    return items\n")
    (src / "train.py").write_text(
        "import pkg\nimport random\nfrom pkg import step\nfrom util import *\n"
        "a = pkg.step(1), step(2), helper()\nrandom.seed(0)\nrandom.shuffle([])\n")
    rename.rename_tree(str(src), str(dst))
    assert (dst / "pkg" / "__init__.py").read_text() == expect("from .model import $step\n")
    assert (dst / "train.py").read_text() == expect(
        "import pkg\nimport random\nfrom pkg import $step\nfrom util import *\n"
        "$a = pkg.$step(1), $step(2), $helper()\nrandom.seed(0)\nrandom.$shuffle([])\n")


def test_command_line(tmp_path):
    src = tmp_path / "m.py"
    src.write_text("def f(a):\n    return a  # keep\n")
    rename.main([str(src), str(tmp_path / "out.py"), "--mapping", str(tmp_path / "map.json"), "-q"])
    assert (tmp_path / "out.py").read_text() == expect("def $f($a):\n    return $a  # keep\n")
    assert (tmp_path / "map.json").read_text().count(":") == 2


# ------------------------------------------------------------------ invariance on the fixtures


RULES = [r() for r in jaxlint_rules.ALL_RULES]

# Fixture folders whose findings change when the user's names change: each is a decision jaxlint
# makes from a name the user chose (found by renaming that one name alone).
# Fixture folders whose findings still change under renaming, with the name-based decision that
# causes it (a convention of jaxlint/conventions.py). Empty since issue 26: `log = logging.getLogger()`
# is resolved to a logger and a `pallas_call` kernel's parameters are refs, whatever their names.
NAME_BASED: dict = {}


def _findings(root: Path) -> set:
    out = set()
    for path in sorted(root.rglob("*.py")):
        result = check_path(str(path), RULES)
        assert result.internal_errors == []
        out |= {(path.relative_to(root).as_posix(), f.line, f.code, f.opt_in is not None) for f in result.findings}
    return out


def _folder_param(folder: Path):
    marks = [pytest.mark.xfail(strict=True, reason=NAME_BASED[folder.name])] if folder.name in NAME_BASED else []
    return pytest.param(folder, marks=marks, id=folder.name)


@pytest.mark.parametrize("folder", [_folder_param(f) for f in FOLDERS])
def test_findings_do_not_depend_on_the_names(folder: Path, tmp_path):
    dest = tmp_path / folder.name  # the folder is renamed as one tree (JAX201_cross_module: a package)
    warnings = []
    mapping = rename.rename_tree(str(folder), str(dest), warnings)
    assert warnings == [] and mapping
    before = _findings(folder)
    assert before, "the fixture's bad.py has findings"
    after = _findings(dest)
    assert after == before, f"lost: {sorted(before - after)}, new: {sorted(after - before)}"


def test_name_based_cases_are_fixture_folders():
    assert set(NAME_BASED) <= {f.name for f in FOLDERS}


def _comments(text: str) -> list:
    return [(t.start[0], t.string) for t in tokenize.generate_tokens(iter(text.splitlines(True)).__next__)
            if t.type == tokenize.COMMENT]


@pytest.mark.parametrize("folder", FOLDERS, ids=lambda p: p.name)
def test_fixture_renaming_is_exact(folder: Path):
    """Every renamed file parses to its original tree with the mapping applied, with every node on
    its original line and every comment kept."""
    texts = {p.relative_to(folder).as_posix(): p.read_text() for p in sorted(folder.rglob("*.py"))}
    info = rename.build_info(texts, folder.name)
    mapping = rename.make_mapping(info)
    for rel, text in texts.items():
        out = rename.rename_source(text, mapping, info, rel)
        assert ast.dump(ast.parse(out)) == ast.dump(rename.renamed_ast(text, mapping, info, rel)), rel
        lines = [(type(n).__name__, n.lineno, n.end_lineno) for n in ast.walk(ast.parse(text)) if hasattr(n, "lineno")]
        assert lines == [(type(n).__name__, n.lineno, n.end_lineno)
                         for n in ast.walk(ast.parse(out)) if hasattr(n, "lineno")], rel
        assert _comments(out) == _comments(text), rel
        assert out.count("\n") == text.count("\n")
        if rel.endswith(("bad.py", "good.py", "model.py")):
            assert out != text, f"{rel}: nothing renamed"


@pytest.mark.parametrize("rule", jaxlint_rules.ALL_RULES, ids=lambda r: r.code)
def test_rule_examples_do_not_depend_on_the_names(rule):
    for example in (rule.bad, rule.good):
        text = textwrap.dedent(example)
        info = rename.build_info({"t.py": text})
        out = rename.rename_source(text, rename.make_mapping(info), info, "t.py")

        def codes(src):
            res = check_source(src, "t.py", RULES)
            assert res.internal_errors == []
            return {(f.line, f.code, f.opt_in is not None) for f in res.findings}

        assert codes(out) == codes(text)
