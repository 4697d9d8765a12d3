"""Small facts read off the syntax alone: positions, names in a target, literal sets, arguments."""

from __future__ import annotations

import ast
from typing import Iterator, Optional


_AST = ast.AST


def _breadth_first(node: ast.AST, kinds) -> Iterator[ast.AST]:
    """``node`` and the nodes of ``kinds`` below it that are reached through nodes of ``kinds``,
    breadth first in field order, as ``ast.walk`` orders them. Each node's ``_fields`` are read
    here instead of through ``ast.iter_child_nodes`` and ``ast.iter_fields``, two generators per
    node: 1.7x faster, and the model walks subtrees thousands of times."""
    todo = [node]
    append = todo.append
    i = 0
    while i < len(todo):
        n = todo[i]
        i += 1
        for name in n._fields:
            v = getattr(n, name, None)
            if isinstance(v, kinds):
                append(v)
            elif isinstance(v, list):
                for x in v:
                    if isinstance(x, kinds):
                        append(x)
        yield n


def walk(node: ast.AST) -> Iterator[ast.AST]:
    """``ast.walk``: the same nodes in the same order, faster (:func:`_breadth_first`)."""
    return _breadth_first(node, _AST)


def child_nodes(node: ast.AST) -> list:
    """``list(ast.iter_child_nodes(node))``, without its generators."""
    out = []
    for name in node._fields:
        v = getattr(node, name, None)
        if isinstance(v, _AST):
            out.append(v)
        elif isinstance(v, list):
            out.extend(x for x in v if isinstance(x, _AST))
    return out


# The nodes with statement lists (``body``, ``orelse``, ``finalbody``); expressions have none.
BLOCK_OWNERS = (ast.stmt, ast.excepthandler, ast.match_case, ast.mod)


def statement_walk(tree: ast.AST) -> Iterator[ast.AST]:
    """The nodes of ``tree`` that hold statement lists (:data:`BLOCK_OWNERS`: every statement
    among them), in the order :func:`walk` gives them, without visiting expressions (statements
    are never inside one)."""
    return _breadth_first(tree, BLOCK_OWNERS)


def _names_in(target: ast.AST) -> set[str]:
    if isinstance(target, ast.Name):
        return {target.id}
    if isinstance(target, (ast.Tuple, ast.List)):
        out: set[str] = set()
        for elt in target.elts:
            out |= _names_in(elt)
        return out
    if isinstance(target, ast.Starred):
        return _names_in(target.value)
    return set()


def _contains(node: ast.AST, pos: tuple) -> bool:
    return (node.lineno, node.col_offset) <= pos <= _end(node)


def _pos(node: ast.AST) -> tuple:
    return (node.lineno, node.col_offset)


def _end(node: ast.AST) -> tuple:
    return (node.end_lineno or node.lineno, node.end_col_offset or 0)


_TERMINAL = (ast.Break, ast.Continue, ast.Return, ast.Raise)


def unreachable_spans(tree: ast.AST) -> list:
    """``(start, end)`` of the statements that follow a ``break``, ``continue``, ``return`` or
    ``raise`` in the same block: they never run (``break`` then ``lr = lr / 2`` in the same
    ``if``). One walk of the statements of ``tree`` (:func:`statement_walk`)."""
    out = []
    for node in statement_walk(tree):
        for field in ("body", "orelse", "finalbody"):
            stmts = getattr(node, field, None)
            if not isinstance(stmts, list):
                continue
            for i, stmt in enumerate(stmts[:-1]):
                if isinstance(stmt, _TERMINAL):
                    out.append((_pos(stmts[i + 1]), _end(stmts[-1])))
                    break
    return out


def catching_handler(tree: ast.AST, node: ast.AST, errors: frozenset) -> Optional[ast.ExceptHandler]:
    """The ``except`` clause that catches an exception of one of the classes ``errors`` (builtin names)
    raised at ``node``: of the innermost ``try`` around it in its own function (not across a ``def``),
    a handler naming one of them, ``Exception``, ``BaseException``, or none (bare); a ``try`` whose
    handlers catch none of them lets the exception out to the ``try`` around it. None if none does."""
    pos = _pos(node)
    caught = errors | {"Exception", "BaseException"}
    found: Optional[ast.ExceptHandler] = None
    block = list(getattr(tree, "body", ()))
    while block:
        stmt = next((s for s in block if _pos(s) <= pos <= _end(s)), None)
        if stmt is None:
            return found
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            found, block = None, stmt.body  # a def's body runs later, outside the try around the def
            continue
        if isinstance(stmt, ast.Try) and stmt.body and _pos(stmt.body[0]) <= pos <= _end(stmt.body[-1]):
            for h in stmt.handlers:
                types = h.type.elts if isinstance(h.type, ast.Tuple) else [h.type]
                if h.type is None or any(last_name(t) in caught for t in types if t is not None):
                    found = h
                    break
        block = [c for f in ("body", "orelse", "finalbody", "handlers", "cases") for c in getattr(stmt, f, None) or ()
                 if isinstance(c, (ast.stmt, ast.ExceptHandler)) or type(c).__name__ == "match_case"]
        block = [x for c in block for x in ([c] if isinstance(c, ast.stmt) else c.body)]
    return found


def _literal_set(node: Optional[ast.AST], kind: type) -> set:
    """Literal values of one type (or one value) from a ``static_argnums``-like argument: a
    constant, a negated int, or a tuple/list/set of them."""
    if node is None:
        return set()
    if isinstance(node, ast.Constant) and isinstance(node.value, kind) and not isinstance(node.value, bool):
        return {node.value}
    if (kind is int and isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub)
            and isinstance(node.operand, ast.Constant)):
        v = node.operand.value
        return {-v} if isinstance(v, int) else set()
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        out: set = set()
        for elt in node.elts:
            out |= _literal_set(elt, kind)
        return out
    return set()


def _int_set(node: Optional[ast.AST]) -> set:
    return _literal_set(node, int)


def _str_set(node: Optional[ast.AST]) -> set:
    return _literal_set(node, str)


def call_arg(call: ast.Call, index: int, keyword: Optional[str]) -> Optional[ast.AST]:
    """The argument at a position or keyword, if the call spells it out."""
    if keyword is not None:
        for kw in call.keywords:
            if kw.arg == keyword:
                return kw.value
    if index is not None and index < len(call.args):
        arg = call.args[index]
        if not any(isinstance(a, ast.Starred) for a in call.args[: index + 1]):
            return arg
    return None


def _kw(call: ast.Call, name: str) -> Optional[ast.AST]:
    for kw in call.keywords:
        if kw.arg == name:
            return kw.value
    return None


def last_name(func: ast.AST) -> str:
    """The name a call is spelled with, without resolving it: ``np.asarray`` -> ``asarray``."""
    if isinstance(func, ast.Attribute):
        return func.attr
    if isinstance(func, ast.Name):
        return func.id
    return ""


def unparse(node: ast.AST, limit: int = 40) -> str:
    """A short source spelling of an expression for messages."""
    try:
        text = ast.unparse(node)
    except Exception:  # pragma: no cover - unparse handles every parsed node
        return "..."
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def annotation_attributes(exprs: list, names: frozenset) -> list:
    """The ``ast.Attribute`` nodes named one of ``names`` in annotation expressions. An annotation
    is a name, an attribute chain, a subscript, a tuple or list, or a ``|`` union: walked by hand,
    through these only (a string annotation is not evaluated, and nothing else is a type)."""
    out: list = []
    stack = [e for e in exprs if e is not None]
    while stack:
        n = stack.pop()
        t = type(n)
        if t is ast.Attribute:
            if n.attr in names:
                out.append(n)
            stack.append(n.value)
        elif t is ast.Subscript:
            stack.append(n.value)
            stack.append(n.slice)
        elif t is ast.Tuple or t is ast.List:
            stack.extend(n.elts)
        elif t is ast.BinOp:
            stack.append(n.left)
            stack.append(n.right)
    return out


_BLOCK_FIELDS = ("body", "orelse", "finalbody", "handlers", "cases")


def returned_values(node: ast.AST) -> list:
    """The expressions a def's ``return`` statements give (not those of nested defs or classes);
    empty when one returns nothing. Walks statements only: a ``return`` is never inside an
    expression."""
    out: list = []
    stack = list(getattr(node, "body", ()))
    while stack:
        n = stack.pop()
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        if isinstance(n, ast.Return):
            if n.value is None:
                return []
            out.append(n.value)
            continue
        for field in _BLOCK_FIELDS:
            block = getattr(n, field, None)
            if block:
                stack.extend(block)
    return out


def returned_nodes(node: ast.AST) -> list:
    """Every ``return`` statement of a def (not those of nested defs or classes)."""
    out: list = []
    stack = list(getattr(node, "body", ()))
    while stack:
        n = stack.pop()
        if isinstance(n, ast.Return):
            out.append(n)
        elif not isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            stack.extend(x for field in _BLOCK_FIELDS for x in getattr(n, field, None) or ())
    return out


def guarded_by_its_truth(region: ast.AST, name: str, pos: tuple) -> bool:
    """Position ``pos`` lies in the body of an ``if name:`` (or ``if name is not None:``) inside
    ``region``: a binding there runs only when ``name`` already held a true value (``if mask:
    mask = grow(mask)`` in a loop reaches the next iteration's test only if the mask was given)."""
    for node in ast.walk(region):
        if not isinstance(node, ast.If):
            continue
        test = node.test
        if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.IsNot) \
                and isinstance(test.comparators[0], ast.Constant) and test.comparators[0].value is None:
            test = test.left
        if isinstance(test, ast.Name) and test.id == name and any(_contains(s, pos) for s in node.body):
            return True
    return False


def least_int(e: ast.AST, loops: tuple) -> Optional[int]:
    """The least value an int expression takes where it runs, inside ``loops`` (For nodes, outermost
    first): an int constant; a loop's index counting up from a constant (``for i in range(a, ...)``
    with no negative step, ``for i, x in enumerate(xs, start)``) that the body does not rebind; sums
    of those (``100 + i``). None when it is not known."""
    if isinstance(e, ast.Constant):
        return e.value if type(e.value) is int else None
    if isinstance(e, ast.BinOp) and isinstance(e.op, ast.Add):
        a, b = least_int(e.left, loops), least_int(e.right, loops)
        return None if a is None or b is None else a + b
    if not isinstance(e, ast.Name):
        return None
    for loop in reversed(loops):
        if not isinstance(loop, ast.For) or e.id not in _names_in(loop.target):
            continue
        it, target = loop.iter, loop.target
        if any(isinstance(n, ast.Name) and n.id == e.id and isinstance(n.ctx, ast.Store)
               for s in loop.body for n in ast.walk(s)) or not isinstance(it, ast.Call) \
                or not isinstance(it.func, ast.Name) or it.keywords and it.func.id == "range":
            return None
        if it.func.id == "range" and isinstance(target, ast.Name) and 1 <= len(it.args) <= 3:
            step = least_int(it.args[2], ()) if len(it.args) == 3 else 1
            return (least_int(it.args[0], ()) if len(it.args) > 1 else 0) if step and step > 0 else None
        if it.func.id == "enumerate" and isinstance(target, ast.Tuple) and target.elts \
                and isinstance(target.elts[0], ast.Name) and target.elts[0].id == e.id:
            start = call_arg(it, 1, "start")
            return 0 if start is None else least_int(start, ())
        return None
    return None


# The nodes Python evaluates every time a statement runs (``certainraise`` asks which of them fail).
_COMPREHENSION_NODES = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)


def evaluated_parts(s: ast.stmt):
    """The nodes of statement ``s`` Python evaluates every time ``s`` runs, in about the order it does."""
    if isinstance(s, ast.Expr):
        roots = [s.value]
    elif isinstance(s, ast.Assign):
        roots = [s.value, *(_target_reads(t) for t in s.targets)]
    elif isinstance(s, ast.AugAssign):
        roots = [s.target if isinstance(s.target, ast.Name) else _target_reads(s.target), s.value]
    elif isinstance(s, ast.AnnAssign):
        roots = [s.value, _target_reads(s.target)] if s.value is not None else []
    elif isinstance(s, (ast.Return, ast.Raise)):
        roots = [getattr(s, "value", None) or getattr(s, "exc", None)]
    elif isinstance(s, (ast.If, ast.While)):
        roots = [s.test]
    elif isinstance(s, (ast.For, ast.AsyncFor)):
        roots = [s.iter]
    elif isinstance(s, (ast.With, ast.AsyncWith)):
        roots = [s.items[0].context_expr]
    elif isinstance(s, ast.Assert):
        roots = [s.test]
    else:
        roots = []
    stack = [r for r in reversed(roots) if r is not None]
    while stack:
        n = stack.pop()
        if isinstance(n, list):
            stack.extend(reversed(n))
            continue
        yield n
        stack.extend(reversed(_certain_children(n)))


def assignment_targets(s: ast.stmt) -> list:
    if isinstance(s, ast.Assign):
        return s.targets
    if isinstance(s, ast.AnnAssign) and s.value is not None:
        return [s.target]
    return []


def _target_reads(t: ast.AST) -> list:
    """The parts of an assignment target that are read: ``a[i]``'s ``a`` and ``i``, ``o.x``'s ``o``."""
    if isinstance(t, ast.Subscript):
        return [t.value, t.slice]
    if isinstance(t, ast.Attribute):
        return [t.value]
    if isinstance(t, (ast.Tuple, ast.List)):
        return [r for e in t.elts for r in _target_reads(e)]
    if isinstance(t, ast.Starred):
        return _target_reads(t.value)
    return []


def _certain_children(n: ast.AST) -> list:
    if isinstance(n, ast.BoolOp):
        return [n.values[0]]
    if isinstance(n, ast.IfExp):
        return [n.test]
    if isinstance(n, ast.Compare):
        return [n.left, n.comparators[0]]
    if isinstance(n, ast.Lambda):
        return list(n.args.defaults)
    if isinstance(n, _COMPREHENSION_NODES):
        return [n.generators[0].iter]
    if isinstance(n, ast.Call):
        return [n.func, *n.args, *(k.value for k in n.keywords)]
    if isinstance(n, (ast.Name, ast.Constant)):
        return []
    return [c for c in ast.iter_child_nodes(n) if isinstance(c, ast.expr)]


def reads_name(node: ast.AST, name: str) -> bool:
    """Whether ``node`` reads the name ``name``."""
    return any(isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load) for n in walk(node))


def subtracts_name(node: ast.AST, name: str, end=None) -> bool:
    """``... - t0`` (``time.time() - t0``, ``end - t0``; ``end``: that name or node): the time since ``t0``."""
    return any(isinstance(n, ast.BinOp) and isinstance(n.op, ast.Sub) and isinstance(n.right, ast.Name)
               and n.right.id == name and (end is None or n.left is end or isinstance(end, str)
                                           and isinstance(n.left, ast.Name) and n.left.id == end)
               for n in walk(node))


def rebinds_name(node: ast.AST, name: str) -> bool:
    """Whether ``node`` binds the name ``name``."""
    return any(isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Store) for n in walk(node))


def within(node: ast.AST, outer: ast.AST) -> bool:
    """``node`` lies inside ``outer``'s source span."""
    return _pos(outer) <= _pos(node) and _end(node) <= _end(outer)


def plain_target_names(t: ast.AST, out: list) -> bool:
    """Append the names a target binds; False when part of it is not a plain name."""
    if isinstance(t, ast.Name):
        out.append(t.id)
        return True
    if isinstance(t, (ast.Tuple, ast.List)):
        ok = True
        for elt in t.elts:
            ok = plain_target_names(elt, out) and ok
        return ok
    if isinstance(t, ast.Starred):
        return plain_target_names(t.value, out)
    return False


def walk_statements(body: list) -> Iterator[ast.stmt]:
    """The statements of a body, nested blocks included, not those of nested defs or classes."""
    stack = list(reversed(body))
    while stack:
        n = stack.pop()
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        yield n
        for field in ("body", "orelse", "finalbody"):
            stack.extend(reversed(getattr(n, field, None) or []))
        for h in getattr(n, "handlers", ()):
            stack.extend(reversed(h.body))
