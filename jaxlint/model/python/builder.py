"""The single walk over a module: scopes, bindings, loops, guards and calls, recorded once."""

from __future__ import annotations

import ast
from typing import Optional

from ... import names as N
from .limits import Work
from .module import ModuleModel
from .records import STARRED, Binding, ClassInfo, Context, FuncNode, FunctionInfo, Loop, Scope
from .syntax import _end, _names_in, _pos, annotation_attributes


def walk_module(model: ModuleModel, shallow: bool = False, function_type: type = FunctionInfo,
                loop_type: type = Loop, watched: frozenset = frozenset(),
                watched_attrs: frozenset = frozenset(), annotation_attrs: frozenset = frozenset()) -> ModuleModel:
    """Fill ``model``'s records in one walk of its tree. ``shallow`` skips function bodies (for
    summaries of imported modules). ``function_type`` and ``loop_type``: the record classes to make
    (the facts layer's subclasses of :class:`FunctionInfo` and :class:`Loop`, which carry what it
    infers; this layer knows only the base classes). ``watched``: last names of callees whose calls
    (and the calls of a call's result) the walk also lists in ``model.watched_calls``, in its order;
    ``watched_attrs``: attribute names whose attribute nodes it lists in ``model.watched_attrs``;
    ``annotation_attrs``: those of them also looked for in annotations that are evaluated (a def's,
    a class field's, unless ``from __future__ import annotations`` postpones them)."""
    model.work = Work(model.tree.body[-1].end_lineno if model.tree.body else 0)
    _Builder(model, shallow, function_type, loop_type, watched, watched_attrs, annotation_attrs).run(model.tree)
    return model


class _Builder:
    """The single walk: scopes, bindings, loops, guards, calls."""

    def __init__(self, model: ModuleModel, shallow: bool = False, function_type: type = FunctionInfo,
                 loop_type: type = Loop, watched: frozenset = frozenset(),
                 watched_attrs: frozenset = frozenset(), annotation_attrs: frozenset = frozenset()):
        self.m = model
        self.watched = watched
        self.watched_attrs = watched_attrs
        # annotations are evaluated where they stand (a def's, a class field's) unless postponed
        self.annotation_attrs = annotation_attrs
        self.watch_annotations = bool(annotation_attrs) and not any(
            isinstance(st, ast.ImportFrom) and st.module == "__future__" and any(a.name == "annotations" for a in st.names)
            for st in model.tree.body[:8])
        self.function_type = function_type
        self.loop_type = loop_type
        self.shallow = shallow  # module and class level only: enough to summarize what a module exports
        self.scope = model.module_scope
        self.loops: tuple = ()
        self.guards: tuple = ()
        self.func: Optional[FunctionInfo] = None
        self.loop: Optional[Loop] = None
        self.raising = False
        self.branches: tuple = ()
        self.cur = Context(self.scope)
        self.qual: list[str] = []

    def run(self, tree: ast.Module) -> None:
        self.body(tree.body)

    # -- plumbing

    def _refresh(self) -> None:
        self.cur = Context(self.scope, self.loops, self.guards, self.branches, self.raising)

    def body(self, stmts: list) -> None:
        ctx = self.m.ctx
        for stmt in stmts:
            ctx[id(stmt)] = self.cur
            handler = _HANDLERS.get(type(stmt))  # visit() inlined: a statement is never a leaf
            if handler is not None:
                handler(self, stmt)
            else:
                self.visit(stmt)

    def visit(self, node: ast.AST) -> None:
        t = type(node)
        if t is _NAME or t is _CONSTANT:  # half of all nodes visited; nothing to record
            return
        handler = _HANDLERS.get(t)
        if handler is not None:
            handler(self, node)
            return
        for child in ast.iter_child_nodes(node):
            self.visit(child)

    def visit_all(self, nodes) -> None:
        for n in nodes:
            if n is not None and type(n) not in _LEAVES:
                self.visit(n)

    def bind(self, name: str, kind: str, value, path, node, pos) -> None:
        scope = self.scope
        b = Binding(pos, kind, value, path, node, scope, self.loops)
        evs = scope.events.get(name)
        if evs is None:
            scope.events[name] = [b]
        else:
            evs.append(b)

    def bind_target(self, target: ast.AST, value, pos, kind: str = "assign", path: tuple = ()) -> None:
        if isinstance(target, ast.Name):
            self.bind(target.id, kind, value, path or None, target, pos)
        elif isinstance(target, (ast.Tuple, ast.List)):
            for i, elt in enumerate(target.elts):
                if isinstance(elt, ast.Starred):
                    self.bind_target(elt.value, value, pos, kind, path + (STARRED,))
                else:
                    self.bind_target(elt, value, pos, kind, path + (i,))
        elif isinstance(target, ast.Starred):
            self.bind_target(target.value, value, pos, kind, path)
        elif isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and target.value.id == "self":
            cls = self.func.cls if self.func is not None else None
            if cls is not None and value is not None and not path:
                cls.self_attrs.setdefault(target.attr, []).append(value)

    # -- imports

    def v_Import(self, node: ast.Import) -> None:
        self.m.import_nodes.append(node)
        for alias in node.names:
            if alias.asname:
                self.scope.imports[alias.asname] = N.canonical(alias.name)
                self.scope.import_src[alias.asname] = (alias.name, None, 0)
            else:
                top = alias.name.split(".")[0]
                self.scope.imports[top] = top
                self.scope.import_src[top] = (top, None, 0)
            self.m.import_roots.add(alias.name.split(".")[0])

    def v_ImportFrom(self, node: ast.ImportFrom) -> None:
        self.m.import_nodes.append(node)
        mod = "." * node.level + (node.module or "")
        if node.level == 0:
            self.m.import_roots.add(mod.split(".")[0])
        for alias in node.names:
            if alias.name == "*":
                continue
            local = alias.asname or alias.name
            full = f"{mod}.{alias.name}" if mod and not mod.endswith(".") else mod + alias.name
            self.scope.imports[local] = N.canonical(full) if node.level == 0 else ""
            self.scope.import_src[local] = (node.module, alias.name, node.level)

    def v_Global(self, node: ast.Global) -> None:
        # At module level ``global x`` is legal and means nothing; recorded there, the lookups that
        # follow a global name to the module scope would find it again there and loop forever.
        if self.scope.kind != "module":
            self.scope.globals.update(node.names)
        self.m.ctx[id(node)] = self.cur
        self.m.decls.append(node)

    def v_Nonlocal(self, node: ast.Nonlocal) -> None:
        self.m.ctx[id(node)] = self.cur
        self.m.decls.append(node)

    # -- definitions

    def _function(self, node: FuncNode, name: str) -> FunctionInfo:
        m = self.m
        a = node.args
        params = [p.arg for p in a.posonlyargs] + [p.arg for p in a.args]
        kwonly = [p.arg for p in a.kwonlyargs]
        cls = self.scope.cls if self.scope.kind == "class" else None
        scope = Scope(node, "function", self.scope)
        self.m.scopes.append(scope)
        qual = ".".join(self.qual + [name])
        fi = self.function_type(node, name, qual, scope, self.func, cls, params, kwonly)
        scope.func = fi
        m.functions.append(fi)
        m.func_of_node[id(node)] = fi
        m.ctx[id(node)] = self.cur
        pos = _pos(node)
        events = scope.events
        for p in params + kwonly + ([a.vararg.arg] if a.vararg else []) + ([a.kwarg.arg] if a.kwarg else []):
            b = Binding(pos, "param", p, None, node, scope)
            evs = events.get(p)
            if evs is None:
                events[p] = [b]
            else:
                evs.append(b)
        if cls is not None and not isinstance(node, ast.Lambda):
            cls.methods[name] = fi
        return fi

    def _enter(self, fi: FunctionInfo, name: str):
        saved = (self.scope, self.loops, self.guards, self.func, self.loop, self.cur, self.raising, self.branches)
        self.scope, self.loops, self.guards, self.func, self.loop = fi.scope, (), (), fi, None
        self.raising = False
        self.branches = ()
        self.qual.append(name)
        self._refresh()
        return saved

    def _leave(self, saved) -> None:
        self.scope, self.loops, self.guards, self.func, self.loop, self.cur, self.raising, self.branches = saved
        self.qual.pop()

    def v_FunctionDef(self, node) -> None:
        self.visit_all(node.decorator_list)
        self.visit_all(node.args.defaults)
        self.visit_all(node.args.kw_defaults)
        if self.watch_annotations:
            a = node.args
            self._annotations([x.annotation for x in (*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg)
                               if x is not None] + [node.returns])
        fi = self._function(node, node.name)
        self.bind(node.name, "def", None, None, node, _pos(node))
        self.scope.defs[node.name] = fi
        if self.shallow:
            return
        saved = self._enter(fi, node.name)
        self.body(node.body)
        self._leave(saved)

    v_AsyncFunctionDef = v_FunctionDef

    def v_Lambda(self, node: ast.Lambda) -> None:
        self.visit_all(node.args.defaults)
        self.visit_all(node.args.kw_defaults)
        fi = self._function(node, "<lambda>")
        fi.returns.append(node.body)
        if self.shallow:
            return
        saved = self._enter(fi, "<lambda>")
        self.visit(node.body)
        self._leave(saved)

    def v_ClassDef(self, node: ast.ClassDef) -> None:
        self.visit_all(node.decorator_list)
        self.visit_all(node.bases)
        self.visit_all(node.keywords)
        self.bind(node.name, "other", None, None, node, _pos(node))
        info = ClassInfo(node)
        self.m.classes[id(node)] = info
        scope = Scope(node, "class", self.scope)
        self.m.scopes.append(scope)
        scope.cls = info
        info.scope = scope
        saved = (self.scope, self.cur)
        self.scope = scope
        self.qual.append(node.name)
        self._refresh()
        self.body(node.body)
        self.qual.pop()
        self.scope, self.cur = saved

    # -- bindings

    def _store(self, target: ast.AST, kind: str) -> None:
        if isinstance(target, (ast.Subscript, ast.Attribute)):
            self.m.ctx[id(target)] = self.cur
            self.m.stores.append((target, kind))
        elif isinstance(target, (ast.Tuple, ast.List)):
            for elt in target.elts:
                self._store(elt, kind)
        elif isinstance(target, ast.Starred):
            self._store(target.value, kind)

    def v_Assign(self, node: ast.Assign) -> None:
        value = node.value
        if type(value) not in _LEAVES:
            self.visit(value)
        targets = node.targets
        for t in targets:
            if type(t) is not _NAME:
                self.visit(t)
        pos = _end(node)
        stmt_of = self.m.stmt_of
        for t in targets:
            stmt_of[id(t)] = node
            if type(t) is _NAME:  # what _store (nothing) and bind_target do for a plain name
                self.bind(t.id, "assign", value, None, t, pos)
            else:
                self._store(t, "assign")
                self.bind_target(t, value, pos)

    def v_Delete(self, node: ast.Delete) -> None:
        for t in node.targets:
            self.visit(t)
            self._store(t, "del")

    def _annotations(self, exprs: list) -> None:
        """List the watched attributes of annotations (only they: the walk does not read types)."""
        self.m.watched_attrs.extend(annotation_attributes(exprs, self.annotation_attrs))

    def v_AnnAssign(self, node: ast.AnnAssign) -> None:
        if self.watch_annotations and self.scope.kind != "function":
            # a function's annotated assignments never evaluate their annotation, with a value or without
            # (PEP 526; ``x: undefined = 1`` in a def runs): only module and class level ones do
            self._annotations([node.annotation])
        if node.value is not None:
            self.visit(node.value)
            self.visit(node.target)
            self._store(node.target, "assign")
            self.bind_target(node.target, node.value, _end(node))

    def v_AugAssign(self, node: ast.AugAssign) -> None:
        self.visit(node.value)
        self.visit(node.target)
        self.m.stmt_of[id(node.target)] = node
        self._store(node.target, "aug")
        if isinstance(node.target, ast.Name):
            self.bind(node.target.id, "aug", None, None, node, _end(node))

    def v_NamedExpr(self, node: ast.NamedExpr) -> None:
        self.visit(node.value)
        self.bind_target(node.target, node.value, _end(node))

    def v_With(self, node) -> None:
        self.m.with_nodes.append(node)
        for item in node.items:
            self.visit(item.context_expr)
            if item.optional_vars is not None:
                self.visit(item.optional_vars)
                for n in _names_in(item.optional_vars):
                    self.bind(n, "other", None, None, item, _end(item.context_expr))
        self.body(node.body)

    v_AsyncWith = v_With

    def v_ExceptHandler(self, node: ast.ExceptHandler) -> None:
        if node.type is not None:
            self.visit(node.type)
        if node.name:
            self.bind(node.name, "other", None, None, node, _pos(node))
        self.body(node.body)

    def v_Try(self, node) -> None:
        self.body(node.body)
        for h in node.handlers:
            self.v_ExceptHandler(h)
        self.body(node.orelse)
        self.body(node.finalbody)

    v_TryStar = v_Try

    def _raising(self, nodes) -> None:
        saved = self.raising, self.cur
        self.raising = True
        self._refresh()
        self.visit_all(nodes)
        self.raising, self.cur = saved

    def v_Raise(self, node: ast.Raise) -> None:
        self._raising([node.exc, node.cause])

    def v_Return(self, node: ast.Return) -> None:
        value = node.value
        if value is not None:
            if type(value) not in _LEAVES:
                self.visit(value)
            if self.func is not None:
                self.func.returns.append(value)

    # -- control flow

    def _push_loop(self, node: ast.AST, kind: str) -> tuple:
        loop = self.loop_type(node, kind, self.loop, len(self.loops))
        self.m.loops.append(loop)
        self.m.ctx[id(node)] = self.cur
        if self.func is not None:
            self.func.loops.append(loop)
        if self.loop is not None:
            self.loop.children.append(loop)
        saved = (self.loops, self.loop, self.cur)
        self.loops = self.loops + (loop,)
        self.loop = loop
        self._refresh()
        return saved

    def _pop_loop(self, saved: tuple) -> None:
        self.loops, self.loop, self.cur = saved

    def v_For(self, node) -> None:
        self.visit(node.iter)
        self.bind_target(node.target, node.iter, _end(node.target), kind="for")
        saved = self._push_loop(node, "for")
        self.loop.iter_nodes.append((node.iter, self.scope))
        self.body(node.body)
        self._pop_loop(saved)
        self.body(node.orelse)

    v_AsyncFor = v_For

    def v_While(self, node: ast.While) -> None:
        saved = self._push_loop(node, "while")
        self.m.ctx[id(node.test)] = self.cur
        self.m.ifs.append(node)
        self.visit(node.test)
        self.body(node.body)
        self._pop_loop(saved)
        self.body(node.orelse)

    def v_If(self, node: ast.If) -> None:
        self.m.ifs.append(node)
        if type(node.test) not in _LEAVES:
            self.visit(node.test)
        saved_guards, saved_branches, saved_cur = self.guards, self.branches, self.cur
        self.guards = self.guards + ((node.test, len(self.loops)),)
        self.branches = saved_branches + ((id(node), 0),)
        self._refresh()
        self.body(node.body)
        self.guards = saved_guards
        if node.orelse:
            self.branches = saved_branches + ((id(node), 1),)
            self._refresh()
            self.body(node.orelse)
        self.branches, self.cur = saved_branches, saved_cur

    def v_IfExp(self, node: ast.IfExp) -> None:
        self.m.ctx[id(node)] = self.cur
        self.m.ifs.append(node)
        self.visit(node.test)
        self.visit(node.body)
        self.visit(node.orelse)

    def v_Assert(self, node: ast.Assert) -> None:
        self.m.ifs.append(node)
        self.visit(node.test)
        if node.msg is not None:
            self._raising([node.msg])

    def _comprehension(self, node, elts: list) -> None:
        gens = node.generators
        self.visit(gens[0].iter)
        saved = self._push_loop(node, "comprehension")
        for i, gen in enumerate(gens):
            if i:
                self.visit(gen.iter)
                self.loop.iter_nodes.append((gen.iter, self.scope))
            else:
                self.loop.iter_nodes.append((gen.iter, self.scope))
            self.bind_target(gen.target, gen.iter, _end(gen.target), kind="for")
            self.visit_all(gen.ifs)
        self.visit_all(elts)
        self._pop_loop(saved)

    def v_ListComp(self, node) -> None:
        self._comprehension(node, [node.elt])

    v_SetComp = v_ListComp
    v_GeneratorExp = v_ListComp

    def v_DictComp(self, node) -> None:
        self._comprehension(node, [node.key, node.value])

    # -- expressions of interest

    def v_Call(self, node: ast.Call) -> None:
        m = self.m
        m.ctx[id(node)] = self.cur
        m.calls.append(node)
        func = node.func
        t = type(func)
        last = func.attr if t is _ATTRIBUTE else (func.id if t is _NAME else "")
        bucket = m.calls_by_name.get(last)
        if bucket is None:
            m.calls_by_name[last] = [node]
        else:
            bucket.append(node)
        if last in self.watched or t is _CALL:
            m.watched_calls.append(node)
        if self.func is not None:
            self.func.calls.append(node)
        if self.loop is not None:
            self.loop.calls.append(node)
            m.loop_calls.append(node)
        if t is _ATTRIBUTE:  # v_Attribute, inlined
            m.attr_names.add(last)
            if last in self.watched_attrs:
                m.watched_attrs.append(func)
            value = func.value
            if type(value) not in _LEAVES:
                self.visit(value)
        elif t is not _NAME:
            self.visit(func)
        for a in node.args:
            if type(a) not in _LEAVES:
                self.visit(a)
        for kw in node.keywords:
            value = kw.value
            if type(value) not in _LEAVES:
                self.visit(value)

    def v_JoinedStr(self, node: ast.JoinedStr) -> None:
        self.m.ctx[id(node)] = self.cur
        self.m.joined_strs.append(node)
        for v in node.values:
            if type(v) is not _CONSTANT:
                self.visit(v)

    def v_BinOp(self, node: ast.BinOp) -> None:
        left, right = node.left, node.right
        if type(node.op) is ast.Mod and type(left) is _CONSTANT and isinstance(left.value, str):
            self.m.ctx[id(node)] = self.cur
            self.m.percent_formats.append(node)
        if type(left) not in _LEAVES:
            self.visit(left)
        if type(right) not in _LEAVES:
            self.visit(right)

    # Fast paths for the commonest nodes (ast.iter_child_nodes is slow).

    def v_Name(self, node: ast.Name) -> None:
        pass

    v_Constant = v_Name
    v_Pass = v_Name
    v_Break = v_Name
    v_Continue = v_Name

    def v_Attribute(self, node: ast.Attribute) -> None:
        self.m.attr_names.add(node.attr)
        if node.attr in self.watched_attrs:
            self.m.watched_attrs.append(node)
        value = node.value
        if type(value) not in _LEAVES:
            self.visit(value)

    def v_Expr(self, node: ast.Expr) -> None:
        value = node.value
        m = self.m
        m.expr_values.add(id(value))
        m.stmt_of[id(value)] = node
        if type(value) not in _LEAVES:
            self.visit(value)

    def v_Starred(self, node) -> None:
        if type(node.value) not in _LEAVES:
            self.visit(node.value)

    v_keyword = v_Starred
    v_Await = v_Starred

    def v_FormattedValue(self, node: ast.FormattedValue) -> None:
        self.visit(node.value)
        if node.format_spec is not None:
            self.visit(node.format_spec)

    def v_Subscript(self, node: ast.Subscript) -> None:
        if type(node.ctx) is ast.Load:
            if self.func is not None:
                self.m.ctx[id(node)] = self.cur
                self.func.subscripts.append(node)
            elif self.cur.loops:  # a script's loop at module level
                self.m.ctx[id(node)] = self.cur
                self.m.module_loop_subscripts.append(node)
        if type(node.value) not in _LEAVES:
            self.visit(node.value)
        if type(node.slice) not in _LEAVES:
            self.visit(node.slice)

    def v_Tuple(self, node) -> None:
        for elt in node.elts:
            if type(elt) not in _LEAVES:
                self.visit(elt)

    v_List = v_Tuple
    v_Set = v_Tuple

    def v_Compare(self, node: ast.Compare) -> None:
        if type(node.left) not in _LEAVES:
            self.visit(node.left)
        for c in node.comparators:
            if type(c) not in _LEAVES:
                self.visit(c)

    def v_BoolOp(self, node: ast.BoolOp) -> None:
        self.m.ctx[id(node)] = self.cur
        self.m.bool_nodes.append(node)
        for v in node.values:
            if type(v) not in _LEAVES:
                self.visit(v)

    def v_UnaryOp(self, node: ast.UnaryOp) -> None:
        if type(node.op) is ast.Not:
            self.m.ctx[id(node)] = self.cur
            self.m.bool_nodes.append(node)
        if type(node.operand) not in _LEAVES:
            self.visit(node.operand)

    def v_Dict(self, node: ast.Dict) -> None:
        for k in node.keys:
            if k is not None and type(k) not in _LEAVES:
                self.visit(k)
        for v in node.values:
            if type(v) not in _LEAVES:
                self.visit(v)

    def v_Slice(self, node: ast.Slice) -> None:
        for part in (node.lower, node.upper, node.step):
            if part is not None:
                self.visit(part)


# node type -> the _Builder method that visits it (``v_<TypeName>``), built once, not per module
_HANDLERS = {getattr(ast, name[2:]): getattr(_Builder, name) for name in dir(_Builder)
             if name.startswith("v_") and hasattr(ast, name[2:])}  # ast.TryStar is 3.11+
_NAME, _CONSTANT, _ATTRIBUTE, _CALL = ast.Name, ast.Constant, ast.Attribute, ast.Call
_LEAVES = frozenset({ast.Name, ast.Constant})  # what visit() returns at at once: its callers skip the call
