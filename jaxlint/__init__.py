"""jaxlint: finds the code that wastes accelerator time in JAX programs."""

__version__ = "0.1.0"


def load_ipython_extension(ip):
    """``%load_ext jaxlint``: check each cell as it runs, and the ``%%jaxlint_trace`` cell magic
    (jaxlint/ipython.py, imported only now: ``import jaxlint`` stays free of IPython and JAX)."""
    from .ipython import load_ipython_extension as load

    load(ip)


def unload_ipython_extension(ip):
    from .ipython import unload_ipython_extension as unload

    unload(ip)
