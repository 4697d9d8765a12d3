"""JAX API spellings read from syntax alone: ``x.at[i].set(v)``."""

from __future__ import annotations

import ast
from typing import Optional

from ... import names as N


def at_update(func: ast.AST, methods=N.AT_METHODS) -> Optional[ast.AST]:
    """The receiver ``x`` when ``func`` (a call's callee) is ``x.at[...].<method>`` with ``method``
    in ``methods``; None otherwise."""
    if (isinstance(func, ast.Attribute) and func.attr in methods and isinstance(func.value, ast.Subscript)
            and isinstance(func.value.value, ast.Attribute) and func.value.value.attr == "at"):
        return func.value.value.value
    return None
