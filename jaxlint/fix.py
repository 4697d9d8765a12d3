"""Safe automatic fixes for ``jaxlint check --fix`` and ``--diff``.

Only mechanical rewrites whose meaning is certain are offered:

* JAX401 ``x[i] = v`` -> ``x = x.at[i].set(v)``; ``x[i] += v`` -> ``x = x.at[i].add(v)`` (``-=``
  ``.subtract``, ``*=`` ``.multiply``, ``/=`` ``.divide``, ``**=`` ``.power``);
* JAX402 ``jax.ops.index_update(x, idx, v)`` -> ``x.at[idx].set(v)`` (``index_add`` ``.add``,
  ``index_mul`` ``.multiply``, ``index_min``/``index_max`` ``.min``/``.max``), with
  ``jax.ops.index[...]`` unwrapped; removed names that nothing uses any more are dropped from
  module-level ``from jax.ops import ...`` lines;
* JAX403 ``x.at[i].set(v)`` as a statement -> ``x = x.at[i].set(v)``.

The rule decides *whether* a statement is a finding (the model's judgement that ``x`` is an
array); :class:`FixBuilder`, called by the rule for that finding, decides from the syntax whether
the rewrite is certain, and attaches a :class:`Fix` to the :class:`~jaxlint.rule.Finding`. For
JAX401/JAX403 ``x`` must be a plain name already local to the statement's scope (not global,
nonlocal or a closure variable) and read again afterwards; one target, no walrus, no tuple value,
and for ``x[f()] = g()`` not two calls whose order would swap.
A fix is a few edits at exact source positions (ast line and UTF-8 byte column): untouched code,
comments and formatting are kept byte for byte, and the original spelling of every
subexpression is reused. Fixes are applied in rounds (findings are recomputed on the fixed text
until nothing changes), so a second run changes nothing.
"""

from __future__ import annotations

import ast
import difflib
import functools
import io
import os
import re
import tokenize
from dataclasses import dataclass, replace
from typing import Callable, Iterable, Optional, Sequence

MAX_ROUNDS = 10


def __getattr__(name):  # FIXABLE_CODES: the rules that declare ``fixable`` (jaxlint/registry.py)
    if name == "FIXABLE_CODES":  # looked up late: jaxlint_rules imports this module
        from .registry import FIXABLE_CODES

        return FIXABLE_CODES
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

Pos = tuple  # (1-based line, 0-based UTF-8 byte column), as ast reports positions


@dataclass(frozen=True)
class Span:
    """A part of a replacement that copies the source text between two positions; with
    ``after``, only the text after the first ``after`` in it (none: nothing), with ``before``,
    only the text before the last ``before`` in it (none: nothing)."""

    start: Pos
    end: Pos
    after: str = ""
    before: str = ""

    def pick(self, text: str) -> str:
        if self.after:
            i = text.find(self.after)
            text = "" if i < 0 else text[i + len(self.after):]
        if self.before:
            i = text.rfind(self.before)
            text = "" if i < 0 else text[:i]
        return text


@dataclass(frozen=True)
class Edit:
    """Replace the source from ``start`` to ``end`` (equal: insert) with ``parts`` (strings and
    :class:`Span` copies of the original source)."""

    start: Pos
    end: Pos
    parts: tuple = ()


@dataclass(frozen=True)
class Fix:
    edits: tuple


def _start(node: ast.AST) -> Pos:
    return (node.lineno, node.col_offset)


def _end(node: ast.AST) -> Pos:
    return (node.end_lineno, node.end_col_offset)


def can_fix_path(path: str) -> bool:
    """Only plain Python sources are rewritten (never notebooks)."""
    return not path.lower().endswith(".ipynb")


# --------------------------------------------------------------------------- building fixes (AST only)

_AUG_METHODS = {ast.Add: "add", ast.Sub: "subtract", ast.Mult: "multiply", ast.Div: "divide", ast.Pow: "power"}
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)
_EFFECTS = (ast.Await, ast.Yield, ast.YieldFrom, ast.NamedExpr)
# Calls whose order against another call cannot matter: pure builtins and JAX's functional API.
_PURE_BUILTINS = frozenset("builtins." + n for n in (
    "len", "int", "float", "bool", "complex", "abs", "min", "max", "round", "range", "slice", "tuple",
    "divmod", "pow", "sum", "isinstance",
))
_PURE_FAMILIES = ("jax.numpy.", "jax.lax.", "jax.random.", "jax.nn.", "jax.scipy.")
_PRIMARY = (ast.Name, ast.Attribute, ast.Subscript, ast.Call)  # ``<expr>.at`` needs no parentheses


def _contains(node: ast.AST, kinds) -> bool:
    return any(isinstance(n, kinds) for n in ast.walk(node))


def _local_names(scope: ast.AST) -> tuple[set, set]:
    """(names bound in ``scope``'s own namespace, names it declares global/nonlocal), from the
    syntax. Under-approximates bindings (comprehension targets, walruses in nested defaults and
    lambdas are left out), so a name found here is certainly local."""
    bound: set = set()
    declared: set = set()
    if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)):
        a = scope.args
        for arg in a.posonlyargs + a.args + a.kwonlyargs + [a.vararg, a.kwarg]:
            if arg is not None:
                bound.add(arg.arg)
    stack = list(reversed(scope.body))
    while stack:
        node = stack.pop()
        if isinstance(node, _SCOPES):
            bound.add(node.name)
            continue
        if isinstance(node, ast.Lambda):
            continue
        if isinstance(node, (ast.Global, ast.Nonlocal)):
            declared.update(node.names)
            continue
        if isinstance(node, ast.Name):
            if isinstance(node.ctx, (ast.Store, ast.Del)):
                bound.add(node.id)
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                if alias.name != "*":
                    bound.add(alias.asname or alias.name.split(".")[0])
            continue
        if isinstance(node, ast.ExceptHandler) and node.name:
            bound.add(node.name)
        elif isinstance(node, (ast.MatchAs, ast.MatchStar)) and node.name:
            bound.add(node.name)
        elif isinstance(node, ast.MatchMapping) and node.rest:
            bound.add(node.rest)
        if isinstance(node, _COMPREHENSIONS):
            # the loop targets are the comprehension's own; only walruses inside bind here
            for gen in node.generators:
                stack.append(gen.iter)
                stack.extend(gen.ifs)
            stack.extend([node.key, node.value] if isinstance(node, ast.DictComp) else [node.elt])
            continue
        stack.extend(ast.iter_child_nodes(node))
    return bound, declared


def _never_raises(build):
    """A fix is optional: whatever goes wrong while building one, the finding stays, unfixed."""
    @functools.wraps(build)
    def wrapper(*args, **kwargs):
        try:
            return build(*args, **kwargs)
        except Exception:  # RecursionError included
            return None
    return wrapper


class FixBuilder:
    """Builds the fixes for one module's findings. Rules create one lazily, the first time a
    finding may be fixable, and pass it the nodes of that finding."""

    def __init__(self, model):
        self.m = model
        self.tree = model.tree
        self._parent: Optional[dict] = None  # id(target or expression) -> its statement
        self._scope: dict = {}  # id(statement) -> innermost def/class/module around it
        self._loop: dict = {}  # id(statement) -> outermost loop around it in its own scope
        self._reads: dict = {}  # (id(scope node), name) -> positions where the name is read
        self._names: dict = {}  # id(scope node) -> _local_names(scope)

    def _index(self) -> None:
        parent: dict = {}
        stack = [(self.tree, self.tree, None)]
        while stack:
            node, scope, loop = stack.pop()
            for child in ast.iter_child_nodes(node):
                if isinstance(child, ast.stmt):
                    self._scope[id(child)] = scope
                    self._loop[id(child)] = loop
                    if isinstance(child, ast.Assign):
                        for t in child.targets:
                            parent[id(t)] = child
                    elif isinstance(child, ast.AugAssign):
                        parent[id(child.target)] = child
                    elif isinstance(child, ast.Expr):
                        parent[id(child.value)] = child
                    if isinstance(child, _SCOPES):
                        stack.append((child, child, None))
                    else:
                        is_loop = isinstance(child, (ast.For, ast.AsyncFor, ast.While))
                        stack.append((child, scope, loop or (child if is_loop else None)))
                elif isinstance(child, (ast.excepthandler, ast.match_case)):
                    stack.append((child, scope, loop))  # they hold statements
        self._parent = parent

    def _statement(self, node: ast.AST) -> Optional[ast.stmt]:
        if self._parent is None:
            self._index()
        return self._parent.get(id(node))

    def _rebindable(self, name: str, stmt: ast.stmt) -> bool:
        """Whether ``name = ...`` at ``stmt`` rebinds the very variable the statement reads: the
        name is already local to the statement's scope (so adding an assignment cannot turn a
        read of a global or closure variable into an UnboundLocalError), and is not declared
        global or nonlocal there."""
        scope = self._scope.get(id(stmt))
        if scope is None:
            return False
        if isinstance(scope, ast.Module):
            return True
        names = self._names.get(id(scope))
        if names is None:
            names = self._names[id(scope)] = _local_names(scope)
        bound, declared = names
        return name in bound and name not in declared

    def _observed(self, name: str, stmt: ast.stmt) -> bool:
        """Whether rebinding ``name`` at ``stmt`` is seen: in a function, the name is read after
        the statement or anywhere in a loop around it (a module's or class's names are seen from
        outside). Otherwise the rewrite would turn a loud TypeError into an update silently
        dropped, e.g. a parameter "modified in place" for the caller."""
        scope = self._scope.get(id(stmt))
        if not isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return True
        key = (id(scope), name)
        reads = self._reads.get(key)
        if reads is None:
            reads = self._reads[key] = [_start(n) for n in ast.walk(scope)
                                        if isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load)]
        start, end = _start(stmt), _end(stmt)
        loop = self._loop.get(id(stmt))
        return any(pos >= end or (loop is not None and _start(loop) <= pos <= _end(loop) and pos < start)
                   for pos in reads)

    def _effects(self, e: ast.AST, stmt: ast.stmt) -> bool:
        """Whether evaluating ``e`` may have an effect another expression could observe: a call
        of anything but a pure builtin or a JAX function, ``await``, ``yield``, ``:=``."""
        scope = None
        for node in ast.walk(e):
            if isinstance(node, _EFFECTS):
                return True
            if isinstance(node, ast.Call):
                if scope is None:
                    scope = self.m.scope_at(stmt)
                qn = self.m.resolve(node.func, scope)
                if qn is None or not (qn in _PURE_BUILTINS or qn.startswith(_PURE_FAMILIES)):
                    return True
        return False

    # -- JAX401

    @_never_raises
    def item_assignment(self, target: ast.AST, kind: str) -> Optional[Fix]:
        """``x[i] = v`` / ``x[i] op= v`` as a whole statement, ``x`` a local plain name."""
        if kind not in ("assign", "aug") or not isinstance(target, ast.Subscript):
            return None
        base = target.value
        stmt = self._statement(target)
        if not isinstance(base, ast.Name) or stmt is None:
            return None
        if isinstance(stmt, ast.Assign):
            if len(stmt.targets) != 1 or stmt.targets[0] is not target:
                return None  # a = x[i] = v
            method = "set"
        elif isinstance(stmt, ast.AugAssign) and stmt.target is target:
            method = _AUG_METHODS.get(type(stmt.op))
            if method is None:
                return None  # //=, %=, @=, <<=, |=, ...: no .at method
        else:
            return None
        value = stmt.value
        if isinstance(value, (ast.Tuple, ast.Starred, ast.Yield, ast.YieldFrom)):
            return None  # x[i] = 1, 2 would become two arguments
        if _start(stmt) != _start(target):
            return None  # (x[i]) = v
        if _contains(target.slice, ast.NamedExpr) or _contains(value, ast.NamedExpr):
            return None
        if method == "set" and self._effects(target.slice, stmt) and self._effects(value, stmt):
            return None  # x[f()] = g(): Python runs g() first, the rewrite f() first
        if not (self._rebindable(base.id, stmt) and self._observed(base.id, stmt)):
            return None
        return Fix((
            Edit(_start(stmt), _start(stmt), (Span(_start(base), _end(base)), " = ")),
            Edit(_end(base), _end(base), (".at",)),
            # ``= (\n v\n)``: the first parenthesis around the value becomes the call's
            # (``.set(\n v\n)``); the text between the others and the value is kept
            Edit(_end(target), _start(value), (f".{method}(", Span(_end(target), _start(value), after="("))),
            Edit(_end(value), _end(stmt), (Span(_end(value), _end(stmt), before=")"), ")")),
        ))

    # -- JAX402

    @_never_raises
    def index_update(self, call: ast.Call, method: str, index: ast.AST) -> Optional[Fix]:
        """``F(x, idx, v)`` -> ``x.at[idx].method(v)``; ``index`` is ``idx``, or what
        ``jax.ops.index[...]`` wraps when ``idx`` is that helper."""
        if len(call.args) != 3 or call.keywords or any(isinstance(a, ast.Starred) for a in call.args):
            return None
        x, idx, v = call.args
        if not (_start(x) < _start(idx) <= _start(index) and _end(index) <= _end(idx) < _start(v)):
            return None
        wrap = not isinstance(x, _PRIMARY)
        return Fix((
            Edit(_start(call), _start(x), ("(",) if wrap else ()),
            Edit(_end(x), _start(index), (").at[" if wrap else ".at[",)),
            Edit(_end(index), _start(v), (f"].{method}(",)),
            Edit(_end(v), _end(call), (")",)),
        ))

    # -- JAX403

    @_never_raises
    def discarded_update(self, call: ast.Call) -> Optional[Fix]:
        """``x.at[i].set(v)`` as an expression statement, ``x`` a local plain name."""
        stmt = self._statement(call)
        if not isinstance(stmt, ast.Expr) or stmt.value is not call:
            return None
        receiver = call.func.value.value.value  # the rule matched ``<receiver>.at[...].<method>(...)``
        if not (isinstance(receiver, ast.Name) and self._rebindable(receiver.id, stmt)
                and self._observed(receiver.id, stmt)):
            return None
        return Fix((Edit(_start(stmt), _start(stmt), (Span(_start(receiver), _end(receiver)), " = ")),))


# --------------------------------------------------------------------------- applying fixes (source text)

_NEWLINE = re.compile(r"\r\n|\r|\n")


class _Lines:
    """Maps ast positions (line, UTF-8 byte column) to offsets in the text."""

    def __init__(self, text: str):
        self.text = text
        self.starts = [0] + [m.end() for m in _NEWLINE.finditer(text)]

    def offset(self, pos: Pos) -> Optional[int]:
        line, col = pos
        if not 1 <= line <= len(self.starts) or col < 0:
            return None
        start = self.starts[line - 1]
        end = self.starts[line] if line < len(self.starts) else len(self.text)
        chunk = self.text[start:end]
        if chunk.isascii():
            return start + col if col <= len(chunk) else None
        raw = chunk.encode("utf-8", "surrogatepass")
        if col > len(raw):
            return None
        try:
            return start + len(raw[:col].decode("utf-8"))
        except UnicodeDecodeError:  # not at a character boundary
            return None


def _resolve(fix: Fix, lines: _Lines) -> Optional[list]:
    """The fix's edits as sorted (start, end, replacement) text offsets, or None when they do not
    fit this text: out of range, overlapping, or deleting a comment."""
    out = []
    for edit in fix.edits:
        s, e = lines.offset(edit.start), lines.offset(edit.end)
        if s is None or e is None or e < s:
            return None
        pieces = []
        for part in edit.parts:
            if isinstance(part, Span):
                a, b = lines.offset(part.start), lines.offset(part.end)
                if a is None or b is None or b < a:
                    return None
                pieces.append(part.pick(lines.text[a:b]))
            else:
                pieces.append(part)
        rep = "".join(pieces)
        if lines.text[s:e].count("#") > rep.count("#"):
            return None  # between tokens a ``#`` starts a comment: never drop one
        out.append((s, e, rep))
    out.sort(key=lambda r: (r[0], r[1]))
    for (s1, e1, _), (s2, e2, _) in zip(out, out[1:]):
        if s2 < e1 or (s2 == e1 and (s1 == e1 or s2 == e2)):
            return None  # overlapping, or an insertion whose order against its neighbour is unclear
    return out


def _conflict(a: list, b: list) -> bool:
    for s1, e1, _ in a:
        for s2, e2, _ in b:
            if s1 < e2 and s2 < e1:
                return True
            if (e1 == s2 or e2 == s1) and (s1 == e1 or s2 == e2):
                return True  # touching, and one is an insertion: which goes first is unclear
            if s1 == e1 == s2 == e2:
                return True
    return False


def _splice(text: str, edits: Iterable) -> str:
    for s, e, rep in sorted(edits, key=lambda r: (r[0], r[1]), reverse=True):
        text = text[:s] + rep + text[e:]
    return text


def _parses(text: str) -> bool:
    try:
        ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    return True


def apply_fixes(text: str, fixes: Sequence[Fix]) -> tuple[str, list]:
    """Apply every fix that fits ``text`` and conflicts with no earlier one (conflicting fixes
    wait for the next round). Returns the new text and the fixes applied; the text always
    parses when the input did."""
    lines = _Lines(text)
    chosen: list = []
    for fix in fixes:
        edits = _resolve(fix, lines)
        if edits and not any(_conflict(edits, other) for _, other in chosen):
            chosen.append((fix, edits))
    chosen.sort(key=lambda c: c[1][0][:2])
    if not chosen:
        return text, []
    new = _splice(text, [e for _, edits in chosen for e in edits])
    if _parses(new):
        return new, [fix for fix, _ in chosen]
    applied = []  # a fix broke the syntax: keep only the fixes that parse one by one, last first
    new = text
    for fix, edits in reversed(chosen):
        candidate = _splice(new, edits)
        if _parses(candidate):
            new = candidate
            applied.append(fix)
    return new, applied[::-1]


def fixable(text: str, fix: Optional[Fix]) -> bool:
    """Whether ``fix`` applies to ``text`` (its edits fit and delete no comment)."""
    return fix is not None and bool(_resolve(fix, _Lines(text)))


# --------------------------------------------------------------------------- removed jax.ops imports

_REMOVED_NAMES = frozenset({"index_update", "index_add", "index_mul", "index_min", "index_max", "index"})


def _drop_dead_ops_imports(text: str) -> str:
    """Once the calls are rewritten, a module-level ``from jax.ops import index_update, ...`` is
    the only thing left that fails on current JAX: drop the removed names nothing uses any more
    from it (the whole line when nothing else is left; a one-line import keeps its other names)."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return text
    candidates = [s for s in tree.body if isinstance(s, ast.ImportFrom) and s.module == "jax.ops" and not s.level
                  and any(a.name in _REMOVED_NAMES for a in s.names)]
    if not candidates:
        return text
    used = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            used.add(node.id)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            used.add(node.value)  # __all__ entries and other spellings by name: keep the import
    lines = _Lines(text)
    cut = []
    for stmt in candidates:
        keep = [a for a in stmt.names if a.name not in _REMOVED_NAMES or (a.asname or a.name) in used]
        if len(keep) == len(stmt.names):
            continue
        s, e = lines.offset(_start(stmt)), lines.offset(_end(stmt))
        if s is None or e is None:
            continue
        line_start = lines.starts[stmt.lineno - 1]
        nxt = lines.starts[stmt.end_lineno] if stmt.end_lineno < len(lines.starts) else len(text)
        before, after = text[line_start:s], text[e:nxt]
        if before.strip() or after.strip() and not after.strip().startswith("#"):
            continue  # shares its line with other code (``;``)
        if not keep:
            cut.append((line_start, nxt, ""))
        elif stmt.lineno == stmt.end_lineno and "#" not in text[s:e]:
            names = ", ".join(a.name + (f" as {a.asname}" if a.asname else "") for a in keep)
            cut.append((s, e, f"from jax.ops import {names}"))
    if not cut:
        return text
    new = _splice(text, cut)
    return new if _parses(new) else text


# --------------------------------------------------------------------------- files


def _encoding(data: bytes) -> tuple[str, bytes]:
    """(codec, BOM) of a source file, as the interpreter reads it."""
    enc, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    if enc == "utf-8-sig":
        return "utf-8", (b"\xef\xbb\xbf" if data.startswith(b"\xef\xbb\xbf") else b"")
    return enc, b""


@dataclass
class FileFix:
    """The outcome of fixing one file: old and new contents, and how many findings were fixed."""

    path: str
    old_bytes: bytes
    new_bytes: bytes
    old_text: str
    new_text: str
    fixed: int

    def diff(self) -> str:
        return unified_diff(self.path, self.old_text, self.new_text)

    def write(self) -> None:
        """Rewrite the file in place (keeping its mode, links and encoding), unless it changed
        since it was read."""
        with open(self.path, "rb") as fh:
            if fh.read() != self.old_bytes:
                raise OSError(f"{self.path} changed while it was being fixed; not written")
        with open(self.path, "wb") as fh:
            fh.write(self.new_bytes)


def _lines_keepends(text: str) -> list:
    out, pos = [], 0
    for m in _NEWLINE.finditer(text):
        out.append(text[pos:m.end()])
        pos = m.end()
    if pos < len(text):
        out.append(text[pos:])
    return out


def unified_diff(path: str, old: str, new: str) -> str:
    """A unified diff with 3 lines of context, empty when nothing changed. A file under the current
    folder is named ``a/PATH`` and ``b/PATH`` relative to it (``git apply`` and ``patch -p1``
    accept it), any other by its absolute path on both lines."""
    if old == new:
        return ""
    try:
        rel = os.path.relpath(path)
    except ValueError:  # another drive
        rel = os.path.abspath(path)
    if rel == os.pardir or rel.startswith(os.pardir + os.sep) or os.path.isabs(rel):
        before = after = os.path.abspath(path)
    else:
        before, after = os.path.join("a", rel), os.path.join("b", rel)
    out = []
    for line in difflib.unified_diff(_lines_keepends(old), _lines_keepends(new),
                                     before.replace(os.sep, "/"), after.replace(os.sep, "/")):
        if line.endswith(("\n", "\r")):
            out.append(line)
        else:
            out.append(line + "\n\\ No newline at end of file\n")
    return "".join(out)


def fix_source(data: bytes, path: str, rules: Sequence, keep: Optional[Callable] = None) -> Optional[FileFix]:
    """Fix one file's contents in memory: check, apply the fixes of the findings ``keep`` accepts
    (all by default), check again, until nothing changes. None when nothing was fixed."""
    from .engine import check_source
    from .registry import FIXABLE_CODES

    if not can_fix_path(path):
        return None
    try:
        codec, bom = _encoding(data)
        text = data[len(bom):].decode(codec)
    except (SyntaxError, LookupError, UnicodeDecodeError):
        return None
    if not _parses(text):
        return None
    new, fixed, ops_fixed = text, 0, False
    for _ in range(MAX_ROUNDS):
        result = check_source(new, path, rules)
        fixes = [f.fix for f in result.findings if f.fix is not None and f.code in FIXABLE_CODES
                 and (keep is None or keep(f))]
        if not fixes:
            break
        codes = {id(f.fix): f.code for f in result.findings if f.fix is not None}
        new, applied = apply_fixes(new, fixes)
        if not applied:
            break
        fixed += len(applied)
        ops_fixed = ops_fixed or any(codes.get(id(fx)) == "JAX402" for fx in applied)
    if ops_fixed:
        new = _drop_dead_ops_imports(new)
    if new == text:
        return None
    try:
        new_bytes = bom + new.encode(codec)
    except (UnicodeEncodeError, LookupError):
        return None
    return FileFix(path, data, new_bytes, text, new, fixed)


def _rules(codes: Sequence[str]) -> list:
    from .registry import RULES_BY_CODE

    return [RULES_BY_CODE[c]() for c in codes if c in RULES_BY_CODE]


def fix_files(paths: Sequence[str], codes: Sequence[str], keep: Optional[Callable] = None) -> tuple[list, list]:
    """Fix each file in memory with the selected rules; ``keep(path, finding)`` says which
    findings may be fixed (per-file ignores). Returns ([FileFix], [error messages])."""
    rules = _rules(codes)
    changes, errors = [], []
    for path in paths:
        try:
            with open(path, "rb") as fh:
                data = fh.read()
        except OSError as e:
            errors.append(f"{path}: could not read: {e.strerror or e}")
            continue
        change = fix_source(data, path, rules, None if keep is None else (lambda f, p=path: keep(p, f)))
        if change is not None:
            changes.append(change)
    return changes, errors


def mark_fixable(findings: Sequence, codes: Sequence[str]) -> list:
    """``findings`` with a verified :class:`Fix` on those ``--fix`` would fix and none on the others
    (results read from the cache carry none, so their files are checked again here)."""
    from .registry import FIXABLE_CODES

    by_path: dict = {}
    for f in findings:
        if f.code in FIXABLE_CODES and can_fix_path(f.path):
            by_path.setdefault(f.path, []).append(f)
    fixes: dict = {}
    if by_path:
        from .engine import check_source

        rules = _rules(codes)
        for path in by_path:
            try:
                with open(path, "rb") as fh:
                    data = fh.read()
                codec, bom = _encoding(data)
                text = data[len(bom):].decode(codec)
            except (OSError, SyntaxError, LookupError, UnicodeDecodeError):
                continue
            for f in check_source(data, path, rules).findings:
                if f.fix is not None and fixable(text, f.fix):
                    fixes[(path, f.line, f.col, f.code, f.message)] = f.fix
    out = []
    for f in findings:
        fix = fixes.get((f.path, f.line, f.col, f.code, f.message))
        out.append(f if f.fix is fix else replace(f, fix=fix))
    return out


def fix_results(results: Sequence, codes: Sequence[str], keep: Callable, write: bool) -> tuple[list, list]:
    """``jaxlint check --fix/--diff``: fix the files whose findings include a fixable code that
    ``keep(path, finding)`` accepts (per-file ignores: ``Config.keeps``), and write them when
    ``write``. Returns ([FileFix], [errors])."""
    from .registry import FIXABLE_CODES

    todo = [r.path for r in results if can_fix_path(r.path)
            and any(f.code in FIXABLE_CODES and keep(r.path, f) for f in r.findings)]
    changes, errors = fix_files(todo, codes, keep)
    if write:
        written = []
        for change in changes:
            try:
                change.write()
                written.append(change)
            except OSError as e:
                errors.append(f"{change.path}: could not write: {e.strerror or e}")
        changes = written
    return changes, errors


def summary(changes: Sequence[FileFix], errors: Sequence[str], write: bool) -> str:
    """The line ``--fix``/``--diff`` print on stderr."""
    out = "".join(f"jaxlint: could not fix {msg}\n" for msg in errors)
    if changes:
        n = sum(c.fixed for c in changes)
        verb = "fixed" if write else "would fix"
        out += (f"jaxlint: {verb} {n} finding{'s' if n != 1 else ''} in {len(changes)} "
                f"file{'s' if len(changes) != 1 else ''}\n")
    return out
