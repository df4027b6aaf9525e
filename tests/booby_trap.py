"""A workspace that runs code if anything imports from it: the modules a Python started in it, or
with it on PYTHONPATH, would pick up (`torchdoctor/`, `pathspec.py`, `sitecustomize.py`, the
PYTHONSTARTUP file) and a user site with a `usercustomize.py`. Each writes its name to a marker
file outside the workspace when it runs."""

from __future__ import annotations

import os
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class BoobyTrap:
    workspace: Path
    user_site: Path  # site-packages of `user_base`
    user_base: Path
    marker: Path

    def environment(self) -> dict[str, str]:
        """os.environ plus what would make a careless Python import the traps."""
        return {
            **os.environ,
            "PYTHONPATH": str(self.workspace),
            "PYTHONSTARTUP": str(self.workspace / "startup.py"),
            "PYTHONUSERBASE": str(self.user_base),
        }

    def fired(self) -> list[str]:
        """The traps that ran, in order (empty when none did)."""
        if not self.marker.exists():
            return []
        return self.marker.read_text(encoding="utf-8").split()


def make_booby_trap(root: Path) -> BoobyTrap:
    workspace, user_base, marker = root / "workspace", root / "user-base", root / "fired.txt"
    user_site = Path(sysconfig.get_path("purelib", f"{os.name}_user", {"userbase": str(user_base)}))
    (workspace / "torchdoctor").mkdir(parents=True)
    user_site.mkdir(parents=True)

    def trap(path: Path, name: str) -> None:
        path.write_text(f"open({str(marker)!r}, 'a').write({name!r} + '\\n')\n", encoding="utf-8")

    trap(workspace / "torchdoctor" / "__init__.py", "torchdoctor")
    for name in ("pathspec", "sitecustomize", "usercustomize", "startup"):
        trap(workspace / f"{name}.py", name)
    trap(user_site / "usercustomize.py", "user-site-usercustomize")
    return BoobyTrap(workspace, user_site, user_base, marker)


def fake_torch_metadata(site: Path, version: str) -> None:
    """What `pip install torch==<version>` leaves for torchdoctor's version look-up to read."""
    dist_info = site / f"torch-{version}.dist-info"
    dist_info.mkdir(parents=True)
    (dist_info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: torch\nVersion: {version}\n")


def plain_python() -> str:
    """An interpreter that is no virtual environment, so its user site is live: the one this
    test environment was made from."""
    return str(getattr(sys, "_base_executable", None) or sys.executable)
