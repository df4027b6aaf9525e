"""The README's rule table, generated from the registry so it cannot drift from the code.

`python -m torchdoctor.reporting.rule_table --write README.md` rewrites the table in place.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from ..analysis import REGISTRY

START, END = "<!-- rules:start -->", "<!-- rules:end -->"


def render_rule_table() -> str:
    rows = [
        "| code | name | severity | fix | default | what it flags |",
        "|---|---|---|---|---|---|",
    ]
    for info in REGISTRY:
        rows.append(
            f"| [{info.code}](server/torchdoctor/docs/en/{info.code}.md) | {info.name} | "
            f"{info.severity.value} | {'yes' if info.fixable else ''} | "
            f"{'on' if info.enabled_by_default else 'off'} | {info.summary} |"
        )
    return "\n".join(rows)


def with_current_table(readme: str) -> str:
    block = f"{START}\n{render_rule_table()}\n{END}"
    pattern = re.compile(re.escape(START) + r".*?" + re.escape(END), re.DOTALL)
    if not pattern.search(readme):
        raise ValueError(f"README has no {START} … {END} block")
    return pattern.sub(lambda _: block, readme)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--write", type=Path, required=True)
    path = parser.parse_args().write
    path.write_text(with_current_table(path.read_text(encoding="utf-8")), encoding="utf-8")


if __name__ == "__main__":
    main()
