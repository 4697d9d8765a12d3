"""docs/rules.md is generated from the rule classes, is up to date, and shows each rule's own
bad and good example (the ones test_rule_examples.py runs), not copies."""

import textwrap

from jaxlint.docs import DOCS, render
from jaxlint.engine import check_source
from jaxlint_rules import ALL_RULES
from ruletools import EVERYWHERE_OPT_IN


def test_committed_rules_md_is_up_to_date():
    with open(DOCS, encoding="utf-8") as fh:
        committed = fh.read()
    assert committed == render(), "docs/rules.md is out of date: run `python -m jaxlint.docs --write`"


def test_every_rule_is_documented_with_its_own_examples():
    text = render()
    for rule in ALL_RULES:
        section = text.split(f"## {rule.code} {rule.name}\n", 1)[1].split("\n## ", 1)[0]
        for heading in ("What it does", "Why it is slow or wrong", "Example", "Use instead", "Suppressing it"):
            assert f"### {heading}" in section, (rule.code, heading)
        assert textwrap.dedent(rule.bad).strip("\n") in section
        assert textwrap.dedent(rule.good).strip("\n") in section
        assert f"# noqa: {rule.code}" in section


def test_documented_examples_trigger_exactly_their_rule():
    rules = [cls() for cls in ALL_RULES]
    text = render()
    for rule in ALL_RULES:
        section = text.split(f"## {rule.code} {rule.name}\n", 1)[1].split("\n## ", 1)[0]
        bad = section.split("### Example\n\n```python\n", 1)[1].split("```", 1)[0]
        good = section.split("### Use instead\n\n```python\n", 1)[1].split("```", 1)[0]
        others = EVERYWHERE_OPT_IN - {rule.code}  # opt-in rules that fire on any step loop (ruletools)
        assert {f.code for f in check_source(bad, "example.py", rules).findings} - others == {rule.code}, rule.code
        assert [f for f in check_source(good, "example.py", rules).findings if f.code not in others] == [], rule.code


def test_opt_in_cases_are_documented():
    from jaxlint.docs import render
    from jaxlint.registry import ALL_RULES

    text = render()
    with_cases = [r for r in ALL_RULES if r.opt_in_cases]
    assert with_cases, "some rules have opt-in cases (issue 11's policy)"
    for r in with_cases:
        section = text.split(f"## {r.code} {r.name}\n", 1)[1].split("\n## ", 1)[0]
        assert f"### Reported only with --pedantic\n\n{r.opt_in_cases}\n" in section, r.code
