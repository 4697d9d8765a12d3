"""Put first on a test's child processes' PYTHONPATH by bench/trace_tpu_tests.py: each child that
imports jax appends one line to $JAXLINT_CHILD_LOG then ("started") and one at its exit: the test
it ran for, the backend it used (or "none" when its backend never started) and its command line. Any other sitecustomize
found further along sys.path still runs."""
import atexit
import os
import sys


def _log(backend=None):
    path, test = os.environ.get("JAXLINT_CHILD_LOG"), os.environ.get("JAXLINT_TEST_ID", "?")
    if not path or "jax" not in sys.modules or str(os.getpid()) == os.environ.get("JAXLINT_PYTEST_PID"):
        return  # the pytest process itself is not a child
    if backend is not None:
        return _write(path, test, backend)
    backend = "none"
    try:
        from jax._src import xla_bridge

        if xla_bridge.backends_are_initialized():
            import jax

            backend = jax.default_backend()
    except Exception as e:
        backend = f"? ({type(e).__name__})"
    _write(path, test, backend)


def _write(path, test, backend):
    try:
        with open(path, "a") as fh:
            fh.write(f"{test}\t{backend}\t{' '.join(sys.argv)[:200]}\n")
    except OSError:
        pass


class _AfterJax:
    """Registers the exit hook once jax is imported: atexit runs hooks last-in first-out, so it
    then runs before jax's own clean-up, which forgets the backends."""

    busy = False

    def find_spec(self, name, path=None, target=None):
        if name != "jax" or self.busy:
            return None
        import importlib.util

        self.busy = True  # a find_spec alone (jaxlint's "is jax installed?") executes nothing
        try:
            spec = importlib.util.find_spec(name)
        finally:
            self.busy = False
        real = getattr(spec.loader, "exec_module", None) if spec is not None else None
        if real is not None:
            finder = self

            def exec_module(module):
                real(module)
                if finder in sys.meta_path:
                    sys.meta_path.remove(finder)
                    _log("started")  # a child that ends with os._exit never runs its exit hooks
                    atexit.register(_log)

            spec.loader.exec_module = exec_module
        return spec


sys.meta_path.insert(0, _AfterJax())

_here = os.path.dirname(os.path.abspath(__file__))
for _p in sys.path:
    _f = os.path.join(_p, "sitecustomize.py")
    if _p and os.path.abspath(_p) != _here and os.path.isfile(_f):
        exec(compile(open(_f).read(), _f, "exec"), {"__name__": "sitecustomize", "__file__": _f})
        break
