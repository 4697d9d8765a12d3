#!/usr/bin/env python3
"""Real-library regression snapshot: jaxlint's findings on the pinned corpus vs bench/expected_findings.json.

Runs `jaxlint check --format json --no-cache` (without --no-cache when this jaxlint lacks the flag)
on the corpus of bench/corpus.py (flax, optax, equinox, numpyro, chex, dm-haiku, jax), with
`--select JAX` and an empty [tool.jaxlint] config so that no pyproject.toml around the corpus
changes the result, and builds:

  - per_library: the count per code for each library (all seven, also when zero);
  - findings:    the full list (path relative to the corpus root, line, col, code, message) for the
                 libraries in FULL_FINDINGS_FOR, today all seven (~24 findings in all).

    python bench/snapshot.py             # compare; prints a readable diff and exits 1 on a difference
    python bench/snapshot.py --write     # (re)write bench/expected_findings.json after an intended change
    python bench/snapshot.py --corpus DIR

Exit codes: 0 same, 1 different, 2 could not run (no corpus, jaxlint failed).
tests/test_corpus_snapshot.py runs the comparison when the corpus has been fetched.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
from collections import Counter

HERE = os.path.dirname(os.path.abspath(__file__))


def _load_corpus():
    """bench/corpus.py, loaded by path (bench/ is no package, and sys.path is left alone for the test)."""
    name = "jaxlint_bench_corpus"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, os.path.join(HERE, "corpus.py"))
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


corpus = _load_corpus()

EXPECTED = os.path.join(HERE, "expected_findings.json")
LIBRARIES = tuple(corpus.LIBRARY_DIRS) + (corpus.JAX,)  # flax, optax, equinox, numpyro, chex, dm-haiku, jax
# Libraries whose findings are kept one by one (the others only as counts per code). Everything
# while the list is short; drop jax (the largest) here if it ever grows past a few hundred.
FULL_FINDINGS_FOR = LIBRARIES
RUN_LIMIT_S = 1800


class SnapshotError(Exception):
    pass


def library_paths():
    """(library, path relative to the corpus root) in LIBRARIES order."""
    return [(lib, "jax" if lib == corpus.JAX else f"libs/{corpus.LIBRARY_DIRS[lib]}") for lib in LIBRARIES]


def library_of(path: str) -> str:
    for lib, root in library_paths():
        if path == root or path.startswith(root + "/"):
            return lib
    raise SnapshotError(f"finding outside the corpus libraries: {path}")


def jaxlint_command():
    return [sys.executable, "-m", "jaxlint"]


def has_flag(flag: str) -> bool:
    p = subprocess.run(jaxlint_command() + ["check", "--help"], capture_output=True, text=True)
    return flag in p.stdout


def compute(root: str) -> dict:
    """The snapshot of jaxlint's findings on the corpus at root (which holds libs/ and jax/)."""
    rels = [rel for _, rel in library_paths()]
    missing = [rel for rel in rels if not os.path.isdir(os.path.join(root, rel))]
    if missing:
        raise SnapshotError(f"corpus at {root} lacks {', '.join(missing)}")
    no_cache = ["--no-cache"] if has_flag("--no-cache") else []
    with tempfile.TemporaryDirectory(prefix="jaxlint-snapshot-") as tmp:
        config = os.path.join(tmp, "pyproject.toml")
        with open(config, "w") as fh:
            fh.write("[tool.jaxlint]\n")
        args = ["check", "--format", "json", "--select", "JAX", "--exit-zero", "--config", config, *no_cache]
        try:
            p = subprocess.run(jaxlint_command() + args + rels, cwd=root, capture_output=True, text=True,
                               stdin=subprocess.DEVNULL, timeout=RUN_LIMIT_S)
        except subprocess.TimeoutExpired:
            raise SnapshotError(f"jaxlint check ran over {RUN_LIMIT_S} s on the corpus") from None
    if p.returncode != 0:
        raise SnapshotError(f"jaxlint check exited {p.returncode} on the corpus:\n{p.stderr.strip()[-3000:]}")
    try:
        rows = json.loads(p.stdout)
    except ValueError as e:
        raise SnapshotError(f"jaxlint check --format json printed unparsable output ({e}): {p.stdout[:500]!r}")
    per_library = {lib: Counter() for lib in LIBRARIES}
    findings = []
    for row in rows:
        path = row["path"].replace(os.sep, "/")
        if path.startswith("./"):
            path = path[2:]
        lib = library_of(path)
        per_library[lib][row["code"]] += 1
        if lib in FULL_FINDINGS_FOR:
            findings.append({"path": path, "line": row["line"], "col": row["col"], "code": row["code"],
                             "message": row["message"]})
    findings.sort(key=_key)
    totals = Counter()
    for c in per_library.values():
        totals.update(c)
    return {
        "about": "jaxlint findings on the pinned real-library corpus (bench/corpus.py), made by bench/snapshot.py. "
                 "After an intended change: python bench/snapshot.py --write, and commit this file with it.",
        "corpus": corpus.pin_line(),
        "command": "jaxlint check --format json --select JAX --exit-zero [--no-cache] --config <empty [tool.jaxlint]> "
                   + " ".join(rels) + "  (run in the corpus root)",
        "totals": dict(sorted(totals.items())),
        "per_library": {lib: dict(sorted(per_library[lib].items())) for lib in LIBRARIES},
        "findings_for": list(FULL_FINDINGS_FOR),
        "findings": findings,
    }


def _key(f):
    return (f["path"], f["line"], f["col"], f["code"], f["message"])


def _fmt(f):
    return f"{f['path']}:{f['line']}:{f['col']}: {f['code']} {f['message']}"


def dump(snapshot: dict) -> str:
    return json.dumps(snapshot, indent=2) + "\n"


def _shown(path: str) -> str:
    rel = os.path.relpath(os.path.abspath(path), os.path.dirname(HERE))
    return path if rel.startswith("..") else rel


def diff(expected: dict, actual: dict, expected_path: str = EXPECTED) -> str:
    """A readable difference of two snapshots; "" when they agree on counts and findings."""
    out = []
    if expected.get("corpus") != actual.get("corpus"):
        out.append(f"corpus: expected {expected.get('corpus')!r}, now {actual.get('corpus')!r}")
    counts = []
    libs = list(actual["per_library"]) + [l for l in expected.get("per_library", {}) if l not in actual["per_library"]]
    for lib in libs:
        e = expected.get("per_library", {}).get(lib, {})
        a = actual["per_library"].get(lib, {})
        for code in sorted(set(e) | set(a)):
            if e.get(code, 0) != a.get(code, 0):
                counts.append(f"  {lib:9} {code}: {e.get(code, 0)} -> {a.get(code, 0)}")
    if counts:
        out.append("count per library and code (expected -> now):")
        out.extend(counts)
    exp_f = Counter(tuple(sorted(f.items())) for f in expected.get("findings", []))
    act_f = Counter(tuple(sorted(f.items())) for f in actual["findings"])
    if expected.get("findings_for") != actual.get("findings_for"):
        out.append(f"findings listed for: expected {expected.get('findings_for')}, now {actual.get('findings_for')}")
    changed = [("-", dict(f)) for f in (exp_f - act_f).elements()] + [("+", dict(f)) for f in (act_f - exp_f).elements()]
    if changed:
        changed.sort(key=lambda sf: (_key(sf[1])[:4], sf[0] == "+", sf[1]["message"]))
        out.append("findings (- expected, gone now; + new):")
        out.extend(f"  {sign} {_fmt(f)}" for sign, f in changed)
    if not out:
        return ""
    te, ta = sum(expected.get("totals", {}).values()), sum(actual["totals"].values())
    return "\n".join([f"jaxlint's findings on the corpus differ from {_shown(expected_path)} "
                      f"(expected {te} in all, now {ta}):", *out,
                      "If the change is intended, run `python bench/snapshot.py --write` and commit "
                      "bench/expected_findings.json with it."])


def load_expected(path: str = EXPECTED) -> dict:
    with open(path, encoding="utf-8") as fh:
        return json.load(fh)


def check(root: str, path: str = EXPECTED) -> str:
    """Compare the corpus at root with the expected snapshot; return the diff ("" when equal)."""
    return diff(load_expected(path), compute(root), path)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpus", metavar="DIR", help="folder holding libs/ and jax/ (default: bench/corpus.py's, "
                                                    "fetched on first use)")
    ap.add_argument("--write", action="store_true", help="write the snapshot file instead of comparing")
    ap.add_argument("--expected", metavar="FILE", default=EXPECTED, help="the snapshot file (default: %(default)s)")
    args = ap.parse_args(argv)
    try:
        if args.corpus:
            root = os.path.abspath(args.corpus)
        else:
            libs, _ = corpus.fetch()
            root = os.path.dirname(libs)
        actual = compute(root)
    except (corpus.CorpusError, SnapshotError, OSError) as e:
        print(f"snapshot: error: {e}", file=sys.stderr)
        return 2
    if args.write:
        with open(args.expected, "w", encoding="utf-8") as fh:
            fh.write(dump(actual))
        per_code = ", ".join(f"{c} {n}" for c, n in actual["totals"].items()) or "none"
        print(f"wrote {_shown(args.expected)}: {sum(actual['totals'].values())} findings ({per_code})")
        return 0
    try:
        expected = load_expected(args.expected)
    except (OSError, ValueError) as e:
        print(f"snapshot: error: cannot read {args.expected}: {e} (create it with --write)", file=sys.stderr)
        return 2
    text = diff(expected, actual, args.expected)
    if text:
        print(text)
        return 1
    print(f"same as {_shown(args.expected)}: {sum(actual['totals'].values())} findings")
    return 0


if __name__ == "__main__":
    sys.exit(main())
