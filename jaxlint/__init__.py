"""jaxlint: finds the code that wastes accelerator time in JAX programs."""

__version__ = "0.1.0"
