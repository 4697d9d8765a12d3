"""What can be jitted around lines that dispatch JAX operations one by one (issue 38): the loop
body's array work, as a function of the values it carries.

Pure source reading (``ast``; no JAX): for a line inside a ``for``/``while`` loop, the statements
of that loop's body that hold eager lines, the names they read (the loop's carried values and
inputs: not the modules, functions and classes the file defines or imports, nor builtins) and
the names they write that are read elsewhere. For a line in a function but not in a loop of its
own, that function (it is called repeatedly from elsewhere).
"""

from __future__ import annotations

import ast
import builtins
import functools
from typing import Iterable, Optional

_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)
_LOOPS = (ast.For, ast.While, ast.AsyncFor)


@functools.lru_cache(maxsize=64)
def _tree(path: str) -> Optional[ast.Module]:
    try:
        with open(path, encoding="utf-8") as fh:
            return ast.parse(fh.read(), path)
    except (OSError, SyntaxError, ValueError, UnicodeDecodeError):
        return None


def _span(node) -> tuple:
    return node.lineno, getattr(node, "end_lineno", node.lineno) or node.lineno


def _chain(tree: ast.AST, line: int) -> list:
    """The nodes from the module down to the innermost statement containing ``line``."""
    out, node = [], tree
    while True:
        out.append(node)
        nxt = None
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.stmt) and _span(child)[0] <= line <= _span(child)[1]:
                nxt = child
                break
        if nxt is None:
            return out
        node = nxt


def _module_names(tree: ast.Module) -> set:
    """Names the module binds to modules, functions and classes (not values a step carries)."""
    names = set(dir(builtins))
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            for a in node.names:
                names.add((a.asname or a.name).split(".")[0])
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
    return names


def _names(nodes: Iterable[ast.AST], ctx) -> list:
    out = []
    for n in nodes:
        for sub in ast.walk(n):
            if isinstance(sub, ast.Name) and isinstance(sub.ctx, ctx) and sub.id not in out:
                out.append(sub.id)
    return out


def suggestion(path: str, line: int, eager_lines: Iterable[int] = ()) -> Optional[dict]:
    """``{"kind": "loop", "loop_line", "first", "last", "inputs", "outputs"}`` for a line in a loop
    body; ``{"kind": "function", "name", "def_line"}`` for a line in a function outside any loop
    of it; None when the source cannot be read or the line is at module level outside a loop."""
    tree = _tree(path)
    if tree is None:
        return None
    chain = _chain(tree, line)
    loop, scope = None, None
    for node in reversed(chain):  # innermost first; a loop outside the innermost function does not count
        if isinstance(node, _SCOPES):
            scope = node
            break
        if isinstance(node, _LOOPS) and loop is None and line > node.lineno:
            loop = node
    if loop is None:
        if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return {"kind": "function", "name": scope.name, "def_line": scope.lineno}
        return None
    marks = set(eager_lines) | {line}
    body, run = [], []
    for stmt in loop.body:  # the row's run of consecutive loop statements that dispatch eagerly
        if any(_span(stmt)[0] <= m <= _span(stmt)[1] for m in marks):
            run.append(stmt)
            if _span(stmt)[0] <= line <= _span(stmt)[1]:
                body = run
        else:
            if body:
                break
            run = []
    first, last = _span(body[0])[0], _span(body[-1])[1]
    known = _module_names(tree)
    written_in_loop = set(_names(loop.body, ast.Store))
    if isinstance(loop, (ast.For, ast.AsyncFor)):
        written_in_loop |= set(_names([loop.target], ast.Store))
    inputs, defined = [], set()
    for stmt in body:  # in order: a name the span writes before it reads it is its own temporary
        reads = [n for n in _names([stmt], ast.Load) if n not in defined and n not in known]
        inputs += [n for n in reads if n not in inputs]
        defined |= set(_names([stmt], ast.Store))
    # its arguments: what the loop writes (carried from one iteration to the next, or the loop's
    # own variable); names it only reads (constants set before the loop) can stay closed over
    carried = [n for n in inputs if n in written_in_loop]
    inputs = carried
    rest = [s for s in (scope.body if scope is not None else tree.body) if s not in body]
    read_elsewhere = set(_names(rest, ast.Load)) | set(_names(body, ast.Load))
    outputs = [n for n in _names(body, ast.Store) if n in read_elsewhere]
    return {"kind": "loop", "loop_line": loop.lineno, "first": first, "last": last, "inputs": inputs,
            "carried": carried, "outputs": outputs}


def fix_text(s: Optional[dict], n: int, where: str, step: Optional[str] = None) -> Optional[str]:
    """The eager-dispatch fix for a row of ``n`` dispatches, from :func:`suggestion`; ``where``:
    the file as the report writes it; ``step``: the busiest jitted function, if any."""
    if s is None:
        return None
    also = f", or move it into the jitted step `{step}`" if step else ""
    if s["kind"] == "function":
        return (f"{n:,} dispatches, one per operation: `jax.jit` `{s['name']}` ({where}:{s['def_line']}, the "
                f"function this line is in, called again and again) so that they run as one compiled program{also}")
    args = ", ".join(s["inputs"]) or ""
    outs = ", ".join(s["outputs"])
    lines = f"line {s['first']}" if s["first"] == s["last"] else f"lines {s['first']}-{s['last']}"
    call = f"{outs} = body({args})" if outs else f"body({args})"
    return (f"{n:,} dispatches, one per operation: the loop at {where}:{s['loop_line']} runs {lines} eagerly every "
            f"iteration; make {'it' if s['first'] == s['last'] else 'them'} one jitted function of the values the "
            f"loop carries into {'it' if s['first'] == s['last'] else 'them'}: `{call}` with `body = jax.jit(...)` "
            f"holding {lines}{also}")
