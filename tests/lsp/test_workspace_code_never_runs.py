"""The language server started the way the VS Code extension starts it runs no code from the
folder it serves: not a workspace `torchdoctor/` package or `pathspec.py` that would shadow the
server's own, not a `sitecustomize.py`/`usercustomize.py` on PYTHONPATH, not the PYTHONSTARTUP
file, not the user site; nor do the Pythons it starts (the torch-version look-up, jedi's process).

Stricter than the extension: the server's working folder here is the workspace itself (the
extension uses the launch script's folder), and the workspace is on PYTHONPATH."""

from __future__ import annotations

import importlib.metadata
import sys
from pathlib import Path

import pytest
from lsprotocol import types
from packaging.requirements import Requirement

from ..booby_trap import BoobyTrap, fake_torch_metadata, make_booby_trap, plain_python
from .conftest import (
    Client,
    Sessions,
    make_client,
    open_document,
    published_for,
    set_settings,
    vscode_capabilities,
    wait_until,
)
from .samples import MISSING_ZERO_GRAD

pytestmark = pytest.mark.asyncio(loop_scope="module")

ROOT = Path(__file__).resolve().parents[2]
LAUNCH_SCRIPT = ROOT / "vscode-extension" / "python" / "start_server.py"
# vscode-extension/src/server/launch.ts writes this command line (its unit test checks it)
INTERPRETER_FLAGS = ["-I", "-S", "-X", "utf8"]
TRAIN = MISSING_ZERO_GRAD + "\nstate = torch.load('model.pt')\n"  # TD101, and TD702 before 2.6


def runtime_distributions() -> list[importlib.metadata.Distribution]:
    """torchdoctor's runtime dependencies, with theirs: what `npm run package` bundles."""
    found: dict[str, importlib.metadata.Distribution] = {}
    pending = [Requirement(r) for r in importlib.metadata.requires("torchdoctor") or []]
    while pending:
        requirement = pending.pop()
        if requirement.marker is not None and not requirement.marker.evaluate({"extra": ""}):
            continue
        name = requirement.name.lower().replace("_", "-")
        if name in found:
            continue
        found[name] = importlib.metadata.distribution(requirement.name)
        pending.extend(Requirement(r) for r in found[name].requires or [])
    return list(found.values())


def symlinked_bundle(folder: Path) -> Path:
    """A folder laid out like the extension's bundled/libs (`pip install --target`), made of
    links to this environment's installed packages and the server's source."""
    folder.mkdir()
    for distribution in runtime_distributions():
        tops = {Path(str(file)).parts[0] for file in distribution.files or []}
        for top in sorted(tops - {"..", "__pycache__"}):
            source = Path(str(distribution.locate_file(top)))
            if source.exists() and not (folder / top).exists():
                (folder / top).symlink_to(source)
    (folder / "torchdoctor").symlink_to(ROOT / "server" / "torchdoctor")
    return folder


def files_in(folder: Path) -> set[str]:
    return {str(path.relative_to(folder)) for path in folder.rglob("*")}


async def start_like_the_extension(
    lsp: Sessions, trap: BoobyTrap, launch_options: list[str]
) -> Client:
    client = make_client()
    command = [sys.executable, *INTERPRETER_FLAGS, str(LAUNCH_SCRIPT), *launch_options]
    env = {**trap.environment(), "TORCHDOCTOR_LOG_LEVEL": "WARNING"}
    await client.start_io(*command, env=env, cwd=str(trap.workspace))
    lsp.clients.append(client)
    # the interpreter of the user's code: a plain Python (live user site) without torch, so the
    # torch version can only come from the user site's metadata
    settings = {"hoverSignatures": True, "interpreter": plain_python()}
    set_settings(client, settings)
    root_uri = trap.workspace.as_uri()
    await client.initialize_session(
        types.InitializeParams(
            capabilities=vscode_capabilities(),
            root_uri=root_uri,
            workspace_folders=[types.WorkspaceFolder(root_uri, "workspace")],
            initialization_options={"settings": settings},
        )
    )
    return client


@pytest.mark.timeout(150)
@pytest.mark.parametrize("libraries", ["installed", "bundled"])
async def test_a_booby_trapped_workspace_gets_diagnostics_and_runs_nothing(
    lsp: Sessions, tmp_path: Path, libraries: str
) -> None:
    trap = make_booby_trap(tmp_path)
    fake_torch_metadata(trap.user_site, "2.4.1")  # `pip install --user torch==2.4.1`
    (trap.workspace / "train.py").write_text(TRAIN, encoding="utf-8")
    before = files_in(trap.workspace)
    # installed: torchdoctor from the interpreter's own site-packages (development);
    # bundled: the libraries shipped in the extension, with no site-packages at all
    options = (
        []
        if libraries == "installed"
        else ["--bundled", str(symlinked_bundle(tmp_path / "bundled-libs"))]
    )
    client = await start_like_the_extension(lsp, trap, options)

    uri = (trap.workspace / "train.py").as_uri()
    open_document(client, uri, TRAIN)
    published = await published_for(client, uri, version=1)
    by_code = {str(d.code): d for d in published.diagnostics}
    assert "TD101" in by_code
    # the look-up in the user's interpreter ran (it read the user site's torch metadata)
    assert "TD702" in by_code and "2.4" in by_code["TD702"].message

    # jedi's process ran in that interpreter and searched it for torch (which it lacks)
    notice = await wait_until(
        lambda: next((m for m in client.log_messages if "jedi" in m.message), None), timeout=120
    )
    assert "torch was not found by jedi" in notice.message, notice.message

    assert trap.fired() == []
    assert files_in(trap.workspace) == before  # no byte code of an imported workspace module
