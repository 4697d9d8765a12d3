#!/usr/bin/env python3
"""How much of the model's per-module inference work budget (jaxlint/model/limits.py) real code
spends: builds the model of every file under the given folders, runs every rule on it, and prints
the files that spend the most, as units and as units per line, against the budget.

    python bench/inference_work.py ~/.cache/jaxlint-corpus ~/.cache/jaxlint-baseline/realcode
"""

from __future__ import annotations

import ast
import os
import sys
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from jaxlint.engine import decode_source  # noqa: E402
from jaxlint.model import build_model
from jaxlint.model.python import limits  # noqa: E402
from jaxlint_rules import ALL_RULES  # noqa: E402


def main(roots) -> int:
    rules = [r() for r in ALL_RULES]
    rows = []
    for root in roots:
        for dirpath, _, files in os.walk(root):
            for name in files:
                if not name.endswith(".py"):
                    continue
                path = os.path.join(dirpath, name)
                try:
                    with open(path, "rb") as fh:
                        text = decode_source(fh.read())
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        tree = ast.parse(text)
                except (SyntaxError, ValueError, UnicodeError, OSError):
                    continue
                model = build_model(tree)
                if model.uses_jax():
                    for rule in rules:
                        list(rule.check(model))
                lines = tree.body[-1].end_lineno if tree.body else 0
                budget = limits.WORK_BASE + limits.WORK_PER_LINE * lines
                rows.append((model.work.spent, lines, budget, path))
                model.dispose()
    rows.sort(reverse=True)
    exhausted = sum(1 for spent, _, budget, _ in rows if spent > budget)
    print(f"{len(rows)} files; budget exhausted in {exhausted}")
    print(f"{'spent':>9} {'lines':>7} {'per line':>9} {'of budget':>9}  file")
    for spent, lines, budget, path in rows[:10]:
        print(f"{spent:9d} {lines:7d} {spent / max(lines, 1):9.1f} {spent / budget:9.1%}  {os.path.relpath(path)}")
    worst = max(rows, key=lambda r: r[0] / r[2]) if rows else None
    if worst:
        print(f"largest share of its budget: {worst[0] / worst[2]:.1%} ({os.path.relpath(worst[3])})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:] or [os.path.expanduser("~/.cache/jaxlint-corpus")]))
