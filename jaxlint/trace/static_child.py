"""The static cross-check of `jaxlint trace`, run in a child process while the program runs, so the
program's wall time does not wait for it (the static check of a short program's files was about
10% of its run): ``python -m jaxlint.trace.static_child FILE...`` prints the findings the report
cross-checks as JSON lines. Imports no jax.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Sequence


def main(argv) -> int:
    for f in static_findings(list(argv)):
        sys.stdout.write(json.dumps([f.path, f.line, f.col, f.code, f.message, f.name, list(f.evidence)]) + "\n")
    return 0


def static_findings(files: Sequence[str]) -> list:
    from ..config import ConfigError, load_config
    from ..engine import check_path
    from ..registry import ALL_RULES, select_rules

    try:
        cfg = load_config(os.path.dirname(files[0]) if files else ".")
        select, ignore = cfg.select, cfg.ignore
    except ConfigError:
        cfg, select, ignore = None, [], []
    rules = select_rules(ALL_RULES, select, ignore)
    findings = []
    for path in files:
        res = check_path(path, rules)
        findings.extend(f for f in res.findings if f.code != "JAX000" and f.opt_in is None
                        and (cfg is None or cfg.keeps(path, f)))
    findings.sort(key=lambda f: (f.path, f.line, f.col, f.code))
    return findings


def decode(line: str):
    from ..rule import Finding

    path, line_no, col, code, message, name, evidence = json.loads(line)
    return Finding(line_no, col, code, message, name, path, evidence=tuple(evidence))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
