"""`python -m bench ecosystem`: every rule over real public PyTorch code, judged by a ledger.

The corpus is a pinned list (`shared/corpus/`: MANIFEST.tsv with one commit per repository,
FILES.txt with the files to read). Files are read straight from local git mirrors
(`.mirror/OWNER+NAME/repo`) at the pinned commit; nothing is fetched and nothing is copied into
the project. Each finding is looked up in the ledger (`tests/ecosystem/ledger.jsonl`: one verdict
per finding, judged by reading the code) so a rule's precision on real code is a number, and a
rule change shows up as a diff of findings.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import subprocess
import sys
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

from torchdoctor.analysis import REGISTRY, Config, Document, analyse
from torchdoctor.analysis.config import with_overrides
from torchdoctor.analysis.notebook_file import NotebookError, read_notebook
from torchdoctor.reporting.notebook_checking import check_notebook, is_notebook

PROJECT = Path(__file__).resolve().parent.parent
LEDGER = PROJECT / "tests" / "ecosystem" / "ledger.jsonl"
SUMMARY = PROJECT / "tests" / "ecosystem" / "summary.json"
VERDICTS = ("TP", "FP", "noise")
# Python files and notebooks; a notebook's findings are filed under "PATH:cell N", at the line
# within that cell, as `torchdoctor check` shows them
CHECKED_SUFFIXES = (".py", ".ipynb")
# Findings depend on the torch release for a few rules: judge them against one fixed release.
TARGET_TORCH = (2, 13)


def default_corpus_dir() -> Path:
    return Path(os.environ.get("TORCHDOCTOR_CORPUS", PROJECT.parent / "shared" / "corpus"))


def default_mirror_dir() -> Path:
    return Path(os.environ.get("TORCHDOCTOR_MIRRORS", PROJECT.parent / ".mirror"))


@dataclass(frozen=True)
class Repository:
    name: str  # OWNER/NAME
    commit: str
    files: tuple[str, ...]

    @property
    def key(self) -> str:
        return self.name.replace("/", "+")


@dataclass(frozen=True)
class SourceFile:
    repo: str
    path: str
    data: bytes


@dataclass(frozen=True, order=True)
class CorpusFinding:
    repo: str
    path: str
    line: int  # 1-based, as editors and the ledger show it
    code: str
    message: str = field(compare=False, default="")
    source: str = field(compare=False, default="")

    @property
    def key(self) -> tuple[str, str, int, str]:
        return (self.repo, self.path, self.line, self.code)


@dataclass(frozen=True)
class Verdict:
    repo: str
    path: str
    line: int
    code: str
    verdict: str
    why: str

    @property
    def key(self) -> tuple[str, str, int, str]:
        return (self.repo, self.path, self.line, self.code)


def read_manifest(corpus: Path) -> list[Repository]:
    """The pinned repositories and their files, from MANIFEST.tsv and FILES.txt."""
    files: dict[str, list[str]] = defaultdict(list)
    for line in (corpus / "FILES.txt").read_text(encoding="utf-8").splitlines():
        if line.strip():
            key, _, path = line.partition("/")
            files[key].append(path)
    repositories = []
    rows = (corpus / "MANIFEST.tsv").read_text(encoding="utf-8").splitlines()[1:]
    for row in rows:
        if not row.strip():
            continue
        name, commit = row.split("\t")[:2]
        repositories.append(Repository(name, commit, tuple(files[name.replace("/", "+")])))
    return repositories


def git_dir(mirrors: Path, repository: Repository) -> Path | None:
    """The mirror's git directory (a bare folder or a work tree's `.git`), if it is here."""
    root = mirrors / repository.key / "repo"
    for candidate in (root / ".git", root):
        if (candidate / "objects").is_dir():
            return candidate
    return None


def missing_repositories(corpus: Path, mirrors: Path) -> list[str]:
    return [r.name for r in read_manifest(corpus) if git_dir(mirrors, r) is None]


def read_files(
    mirrors: Path, repository: Repository, suffix: str | tuple[str, ...] = CHECKED_SUFFIXES
) -> Iterator[SourceFile]:
    """The repository's corpus files at the pinned commit, through one `git cat-file --batch`."""
    directory = git_dir(mirrors, repository)
    if directory is None:
        return
    paths = [path for path in repository.files if path.endswith(suffix)]
    if not paths:
        return
    request = "".join(f"{repository.commit}:{path}\n" for path in paths).encode()
    output = subprocess.run(
        ["git", f"--git-dir={directory}", "cat-file", "--batch"],
        input=request,
        capture_output=True,
        check=True,
    ).stdout
    offset = 0
    for path in paths:
        end = output.index(b"\n", offset)
        header = output[offset:end].split()
        offset = end + 1
        if len(header) < 3 or header[1] != b"blob":  # "missing": absent from the mirror
            continue
        size = int(header[2])
        yield SourceFile(repository.name, path, output[offset : offset + size])
        offset += size + 1


def corpus_config() -> Config:
    return with_overrides(Config(target_torch=TARGET_TORCH), select=["ALL"])


def check_one(source: SourceFile) -> list[CorpusFinding]:
    if is_notebook(source.path):
        return check_notebook_file(source)
    text = source.data.decode("utf-8", errors="replace")
    doc = Document.parse(text, source.path)
    lines = doc.index.lines
    found = []
    for finding in analyse(doc, corpus_config()):
        line = finding.span.start_line
        snippet = lines[line].strip() if line < len(lines) else ""
        found.append(
            CorpusFinding(
                source.repo, source.path, line + 1, finding.code, finding.message, snippet[:200]
            )
        )
    return found


def check_notebook_file(source: SourceFile) -> list[CorpusFinding]:
    result, _, _ = check_notebook(source.data, source.path, corpus_config(), None, False)
    found = []
    for original in result.findings:
        cell, finding = result.in_cell(original)
        lines = result.source_lines(cell)
        line = finding.span.start_line
        snippet = lines[line].strip() if line < len(lines) else ""
        found.append(
            CorpusFinding(
                source.repo,
                f"{source.path}:cell {cell}",
                line + 1,
                finding.code,
                finding.message,
                snippet[:200],
            )
        )
    return found


def code_lines(source: SourceFile) -> int:
    """Lines of Python: a notebook's code cells, not its JSON (outputs can be megabytes)."""
    if not is_notebook(source.path):
        return source.data.count(b"\n")
    try:
        notebook = read_notebook(source.data.decode("utf-8"))
    except (UnicodeDecodeError, NotebookError):
        return 0
    return sum(len(cell.source.splitlines()) for cell in notebook.code_cells)


def check_sources(sources: Sequence[SourceFile], jobs: int) -> list[CorpusFinding]:
    if jobs <= 1:
        results: Iterable[list[CorpusFinding]] = map(check_one, sources)
        return sorted(f for found in results for f in found)
    # forkserver: workers start from a clean process, never from a fork of a threaded caller
    context = multiprocessing.get_context("forkserver")
    with ProcessPoolExecutor(max_workers=jobs, mp_context=context) as pool:
        return sorted(f for found in pool.map(check_one, sources, chunksize=8) for f in found)


def folder_sources(folder: Path) -> list[SourceFile]:
    """Any folder instead of the corpus: its .py files and notebooks, reported under the
    folder's name."""
    return [
        SourceFile(folder.name, str(path.relative_to(folder)), path.read_bytes())
        for path in sorted(folder.rglob("*"))
        if path.suffix in CHECKED_SUFFIXES and path.is_file()
    ]


def read_ledger(path: Path = LEDGER) -> dict[tuple[str, str, int, str], Verdict]:
    ledger: dict[tuple[str, str, int, str], Verdict] = {}
    if not path.exists():
        return ledger
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        row = json.loads(line)
        verdict = Verdict(
            row["repo"], row["path"], int(row["line"]), row["code"], row["verdict"], row["why"]
        )
        if verdict.verdict not in VERDICTS:
            raise ValueError(f"{path}:{number}: verdict must be one of {VERDICTS}")
        ledger[verdict.key] = verdict
    return ledger


@dataclass
class LedgerDiff:
    unjudged: list[CorpusFinding]  # found now, no verdict in the ledger
    lost_true_positives: list[Verdict]  # a TP in the ledger that is no longer found
    gone: list[Verdict]  # FP/noise entries no longer found (fine: a rule got quieter)


def compare(
    findings: Sequence[CorpusFinding],
    ledger: dict[tuple[str, str, int, str], Verdict],
    repositories: Iterable[str] | None = None,
) -> LedgerDiff:
    """What differs between today's findings and the ledger (limited to the repositories read)."""
    found = {f.key for f in findings}
    scope = set(repositories) if repositories is not None else None
    entries = [v for v in ledger.values() if scope is None or v.repo in scope]
    return LedgerDiff(
        unjudged=[f for f in findings if f.key not in ledger],
        lost_true_positives=[v for v in entries if v.verdict == "TP" and v.key not in found],
        gone=[v for v in entries if v.verdict != "TP" and v.key not in found],
    )


@dataclass
class RuleRow:
    code: str
    default_on: bool
    findings: int = 0
    per_kloc: float = 0.0
    tp: int = 0
    fp: int = 0
    noise: int = 0
    unjudged: int = 0

    @property
    def precision(self) -> float | None:
        judged = self.tp + self.fp
        return self.tp / judged if judged else None

    @property
    def noise_share(self) -> float | None:
        return self.noise / self.findings if self.findings else None


def rule_table(
    findings: Sequence[CorpusFinding],
    ledger: dict[tuple[str, str, int, str], Verdict],
    lines: int,
) -> list[RuleRow]:
    rows = {info.code: RuleRow(info.code, info.enabled_by_default) for info in REGISTRY}
    for finding in findings:
        row = rows[finding.code]
        row.findings += 1
        verdict = ledger.get(finding.key)
        if verdict is None:
            row.unjudged += 1
        elif verdict.verdict == "TP":
            row.tp += 1
        elif verdict.verdict == "FP":
            row.fp += 1
        else:
            row.noise += 1
    for row in rows.values():
        row.per_kloc = 1000 * row.findings / lines if lines else 0.0
    return sorted(rows.values(), key=lambda row: row.code)


def markdown(rows: Sequence[RuleRow], files: int, lines: int, repos: int) -> str:
    def ratio(value: float | None) -> str:
        return "—" if value is None else f"{value:.2f}"

    out = [
        f"{files:,} files, {lines:,} lines, {repos} repositories.",
        "",
        "| code | default | findings | per 1k lines | TP | FP | noise | unjudged | precision "
        "| noise share |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        out.append(
            f"| {row.code} | {'on' if row.default_on else 'off'} | {row.findings} | "
            f"{row.per_kloc:.3f} | {row.tp} | {row.fp} | {row.noise} | {row.unjudged} | "
            f"{ratio(row.precision)} | {ratio(row.noise_share)} |"
        )
    total = sum(row.findings for row in rows)
    out += ["", f"{total} findings in all."]
    return "\n".join(out)


def summary_json(rows: Sequence[RuleRow], run: EcosystemRun) -> str:
    """Per-rule counts on the corpus, stable across runs (no times, no machine)."""
    data = {
        "corpus": {"files": run.files, "lines": run.lines, "repositories": len(run.repositories)},
        "rules": {
            row.code: {
                "findings": row.findings,
                "tp": row.tp,
                "fp": row.fp,
                "noise": row.noise,
                "unjudged": row.unjudged,
            }
            for row in rows
            if row.findings
        },
    }
    return json.dumps(data, indent=2, sort_keys=True) + "\n"


@dataclass
class EcosystemRun:
    findings: list[CorpusFinding]
    files: int
    lines: int
    repositories: list[str]
    missing: list[str]


def run_corpus(corpus: Path, mirrors: Path, jobs: int) -> EcosystemRun:
    repositories = read_manifest(corpus)
    sources: list[SourceFile] = []
    present: list[str] = []
    missing: list[str] = []
    for repository in repositories:
        if git_dir(mirrors, repository) is None:
            missing.append(repository.name)
            continue
        present.append(repository.name)
        sources.extend(read_files(mirrors, repository))
    lines = sum(code_lines(source) for source in sources)
    return EcosystemRun(check_sources(sources, jobs), len(sources), lines, present, missing)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench ecosystem", description=__doc__)
    parser.add_argument("--corpus", type=Path, default=default_corpus_dir())
    parser.add_argument("--mirrors", type=Path, default=default_mirror_dir())
    parser.add_argument("--folder", type=Path, help="check this folder instead of the corpus")
    parser.add_argument("--ledger", type=Path, default=LEDGER)
    parser.add_argument("--jobs", "-j", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--findings", type=Path, help="write every finding as JSON lines here")
    parser.add_argument("--markdown", type=Path, help="write the per-rule table here")
    parser.add_argument(
        "--write-summary",
        nargs="?",
        type=Path,
        const=SUMMARY,
        help="write per-rule counts as JSON (default tests/ecosystem/summary.json), which the "
        "README's rule table shows",
    )
    args = parser.parse_args(argv)

    if args.folder is not None:
        sources = folder_sources(args.folder)
        lines = sum(code_lines(source) for source in sources)
        run = EcosystemRun(
            check_sources(sources, args.jobs), len(sources), lines, [args.folder.name], []
        )
    else:
        run = run_corpus(args.corpus, args.mirrors, args.jobs)
    if run.missing:
        print(f"not on this machine (skipped): {', '.join(run.missing)}", file=sys.stderr)
    ledger = read_ledger(args.ledger)
    table = markdown(
        rule_table(run.findings, ledger, run.lines), run.files, run.lines, len(run.repositories)
    )
    print(table)
    if args.markdown:
        args.markdown.write_text(table + "\n", encoding="utf-8")
    if args.write_summary:
        args.write_summary.write_text(
            summary_json(rule_table(run.findings, ledger, run.lines), run), encoding="utf-8"
        )
    if args.findings:
        with args.findings.open("w", encoding="utf-8") as out:
            for finding in run.findings:
                out.write(json.dumps(asdict(finding), ensure_ascii=False) + "\n")
    diff = compare(run.findings, ledger, run.repositories)
    print(describe(diff))
    return 0


def describe(diff: LedgerDiff, limit: int = 200) -> str:
    out = []
    if diff.unjudged:
        out.append(f"{len(diff.unjudged)} finding(s) with no verdict in the ledger:")
        out += [
            f"  {f.repo} {f.path}:{f.line} {f.code} {f.message[:100]}"
            for f in diff.unjudged[:limit]
        ]
    if diff.lost_true_positives:
        out.append(f"{len(diff.lost_true_positives)} true positive(s) no longer found:")
        out += [
            f"  {v.repo} {v.path}:{v.line} {v.code}: {v.why}"
            for v in diff.lost_true_positives[:limit]
        ]
    if diff.gone:
        counts = Counter(v.code for v in diff.gone)
        out.append(
            "ledger entries no longer found (false positives and noise now quiet): "
            + ", ".join(f"{code} {n}" for code, n in sorted(counts.items()))
        )
    return "\n".join(out) if out else "every finding has a verdict; every true positive is found"


if __name__ == "__main__":
    raise SystemExit(main())
