"""`check --fix` on a copy of every notebook of the ecosystem corpus: each stays a valid nbformat 4
notebook whose outputs and metadata are unchanged, and a second `--fix` changes nothing.
Reads the corpus from local git mirrors (see bench/ecosystem.py); skips when they are absent."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from torchdoctor.cli import main

from bench import ecosystem


@pytest.fixture(scope="module")
def corpus_notebooks(tmp_path_factory: pytest.TempPathFactory) -> dict[Path, bytes]:
    corpus, mirrors = ecosystem.default_corpus_dir(), ecosystem.default_mirror_dir()
    if not (corpus / "MANIFEST.tsv").is_file():
        pytest.skip(f"the corpus list is not on this machine ({corpus})")
    missing = ecosystem.missing_repositories(corpus, mirrors)
    if missing:
        pytest.skip(f"corpus mirrors not in {mirrors}: {', '.join(missing)}")
    folder = tmp_path_factory.mktemp("corpus-notebooks")
    originals: dict[Path, bytes] = {}
    for repository in ecosystem.read_manifest(corpus):
        for source in ecosystem.read_files(mirrors, repository, suffix=".ipynb"):
            path = folder / repository.key / source.path
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(source.data)
            originals[path] = source.data
    assert originals, "the corpus lists notebooks; none were read"
    return originals


def test_fix_keeps_every_corpus_notebook_valid_with_its_outputs_and_is_stable(
    corpus_notebooks: dict[Path, bytes], capsys: pytest.CaptureFixture[str]
) -> None:
    roots = {path.parent.parent for path in corpus_notebooks}
    main(["check", "--fix", "--quiet", "--no-color", "--jobs", "1", *map(str, sorted(roots))])
    capsys.readouterr()
    fixed = 0
    for path, original in corpus_notebooks.items():
        before, after = json.loads(original), json.loads(path.read_bytes())
        assert after["nbformat"] == 4 and isinstance(after["cells"], list), path
        assert len(after["cells"]) == len(before["cells"]), path
        assert {k: v for k, v in after.items() if k != "cells"} == {
            k: v for k, v in before.items() if k != "cells"
        }, path
        for old, new in zip(before["cells"], after["cells"], strict=True):
            assert {k: v for k, v in old.items() if k != "source"} == {
                k: v for k, v in new.items() if k != "source"
            }, path
        fixed += path.read_bytes() != original
    once = {path: path.read_bytes() for path in corpus_notebooks}
    main(["check", "--fix", "--quiet", "--no-color", "--jobs", "1", *map(str, sorted(roots))])
    capsys.readouterr()
    assert {path: path.read_bytes() for path in corpus_notebooks} == once
    assert fixed, "no corpus notebook had a fix: the round trip was not exercised"
