"""pytest plugin of bench/trace_tpu_tests.py (loaded with `-p tpu_tests_plugin`, bench/ on the path).

JAXLINT_TPU_PASS=children: this pytest process runs its own JAX on the CPU (jax_platforms set in
this process only, not in the environment), so that the chip stays free for the programs the
tests start (`jaxlint trace ...`), which take it one at a time. Each test's child processes log
their backend (bench/tpu_child_site). JAXLINT_TPU_PASS=inprocess: only the tests named in
$JAXLINT_TPU_SELECT (one node id per line) run, in this process, which takes the chip.
Each test's outcome is appended to $JAXLINT_TPU_RESULTS as one JSON line.
"""
import json
import os
import time

import pytest

MODE = os.environ.get("JAXLINT_TPU_PASS", "children")
os.environ["JAXLINT_PYTEST_PID"] = str(os.getpid())
if MODE == "children":
    import jax

    jax.config.update("jax_platforms", "cpu")


def pytest_collection_modifyitems(config, items):
    if MODE != "inprocess":
        return
    with open(os.environ["JAXLINT_TPU_SELECT"]) as fh:
        keep = {line.strip() for line in fh if line.strip()}
    selected = [i for i in items if i.nodeid in keep]
    config.hook.pytest_deselected(items=[i for i in items if i.nodeid not in keep])
    items[:] = selected


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    os.environ["JAXLINT_TEST_ID"] = item.nodeid
    start = time.perf_counter()
    outcome = {"nodeid": item.nodeid}
    item._tpu_outcome = outcome
    yield
    outcome["seconds"] = round(time.perf_counter() - start, 2)
    outcome["pass"] = MODE
    try:
        from jax._src import xla_bridge

        if xla_bridge.backends_are_initialized():
            import jax

            outcome["in_process_backend"] = jax.default_backend()
    except Exception:
        pass
    with open(os.environ["JAXLINT_TPU_RESULTS"], "a") as fh:
        fh.write(json.dumps(outcome) + "\n")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    rep = (yield).get_result()
    out = getattr(item, "_tpu_outcome", None)
    if out is None:
        return
    if rep.failed or rep.skipped or (rep.when == "call" and "outcome" not in out):
        if out.get("outcome") != "failed":
            out["outcome"] = rep.outcome
            if rep.failed or rep.skipped:
                out["detail"] = str(rep.longrepr)[-1500:]
