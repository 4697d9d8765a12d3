#!/usr/bin/env python3
"""Behaviour baseline for refactors: every finding (path, line, col, code, message, cell, fix edits)
and every byte ``--fix`` writes, over everything jaxlint can be pointed at, so that a change that
must not change behaviour can prove it did not.

Sources (each compared on its own):
  fixtures   every .py/.ipynb under fixtures/, in-process, with fixes
  examples   every rule's bad and good example
  snippets   every snippet the rule tests check (tests/test_rules_*.py, test_model.py, test_fix.py,
             test_notebooks.py), recorded by wrapping ``jaxlint.engine.check_source`` during pytest
  fuzz       2,000 hypothesmith programs from a fixed seed (generated once and cached), each as is
             and with a JAX prelude
  corpus     the pinned libraries (bench/corpus.py), through the CLI (``--format json``)
  realcode   ../shared/realcode/dev.tar.gz, unpacked once into the cache, through the CLI
  fixbytes   sha256 of what ``jaxlint check --fix`` writes for each fixtures/fix/*/before.py

    python bench/baseline.py record [--out FILE]      # default: $CACHE/baseline-<commit>.json
    python bench/baseline.py compare BASELINE [--only fixtures,examples,...]

The records stay out of the repository (they quote real code); $CACHE is
~/.cache/jaxlint-baseline. ``compare`` prints per-source counts and every difference; exit 0 when
identical, 1 when not.
"""

from __future__ import annotations

import argparse
import dataclasses
import glob
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import textwrap

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
CACHE = os.path.join(os.path.expanduser("~"), ".cache", "jaxlint-baseline")
REALCODE_TAR = os.path.join(REPO, os.pardir, "shared", "realcode", "dev.tar.gz")
FUZZ_N = 2000
FUZZ_SEED = 20261201
JAX_PRELUDE = "import jax\nimport jax.numpy as jnp\nfrom jax import lax\n"
SOURCES = ("fixtures", "examples", "snippets", "fuzz", "corpus", "realcode", "fixbytes")
SNIPPET_TESTS = ("tests/test_rules_*.py", "tests/test_model.py", "tests/test_fix.py", "tests/test_notebooks.py")

sys.path.insert(0, REPO)


def _plain(obj):
    """A JSON-able, module-independent spelling of a fix (dataclasses by field, tuples as lists)."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: _plain(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, (list, tuple)):
        return [_plain(x) for x in obj]
    if obj is None or isinstance(obj, (str, int, float, bool)):
        return obj
    return repr(obj)


def record_of(f, path=None) -> list:
    return [path if path is not None else f.path, f.line, f.col, f.code, f.message, f.cell, f.cell_line,
            _plain(getattr(f, "fix", None))]


def _rules():
    import jaxlint_rules

    return [cls() for cls in jaxlint_rules.ALL_RULES]


# --------------------------------------------------------------------------- sources


def src_fixtures() -> list:
    from jaxlint.engine import check_path

    rules = _rules()
    out = []
    files = sorted(glob.glob(os.path.join(REPO, "fixtures", "**", "*.py"), recursive=True)
                   + glob.glob(os.path.join(REPO, "fixtures", "**", "*.ipynb"), recursive=True))
    for p in files:
        rel = os.path.relpath(p, REPO)
        res = check_path(p, rules)
        out.extend(record_of(f, rel) for f in res.findings)
        out.extend([rel, "internal", e] for e in res.internal_errors)
        out.append([rel, "count", len(res.findings)])
    return out


def src_examples() -> list:
    import jaxlint_rules
    from jaxlint.engine import check_source

    rules = _rules()
    out = []
    for cls in jaxlint_rules.ALL_RULES:
        for which in ("bad", "good"):
            res = check_source(textwrap.dedent(getattr(cls, which)), "example.py", rules)
            out.append([cls.code, which, [record_of(f) for f in res.findings], res.internal_errors])
    return out


def src_snippets() -> list:
    fd, path = tempfile.mkstemp(suffix=".jsonl")
    os.close(fd)
    env = dict(os.environ, JAXLINT_BASELINE_SNIPPETS=path, PYTHONPATH=HERE + os.pathsep + REPO)
    tests = sorted(t for pat in SNIPPET_TESTS for t in glob.glob(os.path.join(REPO, pat)))
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "baseline_plugin", "-x",
                           "-p", "no:cacheprovider", *tests], cwd=REPO, env=env,
                          capture_output=True, text=True)
    if proc.returncode != 0:
        print(proc.stdout[-3000:], proc.stderr[-3000:], file=sys.stderr)
        raise SystemExit("snippets: the recorded tests failed")
    seen = {}
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            row = json.loads(line)
            seen[row[0]] = row  # one row per (source, path, options); reruns are identical
    os.unlink(path)
    return [seen[k] for k in sorted(seen)]


def _fuzz_programs() -> list:
    cached = os.path.join(CACHE, f"fuzz-{FUZZ_SEED}-{FUZZ_N}.json")
    if os.path.exists(cached):
        with open(cached, encoding="utf-8") as fh:
            return json.load(fh)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import hypothesmith
        from hypothesis import HealthCheck, given, seed, settings

        programs: list = []

        @seed(FUZZ_SEED)
        @settings(max_examples=FUZZ_N, deadline=None, database=None, derandomize=False,
                  suppress_health_check=list(HealthCheck))
        @given(hypothesmith.from_grammar())
        def collect(src):
            programs.append(src)

        collect()
    os.makedirs(CACHE, exist_ok=True)
    with open(cached, "w", encoding="utf-8") as fh:
        json.dump(programs, fh)
    return programs


def src_fuzz() -> list:
    import warnings

    from jaxlint.engine import check_source

    rules = _rules()
    out = []
    programs = _fuzz_programs()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for i, prog in enumerate(programs):
            for tag, text in (("plain", prog), ("jax", JAX_PRELUDE + prog)):
                res = check_source(text, f"fuzz{i}.py", rules)
                if res.findings or res.internal_errors:
                    out.append([i, tag, [record_of(f) for f in res.findings], res.internal_errors])
    out.append(["checked", 2 * len(programs)])  # so that "no findings" is not a vacuous match
    return out


def _cli_json(root: str) -> list:
    """The CLI's findings on a tree, paths relative to it, with an empty config around it."""
    with tempfile.TemporaryDirectory() as cfgdir:
        cfg = os.path.join(cfgdir, "pyproject.toml")
        with open(cfg, "w") as fh:
            fh.write("[tool.jaxlint]\n")
        proc = subprocess.run([sys.executable, "-m", "jaxlint", "check", "--no-cache", "--format", "json",
                               "--config", cfg, root], cwd=REPO, capture_output=True, text=True)
    if proc.returncode not in (0, 1):
        raise SystemExit(f"jaxlint check {root} exited {proc.returncode}: {proc.stderr[-2000:]}")
    rows = json.loads(proc.stdout or "[]")
    out = []
    for r in rows:
        r = dict(r)
        r.pop("evidence", None)  # why a finding was made, not what was found (its own tests cover it)
        r["path"] = os.path.relpath(os.path.abspath(r["path"]), root) if r.get("path") else r.get("path")
        out.append(sorted(r.items()))
    out.sort(key=lambda r: json.dumps(r))
    if proc.stderr.strip():
        out.append(["stderr", proc.stderr.strip().splitlines()])
    return out


def src_corpus() -> list:
    sys.path.insert(0, HERE)
    import corpus

    root = corpus.default_dest()
    if not os.path.isdir(os.path.join(root, "libs")):
        raise SystemExit(f"no corpus at {root}: run python bench/corpus.py")
    return _cli_json(os.path.join(root, "libs")) + _cli_json(os.path.join(root, "jax"))


def src_realcode() -> list:
    dest = os.path.join(CACHE, "realcode")
    if not os.path.isdir(dest):
        if not os.path.exists(REALCODE_TAR):
            raise SystemExit(f"no real-code set at {REALCODE_TAR}")
        tmp = dest + ".tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        os.makedirs(tmp)
        with tarfile.open(REALCODE_TAR) as tf:
            tf.extractall(tmp, filter="data") if sys.version_info >= (3, 12) else tf.extractall(tmp)
        os.rename(tmp, dest)
    return _cli_json(dest)


def src_fixbytes() -> list:
    out = []
    for before in sorted(glob.glob(os.path.join(REPO, "fixtures", "fix", "*", "before.py"))):
        with tempfile.TemporaryDirectory() as d:
            target = os.path.join(d, "before.py")
            shutil.copyfile(before, target)
            proc = subprocess.run([sys.executable, "-m", "jaxlint", "check", "--no-cache", "--fix", target],
                                  cwd=d, capture_output=True, text=True,
                                  env=dict(os.environ, PYTHONPATH=REPO))
            with open(target, "rb") as fh:
                data = fh.read()
        out.append([os.path.relpath(before, REPO), proc.returncode, hashlib.sha256(data).hexdigest(),
                    proc.stdout.replace(target, "before.py"), proc.stderr.replace(target, "before.py")])
    return out


# --------------------------------------------------------------------------- record / compare


def record(only) -> dict:
    data = {}
    for name in only:
        print(f"baseline: {name} ...", file=sys.stderr, flush=True)
        data[name] = globals()["src_" + name]()
        print(f"baseline: {name}: {len(data[name])} records", file=sys.stderr, flush=True)
    return data


def _commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True,
                              text=True).stdout.strip() or "unknown"
    except OSError:
        return "unknown"


def compare(old: dict, new: dict) -> bool:
    same = True
    for name in new:
        a = [json.dumps(r, sort_keys=True) for r in old.get(name, [])]
        b = [json.dumps(r, sort_keys=True) for r in new[name]]
        sa, sb = set(a), set(b)
        gone, added = sorted(sa - sb), sorted(sb - sa)
        status = "same" if not gone and not added and len(a) == len(b) else "DIFFERENT"
        print(f"{name:9} {len(a):6} before {len(b):6} after  {status}")
        for r in gone[:40]:
            print(f"  - {r[:400]}")
        for r in added[:40]:
            print(f"  + {r[:400]}")
        if len(gone) > 40 or len(added) > 40:
            print(f"  ... {len(gone)} gone, {len(added)} added in all")
        same = same and status == "same"
    return same


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("record")
    r.add_argument("--out")
    r.add_argument("--only", default=",".join(SOURCES))
    c = sub.add_parser("compare")
    c.add_argument("baseline")
    c.add_argument("--only")
    args = ap.parse_args(argv)
    if args.cmd == "record":
        only = [s for s in args.only.split(",") if s]
        data = record(only)
        out = args.out or os.path.join(CACHE, f"baseline-{_commit()}.json")
        os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
        with open(out, "w", encoding="utf-8") as fh:
            json.dump(data, fh)
        print(out)
        return 0
    with open(args.baseline, encoding="utf-8") as fh:
        old = json.load(fh)
    only = [s for s in (args.only.split(",") if args.only else old) if s]
    return 0 if compare(old, record(only)) else 1


if __name__ == "__main__":
    sys.exit(main())
