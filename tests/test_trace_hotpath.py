"""The per-call hooks' kept answers (issue 38, the loop overhead): what a jitted call or an eager
operation would otherwise look up again at every call is kept (``hooks._Steady``, the watcher's
``_quick_loops``, ``Collector.eager_slot``, ``UserFiles.line``). Each kept answer must be the one a
fresh lookup gives, also after what can change it: a retrace, a rebound global, another call site,
a long function, a code object freed and its id reused."""

import sys

import pytest

pytest.importorskip("jax")

from jaxlint.trace import steps  # noqa: E402
from jaxlint.trace.userfiles import UserFiles  # noqa: E402
from test_trace_stale import row, run  # noqa: E402


def _long_function(n_filler: int, probe):
    """Run a function with ``n_filler`` lines before a loop, calling ``probe(frame)`` at each marked
    line (while the frame is there); its answers and the marked lines."""
    body = "".join(f"    v{i} = {i}\n" for i in range(n_filler))
    src = ("import sys\n"
           "def f(seen, probe):\n" + body +
           "    for k in range(3):\n"
           "        seen.append(probe(sys._getframe()))  # mark a\n"
           "    seen.append(probe(sys._getframe()))  # mark b\n")
    ns: dict = {}
    exec(compile(src, "/tmp/jaxlint-hotpath-long.py", "exec"), ns)
    seen: list = []
    ns["f"](seen, probe)
    lines = [n for n, text in enumerate(src.splitlines(), 1) if "# mark" in text]
    return seen, lines


def test_a_kept_line_is_the_frames_own_line_in_long_and_short_functions():
    uf = UserFiles()
    for filler in (0, 400):
        seen, (a, b) = _long_function(filler, lambda f: (uf.line(f), f.f_lineno, uf.line(f)))
        assert seen == [(a, a, a)] * 3 + [(b, b, b)]


def test_a_kept_line_is_not_given_to_another_code_object_with_the_same_id():
    uf = UserFiles()
    other = compile("pass", "/tmp/other.py", "exec")

    def probe(frame):
        # as if `other` had been freed and this frame's code had been given its id: the entry is other's
        uf._lines[id(frame.f_code)] = (other, {frame.f_lasti: 999})
        return uf.line(frame)

    seen, (a, b) = _long_function(10, probe)
    assert seen == [a, a, a, b]


def test_eager_counts_land_on_the_innermost_user_line_of_a_long_function_and_a_helper(tmp_path):
    filler = "".join(f"    v{i} = {i}\n" for i in range(300))
    body = ("import jax.numpy as jnp\n"
            "xs = jnp.ones((8, 4))\n"
            "def helper(a):\n"
            "    return a * 2.0  # mark helper\n"
            "def main():\n" + filler +
            "    for i in range(25):\n"
            "        y = xs[3]  # mark index\n"
            "        z = helper(xs)  # mark call 1\n"
            "        z = helper(y)  # mark call 2\n"
            "main()\n")
    c, _ = run(tmp_path, body)
    src = (tmp_path / "prog.py").read_text().splitlines()
    at = {text.split("# mark ")[1]: n for n, text in enumerate(src, 1) if "# mark " in text}
    got = {line: dict(ops) for (f, line), ops in c.eager_ops.items() if f.endswith("prog.py")}
    assert got[at["index"]] == {"slice": 25, "squeeze": 25}
    assert got[at["helper"]] == {"multiply": 50}  # both calls: the innermost user line
    assert at["call 1"] not in got and at["call 2"] not in got
    assert c.eager[(str(tmp_path / "prog.py"), at["index"])] == 50
    assert set(c.eager) == set(c.eager_seconds) == set(c.eager_ops)


def test_calls_counted_on_the_kept_record_survive_a_retrace_and_a_rebound_global(tmp_path):
    """Past the watcher's first calls a call adds to records kept in its wrapper; a retrace (a new
    shape) and a global rebound after many calls must still be seen: the kept record and the kept
    JAX603 watch are looked up again after every trace."""
    n = steps.WATCH_ALL + 36
    c, _ = run(tmp_path, f"""
        import jax
        import jax.numpy as jnp

        scale = 2.0

        @jax.jit
        def step(w):
            return w * scale

        w = jnp.ones(2)
        for i in range({n}):
            w = step(w)
        w3 = jnp.ones(3)
        for i in range({n}):
            w3 = step(w3)
        scale = 3.0
        for i in range(5):
            w3 = step(w3)
    """)
    rec = row(c, "step")
    assert rec.traces == 2 and rec.calls == 2 * n + 5
    assert rec.stale["scale"][0] == 5


def _calls_per_marked_line(c, tmp_path) -> dict:
    """{mark: calls} of the step loops whose call site is a `# mark NAME` line of prog.py."""
    src = (tmp_path / "prog.py").read_text().splitlines()
    marked = {n: text.split("# mark ")[1] for n, text in enumerate(src, 1) if "# mark " in text}
    by_line: dict = {}
    for lp in c.steps.loops.values():
        file, line = lp.site
        if file.endswith("prog.py") and line in marked:
            by_line[marked[line]] = by_line.get(marked[line], 0) + lp.steps + lp.unwatched
    return by_line


def test_two_call_sites_of_one_jitted_function_keep_their_own_loops(tmp_path):
    n = steps.WATCH_ALL + 100
    c, _ = run(tmp_path, f"""
        import jax
        import jax.numpy as jnp

        @jax.jit
        def step(w):
            return w + 1.0

        w = jnp.ones(2)
        for i in range({n}):
            w = step(w)  # mark first
            w = step(w)  # mark second
        w.block_until_ready()
    """)
    assert _calls_per_marked_line(c, tmp_path) == {"first": n, "second": n}
    assert row(c, "step").calls == 2 * n


def test_a_quick_call_from_a_library_frame_is_counted_at_the_users_line_each_time(tmp_path):
    """A jitted function called by a library's helper: the loop is the user's line that called the
    helper, found by the walk at each call (loops are kept per call site only where the jitted
    function's caller is itself a user file)."""
    n = steps.WATCH_ALL + 50
    lib = tmp_path / "site-packages" / "somelib.py"
    lib.parent.mkdir()
    lib.write_text("def apply(f, x):\n    return f(x)\n")
    sys.path.insert(0, str(lib.parent))
    try:
        c, _ = run(tmp_path, f"""
            import jax
            import jax.numpy as jnp
            import somelib

            @jax.jit
            def step(w):
                return w + 1.0

            w = jnp.ones(2)
            for i in range({n}):
                w = somelib.apply(step, w)  # mark first
            for i in range({n}):
                w = somelib.apply(step, w)  # mark second
            w.block_until_ready()
        """)
    finally:
        sys.path.remove(str(lib.parent))
        sys.modules.pop("somelib", None)
    assert _calls_per_marked_line(c, tmp_path) == {"first": n, "second": n}
