"""What reading and parsing alone cost: the floor under a cold `jaxlint check`.

Reads the files `jaxlint check PATH...` would check (``jaxlint.files.discover`` with the config
the CLI loads for the first path), decodes and parses each with the engine's own functions
(``jaxlint.source.decode_source`` and ``parse_source``: CPython's ``ast.parse``), frees the tree,
with the cyclic GC off (as the engine has it while parsing), and does nothing else: no model, no rules, no cross-module lookups, no report. With ``-jN`` it
uses N forked processes, largest files first, as ``jaxlint check -jN`` does (0: all cores).
Notebooks are left out (the pinned corpus has none).

bench/run.py times it next to the cold check and ruff: whatever jaxlint does after parsing, a
cold check cannot take less time than this on the same machine.

    python bench/parse_floor.py [-jN] PATH...
"""

from __future__ import annotations

import argparse
import os
import sys


def _parse(path: str) -> int:
    """Lines parsed (0 for a file that cannot be read, decoded or parsed)."""
    from jaxlint.source import decode_source, parse_source

    try:
        with open(path, "rb") as fh:
            data = fh.read()
        text = decode_source(data)
    except (OSError, UnicodeError, LookupError, SyntaxError):
        return 0
    tree, error = parse_source(text, path)
    return 0 if tree is None else text.count("\n")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-j", "--jobs", type=int, default=1, help="processes (0: all cores), as jaxlint check -j")
    ap.add_argument("paths", nargs="+")
    args = ap.parse_args(argv)
    from jaxlint.config import load_config
    from jaxlint.files import discover

    import gc

    gc.disable()  # the forked workers inherit it
    files = [f for f in discover(args.paths, load_config(args.paths[0])) if f.endswith(".py")]
    files.sort(key=lambda f: -os.stat(f).st_size)
    jobs = args.jobs if args.jobs > 0 else (os.cpu_count() or 1)
    if jobs == 1:
        lines = sum(_parse(f) for f in files)
    else:
        import multiprocessing

        methods = multiprocessing.get_all_start_methods()
        mp = multiprocessing.get_context("fork" if "fork" in methods else None)
        chunk = max(1, min(4, len(files) // (jobs * 8)))
        with mp.Pool(jobs) as pool:
            lines = sum(pool.imap(_parse, files, chunksize=chunk))
    print(f"parsed {len(files)} files, {lines} lines, with {jobs} process(es)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
