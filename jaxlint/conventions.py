"""Conventions: every decision jaxlint still makes from a name the user chose, in one place.

jaxlint decides from facts where it can: data flow, the call graph, and JAX's API semantics. A
few questions have no fact to decide them within one module (is the method ``step`` of an object
from another library called once per environment step? does the function ``main`` run once per
process?), and there a name is the best evidence left. Each such name list is one
:class:`Convention` here, with what it decides, why a name is evidence, and its measured effect
on the review sets (``bench/conventions.py`` measures it: the findings that change on the two
real-code review sets when the convention is emptied).

A project that names things its own way changes them in ``pyproject.toml``::

    [tool.jaxlint.conventions]
    extend-step-methods = ["advance", "tick"]   # added to the defaults
    counter-names = ["step", "it"]              # replaces the defaults

Model code asks :func:`active` (set once per run from the configuration by the engine); a name
that decides a finding is recorded in the finding's evidence (``conventions`` in ``--format
json``).
"""

from __future__ import annotations

from fnmatch import fnmatchcase
from typing import Iterable, Optional

# How a convention's words match a name (the name lower-cased; ``parts`` are its words between
# underscores, with leading underscores dropped: ``_train_step`` -> ``train``, ``step``).
EXACT = "exact"  # the whole name is a word: ``sample``
LAST_PART = "last-part"  # the last part of the name is a word: ``global_step``, ``num_updates``
FIRST_PART = "first-part"  # the first part is a word (or the whole name): ``load_params``, ``init``
AFFIX = "affix"  # the name is a word, starts with ``word_`` or ends with ``_word``: ``train_step``, ``step_env``
SUBSTRING = "substring"  # a word occurs anywhere: ``run_example``, ``my_benchmark``
SUFFIX = "suffix"  # the name ends with a word (no underscore needed): ``param_ref``, ``refs``
PREFIX = "prefix"  # the name starts with a word (no underscore needed): ``checkpoint``, ``verify_grads``
PATH = "path"  # a file's path: ``dir/**`` a folder anywhere above it, ``dir/*`` its folder, else a pattern of its name


class Convention:
    """One name list: ``key`` (its name in [tool.jaxlint.conventions]), ``words`` (the defaults),
    ``how`` (EXACT, LAST_PART, FIRST_PART, AFFIX, SUBSTRING or SUFFIX), ``decides`` (what a match
    decides, and where), ``rationale`` (why a name is evidence where no fact is) and ``measured``
    (its effect on the review sets when emptied, from bench/conventions.py). (A plain class: the
    checking path does not load ``dataclasses``.)"""

    __slots__ = ("key", "words", "how", "decides", "rationale", "measured")

    def __init__(self, key: str, words: tuple, how: str, decides: str, rationale: str, measured: str):
        self.key = key
        self.words = words
        self.how = how
        self.decides = decides
        self.rationale = rationale
        self.measured = measured

    def matches(self, name: str, words: Optional[frozenset] = None) -> bool:
        words = self.words if words is None else words
        if not name:
            return False
        low = name.lower()
        if self.how == PATH:
            parts = low.replace("\\", "/").split("/")
            return any(w[:-3] in parts[:-1] if w.endswith("/**") else
                       fnmatchcase("/".join(parts[-(w.count("/") + 1):]), w) for w in words)
        if self.how == SUBSTRING:
            return any(w in low for w in words)
        bare = low.lstrip("_")
        if self.how == SUFFIX:
            return low.endswith(tuple(words)) if words else False
        if self.how == PREFIX:
            return bare.startswith(tuple(words)) if words else False
        if low in words or bare in words:
            return True
        if self.how == EXACT:
            return False
        parts = bare.split("_")
        if self.how == LAST_PART:
            return parts[-1] in words
        if self.how == FIRST_PART:
            return parts[0] in words
        return parts[0] in words or parts[-1] in words  # AFFIX


CONVENTIONS = (
    Convention(
        "counter-names", ("step", "steps", "iter", "iters", "iteration", "iterations", "epoch", "epochs", "update",
                          "updates"), LAST_PART,
        "periodicity: an argument that counts steps when it is not a counter of the loop itself (``state.step`` "
        "returned by the jitted step, ``self.global_step``), so that ``if log_now(state.step, n):`` is read as a "
        "schedule test like ``if log_now(step, n):``",
        "a device-side counter advances inside the compiled step, where the loop's own statements show no "
        "``+= 1``; what it counts is said only by its name",
        "emptied: no default finding changes on either review set (their loops count with range, "
        "enumerate, zip(range(...)) or += 1, which are facts); measured 2026-12-02 by "
        "bench/conventions.py"),
    Convention(
        "step-methods", ("step", "update", "act", "__call__", "sample", "insert", "forward"), EXACT,
        "repetition: a function or method of this name runs once per step, so a jit wrapper or a constant key "
        "made in it is made every step (JAX102, JAX502, JAX503), when this module shows no call of it (calls it "
        "can see decide: made once from code that runs once, it runs once)",
        "an environment's or agent's ``step``/``act`` is called by a loop in another package (an RL library, a "
        "serving loop) that the module does not contain",
        "emptied: -1 default finding (dev, held-out half); renaming every identifier changes none (the "
        "project's call graph decides it then); measured 2026-12-02 (second stop) by bench/conventions.py"),
    Convention(
        "step-affixes", ("step",), AFFIX,
        "repetition: as step-methods, for names that start or end with the word (``train_step``, ``step_env``)",
        "``*_step`` is how JAX code names the function a training or environment loop calls every iteration",
        "emptied: no default finding changes (it decided 7 in review2's held-out half before scan bodies and "
        "the project's call graph were facts); measured 2026-12-02 (second stop) by bench/conventions.py"),
    Convention(
        "step-params", ("step", "global_step", "step_num", "step_number", "cur_step", "current_step"), EXACT,
        "repetition: a function with a parameter of this name that it does not call is called at the steps of a "
        "loop (JAX102, JAX503), when nothing else says how often it runs",
        "a function handed the current step is called with each step, in a loop the module may not show",
        "emptied: no default finding changes (it decided 2 in dev's held-out half before the project's call "
        "graph followed methods and namespace packages); measured 2026-12-02 (second stop) by "
        "bench/conventions.py"),
    Convention(
        "setup-functions", ("init", "initialize", "initialise", "setup", "build", "create", "make", "load",
                            "restore", "prepare", "configure", "quantize", "convert", "export", "save", "train",
                            "main"), FIRST_PART,
        "repetition: a function whose name is or starts with one of these words (``load_params``, ``train``) "
        "runs once per program or per run, when no call in the module shows it repeating; JAX102 is then "
        "opt-in (--pedantic) instead of default, and keys made there are set-up keys (JAX502, JAX503)",
        "entry points and set-up are called from outside the module (a launcher, a config system) or once "
        "from ``main``; evidence of repetition (a call in a loop) always wins over the name",
        "emptied: no default finding changes (JAX102 findings move between default and --pedantic only "
        "through the call graph); measured 2026-12-02 by bench/conventions.py"),
    Convention(
        "setup-exact", ("run", "fit"), EXACT,
        "repetition: as setup-functions, for these whole names only (``run_episode`` and ``fit_batch`` repeat)",
        "``run``/``fit`` name a whole run; with a suffix they name a part of one",
        "emptied: no default finding changes; measured 2026-12-02 by bench/conventions.py"),
    Convention(
        "entry-points", ("main", "_main"), EXACT,
        "repetition: a function of this name (and what is nested in it) runs once per process (JAX102, JAX503)",
        "the program's entry point is called by ``if __name__ == '__main__'`` or a launcher",
        "emptied: no default finding changes; measured 2026-12-02 by bench/conventions.py"),
    Convention(
        "demo-functions", ("example", "benchmark"), SUBSTRING,
        "repetition: a function whose name contains one of these runs once, as a demo or a benchmark (JAX102)",
        "docs examples and benchmarks build their wrappers once per run; compiling per call is their point",
        "emptied: no default finding changes; measured 2026-12-02 by bench/conventions.py"),
    Convention(
        "benchmark-names", ("measure", "benchmark", "bench", "timeit", "time_fn", "profile", "autotune"), SUBSTRING,
        "timing: a loop that calls a helper whose name contains one of these in its iterations (not under a "
        "periodic `if`, and not a function of the module that reads no clock: `measure_current_performance` "
        "evaluating accuracy every 1,000 steps), or that runs in a function so named, measures time: blocking "
        "every iteration is the point (JAX202), and a compile per configuration may be (JAX101, JAX503 opt-in)",
        "timing helpers of other libraries and projects (``benchmark(fn)``, ``profile_step``) do not show that "
        "they read the clock; a function named for benchmarking says it is one",
        "emptied: no default finding changes on either review set (issue 37 moved it here from a table in "
        "names.py and narrowed benchmarks to loops that time their own iterations); measured 2026-12-05 by "
        "bench/conventions.py"),
    Convention(
        "check-functions", ("check", "verify"), PREFIX,
        "transfers: asserts in a function whose name starts with this (``check_grads``) are cross-checks that "
        "must see the values (JAX201 opt-in)",
        "a verification helper fetches to compare; its loop is a test's loop, not a training loop",
        "emptied: +1 default finding (dev, worked half: an assert in a `check_*` notebook helper); "
        "measured 2026-12-02 by bench/conventions.py"),
    Convention(
        "check-calls", ("assert",), PREFIX,
        "stale closures: a call of a method or module function whose name starts with this inside a compiled "
        "function (``self.assertTrue(...)``, ``np.testing.assert_allclose(...)``, ``chex.assert_shape(...)``) "
        "is a check made while tracing, not a value the compiled program keeps (JAX603)",
        "unittest's, NumPy's testing and chex's assertions are known by these names; a check reads a global "
        "at trace time by design",
        "emptied: no default finding changes on dev, review2, review3 or the fresh sets; +1 on the pinned jax "
        "(jax/_src/test_util.py, a check inside a compiled test helper); measured 2026-12-05"),
    Convention(
        "host-consumer-methods", ("step", "decode", "decode_batch", "batch_decode", "apply_action", "send",
                                  "sendall"), EXACT,
        "transfers: a device value handed to a method of this name on an object the module cannot type is "
        "needed on the host (an environment's ``step``, a tokenizer's ``decode``), so the sync is inherent "
        "(JAX201)",
        "host environments and tokenizers are classes of other libraries whose types a single module does not "
        "show",
        "emptied: +1 default finding (review2, held-out half; 3 before objects made by gym/envpool were "
        "known by their type); measured 2026-12-02 (second stop) by bench/conventions.py"),
    Convention(
        "pacing-names", ("render", "imshow", "show", "display", "show_image", "show_images", "show_video",
                         "show_videos", "save_svg", "display_svg", "clear_output", "savefig"), EXACT,
        "transfers: a loop that calls one of these is paced by the host (rendering, plotting, showing), so a "
        "sync per iteration costs nothing that matters (JAX201, JAX202)",
        "rendering and plotting come from many libraries (gym, pygame, project helpers) the model does not "
        "resolve",
        "emptied: +7 default findings (dev, worked half: evojax notebooks and a script that render every "
        "step); measured 2026-12-02 by bench/conventions.py"),
    Convention(
        "logger-receivers", ("log",), SUBSTRING,
        "transfers: ``X.info/warning/...(...)`` on a receiver whose last name contains this (``self.logger``, "
        "``log``) prints what it is given, a fetch of a JAX value (JAX201)",
        "logging libraries differ (absl, loguru, project loggers); their receivers are named for logging",
        "emptied: no default finding changes (loggers bound to logging.getLogger() are known by their "
        "binding); measured 2026-12-02 by bench/conventions.py"),
    Convention(
        "optimizer-receivers", ("opt", "tx", "solver"), SUBSTRING,
        "work: ``X.update(...)`` on a receiver whose last name contains this advances an optimizer: a compiled "
        "function that calls it is one training step with a device loop inside, not a whole program",
        "optax and jaxopt objects are built from factories whose results the model does not type",
        "emptied: no default finding changes; measured 2026-12-02 by bench/conventions.py"),
    Convention(
        "ref-names", ("ref", "refs"), SUFFIX,
        "mutation: a receiver whose name ends with this is a Pallas or state ref, mutable, so ``x_ref[i] = v`` "
        "and ``x_ref.at[i].set(v)`` are writes, not pitfalls (JAX401, JAX403)",
        "refs are kernel parameters typed only by Pallas at trace time",
        "emptied: no default finding changes (pallas_call kernels' parameters are refs by fact); "
        "measured 2026-12-02 by bench/conventions.py"),
    Convention(
        "dtype-params", ("dtype",), LAST_PART,
        "staging: a parameter of a traced function named like a dtype (``dtype``, ``param_dtype``) holds a "
        "Python value, not a tracer (JAX30x)",
        "dtypes are passed as Python objects; nothing in a signature without annotations says so",
        "emptied: no default finding changes; measured 2026-12-02 by bench/conventions.py"),
)

CONVENTIONS += (
    Convention(
        "test-files", ("tests/**", "test/*", "test_*.py", "*_test.py", "tests.py", "conftest.py"), PATH,
        "test code: a module whose path matches (a file under a ``tests/`` folder or directly in a ``test/`` one, ``test_*.py``, "
        "``*_test.py``, ``tests.py``, ``conftest.py``) is test code, where syncs, asserts and key reuse are "
        "checks, and its findings are opt-in (JAX201, JAX202, JAX502, ...). A notebook is never a test module "
        "(test runners do not collect notebooks).",
        "pytest and unittest find tests by these file and folder names; nothing in a test module's code says "
        "it runs under a test runner",
        "emptied: +24 default findings on dev, none on review2 or review3, +3 on fresh set A and +7 on fresh set "
        "B, every one in a test file (maxtext tests/, neuralgcm *_test.py, QDax tests/); a notebook under tests/ "
        "is no longer test code, which adds 2 findings on fresh set A; measured 2026-12-05"),
)

BY_KEY = {c.key: c for c in CONVENTIONS}


class Conventions:
    """The conventions in force: the defaults with a project's changes."""

    def __init__(self, words: Optional[dict] = None):
        self.words = {c.key: frozenset(c.words) for c in CONVENTIONS}
        if words:
            self.words.update({k: frozenset(v) for k, v in words.items()})
        self._memo: dict = {}

    def matches(self, key: str, name: str) -> bool:
        memo_key = (key, name)
        hit = self._memo.get(memo_key)
        if hit is None:
            hit = self._memo[memo_key] = BY_KEY[key].matches(name, self.words[key])
        return hit

    def changed(self) -> dict:
        """The keys whose words differ from the defaults (for the result cache's key)."""
        return {k: sorted(v) for k, v in self.words.items() if v != frozenset(BY_KEY[k].words)}


_DEFAULT = Conventions()
_active = _DEFAULT


def active() -> Conventions:
    return _active


def configure(words: Optional[dict]) -> Conventions:
    """Put the conventions of a configuration in force (None or {}: the defaults)."""
    global _active
    _active = Conventions(words) if words else _DEFAULT
    return _active


def parse(section, source: str, error) -> dict:
    """``[tool.jaxlint.conventions]``: ``KEY = [...]`` replaces a convention's words and
    ``extend-KEY = [...]`` adds to them. Raises ``error`` (the config's exception type) for an
    unknown key or a value that is not a list of strings."""
    if not isinstance(section, dict):
        raise error(f"{source}: [tool.jaxlint] conventions must be a table ([tool.jaxlint.conventions])")
    out: dict = {}
    valid = sorted(BY_KEY) + sorted("extend-" + k for k in BY_KEY)
    for key, value in section.items():
        base = key[len("extend-"):] if key.startswith("extend-") else key
        if base not in BY_KEY:
            raise error(f"{source}: unknown [tool.jaxlint.conventions] key {key!r} (valid: {', '.join(valid)})")
        if not (isinstance(value, list) and all(isinstance(v, str) and v.strip() for v in value)):
            raise error(f"{source}: [tool.jaxlint.conventions] {key} must be a list of non-empty strings, "
                        f"not {value!r}")
    for key, value in section.items():
        if not key.startswith("extend-"):
            out[key] = [v.strip().lower() for v in value]
    for key, value in section.items():
        if key.startswith("extend-"):
            base = key[len("extend-"):]
            out[base] = list(out.get(base, BY_KEY[base].words)) + [v.strip().lower() for v in value]
    return out


def describe(keys: Iterable[str] = ()) -> str:
    """Text for ``jaxlint conventions``: every convention, its words in force and why."""
    cur = active()
    lines = []
    for c in CONVENTIONS:
        if keys and c.key not in keys:
            continue
        lines.append(f"{c.key} ({c.how}): {', '.join(sorted(cur.words[c.key]))}")
        lines.append(f"  decides: {c.decides}")
        lines.append(f"  why a name: {c.rationale}")
        lines.append(f"  measured: {c.measured}")
    return "\n".join(lines)
