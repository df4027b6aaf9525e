"""Every example script and rule fixture, through one server: each fixable finding has its quick
fix, and fix-all in the editor writes exactly what `torchdoctor check --fix` writes."""

from __future__ import annotations

import shutil
import subprocess
import sys
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest
import pytest_asyncio
from lsprotocol import types
from torchdoctor.analysis import Finding, check
from torchdoctor.analysis.fixes import apply_edits

from .conftest import (
    ROOT,
    Sessions,
    apply_text_edits,
    edits_of,
    example_files,
    open_document,
    published_for,
    vscode_capabilities,
)
from .test_code_actions import FIX_ALL, actions_at, resolved, whole

pytestmark = pytest.mark.asyncio(loop_scope="module")

EXAMPLES = example_files()


def _name(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


@dataclass
class Workspace:
    client: object
    copies: dict[str, Path]  # example name → its copy, which the CLI then fixed in place
    originals: dict[str, str]
    opened: set[str]

    async def open(self, name: str) -> tuple[str, str]:
        copy = self.copies[name]
        uri = copy.as_uri()
        if name not in self.opened:
            self.opened.add(name)
            open_document(self.client, uri, self.originals[name])
            await published_for(self.client, uri, version=1)
        return uri, self.originals[name]


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def workspace(tmp_path_factory):
    """Copies of all examples, fixed once by the CLI, and one server that knows nothing of the
    fixes (it sees the original text through didOpen)."""
    folder = tmp_path_factory.mktemp("examples")
    copies: dict[str, Path] = {}
    originals: dict[str, str] = {}
    for path in EXAMPLES:
        name = _name(path)
        copy = folder / name.replace("/", "__")
        shutil.copyfile(path, copy)
        copies[name] = copy
        originals[name] = path.read_text(encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-m", "torchdoctor", "check", "--fix", "--quiet", str(folder)],
        capture_output=True,
        timeout=120,
        check=False,
        cwd=folder,
    )
    assert done.returncode in (0, 1), done.stderr.decode()
    sessions = Sessions()
    try:
        client = await sessions.start(capabilities=vscode_capabilities(lazy_actions=False))
        yield Workspace(client, copies, originals, set())
    finally:
        await sessions.close()


@cache
def _findings(path: Path) -> tuple[Finding, ...]:
    """The engine's findings for an example (analysed once per test process)."""
    return tuple(check(path.read_text("utf-8"), str(path)))


def _safe_fixable(path: Path) -> bool:
    return any(f.fix is not None and f.fix.safe for f in _findings(path))


def _fixable(path: Path) -> bool:
    return any(f.fix is not None for f in _findings(path))


@pytest.mark.parametrize("name", [_name(p) for p in EXAMPLES if _fixable(p)])
async def test_every_fixable_finding_has_its_quick_fix(workspace, name):
    uri, text = await workspace.open(name)
    findings = [f for f in _findings(ROOT / name) if f.fix is not None]
    for finding in findings:
        line, col = finding.span.start_line, finding.span.start_col
        cursor = types.Range(types.Position(line, col), types.Position(line, col))
        actions = await actions_at(workspace.client, uri, cursor, only=["quickfix"])
        matching = [a for a in actions if a.title.startswith(finding.fix.title)]
        assert matching, f"no quick fix for {finding.code} at line {line + 1}"
        action = matching[0]
        assert action.is_preferred is (True if finding.fix.safe else None)
        assert action.edit is not None, "a client without resolve gets the edit at once"
        fixed = apply_text_edits(text, edits_of(action.edit, uri, version=1))
        assert fixed == apply_edits(text, finding.fix.edits)


@pytest.mark.parametrize("name", [_name(p) for p in EXAMPLES if _safe_fixable(p)])
async def test_fix_all_writes_what_the_cli_writes(workspace, name):
    uri, text = await workspace.open(name)
    (fix_all,) = await actions_at(workspace.client, uri, whole(text), only=["source.fixAll"])
    assert fix_all.kind == FIX_ALL
    action = await resolved(workspace.client, fix_all)
    fixed = apply_text_edits(text, edits_of(action.edit, uri, version=1))
    assert fixed == workspace.copies[name].read_text(encoding="utf-8")
