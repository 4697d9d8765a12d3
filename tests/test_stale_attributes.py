"""JAX603 on attributes (issue 39): ``self.attr`` read while tracing a method compiled once per
instance in ``__init__`` (``self._step = jax.jit(self._step_impl)``), rebound by a method that
then calls the compiled wrapper again."""

from __future__ import annotations

import ast
import textwrap

import pytest

from jaxlint.model import build_model
from jaxlint.model.facts import staleattrs
from ruletools import assert_marked, findings, opt_in_findings

DECODER = """
import jax
import jax.numpy as jnp


class Decoder:
    def __init__(self, eos_ids):
        self.eos_ids = eos_ids
        self._step = jax.jit(self._step_impl)

    def _step_impl(self, tokens):
        return jnp.isin(tokens, jnp.asarray(self.eos_ids))  # expect: JAX603

    def sweep(self, tokens, all_eos):
        out = []
        for eos in all_eos:
            self.eos_ids = eos
            out.append(self._step(tokens))
        return out
"""


def test_jax603_an_attribute_rebound_in_the_loop_that_calls_the_compiled_method():
    assert_marked(DECODER)


def test_the_stale_attribute_facts_of_the_loop_case():
    tree = ast.parse(textwrap.dedent(DECODER))
    m = build_model(tree)
    f = next(g for g in m.functions if g.name == "_step_impl")
    [stale] = staleattrs.stale_attribute_reads(m, f)
    assert (stale.attr, stale.wrapper, stale.method.name, stale.rebinding.lineno) == ("eos_ids", "_step", "sweep", 17)
    assert [(x.name, x.status) for x in stale.facts] == [
        ("compiled-once", "proven"), ("rebound-after-call", "proven"), ("new-value", "proven")]


GENERATE = DECODER.replace("""    def sweep(self, tokens, all_eos):
        out = []
        for eos in all_eos:
            self.eos_ids = eos
            out.append(self._step(tokens))
        return out
""", """    def generate(self, tokens, eos_ids):
        self.eos_ids = eos_ids
        return self._step(tokens)
""")


def test_jax603_a_method_that_rebinds_then_calls_is_opt_in_until_it_is_known_to_run_again():
    # the method may run once per instance: whether it runs again is the unknown fact
    assert findings(GENERATE.replace("  # expect: JAX603", ""), "JAX603") == [(12, "JAX603")]
    [(line, code, reason)] = opt_in_findings(GENERATE, "JAX603")
    assert (line, code) == (12, "JAX603") and "rebound-after-call" in reason
    # a call before the rebinding and one after it, in the same method: proven
    twice = GENERATE.replace("        self.eos_ids = eos_ids\n",
                             "        first = self._step(tokens)\n        self.eos_ids = eos_ids\n")
    assert_marked(twice)


@pytest.mark.parametrize("change", [
    # the attribute passed as an argument: traced, no stale read
    [("def _step_impl(self, tokens):", "def _step_impl(self, tokens, eos_ids):"),
     ("jnp.asarray(self.eos_ids)", "jnp.asarray(eos_ids)"), ("self._step(tokens)", "self._step(tokens, eos)")],
    # a new wrapper per call: each call traces again
    [("self._step(tokens)", "jax.jit(self._step_impl)(tokens)")],
    # the attribute only set in __init__
    [("            self.eos_ids = eos\n", "")],
    # the wrapper made only on one branch of __init__: not proven once per instance
    [("        self._step = jax.jit(self._step_impl)", "        if eos_ids:\n            self._step = jax.jit(self._step_impl)")],
    # the wrapper also replaced elsewhere: a new wrapper may trace again
    [("            out.append(self._step(tokens))", "            self._step = jax.jit(self._step_impl)\n"
                                                    "            out.append(self._step(tokens))")],
    # rebound after the last call only
    [("            self.eos_ids = eos\n            out.append(self._step(tokens))",
      "            out.append(self._step(tokens))\n        self.eos_ids = all_eos"),],
    # a method read, not a value
    [("jnp.asarray(self.eos_ids)", "jnp.asarray(self.ids())"), ("    def sweep", "    def ids(self):\n        return 1\n\n    def sweep")],
])
def test_jax603_near_misses_of_the_attribute_case(change):
    src = DECODER
    for old, new in change:
        assert old in src
        src = src.replace(old, new)
    assert findings(src.replace("  # expect: JAX603", ""), "JAX603") == []


def test_the_compiled_method_keeps_the_attribute_of_its_first_trace_at_runtime():
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp

    class Decoder:
        def __init__(self, eos_ids):
            self.eos_ids = eos_ids
            self._step = jax.jit(self._step_impl)

        def _step_impl(self, tokens):
            return jnp.isin(tokens, jnp.asarray(self.eos_ids))

        def generate(self, tokens, eos_ids):
            self.eos_ids = eos_ids
            return self._step(tokens)

    d = Decoder([1])
    tokens = jnp.arange(4)
    assert d.generate(tokens, [1]).tolist() == [False, True, False, False]
    # rebound to [2], yet the program of the first trace still tests for 1
    assert d.generate(tokens, [2]).tolist() == [False, True, False, False]
    assert d._step_impl(tokens).tolist() == [False, False, True, False]  # what an eager run gives
