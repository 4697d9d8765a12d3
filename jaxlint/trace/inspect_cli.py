"""``jaxlint trace --inspect module:function --arg SPEC ...``: the command line of
:func:`jaxlint.trace.audit_fn.inspect` (no JAX needed to build the parser)."""

from __future__ import annotations

import os
import sys
from typing import Optional, Sequence

from .audit_fn import EXIT_GATE, EXIT_OK, EXIT_RAISED, EXIT_USAGE, TOP_LINES, Args, inspect, render
from .inspect_specs import SpecError, materialize, parse_argset, parse_spec, split_items

VALUED = ("--inspect", "--arg", "--args", "--static", "--top", "--max-equations")


def add_arguments(p) -> None:
    """``jaxlint trace``'s options for ``--inspect`` (no JAX needed)."""
    g = p.add_argument_group(
        "inspect one function without running the program",
        "jaxlint trace --inspect module:function --arg 'f32[32,784]' --arg 'i32[]' ... traces the function "
        "with jax.make_jaxpr (nothing executed or compiled) and reports its jaxpr facts")
    g.add_argument("--inspect", metavar="MODULE:FUNCTION",
                   help="the function: a module importable from the current folder (pkg.mod) or a file "
                        "(path/to/file.py), then : and the function's name (Class.method allowed)")
    g.add_argument("--arg", action="append", default=[], metavar="SPEC",
                   help="one argument of the (first) argument set, in order: f32[32,784], i32[], "
                        "f32[]{weak}, a Python literal (3, 0.5, 'relu'), a pytree of them ('[(f32[8,32], f32[32])]', "
                        "\"{'w': f32[8], 'b': f32[]}\"), or NAME=SPEC for a keyword")
    g.add_argument("--args", action="append", default=[], metavar="SPEC,SPEC,...",
                   help="one whole argument set, comma-separated (repeat it for several sets: the report "
                        "says how many distinct compilations they cause and why)")
    g.add_argument("--static", action="append", default=[], metavar="NAME[=VALUE]",
                   help="a static argument (static_argnames); with =VALUE (a Python literal) also its value "
                        "in every argument set")
    g.add_argument("--top", type=int, default=TOP_LINES, metavar="N", help="source lines shown (default 10)")
    g.add_argument("--max-equations", type=int, metavar="N",
                   help="exit 3 if the jaxpr has more than N equations (--max-compiles N: more than N "
                        "compilations over the argument sets)")
    g.add_argument("--x64", action="store_true", help="enable jax_enable_x64 before importing the module")


def _fail(message: str, code: int) -> int:
    print(f"jaxlint trace --inspect: {message}", file=sys.stderr)
    return code


def resolve(target: str):
    """The function named by ``module:function`` or ``path/file.py:function`` (the current
    folder on ``sys.path``, as ``python -m`` has it). Raises LookupError (the name is wrong) or
    whatever importing the module raises."""
    import importlib
    import importlib.util

    mod_name, sep, attr = target.rpartition(":")
    if not sep or not mod_name or not attr:
        raise LookupError(f"{target!r}: expected module:function (or path/to/file.py:function)")
    cwd = os.getcwd()
    if cwd not in sys.path:
        sys.path.insert(0, cwd)
    if mod_name.endswith(".py") or os.sep in mod_name or "/" in mod_name:
        path = os.path.abspath(mod_name)
        if not os.path.isfile(path):
            raise LookupError(f"no file {mod_name}")
        folder = os.path.dirname(path)
        if folder not in sys.path:
            sys.path.insert(0, folder)
        name = os.path.splitext(os.path.basename(path))[0]
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules.setdefault(name, module)
        spec.loader.exec_module(module)
    else:
        try:
            module = importlib.import_module(mod_name)
        except ModuleNotFoundError as e:
            if e.name and (mod_name == e.name or mod_name.startswith(e.name + ".")):
                raise LookupError(f"no module named {e.name!r} (from {cwd})") from None
            raise
    obj = module
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise LookupError(f"{mod_name} has no {attr!r}")
        obj = getattr(obj, part)
    if not callable(obj):
        raise LookupError(f"{target} is not callable")
    return obj


def main(args, script: Optional[str], rest: Sequence[str], missing_jax=lambda: None) -> int:
    """``jaxlint trace --inspect ...``: 0, 1 (the module or the function raised while imported
    or traced: one line), 2 (usage: a bad spec, an unknown module or function), 3 (a gate)."""
    if script is not None or rest or args.module:
        return _fail("give no script or -m with --inspect (the function is traced, not run)", EXIT_USAGE)
    if args.arg and args.args:
        return _fail("give one argument set with --arg ... or several with --args, not both", EXIT_USAGE)
    if args.html or args.chrome_trace:
        return _fail("--html and --chrome-trace are for runs, not --inspect", EXIT_USAGE)
    if getattr(args, "budget", None) or getattr(args, "fail_on_recompile", False) or getattr(
            args, "max_transfers_per_line", None) is not None:
        return _fail("--budget, --fail-on-recompile and --max-transfers-per-line are for runs; "
                     "with --inspect use --max-compiles or --max-equations", EXIT_USAGE)
    try:
        sets = [parse_argset(args.arg)] if args.arg or not args.args else []
        sets += [parse_argset(split_items(text)) for text in args.args]
        static_names, static_values = [], {}
        for text in args.static:
            name, eq, value = text.partition("=")
            name = name.strip()
            if not name.isidentifier():
                raise SpecError(f"--static {text!r}: expected NAME or NAME=VALUE")
            static_names.append(name)
            if eq:
                spec = parse_spec(value)
                if spec[0] != "value":
                    raise SpecError(f"--static {text!r}: a static value is a Python literal, not an array")
                static_values[name] = spec[1]
    except SpecError as e:
        return _fail(str(e), EXIT_USAGE)
    if missing_jax():  # jaxlint.trace.missing_jax, passed in (an import of the package would be a cycle)
        print(missing_jax(), file=sys.stderr)
        return EXIT_USAGE
    if args.x64:
        import jax

        jax.config.update("jax_enable_x64", True)
    try:
        fn = resolve(args.inspect)
    except LookupError as e:
        return _fail(str(e), EXIT_USAGE)
    except BaseException as e:  # the module itself failed to import
        if isinstance(e, KeyboardInterrupt):
            raise
        return _fail(f"importing {args.inspect.rpartition(':')[0]} raised {type(e).__name__}: {e}", EXIT_RAISED)
    try:
        built = []
        for specs, kw in sets:
            kwargs = {k: materialize(v) for k, v in kw.items()}
            for k, v in static_values.items():
                kwargs.setdefault(k, v)
            built.append(Args(*[materialize(s) for s in specs], **kwargs))
    except SpecError as e:
        return _fail(str(e), EXIT_USAGE)
    try:
        result = inspect(fn, argsets=built, static_argnames=tuple(static_names), top=args.top)
    except Exception as e:
        return _fail(f"{args.inspect} raised {type(e).__name__} while traced: {_one_line(e)}", EXIT_RAISED)
    d = result.as_dict()
    gates = []
    if args.max_equations is not None and result.equations > args.max_equations:
        gates.append(f"--max-equations {args.max_equations}: the jaxpr has {result.equations} equations")
    if args.max_compiles is not None and result.compilations > args.max_compiles:
        gates.append(f"--max-compiles {args.max_compiles}: {result.compilations} compilations over "
                     f"{len(built)} argument sets")
    d["gates"] = gates
    if args.format == "json":
        import json

        out = json.dumps(d, indent=2, default=str) + "\n"
    else:
        out = render(d) + "".join(f"GATE: {g}\n" for g in gates)
    sys.stdout.write(out)
    if args.output:
        try:
            with open(args.output, "w", encoding="utf-8") as fh:
                fh.write(out)
        except OSError as e:
            return _fail(f"cannot write {args.output}: {e}", EXIT_USAGE)
    return EXIT_GATE if gates else EXIT_OK


def _one_line(e: BaseException) -> str:
    text = " ".join(str(e).split())
    return text if len(text) <= 300 else text[:299] + "…"
