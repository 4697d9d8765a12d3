"""Generates docs/rules.md from the rule classes themselves (the same examples the tests run).

    python -m jaxlint.docs            # print
    python -m jaxlint.docs --write    # write docs/rules.md (tests fail when it is out of date)
"""

from __future__ import annotations

import os
import sys
import textwrap

DOCS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "docs", "rules.md")


def _code(text: str) -> str:
    return "```python\n" + textwrap.dedent(text).strip("\n") + "\n```\n"


def render() -> str:
    from .registry import ALL_RULES

    out = [
        "# jaxlint rules\n",
        "Generated from the rule classes in `jaxlint_rules/` by `python -m jaxlint.docs --write`; "
        "do not edit by hand. Every *Example* triggers exactly its rule and every *Use instead* "
        "triggers nothing: the test suite runs these very snippets.\n",
        "Level *error* (SARIF, GitHub annotations) marks the rules whose findings are code that raises "
        "when it runs; the others' findings are warnings.\n",
        "| code | name | module | level |\n|---|---|---|---|\n" + "".join(
            f"| [{r.code}](#{r.code.lower()}-{r.name}) | {r.name} | `{r.__module__}` | {r.level()} |\n"
            for r in ALL_RULES),
    ]
    for r in ALL_RULES:
        out.append(
            f"## {r.code} {r.name}\n\n"
            f"Defined in `{r.__module__.replace('.', '/')}.py` (`{r.__name__}`).\n\n"
            f"### What it does\n\n{r.summary}\n\n"
            f"### Why it is slow or wrong on an accelerator\n\n{r.rationale}\n\n"
            f"### Example\n\n{_code(r.bad)}\n"
            f"### Use instead\n\n{_code(r.good)}\n"
            + (f"### Reported only with --pedantic\n\n{r.opt_in_cases}\n\n" if r.opt_in_cases else "")
            + f"### Suppressing it\n\nAdd `# noqa: {r.code}` to the line, or ignore the code project-wide with "
            f"`ignore = [\"{r.code}\"]` under `[tool.jaxlint]` in pyproject.toml "
            f"(flake8: `--extend-ignore {r.code}`).\n"
        )
    return "\n".join(out)


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    text = render()
    if "--write" in argv:
        os.makedirs(os.path.dirname(DOCS), exist_ok=True)
        with open(DOCS, "w", encoding="utf-8") as fh:
            fh.write(text)
        print(f"wrote {DOCS}")
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
