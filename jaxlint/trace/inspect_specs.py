"""Argument specs of ``jaxlint trace --inspect``: ``f32[32,784]``, ``i32[]``, ``f32[]{weak}``, Python
literals, and pytrees of them (``[(f32[8,32], f32[32])]``, ``{'w': f32[8], 'b': f32[]}``).

Pure text work: nothing here imports JAX until :func:`materialize` builds the arguments.
"""

from __future__ import annotations

import ast
import re
from typing import Any, Sequence

DTYPES = {
    "bool": "bool", "f16": "float16", "bf16": "bfloat16", "f32": "float32", "f64": "float64",
    "i8": "int8", "i16": "int16", "i32": "int32", "i64": "int64",
    "u8": "uint8", "u16": "uint16", "u32": "uint32", "u64": "uint64", "c64": "complex64", "c128": "complex128",
}
_NAMES = set(DTYPES) | set(DTYPES.values())
_SPEC = re.compile(r"^\s*([A-Za-z][A-Za-z0-9]*)\s*(?:\[([^\]]*)\])?\s*(\{weak\})?\s*$")
_ARRAY_AT = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)(\s*\[[^\]]*\])?(\s*\{weak\})?")


class SpecError(ValueError):
    """An argument spec that cannot be read (``f32[32,x]``, ``float7[3]``)."""


class ArraySpec:
    """One array leaf of a pytree spec (``f32[8,32]``): shape, dtype name, weak."""

    __slots__ = ("shape", "dtype", "weak")

    def __init__(self, shape: tuple, dtype: str, weak: bool):
        self.shape, self.dtype, self.weak = shape, dtype, weak

    def __eq__(self, other):
        return isinstance(other, ArraySpec) and (self.shape, self.dtype, self.weak) == (
            other.shape, other.dtype, other.weak)

    def __hash__(self):
        return hash((self.shape, self.dtype, self.weak))

    def __repr__(self) -> str:
        return f"ArraySpec({self.shape!r}, {self.dtype!r}, {self.weak!r})"


def _array(text: str) -> tuple:
    """``("array", shape, dtype name, weak)`` for one array spec; raises SpecError."""
    m = _SPEC.match(text)
    if not m or m.group(1) not in _NAMES:
        raise SpecError(f"cannot read argument {text.strip()!r}")
    name = DTYPES.get(m.group(1), m.group(1))
    dims = (m.group(2) or "").strip()
    try:
        shape = tuple(int(d) for d in dims.split(",") if d.strip()) if dims else ()
    except ValueError:
        raise SpecError(f"bad shape in {text.strip()!r}: dimensions are integers, as in f32[32,784]") from None
    if any(d < 0 for d in shape):
        raise SpecError(f"bad shape in {text.strip()!r}: negative dimension")
    return ("array", shape, name, bool(m.group(3)))


def parse_spec(text: str) -> tuple:
    """``("array", shape, dtype name, weak)`` for ``f32[32,784]``, ``i32[]``, ``f32[]{weak}``,
    ``bool`` (a scalar) or a full dtype name (``float32[8]``); ``("value", v)`` for a Python
    literal (``3``, ``2.5``, ``True``, ``'relu'``, ``(1, 2)``), which is passed as it is (a
    Python number traces as a weakly typed scalar); ``("tree", t)`` for a list, tuple or dict
    holding array specs (``[(f32[8,32], f32[32])]``): ``t`` is that structure with an
    :class:`ArraySpec` for each array. Raises :class:`SpecError`."""
    m = _SPEC.match(text)
    if m and m.group(1) in _NAMES:
        return _array(text)
    try:
        return ("value", ast.literal_eval(text.strip()))
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        pass
    tree = _tree(text)
    if tree is not None:
        return ("tree", tree)
    raise SpecError(f"cannot read argument {text.strip()!r}: give a dtype and shape such as f32[32,784], "
                    f"i32[] or f32[]{{weak}} (dtypes: {', '.join(DTYPES)}), a Python literal, or a list, "
                    "tuple or dict of them such as [(f32[8,32], f32[32])]")


def _tree(text: str):
    """The pytree of ``text`` with an :class:`ArraySpec` per array spec, or None when ``text`` is
    not a list, tuple or dict of specs and literals. Each array spec outside quotes becomes a
    placeholder name, and the rest is read as a Python literal by its syntax tree."""
    arrays: list = []
    out, i, quote = [], 0, None
    while i < len(text):
        ch = text[i]
        if quote:
            out.append(ch)
            if ch == "\\" and i + 1 < len(text):
                out.append(text[i + 1])
                i += 2
                continue
            if ch == quote:
                quote = None
            i += 1
            continue
        if ch in "'\"":
            quote = ch
            out.append(ch)
            i += 1
            continue
        m = _ARRAY_AT.match(text, i)
        if m and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] in "_.")):
            if m.group(1) in _NAMES:
                arrays.append(_array(m.group(0)))
                out.append(f"__spec_{len(arrays) - 1}__")
                i = m.end()
                continue
            out.append(m.group(1))
            i += len(m.group(1))
            continue
        out.append(ch)
        i += 1
    if not arrays:
        return None
    try:
        node = ast.parse("".join(out).strip(), mode="eval").body
    except SyntaxError:
        raise SpecError(f"cannot read argument {text.strip()!r}: unbalanced brackets or a stray character") from None
    if not isinstance(node, (ast.List, ast.Tuple, ast.Dict)):
        return None
    return _build(node, arrays, text)


def _build(node, arrays: list, text: str):
    if isinstance(node, ast.Name) and node.id.startswith("__spec_"):
        _, shape, dtype, weak = arrays[int(node.id[7:-2])]
        return ArraySpec(shape, dtype, weak)
    if isinstance(node, ast.List):
        return [_build(e, arrays, text) for e in node.elts]
    if isinstance(node, ast.Tuple):
        return tuple(_build(e, arrays, text) for e in node.elts)
    if isinstance(node, ast.Dict):
        if any(k is None for k in node.keys):
            raise SpecError(f"cannot read argument {text.strip()!r}: ** in a dict")
        return {_literal(k, text): _build(v, arrays, text) for k, v in zip(node.keys, node.values)}
    return _literal(node, text)


def _literal(node, text: str):
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError):
        raise SpecError(f"cannot read argument {text.strip()!r}: {ast.unparse(node)!r} is neither a spec "
                        "nor a Python literal") from None


def split_items(text: str) -> list:
    """``'f32[32,8], n=3'`` -> ``['f32[32,8]', 'n=3']``: commas outside brackets and quotes."""
    items, depth, quote, start = [], 0, None, 0
    for i, ch in enumerate(text):
        if quote:
            if ch == quote:
                quote = None
        elif ch in "'\"":
            quote = ch
        elif ch in "[({":
            depth += 1
        elif ch in "])}":
            depth -= 1
        elif ch == "," and depth == 0:
            items.append(text[start:i])
            start = i + 1
    items.append(text[start:])
    items = [t.strip() for t in items]
    if items == [""]:
        return []
    if any(not t for t in items):
        raise SpecError(f"empty item in {text!r}")
    return items


_KEYWORD = re.compile(r"^\s*([A-Za-z_]\w*)\s*=(?!=)(.*)$", re.S)


def parse_item(text: str) -> tuple:
    """``(keyword or None, spec)`` for ``f32[8]`` or ``n=3`` / ``x=f32[8]``."""
    m = _KEYWORD.match(text)
    if m:
        return m.group(1), parse_spec(m.group(2))
    return None, parse_spec(text)


def parse_argset(items: Sequence[str]) -> tuple:
    """``(positional specs, {keyword: spec})`` from the items of one argument set."""
    args, kwargs = [], {}
    for text in items:
        key, spec = parse_item(text)
        if key is None:
            if kwargs:
                raise SpecError(f"positional argument {text!r} after a keyword argument")
            args.append(spec)
        elif key in kwargs:
            raise SpecError(f"keyword {key!r} given twice")
        else:
            kwargs[key] = spec
    return args, kwargs


def materialize(spec: tuple) -> Any:
    """The object passed to the function for a parsed spec: a ``jax.ShapeDtypeStruct`` (via the
    adapter layer), the Python value, or the pytree with a ``ShapeDtypeStruct`` per array."""
    if spec[0] == "value":
        return spec[1]
    if spec[0] == "tree":
        return _materialize_tree(spec[1])
    _, shape, dtype, weak = spec
    return _struct(shape, dtype, weak)


def _struct(shape: tuple, dtype: str, weak: bool) -> Any:
    from .adapters.base import shape_dtype_struct

    out = shape_dtype_struct(shape, dtype, weak)
    if out is None:
        raise SpecError(f"{dtype}[{','.join(map(str, shape))}]{{weak}}: this JAX has no weakly typed "
                        "ShapeDtypeStruct and no Python scalar has that type")
    return out


def _materialize_tree(t: Any) -> Any:
    if isinstance(t, ArraySpec):
        return _struct(t.shape, t.dtype, t.weak)
    if isinstance(t, list):
        return [_materialize_tree(x) for x in t]
    if isinstance(t, tuple):
        return tuple(_materialize_tree(x) for x in t)
    if isinstance(t, dict):
        return {k: _materialize_tree(v) for k, v in t.items()}
    return t
