"""The copy of a document's unsaved text that the probe imports: never in the user's folder,
removed afterwards, and what a killed server left is removed by the next one."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

from torchdoctor.lsp.probe_bridge import outside_workspace, probe_memory_limit
from torchdoctor.lsp.probe_source import FOLDER_PREFIX, probe_source, remove_abandoned_copies
from torchdoctor.lsp.settings import parse_settings


def test_unsaved_text_is_copied_outside_the_users_folder(tmp_path: Path) -> None:
    model = tmp_path / "model.py"
    model.write_text("x = 1\n", encoding="utf-8")
    with probe_source(str(model), "x = 2\n", str(model)) as source:
        assert Path(source.probe_path).read_text(encoding="utf-8") == "x = 2\n"
        assert not Path(source.probe_path).is_relative_to(tmp_path)
        assert sorted(p.name for p in tmp_path.iterdir()) == ["model.py"]
        assert source.origin == str(model)
        assert source.to_user(f"error at {source.probe_path}:1") == f"error at {model}:1"
    assert not Path(source.probe_path).exists()
    assert not Path(source.probe_path).parent.exists()


def test_saved_text_is_probed_in_place(tmp_path: Path) -> None:
    model = tmp_path / "model.py"
    model.write_text("x = 1\n", encoding="utf-8")
    with probe_source(str(model), "x = 1\n", str(model)) as source:
        assert source.probe_path == str(model) and source.origin is None


def test_copies_left_by_a_dead_server_are_removed_and_a_live_ones_kept(tmp_path: Path) -> None:
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    abandoned = tmp_path / f"{FOLDER_PREFIX}{dead.stdout.strip()}-abc"
    abandoned.mkdir()
    (abandoned / "_torchdoctor_probe_model.py").write_text("x = 1\n")
    live = tmp_path / f"{FOLDER_PREFIX}{os.getpid()}-def"
    live.mkdir()
    unrelated = tmp_path / "someone-else-999999"
    unrelated.mkdir()
    assert remove_abandoned_copies(str(tmp_path)) == [str(abandoned)]
    assert not abandoned.exists() and live.exists() and unrelated.exists()


def test_a_new_copy_clears_what_a_dead_server_left_in_the_temporary_folder() -> None:
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    abandoned = Path(tempfile.gettempdir()) / f"{FOLDER_PREFIX}{dead.stdout.strip()}-left"
    abandoned.mkdir(exist_ok=True)
    with probe_source(None, "x = 1\n", "untitled:1"):
        assert not abandoned.exists()


def test_workspace_folders_contain_their_files_only(tmp_path: Path) -> None:
    inside = tmp_path / "ws" / "pkg" / "model.py"
    inside.parent.mkdir(parents=True)
    inside.write_text("")
    sibling = tmp_path / "ws-other" / "model.py"  # shares the folder name's prefix
    sibling.parent.mkdir()
    sibling.write_text("")
    link = tmp_path / "ws" / "link.py"
    link.symlink_to(sibling)
    folders = (str(tmp_path / "ws"),)
    assert not outside_workspace(str(inside), folders)
    assert outside_workspace(str(sibling), folders)
    assert outside_workspace(str(link), folders)  # a link out of the folder leads outside
    assert outside_workspace(str(inside), ())


def test_the_memory_limit_setting() -> None:
    assert parse_settings({"probe": {"memoryLimit": 2048}}).settings.probe.memory_limit == 2048
    assert parse_settings({"probe.memoryLimit": 0}).settings.probe.memory_limit == 0
    default = parse_settings({}).settings.probe.memory_limit
    assert default is None
    for bad in (100, -1, "8G", True, 1.5):
        parsed = parse_settings({"probe": {"memoryLimit": bad}})
        assert parsed.settings.probe.memory_limit is None
        assert any("probe.memoryLimit" in problem for problem in parsed.problems), bad
    physical = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    assert probe_memory_limit(None) == physical // 2  # the default for editor-started probes
    assert probe_memory_limit(2048) == 2048 * 1024 * 1024
    assert probe_memory_limit(0) is None
