"""Fuzzing and hostile input: the static checker never raises and never records an internal error.

* generated programs: ``hypothesmith`` (valid Python from the grammar), as is and with JAX imports
  in front, plus a small generator of JAX-flavoured programs (jit, loops, keys, lax bodies) that
  reaches the rules' inference;
* mutated files: every fixture (and a sample of the real-library corpus when it is present),
  truncated, bit-flipped, re-encoded, re-indented, with lines dropped or duplicated; through
  ``check_source`` and once through the CLI;
* deep nesting: long chains and deep blocks give findings or one clean JAX000, never a
  ``RecursionError`` or an internal error.

Sizes are small for CI; ``pytest tests/test_fuzz.py --fuzz-examples 2000`` runs a larger fuzz.
A failure message names the file and the mutations (``_mutate(data, seed)`` reproduces them).
"""

from __future__ import annotations

import ast
import glob
import io
import json
import os
import random
import subprocess
import sys
import tokenize
import warnings

import pytest

from jaxlint.engine import check_source
from jaxlint_rules import ALL_RULES

try:  # the property tests need them; the mutation and nesting tests do not
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # libcst's, on import
        import hypothesmith
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st
except ImportError:  # pragma: no cover
    hypothesmith = None

needs_hypothesis = pytest.mark.skipif(hypothesmith is None, reason="needs hypothesis and hypothesmith")
# Generated literals (``1()``, ``'\\d'``) make the compiler warn while Hypothesis builds examples.
quiet_compiler = pytest.mark.filterwarnings("ignore::SyntaxWarning", "ignore::DeprecationWarning")

RULES = [cls() for cls in ALL_RULES]
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIXTURES = os.path.join(REPO, "fixtures")
JAX_PRELUDE = "import jax\nimport jax.numpy as jnp\nfrom jax import lax\n"
TOO_DEEP = "could not parse: too deeply nested"  # the model's own recursion limit, on a file Python parses
UNDECODABLE = "could not parse: not valid source text"


def _settings(n: int):
    # No example database: CI leaves no .hypothesis folder behind; a failure prints its example.
    return settings(max_examples=n, deadline=None, database=None, suppress_health_check=list(HealthCheck))


def _python_parses(data) -> bool:
    """Whether CPython's own parser accepts the source (bytes: with its coding cookie and BOM)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            ast.parse(data)
        except (SyntaxError, ValueError, LookupError, RecursionError, MemoryError):
            return False
    return True


def _undecodable(data) -> bool:
    """Whether bytes are invalid in the encoding their BOM or coding cookie declares."""
    if not isinstance(data, bytes):
        return False
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
        data.decode(encoding)
    except (SyntaxError, LookupError, UnicodeError):
        return True
    return False


def _check(data, path: str = "<fuzz>.py") -> list:
    """Check ``data`` and return what is wrong with the result (empty when all is well)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # SyntaxWarnings of odd generated literals
            res = check_source(data, path, RULES)
    except Exception as e:  # RecursionError and MemoryError included
        return [f"raised {type(e).__name__}: {e}"]
    problems = [f"internal error: {msg}" for msg in res.internal_errors]
    if res.not_analyzed is not None:  # over the size limit: not analyzed and no finding (issue 40)
        if res.findings or not res.not_analyzed.startswith("not analyzed: ") or "\n" in res.not_analyzed:
            problems.append(f"a file not analyzed must have no finding and one line saying why: {res}")
        return problems
    jax000 = [f for f in res.findings if f.code == "JAX000"]
    if jax000 and len(res.findings) != 1:
        problems.append(f"a parse failure must be exactly one JAX000 finding, got {res.findings}")
    for f in jax000:
        if not f.message.startswith(("could not parse: ", "not analyzed: ")) or "\n" in f.message or f.line < 1:
            problems.append(f"malformed JAX000: {f}")
    parses = _python_parses(data)
    if parses and jax000 and jax000[0].message.startswith(UNDECODABLE) and _undecodable(data):
        parses = False  # CPython 3.11 lets invalid UTF-8 through in comments; jaxlint does not
    if parses and any(not f.message.startswith(TOO_DEEP) for f in jax000):
        problems.append(f"Python parses this file but jaxlint reports {jax000[0].message!r}")
    if not parses and not jax000:
        problems.append(f"Python cannot parse this file but jaxlint reports no JAX000: {res.findings}")
    return problems


# --------------------------------------------------------------------------- generated programs


@needs_hypothesis
@quiet_compiler
def test_hypothesmith_programs_never_crash(fuzz_examples):
    """Valid programs from the Python grammar, as they are and with JAX imports in front (which
    makes every rule run on them)."""
    seen = []

    @_settings(fuzz_examples or 40)
    @given(hypothesmith.from_grammar())
    def run(src):
        seen.append(src)
        for text in (src, JAX_PRELUDE + src):
            problems = _check(text)
            assert not problems, (problems, text)

    run()
    assert seen


# A small grammar of JAX-flavoured code: names collide on purpose (shadowed imports, rebound keys,
# helpers called from jitted functions), so the model's inference paths meet each other.
_LEAVES = ("x", "y", "key", "sub", "n", "i", "v", "state", "params", "batch", "0", "1", "3", "-1", "2.5",
           "None", "True", "'s'", "(1, 2)", "x.shape", "x.shape[0]", "x.ndim", "len(x)", "jnp", "jax", "np",
           "self.x", "self", "step", "f", "g", "body", "lambda v: v", "lambda c, v: (c, v)", "...", "*x")
_EXPR_TEMPLATES = (
    "jnp.sum({0})", "jnp.zeros({0})", "jnp.arange({0}, {1})", "jnp.nonzero({0})", "jnp.where({0}, {1}, {2})",
    "jnp.ones(({0}, {1}))", "jnp.asarray({0})", "jnp.unique({0})", "jnp.reshape({0}, {1})", "np.asarray({0})",
    "np.array({0})", "jax.random.split({0})", "jax.random.split({0}, {1})", "jax.random.normal({0}, ({1},))",
    "jax.random.PRNGKey({0})", "jax.random.key({0})", "jax.random.fold_in({0}, {1})",
    "jax.random.uniform({0}, {1}.shape)", "np.random.rand({0})", "random.random()", "time.time()",
    "{0}.at[{1}].set({2})", "{0}.at[{1}].add({2})", "{0}.at[{1}:{2}].get()", "jax.ops.index_update({0}, {1}, {2})",
    "float({0})", "int({0})", "{0}.item()", "{0}.tolist()", "bool({0})", "jax.device_get({0})",
    "{0}.block_until_ready()", "jax.block_until_ready({0})", "print({0})", "print(f'{{{0}}}')",
    "jax.debug.print('{{}}', {0})", "{0}.append({1})",
    "jax.jit({0})", "jax.jit({0})({1})", "jax.jit({0}, static_argnums=({1},))", "jax.jit({0}, static_argnames='n')",
    "partial(jax.jit, static_argnames=('n',))({0})", "jax.vmap({0})({1})", "jax.vmap({0}, in_axes=({1}, None))",
    "jax.grad({0})({1})", "jax.value_and_grad({0})({1}, {2})", "jax.pmap({0})", "eqx.filter_jit({0})",
    "jax.checkpoint({0})", "jax.eval_shape({0}, {1})",
    "lax.fori_loop(0, {0}, {1}, {2})", "lax.scan({0}, {1}, {2})", "lax.cond({0}, {1}, {2}, {0})",
    "lax.while_loop({0}, {1}, {2})", "lax.switch({0}, [{1}, {2}], {0})", "lax.map({0}, {1})",
    "jax.tree_util.tree_map({0}, {1})", "jax.tree.leaves({0})",
    "{0}({1})", "{0}({1}, n={2})", "{0}({1}, *{2})", "{0}(**{1})", "{0}.update({1})",
    "{0} + {1}", "{0} * {1}", "{0} @ {1}", "{0} > {1}", "{0} == {1}", "{0} is None", "{0} if {1} else {2}",
    "not {0}", "-{0}", "{0} and {1}", "{0} or {1}", "{0} % {1}",
    "{0}[{1}]", "{0}[{1}:{2}]", "{0}[..., {1}]", "{0}.shape", "{0}.T", "{0}.astype(jnp.float32)",
    "({0}, {1})", "[{0}, {1}]", "{{'a': {0}, **{1}}}", "{{{0}, {1}}}",
    "[{0} for i in range({1})]", "[{0} for i, v in enumerate({1}) if {2}]", "{{k: {0} for k, v in {1}.items()}}",
    "({0} for v in {1})", "lambda x: {0}", "lambda *a, n={1}, **k: {0}", "(y := {0})", "f'{{{0}!r:>{{{1}}}}}'",
    "(yield {0})", "await {0}",
)
_TARGETS = ("x", "y", "key", "sub", "state", "params", "n", "x[0]", "x[i]", "self.x", "x, y", "key, sub",
            "(key, sub)", "[x, *y]", "jnp", "np", "step", "f", "x.at[0]")
_STMT_TEMPLATES = (
    "{t} = {0}", "{t} = {0}", "{t} += {0}", "x: jax.Array = {0}", "{0}", "{0}", "return {0}", "return",
    "x[{0}] = {1}", "x[{0}] += {1}", "self.x = {0}", "assert {0}, {1}", "raise ValueError({0})", "del x",
    "global x", "nonlocal y", "pass", "break", "continue", "yield {0}",
    "import numpy as np", "import jax.numpy as np", "from jax import jit, lax", "from jax import numpy as jnp",
    "from functools import partial", "import equinox as eqx", "from jax import random", "import random",
    "from .model import step", "from . import model", "from jax._src.api import jit",
    "key, sub = jax.random.split(key)", "{t} = {0}  # noqa", "{0}  # noqa: JAX201,JAX5",
)
_HEADERS = (  # (line, may take an else:)
    ("for i in range({0}):", True), ("for i in range(3):", True), ("for i, v in enumerate({0}):", True),
    ("for k, v in {0}.items():", False), ("for v in {0}:", True), ("for x in [1, 2]:", False),
    ("while {0}:", True), ("while i < n:", False), ("if {0}:", True), ("if i % 10 == 0:", True),
    ("if x.shape[0] > 1:", True), ("with {0}:", False), ("with jax.disable_jit(), open(v) as fh:", False),
    ("async for v in {0}:", True), ("async with {0}:", False), ("match {0}:\n    case [a, *b]:", False),
)
_DECORATORS = ("@jax.jit", "@jit", "@partial(jax.jit, static_argnums=(1,))", "@partial(jax.jit, static_argnames=('n',))",
               "@functools.partial(jax.jit, donate_argnums=0)", "@jax.vmap", "@jax.grad", "@jax.pmap",
               "@eqx.filter_jit", "@nnx.jit", "@jax.checkpoint", "@staticmethod", "@property", "@{0}")
_DEFS = ("def step({p}):", "def f({p}):", "def body({p}):", "def g({p}):", "async def loss({p}):",
         "def __call__(self, {p}):", "def update(self, {p}):")
_PARAMS = ("x", "x, n", "carry, x", "i, x", "key, x", "x, *args, n=3, **kw", "params, batch", "x, /, y=None")
_CLASSES = ("class Model:", "class M(eqx.Module):", "class C(nnx.Module):", "@dataclass\nclass S:")


def _indent(lines: list) -> list:
    return ["    " + line for line in lines]


def _flatten(blocks: list) -> list:
    return [line for b in blocks for line in b]


_HEADER_IMPORTS = ("import jax.numpy as jnp", "from jax import lax", "from functools import partial",
                   "import numpy as np", "import equinox as eqx", "from flax import nnx", "import functools")


def _compound(block, expr):
    """Strategies for compound statements whose bodies are drawn from ``block`` (lists of lines)."""

    def header(h, e, body, orelse):
        line, else_ok = h
        first = line.format(e).split("\n")
        lines = first + _indent(body) if len(first) == 1 else [first[0]] + _indent([first[1].strip()] + _indent(body))
        if else_ok and orelse:
            lines += ["else:"] + _indent(orelse)
        return lines

    def funcdef(decos, d, p, e, body):
        return [x.format(e) for x in decos] + [d.format(p=p)] + _indent(body)

    def classdef(c, body):
        return c.split("\n") + _indent(body)

    def trydef(body, handler, final):
        return ["try:"] + _indent(body) + ["except (ValueError, TypeError) as e:"] + _indent(handler) + (
            ["finally:"] + _indent(final) if final else [])

    return st.one_of(
        st.builds(header, st.sampled_from(_HEADERS), expr, block, st.none() | block),
        st.builds(funcdef, st.lists(st.sampled_from(_DECORATORS), max_size=2), st.sampled_from(_DEFS),
                  st.sampled_from(_PARAMS), expr, block),
        st.builds(classdef, st.sampled_from(_CLASSES), block),
        st.builds(trydef, block, block, st.none() | block),
    )


def jax_programs():
    """A Hypothesis strategy for JAX-flavoured module sources."""
    expr = st.recursive(
        st.sampled_from(_LEAVES),
        lambda inner: st.builds(lambda t, args: t.format(*args), st.sampled_from(_EXPR_TEMPLATES),
                                st.lists(inner, min_size=3, max_size=3)),
        max_leaves=8)
    simple = st.builds(lambda t, tgt, args: [t.format(*args, t=tgt)], st.sampled_from(_STMT_TEMPLATES),
                       st.sampled_from(_TARGETS), st.lists(expr, min_size=2, max_size=2))
    stmt = st.recursive(simple, lambda inner: _compound(st.lists(inner, min_size=1, max_size=3).map(_flatten), expr),
                        max_leaves=12)
    return st.builds(
        lambda imports, body: "\n".join(["import jax"] + imports + _flatten(body)) + "\n",
        st.lists(st.sampled_from(_HEADER_IMPORTS), max_size=4, unique=True),
        st.lists(stmt, min_size=1, max_size=6))


@needs_hypothesis
@quiet_compiler
def test_jax_flavoured_programs_never_crash(fuzz_examples):
    """Programs built from JAX idioms: jitted steps, loops calling them, key splitting, lax bodies,
    host conversions, functional updates, shadowed imports. Most parse; the ones that do not
    (``return`` in a class body parses, ``else`` after ``try`` does not) must give one JAX000."""
    parsed = []

    @_settings(fuzz_examples or 50)
    @given(jax_programs())
    def run(src):
        parsed.append(_python_parses(src))
        problems = _check(src)
        assert not problems, (problems, src)

    run()
    assert any(parsed)


# --------------------------------------------------------------------------- mutations

BOM = b"\xef\xbb\xbf"
INVALID_UTF8 = (b"\xff", b"\xfe\xfe", b"\x80", b"\xc3\x28", b"\xe2\x82", b"\xed\xa0\x80", b"\xf4\x90\x80\x80",
                b"\xf8\x88\x80\x80\x80", b"\xc0\xaf", b"\xe0\x80\xaf")
# Coding cookies the engine reads (text codecs, some of which cannot decode the file) or rejects
# with a JAX000 (unknown names, codecs that are not text encodings).
TEXT_COOKIES = ("klingon", "utf-16", "utf-32-be", "latin-1", "ascii", "cp037", "utf-8-sig", "euc-jp", "shift_jis",
                "utf-7", "hz", "mbcs", "utf8", "UTF-8", "latin-1-unix", "punycode", "undefined", "idna")
NON_TEXT_COOKIES = ("hex", "rot13", "zlib", "base64", "bz2", "uu", "quopri")
# Codecs whose decoder raises UnicodeError rather than UnicodeDecodeError (once a crash).
RAISING_COOKIES = ("punycode", "undefined", "idna")


def _lines(data: bytes) -> list:
    return data.splitlines(keepends=True) or [b""]


def _pos(data: bytes, rng: random.Random) -> int:
    return rng.randrange(len(data) + 1)


def _at_lines(data: bytes, rng: random.Random, fn) -> bytes:
    lines = _lines(data)
    for i in rng.sample(range(len(lines)), k=min(len(lines), rng.randint(1, 4))):
        lines[i] = fn(lines[i])
    return b"".join(lines)


def _swap_lines(data: bytes, rng: random.Random) -> bytes:
    lines = _lines(data)
    i, j = rng.randrange(len(lines)), rng.randrange(len(lines))
    lines[i], lines[j] = lines[j], lines[i]
    return b"".join(lines)


def _delete_lines(data: bytes, rng: random.Random) -> bytes:
    lines = _lines(data)
    i = rng.randrange(len(lines))
    del lines[i:i + rng.randint(1, 3)]
    return b"".join(lines)


def _duplicate_lines(data: bytes, rng: random.Random) -> bytes:
    lines = _lines(data)
    i = rng.randrange(len(lines))
    j = rng.randrange(len(lines) + 1)
    lines[j:j] = lines[i:i + rng.randint(1, 4)]
    return b"".join(lines)


def _splice(data: bytes, rng: random.Random) -> bytes:
    a, b = sorted((_pos(data, rng), _pos(data, rng)))
    p = _pos(data, rng)
    return data[:p] + data[a:b] + data[p:]


def _flip(data: bytes, rng: random.Random) -> bytes:
    if not data:
        return b"\xff"
    buf = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        i = rng.randrange(len(buf))
        buf[i] = buf[i] ^ (1 << rng.randrange(8)) if rng.random() < 0.5 else rng.randrange(256)
    return bytes(buf)


def _insert(chunk_choices):
    def op(data: bytes, rng: random.Random) -> bytes:
        p = _pos(data, rng)
        return data[:p] + rng.choice(chunk_choices) + data[p:]
    return op


def _cookie(cookies):
    def op(data: bytes, rng: random.Random) -> bytes:
        cookie = b"# -*- coding: " + rng.choice(cookies).encode() + b" -*-\n"
        if rng.random() < 0.5:
            return cookie + data
        return b"#!/usr/bin/env python\n" + cookie + data  # the second line counts too
    return op


MUTATIONS = {
    "truncate": lambda d, r: d[:_pos(d, r)],
    "truncate_line": lambda d, r: b"".join(_lines(d)[:r.randrange(len(_lines(d)) + 1)]),
    "flip_bytes": _flip,
    "invalid_utf8": _insert(INVALID_UTF8),
    "null_byte": _insert((b"\x00", b"\x00\x00", b"\\x00\x00")),
    "bom": lambda d, r: BOM + d,
    "double_bom": lambda d, r: BOM + BOM + d,
    "bom_mid_file": _insert((BOM,)),
    "bom_and_cookie": lambda d, r: BOM + b"# coding: " + r.choice((b"latin-1", b"utf-8", b"ascii")) + b"\n" + d,
    "crlf": lambda d, r: d.replace(b"\n", b"\r\n"),
    "cr_only": lambda d, r: d.replace(b"\n", b"\r"),
    "mixed_newlines": lambda d, r: _at_lines(d, r, lambda ln: ln.replace(b"\n", r.choice((b"\r\n", b"\r", b"\n\r")))),
    "tabs_everywhere": lambda d, r: b"".join(ln.replace(b"    ", b"\t") for ln in _lines(d)),
    "tabs_some_lines": lambda d, r: _at_lines(d, r, lambda ln: ln.replace(b"    ", b"\t", 1)),
    "form_feeds": lambda d, r: _at_lines(d, r, lambda ln: r.choice((b"\f", b"\f\f", b"    \f")) + ln),
    "odd_characters": _insert((b"\v", b"\x1b", b"\x7f", b"\xe2\x80\xa8", b"\xe2\x80\xae", b"\xe2\x80\x8b")),
    "text_cookie": _cookie(TEXT_COOKIES),
    "non_text_cookie": _cookie(NON_TEXT_COOKIES),
    "swap_lines": _swap_lines,
    "delete_lines": _delete_lines,
    "duplicate_lines": _duplicate_lines,
    "indent_lines": lambda d, r: _at_lines(d, r, lambda ln: b"    " + ln),
    "dedent_lines": lambda d, r: _at_lines(d, r, lambda ln: ln[4:] if ln.startswith(b"    ") else ln),
    "splice": _splice,
    "long_line": _insert((b"\nx = '" + b"a" * 200_000 + b"'\n", b"\n" + b"(" * 300 + b")" * 300 + b"\n")),
    "unicode_names": lambda d, r: d.replace(b"x", "\u03be".encode(), r.randint(1, 5)),
}
# For the CLI test, whose files import each other: every mutation (a non-text cookie in an
# imported module once made the importer's check fail).
DISK_SAFE = tuple(MUTATIONS)


def _mutate(data: bytes, seed: str, kinds=tuple(MUTATIONS)) -> tuple[bytes, list]:
    """One to three mutations chosen and applied by ``random.Random(seed)``: (bytes, their names)."""
    rng = random.Random(seed)
    names = [rng.choice(kinds) for _ in range(rng.choice((1, 1, 1, 2, 3)))]
    for name in names:
        data = MUTATIONS[name](data, rng)
    return data, names


def _fixture_files() -> list:
    return sorted(glob.glob(os.path.join(FIXTURES, "**", "*.py"), recursive=True))


def _corpus_root():
    root = os.environ.get("JAXLINT_CORPUS") or os.path.expanduser("~/.cache/jaxlint-corpus")
    return root if os.path.isdir(os.path.join(root, "libs")) or os.path.isdir(os.path.join(root, "jax")) else None


def _run_mutations(files: list, count: int, tag: str, base: str = REPO,
                   each_kind: bool = False) -> tuple[int, list]:
    """Mutate ``files`` and check each mutant under the original's path (so its imports resolve to
    the unmutated project): every mutation kind once per file with ``each_kind``, else ``count``
    random stacks spread over the files. Returns (mutants checked, failures)."""
    failures = []
    checked = 0
    per_file = len(MUTATIONS) if each_kind else max(1, -(-count // max(1, len(files))))
    for path in files:
        with open(path, "rb") as fh:
            original = fh.read()
        rel = os.path.relpath(path, base)  # seeds do not depend on where the files are
        for k in range(per_file):
            seed = f"{tag}:{rel}:{k}"
            if each_kind:
                name = list(MUTATIONS)[k]
                data, names = MUTATIONS[name](original, random.Random(seed)), [name]
            else:
                data, names = _mutate(original, seed)
            checked += 1
            problems = _check(data, path)
            if problems:
                failures.append(f"{rel} seed={seed!r} mutations={names}: {problems[0][:500]}")
    return checked, failures


def test_mutated_fixtures_never_crash(fuzz_examples):
    """Every mutation kind on every fixture once, then random stacks of one to three mutations."""
    files = _fixture_files()
    assert len(files) >= 40
    n1, failures = _run_mutations(files, 0, "each", each_kind=True)
    n2, more = _run_mutations(files, fuzz_examples or 4 * len(files), "random")
    assert n1 + n2 >= len(files) * (len(MUTATIONS) + 1)
    assert not failures + more, "\n".join((failures + more)[:20])


def test_mutated_corpus_files_never_crash(fuzz_examples):
    """A fixed sample of the real-library corpus (``$JAXLINT_CORPUS`` or ~/.cache/jaxlint-corpus,
    each with libs/ and jax/), mutated."""
    root = _corpus_root()
    if root is None:
        pytest.skip("no real-library corpus (set JAXLINT_CORPUS to a folder with libs/ and jax/, "
                    "or fetch it to ~/.cache/jaxlint-corpus)")
    files = sorted(glob.glob(os.path.join(root, "libs", "**", "*.py"), recursive=True)
                   + glob.glob(os.path.join(root, "jax", "**", "*.py"), recursive=True))
    # The few very large modules are left out: mutating them costs seconds and tests nothing new.
    files = [f for f in files if os.path.getsize(f) < 150_000]
    if not files:
        pytest.skip(f"the corpus at {root} holds no .py files")
    count = fuzz_examples or 120
    sample = random.Random("jaxlint-corpus-sample").sample(files, min(len(files), max(40, count // 3)))
    checked, failures = _run_mutations(sorted(sample), count, "corpus", base=root)
    assert checked >= min(count, len(sample))
    assert not failures, "\n".join(failures[:20])


def test_identity_mutations_keep_the_findings():
    """BOM, CRLF and a UTF-8 cookie on its own line change no finding (a cookie moves them down a line)."""
    for path in _fixture_files():
        with open(path, "rb") as fh:
            data = fh.read()
        base = check_source(data, path, RULES)
        assert base.internal_errors == []
        want = [(f.line, f.col, f.code) for f in base.findings]
        for name, variant, shift in (("bom", BOM + data, 0), ("crlf", data.replace(b"\n", b"\r\n"), 0),
                                     ("cookie", b"# -*- coding: utf-8 -*-\n" + data, 1)):
            if name == "cookie" and data.startswith(b"#!"):
                continue
            res = check_source(variant, path, RULES)
            got = [(f.line - shift, f.col, f.code) for f in res.findings]
            assert got == want and res.internal_errors == [], (path, name)


CLEAN_BAD = (
    "import jax\n"
    "\n"
    "@jax.jit\n"
    "def step(x):\n"
    "    return x * 2\n"
    "\n"
    "def run(x, n):\n"
    "    for i in range(n):\n"
    "        x = step(x)\n"
    "        print(float(x))\n"
    "    return x\n"
)


def _write_mutated_tree(dest, count: int) -> int:
    """Every fixture copied to ``dest`` under its own relative path (so their imports of each
    other resolve to mutated files), mutated; ``count`` files in all. Returns how many are broken."""
    files = _fixture_files()
    broken = 0
    for k in range(count):
        src = files[k % len(files)]
        rel = os.path.relpath(src, FIXTURES)
        if k >= len(files):  # more copies than fixtures: siblings named like the original
            stem, ext = os.path.splitext(rel)
            rel = f"{stem}_m{k // len(files)}{ext}"
        with open(src, "rb") as fh:
            data, _ = _mutate(fh.read(), f"cli:{rel}", DISK_SAFE)
        out = dest / rel
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_bytes(data)
        broken += not _python_parses(data)
    return broken


def test_cli_survives_a_folder_of_mutated_files(tmp_path, fuzz_examples):
    count = fuzz_examples if fuzz_examples is not None else 2 * len(_fixture_files())
    tree = tmp_path / "proj"
    broken = _write_mutated_tree(tree, count)
    clean = tree / "zz_clean_bad.py"
    clean.write_text(CLEAN_BAD)
    env = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run([sys.executable, "-m", "jaxlint", "check", "--format", "json", str(tree)],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path, env=env)
    assert proc.stderr == "", proc.stderr[-3000:]
    assert proc.returncode == 1, proc.stdout[-3000:]
    rows = json.loads(proc.stdout)
    assert any(r["path"] == str(clean) and r["line"] == 10 and r["code"] == "JAX201" for r in rows), rows[-5:]
    assert sum(r["code"] == "JAX000" for r in rows) >= broken
    assert broken > 0 or count < 20


# --------------------------------------------------------------------------- regressions


MODULE_LEVEL_GLOBAL = (
    "import jax\n"
    "import jax.numpy as jnp\n"
    "global x\n"  # legal at module level, and a no-op
    "x = jnp.ones(3)\n"
    "x[0] = 1\n"
    "def f():\n"
    "    global x\n"
    "    x[1] = 2\n"
    "class C:\n"
    "    global x\n"
    "    y = x + 1\n"
)


def test_module_level_global_statement_does_not_hang():
    """Found by the JAX-flavoured fuzz: ``global x`` at module level sent name lookups from the
    module scope back to the module scope forever. Run in a subprocess so a regression fails
    instead of hanging the suite."""
    code = ("import sys\nfrom jaxlint.engine import check_source\nfrom jaxlint_rules import ALL_RULES\n"
            "res = check_source(sys.stdin.read(), 't.py', [c() for c in ALL_RULES])\n"
            "print(sorted((f.line, f.code) for f in res.findings), res.internal_errors)\n")
    proc = subprocess.run([sys.executable, "-c", code], input=MODULE_LEVEL_GLOBAL, capture_output=True,
                          text=True, timeout=60, cwd=REPO)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == "[(5, 'JAX401'), (8, 'JAX401')] []"


# --------------------------------------------------------------------------- bugs this fuzzing found


@pytest.mark.parametrize("codec", RAISING_COOKIES)
def test_cookie_of_a_codec_that_raises_unicode_error_is_one_jax000(codec):
    data = f"# coding: {codec}\nimport jax\nx = jax.xn--abc\n".encode()  # idna fails on the xn-- label
    res = check_source(data, "t.py", RULES)
    assert [f.code for f in res.findings] == ["JAX000"] and res.internal_errors == []


def test_imported_module_with_a_non_text_codec_cookie_is_unknown_not_an_error(tmp_path):
    (tmp_path / "helpers.py").write_bytes(b"# coding: hex\nimport jax\nstep = jax.jit(lambda x: x)\n")
    main = tmp_path / "main.py"
    main.write_text("import jax\nfrom helpers import step\n\nfor i in range(3):\n    step(i)\n")
    res = check_source(main.read_bytes(), str(main), RULES)
    assert res.internal_errors == []


def test_jax000_findings_carry_the_path():
    res = check_source(b"def f(:\n", "broken.py", RULES)
    assert [(f.code, f.path) for f in res.findings] == [("JAX000", "broken.py")]


# --------------------------------------------------------------------------- deep nesting

_H = "import jax\nimport jax.numpy as jnp\nfrom jax import lax\n"


def _traced_and_looped(expr: str) -> str:
    """``expr`` in a jitted function and in a loop that calls it (so every rule looks at it)."""
    return (_H + f"@jax.jit\ndef step(x):\n    y = {expr}\n    return y\n\n"
            f"def run(x):\n    for i in range(10):\n        x = step(x)\n        z = {expr}\n"
            f"        print(float(z))\n    return x\n")


def _nested_blocks(header: str, depth: int, body: str, outer: str = "def run(x):") -> str:
    """``depth`` nested blocks opened by ``header`` (``{d}`` is the level), inside ``outer``."""
    lines = [_H.rstrip("\n")] + ([outer] if outer else [])
    base = 1 if outer else 0
    lines += ["    " * (base + d) + header.format(d=d) for d in range(depth)]
    lines.append("    " * (base + depth) + body)
    return "\n".join(lines) + "\n"


DEEP = {
    # Python's parser refuses these: one JAX000.
    "lists_1000": _traced_and_looped("[" * 1000 + "x" + "]" * 1000),
    "calls_1000": _traced_and_looped("jnp.sin(" * 1000 + "x" + ")" * 1000),
    "dicts_1000": _traced_and_looped("{0: " * 1000 + "x" + "}" * 1000),
    "unary_10000": _traced_and_looped("-" * 10000 + "x"),
    "ifs_1000": _nested_blocks("if x > {d}:", 1000, "x = x + 1"),
    "defs_1000": _nested_blocks("def f{d}(x):", 1000, "return x"),
    # Python parses these; jaxlint gives findings, or one JAX000 when its own analysis is too deep.
    "binop_10000": _H + "x = " + "+".join(["1"] * 10000) + "\n",
    "jax_binop_10000": _traced_and_looped(" + ".join(["x"] * 10000)),
    "boolop_10000": _traced_and_looped(" and ".join(["x"] * 10000)),
    "compare_10000": _traced_and_looped(" < ".join(["x"] * 10000)),
    "attribute_chain_10000": _traced_and_looped("jnp" + ".T" * 10000),
    "subscript_chain_10000": _traced_and_looped("x" + "[0]" * 10000),
    "method_chain_3000": _traced_and_looped("x" + ".sum()" * 3000),
    "update_chain_2000": _traced_and_looped("x" + ".at[0].set(1)" * 2000),
    "call_chain_3000": _traced_and_looped("step" + "(x)" * 3000),
    "lambdas_1000": _traced_and_looped("lambda: " * 1000 + "x"),
    "ifexp_2000": _traced_and_looped("x if x else " * 2000 + "x"),
    "lists_150": _traced_and_looped("[" * 150 + "x" + "]" * 150),
    "calls_190": _traced_and_looped("jnp.sin(" * 190 + "x" + ")" * 190),
    "comprehensions_90": _traced_and_looped("[" * 90 + "x" + " for i in range(3)]" * 90),
    "ifs_98": _nested_blocks("if x > {d}:", 98, "print(float(jnp.sum(x)))", "@jax.jit\ndef f(x):"),
    "fors_98": _nested_blocks("for i{d} in range(3):", 98, "x = jax.jit(lambda y: y)(x)"),
    "whiles_98": _nested_blocks("while x:", 98, "print(float(jnp.sum(x)))"),
    "withs_98": _nested_blocks("with a:", 98, "x.block_until_ready()"),
    "defs_98": _H + "@jax.jit\ndef f(x):\n" + "".join("    " * (d + 1) + f"def g{d}(x):\n" for d in range(97))
    + "    " * 98 + "return float(x)\n",
    "jitted_defs_95": _H + "".join("    " * d + "@jax.jit\n" + "    " * d + f"def f{d}(x):\n" for d in range(95))
    + "    " * 95 + "return float(jnp.sum(x))\n",
    "classes_98": _nested_blocks("class C{d}:", 98, "x = jnp.ones(3)", ""),
    "elif_2000_in_loop": _H + "def run(x):\n    for i in range(9):\n        if i == 0:\n            x = jnp.ones(3)\n"
    + "".join(f"        elif i == {i}:\n            x = jnp.zeros(x.shape[0] + {i})\n" for i in range(1, 2000))
    + "        print(float(x))\n",
    "rebinding_chain_3000": _H + "@jax.jit\ndef s(x):\n    return x\nx0 = s(1)\n"
    + "".join(f"x{i + 1} = x{i} + 1\n" for i in range(3000)) + "for i in range(3):\n    print(float(x3000))\n",
    "alias_chain_3000": _H + "f0 = jax.jit\n" + "".join(f"f{i + 1} = f{i}\n" for i in range(3000))
    + "for i in range(3):\n    g = f3000(lambda x: x)\n",
    "call_chain_of_helpers_2000": _H + "".join(f"def f{i}(x):\n    return f{i + 1}(x)\n" for i in range(2000))
    + "def f2000(x):\n    return float(x)\nstep = jax.jit(f0)\n",
    "decorators_2000": _H + "@jax.jit\n" * 2000 + "def f(x):\n    return x\n",
    "arguments_5000": _traced_and_looped("jnp.add(" + ", ".join(["x"] * 5000) + ")"),
    "unpack_5000": _H + ", ".join(f"a{i}" for i in range(5000)) + " = jax.jit(f)(x)\n",
}
PARSER_REFUSES = {"lists_1000", "calls_1000", "dicts_1000", "unary_10000", "ifs_1000", "defs_1000"}


@pytest.mark.parametrize("name", sorted(DEEP))
def test_deep_nesting_gives_findings_or_one_clean_jax000(name):
    """No RecursionError and no internal error: findings, or one JAX000 exactly when Python's
    parser refuses the file or jaxlint's analysis is too deep for it (see ``_check``)."""
    src = DEEP[name]
    if name in PARSER_REFUSES:
        assert not _python_parses(src)
    problems = _check(src, f"{name}.py")
    assert not problems, problems
