"""The README's rule table, generated from the registry so it cannot drift from the code.

`python -m torchdoctor.reporting.rule_table --write README.md` rewrites the table in place, with
each rule's findings and precision on the public-code corpus from the summary that
`python -m bench ecosystem --write-summary` keeps (tests/ecosystem/summary.json).
"""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Mapping
from pathlib import Path

from ..analysis import REGISTRY

START, END = "<!-- rules:start -->", "<!-- rules:end -->"


CorpusCounts = Mapping[str, int]  # findings, tp, fp, noise for one rule


def render_rule_table(corpus: Mapping[str, CorpusCounts] | None = None) -> str:
    """The table; with corpus counts, two more columns: findings on the corpus and precision."""
    head = "| code | name | severity | fix | default | what it flags |"
    rule = "|---|---|---|---|---|---|"
    if corpus is not None:
        head += " corpus findings | precision |"
        rule += "---|---|"
    rows = [head, rule]
    for info in REGISTRY:
        row = (
            f"| [{info.code}](server/torchdoctor/docs/en/{info.code}.md) | {info.name} | "
            f"{info.severity.value} | {'yes' if info.fixable else ''} | "
            f"{'on' if info.enabled_by_default else 'off'} | {info.summary} |"
        )
        if corpus is not None:
            row += f" {_corpus_cells(corpus.get(info.code))} |"
        rows.append(row)
    return "\n".join(rows)


def _corpus_cells(counts: CorpusCounts | None) -> str:
    if counts is None:
        return "0 | —"
    judged = counts["tp"] + counts["fp"]
    precision = f"{counts['tp'] / judged:.2f}" if judged else "—"
    return f"{counts['findings']} | {precision}"


def load_corpus_summary(path: Path) -> dict[str, CorpusCounts] | None:
    """Per-rule counts from the ecosystem summary, or None when the file is not there."""
    if not path.is_file():
        return None
    data = json.loads(path.read_text(encoding="utf-8"))
    rules: dict[str, CorpusCounts] = data["rules"]
    return rules


def with_current_table(readme: str, corpus: Mapping[str, CorpusCounts] | None = None) -> str:
    block = f"{START}\n{render_rule_table(corpus)}\n{END}"
    pattern = re.compile(re.escape(START) + r".*?" + re.escape(END), re.DOTALL)
    if not pattern.search(readme):
        raise ValueError(f"README has no {START} … {END} block")
    return pattern.sub(lambda _: block, readme)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--write", type=Path, required=True)
    parser.add_argument(
        "--corpus-summary",
        type=Path,
        default=Path("tests/ecosystem/summary.json"),
        help="per-rule counts on the corpus (default: tests/ecosystem/summary.json, if present)",
    )
    args = parser.parse_args()
    corpus = load_corpus_summary(args.corpus_summary)
    path: Path = args.write
    path.write_text(with_current_table(path.read_text(encoding="utf-8"), corpus), encoding="utf-8")


if __name__ == "__main__":
    main()
