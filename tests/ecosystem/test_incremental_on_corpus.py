"""The editor's incremental analysis on real code: for a sample of the corpus's Python files, a
few edits inside function and method bodies (a line deleted, a line doubled, a character typed,
a call appended), each analysed incrementally, give exactly the findings of a fresh analysis of
the edited text. Real code reaches across blocks in ways generated code does not; this is where
a missing dependency in the file's key shows. Skips without the mirrors, like the ledger test."""

from __future__ import annotations

import random

import pytest
from torchdoctor.analysis import Config, Document, analyse
from torchdoctor.analysis.incremental import IncrementalAnalyser

from bench import ecosystem

ALL = Config(select=("ALL",))
SAMPLE_EVERY = 5  # every fifth file: about 300 files, 15 s on 2 cores
TYPED = ("x", "(", ".", " ", "_1", "  # note", ".detach()", ")")


def _sources() -> list[ecosystem.SourceFile]:
    corpus, mirrors = ecosystem.default_corpus_dir(), ecosystem.default_mirror_dir()
    if not (corpus / "MANIFEST.tsv").is_file():
        pytest.skip(f"the corpus list is not on this machine ({corpus})")
    missing = ecosystem.missing_repositories(corpus, mirrors)
    if missing:
        pytest.skip(f"corpus mirrors not in {mirrors}: {', '.join(missing)}")
    found = [
        source
        for repository in ecosystem.read_manifest(corpus)
        for source in ecosystem.read_files(mirrors, repository, ".py")
    ]
    return found[::SAMPLE_EVERY]


def _edits(rng: random.Random, text: str) -> list[str]:
    lines = text.split("\n")
    body = [
        number
        for number, line in enumerate(lines)
        if line.startswith("    ") and line.strip() and not line.strip().startswith("#")
    ]
    edited: list[str] = []
    for _ in range(3 if body else 0):
        number, copy = rng.choice(body), list(lines)
        choice = rng.random()
        if choice < 0.3:
            del copy[number]
        elif choice < 0.5:
            copy.insert(number, copy[number])
        else:
            column = rng.randint(0, len(copy[number]))
            line = copy[number]
            copy[number] = line[:column] + rng.choice(TYPED) + line[column:]
        edited.append("\n".join(copy))
    return edited


def test_incremental_findings_equal_a_fresh_analysis_on_real_code() -> None:
    differences: list[str] = []
    for index, source in enumerate(_sources()):
        try:
            text = source.data.decode("utf-8")
        except UnicodeDecodeError:
            continue
        analyser = IncrementalAnalyser(source.path)
        analyser.analyse(text, ALL)
        for step, version in enumerate([*_edits(random.Random(index), text), text]):
            _, findings = analyser.analyse(version, ALL)
            fresh = analyse(Document.parse(version, source.path), ALL)
            if findings != fresh:
                only_incremental = [(f.code, f.span.start_line) for f in findings if f not in fresh]
                only_fresh = [(f.code, f.span.start_line) for f in fresh if f not in findings]
                differences.append(
                    f"{source.repo} {source.path} edit {step}: incremental only "
                    f"{only_incremental[:4]}, fresh only {only_fresh[:4]}"
                )
                break
    assert not differences, "\n".join(differences)
