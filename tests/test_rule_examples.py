"""Every rule's own examples (the ones `jaxlint explain` prints): `bad` triggers exactly that
rule, `good` triggers nothing at all, and the explanation renders."""

from __future__ import annotations

import pytest

import jaxlint_rules
from ruletools import findings

RULES = jaxlint_rules.ALL_RULES


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.code)
def test_bad_example_triggers_exactly_its_rule(rule):
    got = findings(rule.bad) + findings(rule.bad, rule.code)  # an everywhere-opt-in rule's own ones too
    assert got, f"{rule.code}.bad triggers nothing"
    assert {code for _, code in got} == {rule.code}


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.code)
def test_good_example_triggers_nothing(rule):
    assert findings(rule.good) == []


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.code)
def test_explain_renders(rule):
    text = rule.explain()
    assert rule.code in text and rule.name in text
