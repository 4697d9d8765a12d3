"""``jaxlint trace``: run a program as ``__main__`` under the hooks, then report.

The program's own stdout/stderr are left alone; the report goes to stderr
(and to ``--output FILE``). Its exit code becomes jaxlint's, an uncaught
exception prints its usual traceback, and ``sys.exit``, ``KeyboardInterrupt``
and running threads all still end with a report. So does ``os._exit``, which
never returns here: while the program runs it is replaced by a function that
writes the report first. Builtins the program deletes or replaces are put
back when it ends, since jaxlint's own code after the run needs them.
"""

from __future__ import annotations

import builtins
import functools
import operator
import os
import runpy
import sys
import threading
import traceback
from typing import Optional, Sequence

from . import frames
from .static_child import static_findings  # noqa: F401  (the report's cross-check; also run in a child)

EXIT_GATE = 3
_RUNPY = (os.path.abspath(runpy.__file__), "<frozen runpy>")
_MISSING = object()


def _exit_code(e: SystemExit) -> int:
    code = e.code
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


def _print_traceback(exc: BaseException) -> list:
    """Print the traceback as Python would, through ``sys.excepthook`` (the program's own, if it
    set one), without jaxlint's frames (the runner's, the forwarding wrapper's, the trace
    hooks'; those of ``runpy`` before the program's first); return its user sites."""
    frames.hide(exc, leading=_RUNPY)
    tb = exc.__traceback__
    try:
        sys.excepthook(type(exc), exc, tb)
    except Exception:  # a broken hook: Python then prints both, as here
        print("Error in sys.excepthook:", file=sys.stderr)
        traceback.print_exc()
        print("\nOriginal exception was:", file=sys.stderr)
        traceback.print_exception(type(exc), exc, tb)
    sites = []
    said = str(exc).strip().split("\n", 1)[0]
    what = type(exc).__name__ + (f": {said[:120]}" if said else "")
    for frame, line in traceback.walk_tb(tb):
        sites.append((frame.f_code.co_filename, line, what))
    return sites


def _run_script(script: str) -> None:
    """Run ``script`` as ``python script`` does: ``sys.argv[0]`` is what was typed (set by the
    caller), ``__file__`` and the code's file name are the typed path made absolute against the
    working directory without resolving links or ``..`` (as CPython does), ``__loader__`` a
    ``SourceFileLoader``. While it runs, it is ``sys.modules["__main__"]`` (as with ``runpy``)."""
    import importlib.machinery
    import io
    import types
    from pkgutil import read_code

    file = script if os.path.isabs(script) else os.path.join(os.getcwd(), script)
    with io.open_code(file) as f:
        code = read_code(f)  # a compiled .pyc, as Python accepts too
    if code is None:
        with io.open_code(file) as f:
            code = compile(f.read(), file, "exec", dont_inherit=True)
    main = types.ModuleType("__main__")
    main.__dict__.update(__file__=file, __cached__=None, __package__=None, __spec__=None,
                         __loader__=importlib.machinery.SourceFileLoader("__main__", file),
                         __builtins__=builtins)
    saved = sys.modules.get("__main__", _MISSING)
    sys.modules["__main__"] = main
    try:
        exec(code, main.__dict__)
    finally:
        if saved is _MISSING:
            sys.modules.pop("__main__", None)
        else:
            sys.modules["__main__"] = saved


def _join_threads() -> None:
    """Wait for the program's non-daemon threads, as the interpreter would before exiting."""
    me = threading.current_thread()
    for t in threading.enumerate():
        if t is not me and not t.daemon and t.is_alive():
            t.join()


def _restore_builtins(saved: dict) -> None:
    """Put back the builtins the program deleted or replaced (names it added stay).

    Uses no builtin name itself: it runs while they may be gone."""
    current = builtins.__dict__
    for name, value in saved.items():
        if current.get(name, _MISSING) is not value:
            current[name] = value


def _os_exit_hook(real_exit, on_exit, saved_builtins: dict):
    """What ``os._exit`` is while the program runs: ``on_exit(code)`` writes the report and
    returns jaxlint's exit code, then the real ``os._exit`` ends the process (threads are not
    waited for, buffers not flushed, as without jaxlint). Only in this process: a forked
    child (multiprocessing ends its workers with ``os._exit``) exits quietly."""
    pid = os.getpid()
    once = threading.Lock()  # a second thread's os._exit waits; the first one's exit ends the process

    @functools.wraps(real_exit)
    def os_exit(*args, **kwargs):
        if os.getpid() != pid:
            real_exit(*args, **kwargs)
        _restore_builtins(saved_builtins)
        try:
            code = operator.index(args[0] if args else kwargs["status"])
        except (TypeError, IndexError, KeyError):
            return real_exit(*args, **kwargs)  # raises the real one's own TypeError
        with once:
            try:
                code = on_exit(code)
            except Exception as e:
                print(f"jaxlint trace: no report ({type(e).__name__}: {e})", file=sys.stderr)
            finally:
                real_exit(code)

    return os_exit


def resolve_target(script: Optional[str], module: Optional[str]) -> tuple:
    """(user-code roots, the file run as __main__)."""
    if module is not None:
        import importlib.util

        spec = importlib.util.find_spec(module)
        if spec is None or spec.origin is None:
            raise FileNotFoundError(f"no module named {module!r}")
        origin = os.path.realpath(spec.origin)
        top = importlib.util.find_spec(module.split(".")[0])
        locations = list(getattr(top, "submodule_search_locations", None) or [])
        roots = [os.path.realpath(p) for p in locations] or [os.path.dirname(origin)]
        return roots, origin
    path = os.path.realpath(script)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"no such file: {script}")
    return [os.path.dirname(path)], path


def run(script: Optional[str], module: Optional[str], argv: Sequence[str], on_os_exit=None) -> tuple:
    """Run the program; return (exit code, collector, failure sites, user files for the static check).

    ``on_os_exit(code, collector, failure sites, user files)``, if given, is called when the
    program calls ``os._exit(code)``; it reports and returns the code to exit with.
    """
    from .collector import Collector
    from .userfiles import UserFiles

    saved_argv, saved_path0 = sys.argv[:], sys.path[0] if sys.path else None
    if module is not None:
        sys.path[0:1] = [os.getcwd()]  # as `python -m` does
    try:
        roots, main_file = resolve_target(script, module)
    except BaseException:
        if saved_path0 is not None:
            sys.path[0] = saved_path0
        raise
    collector = Collector(UserFiles(roots))
    failure_sites: list = []
    saved_builtins = dict(builtins.__dict__)
    real_exit = os._exit

    watch = JaxImportWatch(collector)

    def exit_report(code: int) -> int:
        watch.close()
        return on_os_exit(code, collector, [], _user_modules(collector.user_files, main_file))

    exit_hook = None if on_os_exit is None else _os_exit_hook(real_exit, exit_report, saved_builtins)
    watch.open()
    code = 0
    try:
        if exit_hook is not None:
            os._exit = exit_hook
        try:
            try:
                if module is not None:
                    sys.argv = [main_file, *argv]
                    runpy.run_module(module, run_name="__main__", alter_sys=True)
                else:
                    sys.argv = [script, *argv]  # as typed, as `python script` leaves it
                    sys.path[0] = os.path.dirname(main_file)  # links resolved, as Python does
                    _run_script(script)
            finally:  # before the `except` clauses below look up their names
                _restore_builtins(saved_builtins)
        except SystemExit as e:
            code = _exit_code(e)
        except KeyboardInterrupt as e:
            failure_sites = _print_traceback(e)
            code = 130
        except BaseException as e:  # the program's own failure: show it as Python would
            failure_sites = _print_traceback(e)
            code = 1
        try:
            _join_threads()
        except KeyboardInterrupt:
            code = code or 130
    finally:
        _restore_builtins(saved_builtins)  # a thread may have changed them too
        if exit_hook is not None and os._exit is exit_hook:
            os._exit = real_exit  # a replacement the program made itself is left alone
        watch.close()
        sys.argv = saved_argv
        if saved_path0 is not None and sys.path:
            sys.path[0] = saved_path0
    return code, collector, failure_sites, _user_modules(collector.user_files, main_file)


class JaxImportWatch:
    """Attach ``collector`` to the instrumentation when the program imports jax, not before.

    ``jaxlint trace`` must not import jax ahead of the program: JAX reads its import-time
    settings (``JAX_ENABLE_X64``, ``JAX_PLATFORMS`` ... from ``os.environ``) when ``jax`` is
    first imported, so a program that sets them and then imports jax would run with JAX's
    defaults under jaxlint and with its own settings without it. A finder first on
    ``sys.meta_path`` lets the real import of ``jax`` run and attaches right after the package's
    own code finished (whoever imported it: the program or a library). When jax is already
    imported (an in-process run in a session that has it) it attaches at once.
    """

    def __init__(self, collector):
        self.collector = collector
        self.attached = False
        self._finder = None

    def open(self) -> None:
        if "jax" in sys.modules and sys.modules["jax"] is not None:
            self._attach()
            return
        self._finder = _ImportFinder(self._attach)
        sys.meta_path.insert(0, self._finder)

    def _attach(self, importer=None) -> None:
        if self.attached:
            return
        try:
            from .hooks import INSTRUMENTATION

            INSTRUMENTATION.attach(self.collector)
            self.attached = True
            if importer is not None:  # where the program (or its library) imported jax
                self.collector.memory.jax_imported_at = self.collector.user_files.site(importer)
        except Exception as e:  # the program's `import jax` must not fail because of jaxlint
            self.collector.partial.append(f"not instrumented: {type(e).__name__}: {e}")

    def close(self) -> None:
        finder, self._finder = self._finder, None
        if finder is not None:
            finder.done = True
            try:
                sys.meta_path.remove(finder)
            except ValueError:
                pass
        if self.attached:
            from .hooks import INSTRUMENTATION

            self.attached = False
            INSTRUMENTATION.detach(self.collector)
        elif self.collector.t_end is None:
            import time

            self.collector.t_end = time.perf_counter()


class _ImportFinder:
    """On the first import of the top-level ``jax`` package, find it with the other finders and
    wrap its loader's ``exec_module`` so that ``then()`` runs once the package's code has run."""

    def __init__(self, then):
        self.then = then
        self.done = False

    def find_spec(self, name, path=None, target=None):
        if name != "jax" or self.done:
            return None
        self.done = True
        try:
            sys.meta_path.remove(self)
        except ValueError:
            pass
        import importlib.util

        spec = importlib.util.find_spec(name)
        loader = getattr(spec, "loader", None)
        real_exec = getattr(loader, "exec_module", None)
        if real_exec is None:
            return spec
        then = self.then

        def exec_module(module):
            real_exec(module)
            try:
                del loader.exec_module  # back to the class's own method for any later import
            except AttributeError:
                pass
            then(sys._getframe(1))

        loader.exec_module = exec_module
        return spec


def _user_modules(user_files, main_file: str) -> list:
    files = {main_file}
    for mod in list(sys.modules.values()):
        f = getattr(mod, "__file__", None)
        if f and f.endswith(".py") and user_files(f):
            files.add(os.path.realpath(f))
    return sorted(files)


class StaticCheck:
    """The static cross-check of ``files`` (the program's main file, known before it runs) started
    in a child process when the program starts; :meth:`findings` waits for it and checks in this
    process the files the run added (user modules imported) and any the child could not give."""

    def __init__(self, files: Sequence[str]):
        import subprocess

        self.files = sorted(set(files))
        self.proc = None
        try:
            self.proc = subprocess.Popen([sys.executable, "-m", "jaxlint.trace.static_child", *self.files],
                                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL,
                                         text=True)
        except OSError:  # no child: everything is checked at the end, as before
            self.proc = None

    def findings(self, files: Sequence[str], timeout: float = 120.0) -> list:
        from .static_child import decode

        done: list = []
        rest = sorted(set(files))
        if self.proc is not None:
            try:
                out, _ = self.proc.communicate(timeout=timeout)
                if self.proc.returncode == 0:
                    done = [decode(line) for line in out.splitlines() if line.strip()]
                    rest = [f for f in rest if f not in self.files]
            except Exception:  # a child that failed or hung: check here instead
                self.proc.kill()
                done = []
        if rest:
            done.extend(static_findings(rest))
        done = [f for f in done if f.path in set(files)]
        done.sort(key=lambda f: (f.path, f.line, f.col, f.code))
        return done

    def cancel(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()


def environment() -> dict:
    import jax

    try:
        backend = jax.default_backend()
    except Exception:
        backend = "?"
    return {"jax": jax.__version__, "backend": backend, "python": sys.version.split()[0]}


def gates(report: dict, max_compiles: Optional[int], max_transfers: Optional[int]) -> list:
    """Messages for every CI gate the run exceeded (paths as the report writes them); the
    compile budgets and ``--fail-on-recompile`` are in ``budget.evaluate``."""
    from .budget import Settings, evaluate

    return evaluate(report, Settings(max_compiles=max_compiles, max_transfers_per_line=max_transfers))[0]
