"""The static cross-check of `jaxlint trace`, run in a child process while the program runs, so the
program's wall time does not wait for it (the static check of a short program's files was about
10% of its run): ``python -m jaxlint.trace.static_child FILE...`` prints the findings the report
cross-checks as JSON lines. Imports no jax.
"""

from __future__ import annotations

import json
import sys


def main(argv) -> int:
    from .runner import static_findings

    for f in static_findings(list(argv)):
        sys.stdout.write(json.dumps([f.path, f.line, f.col, f.code, f.message, f.name, list(f.evidence)]) + "\n")
    return 0


def decode(line: str):
    from ..rule import Finding

    path, line_no, col, code, message, name, evidence = json.loads(line)
    return Finding(line_no, col, code, message, name, path, evidence=tuple(evidence))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
