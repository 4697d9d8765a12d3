"""Output formats for ``jaxlint check``: flake8-style text and JSON."""

from __future__ import annotations

import json
from collections import Counter
from typing import Sequence

from .rule import Finding


def text(findings: Sequence[Finding]) -> str:
    # Exactly flake8's default format: 1-based column.
    return "".join(f"{f.path}:{f.line}:{f.col + 1}: {f.code} {f.message}\n" for f in findings)


def as_json(findings: Sequence[Finding]) -> str:
    rows = [{"path": f.path, "line": f.line, "col": f.col + 1, "code": f.code, "name": f.name,
             "message": f.message} for f in findings]
    return json.dumps(rows, indent=2) + "\n"


def statistics(findings: Sequence[Finding]) -> str:
    counts = Counter(f.code for f in findings)
    first = {}
    for f in findings:
        first.setdefault(f.code, f.message)
    return "".join(f"{counts[c]:<5} {c} {first[c]}\n" for c in sorted(counts))


FORMATS = {"text": text, "json": as_json}
