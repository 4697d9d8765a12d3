"""The repository's import graph, and modules nothing in it imports.

:func:`_import_graph` reads, for each ``.py``/``.ipynb`` file of a repository listing, which files its
import statements may reach (one-name imports: a file of that name beside the importer or in a folder
above it, as ``sys.path`` has the script's folder; dotted imports: every file whose path ends so;
relative imports, ``from .m import *`` included: the file they name). :mod:`.unreferenced` asks it for
the programs that may hold a class's instance and for :func:`unimported`.
"""

from __future__ import annotations

import ast
import os
import re

# ``from .ppo import \`` continued on the next line, and a parenthesized list over several lines, count
# (fresh Q's minimax: ``from .ppo import \`` + ``PPOAgent`` read as no import left ppo.py unimported)
_IMPORT_LINE = re.compile(rb'\n[ \t]*"?[ \t]*(?:from[ \t]+(\.*)([\w.]*)[ \t]+import[ \t]+(\([^)]*\)|(?:[\w., \t*]|\\\r?\n)+)'
                          rb'|import[ \t]+((?:[\w., \t]|\\\r?\n)+))')
# [(a listing, (its files' imports, their importers))]: the import graph, once per listing, for the last few
# repositories (a check of several repositories goes back and forth between them)
_GRAPHS: list = []
_KEEP = 8
_DEFINITIONS = (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Assign,
                ast.AnnAssign)


def unimported(m) -> bool:
    """Whether no file of the repository imports the module (no import statement reaches it, no
    packaging file names it), the module runs nothing of its own as a script (only imports, definitions
    and assignments at the top level), and another module of its folder (or the folder's package) is
    imported by another file: the folder is part of a program that leaves this module out, so nothing
    in it runs, whatever other files spell its functions' names (fresh W, X, Y: removed APIs, key reuse
    and a donation in such modules, judged FALSE). A folder of stand-alone files, none imported (a
    folder of examples), says nothing."""
    stem = os.path.splitext(os.path.basename(m.path))[0]
    if stem == "__init__" or not stem.isidentifier() or not all(
            isinstance(st, _DEFINITIONS) or isinstance(st, ast.Expr) and isinstance(st.value, ast.Constant)
            for st in m.tree.body):
        return False  # a package's own module, or one that runs code of its own as a script
    files = m.project.repository_files(m.path)
    if files is None:
        return False
    own = os.path.abspath(m.path)
    _, importers = _import_graph(files)
    if importers.get(own, set()) - {own}:
        return False
    word = re.compile(rb"(?<![\w])" + re.escape(stem.encode()) + rb"(?![\w])")
    if any(not p.endswith((".py", ".ipynb")) and word.search(data) for p, data in files):
        return False  # pyproject.toml / setup.cfg: an entry point may name it
    folder = os.path.dirname(own)
    return any(os.path.dirname(p) == folder and by - {own, p} for p, by in importers.items() if p != own)


def _import_graph(files) -> tuple:
    """``(imports, importers)``: for each ``.py``/``.ipynb`` file of the listing, the files its imports
    may reach, and the reverse."""
    for held, graph in _GRAPHS:
        if held is files:
            return graph
    stems = frozenset(os.path.basename(os.path.dirname(p)) if os.path.basename(p) == "__init__.py" else
                      os.path.splitext(os.path.basename(p))[0] for p, _ in files if p.endswith(".py"))
    specs = {path: _import_specs(path, data, stems) for path, data in files if path.endswith((".py", ".ipynb"))}
    by_suffix: dict = {}
    for path in specs:
        for suffix in _suffixes(path):
            by_suffix.setdefault(suffix, []).append(path)
    imports = {path: {e for e in exact if e in specs}.union(*(by_suffix.get(d, ()) for d in dotted))
               for path, (exact, dotted) in specs.items()}
    importers: dict = {}
    for path, targets in imports.items():
        for target in targets:
            importers.setdefault(target, set()).add(path)
    _GRAPHS[:] = [(files, (imports, importers))] + _GRAPHS[:_KEEP - 1]
    return imports, importers


def _closure(start: set, edges: dict) -> set:
    seen, todo = set(start), list(start)
    while todo:
        for nxt in edges.get(todo.pop(), ()):
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return seen


def _suffixes(path: str) -> list:
    """The dotted-import spellings that may reach the file ``path`` (``pkg/models.py``: ``pkg/models``
    and longer; a package's ``__init__.py``: its folder's)."""
    parts = os.path.splitext(os.path.abspath(path))[0].split(os.sep)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ["/".join(parts[-k:]) for k in range(2, len(parts))]


def _import_specs(path: str, data: bytes, stems: frozenset) -> tuple:
    """What the file's imports may reach: exact file paths (one-name and relative imports) and
    dotted spellings (``a/b`` for ``import a.b``). ``stems``: the names of the listing's modules and
    packages; an absolute import whose last name is none of them (``import numpy``) reaches nothing."""
    folder = os.path.dirname(os.path.abspath(path))
    exact, dotted = set(), set()
    for dots, module, names, plain in _IMPORT_LINE.findall(b"\n" + data):
        if plain:
            modules = [m.strip() for m in plain.decode().replace("\\\n", " ").replace("\\\r\n", " ").split(",")]
        else:
            base = module.decode()
            subs = [n for n in re.findall(r"\w+", names.decode()) if n != "as"]
            modules = [base] + [f"{base}.{n}" if base else n for n in subs]
            if dots:
                up = folder
                for _ in range(len(dots) - 1):
                    up = os.path.dirname(up)
                for mod in modules:
                    exact.update(_files_at(os.path.join(up, *mod.split("."))) if mod else ())
                continue
        for mod in modules:
            mod = mod.split(" as ")[0].strip()
            if mod.rsplit(".", 1)[-1] not in stems:
                continue
            if "." in mod:
                dotted.add(mod.replace(".", "/"))
            elif mod:
                up = folder
                while True:
                    exact.update(_files_at(os.path.join(up, mod)))
                    parent = os.path.dirname(up)
                    if parent == up:
                        break
                    up = parent
    return exact, dotted


def _files_at(stem: str) -> tuple:
    return stem + ".py", os.path.join(stem, "__init__.py")
