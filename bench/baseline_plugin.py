"""pytest plugin for bench/baseline.py: records every ``check_source`` call the tests make (the
source, its path, the rules and the findings) into $JAXLINT_BASELINE_SNIPPETS as JSON lines."""

from __future__ import annotations

import hashlib
import json
import os

import jaxlint.engine as _engine
from baseline import record_of

_OUT = os.environ.get("JAXLINT_BASELINE_SNIPPETS")
_original = _engine.check_source


def _recording(data, path, rules, *args, **kwargs):
    result = _original(data, path, rules, *args, **kwargs)
    if _OUT:
        raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data
        name = os.path.basename(path)
        codes = ",".join(sorted(r.code for r in rules))
        key = f"{name}|{hashlib.sha256(raw).hexdigest()[:16]}|{codes}|{args}|{sorted(kwargs.items())}"
        row = [key, [record_of(f, os.path.basename(f.path)) for f in result.findings], result.internal_errors]
        with open(_OUT, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(row) + "\n")
    return result


if _OUT:
    _engine.check_source = _recording
