"""What the engine decides about a file from its text alone, before building its model.

Two questions, both answered without importing the model (this module is stdlib only, so the
flake8 plugin can ask them before it loads anything else of jaxlint):

* :func:`too_large`: a module over :data:`MAX_SOURCE_CHARS` characters is not analyzed: its
  syntax tree and model would need more memory than a linter may take (about 5 KB per line of
  ordinary code: a generated 200,000-line module took 1.06 GB). It is never a crash or an
  out-of-memory kill: ``jaxlint check`` names it on stderr (the exit code unaffected: generated
  code must not fail CI), the flake8 plugin says nothing, and with ``fail-on-oversize`` both report
  it as one JAX000 finding.
* :func:`mentions_jax`: whether the text contains ``jax``, ``flax`` or ``equinox`` at all. A
  module whose text does not cannot import JAX (an import names the module in the source; NFKC
  spellings of identifiers are normalized first), so only its imports from the project's own
  modules can make a rule fire (:meth:`~jaxlint.model.ModuleModel.uses_jax`): without a project
  path, or without the word ``import``, no rule can fire on it (:func:`may_use_jax`), and with
  them the engine asks the model about its module-level imports
  (:func:`~jaxlint.model.facts.model.imports_use_jax`) before building a model of it.
"""

from __future__ import annotations

from typing import Optional

# The largest module in jax 0.10.2 (lax.py) has 389,198 characters; the generated module of
# bench/bigfile.py needs about 230 MB at this size and 1.06 GB at 5 million characters.
MAX_SOURCE_CHARS = 1_000_000

_JAX_WORDS = ("jax", "flax", "equinox")  # the top-level packages ModuleModel.imports_jax looks for


def mentions_jax(text: str) -> bool:
    """Whether ``text`` contains ``jax``, ``flax`` or ``equinox`` (after NFKC normalization when
    it is not ASCII, as Python normalizes identifiers: ``import ｊａｘ`` imports jax). The words
    as written are looked for first: most modules with non-ASCII text (a docstring's ``—``) name
    JAX plainly, and normalizing costs more than the search."""
    if any(w in text for w in _JAX_WORDS):
        return True
    if text.isascii():
        return False
    import unicodedata  # here: most modules never get this far, and an editor's save pays ~1 ms to load it

    text = unicodedata.normalize("NFKC", text)
    return any(w in text for w in _JAX_WORDS)


def may_use_jax(text: str, project_path: Optional[str]) -> bool:
    """False when no rule can fire on a module with this source: it never mentions JAX, and it
    has no project imports to look up (no ``project_path``, or no ``import`` in it)."""
    if mentions_jax(text):
        return True
    return project_path is not None and "import" in text


class TooLarge:
    """Why a module over the size limit is not analyzed, as the code and message of the JAX000
    finding it becomes with ``fail-on-oversize`` (the engine keeps the message in
    ``FileResult.not_analyzed``; the flake8 plugin makes its own record)."""

    code = "JAX000"
    name = "parse-error"

    def __init__(self, chars: int):
        self.chars = chars
        # nothing was parsed, so not "could not parse" as the other JAX000s: jaxlint did not try
        self.message = (f"not analyzed: the module has {chars:,} characters, over jaxlint's limit of "
                        f"{MAX_SOURCE_CHARS:,} per file (the model of a module this large would take over "
                        "400 MB of memory); split it into smaller modules, or exclude it if it is generated")


def too_large(text: str) -> Optional[TooLarge]:
    """The JAX000 finding for a module over :data:`MAX_SOURCE_CHARS` characters, else None."""
    return TooLarge(len(text)) if len(text) > MAX_SOURCE_CHARS else None
