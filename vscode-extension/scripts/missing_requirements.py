"""Prints the requirements that some supported Python (3.10 to 3.14) needs but a
`pip install --target` folder lacks, one per line: those of the packages in the folder,
plus the top-level requirements given as further arguments.

pip evaluates environment markers with the interpreter that runs it, even under
`--python-version`, so a bundle built on 3.11 misses backports such as
`exceptiongroup; python_version < "3.11"` that Python 3.10 users need.
"""

from __future__ import annotations

import sys
from email.parser import HeaderParser
from pathlib import Path

# pip always vendors packaging, so this needs nothing installed besides pip itself.
from pip._vendor.packaging.requirements import Requirement
from pip._vendor.packaging.utils import canonicalize_name

SUPPORTED = ["3.10", "3.11", "3.12", "3.13", "3.14"]


def main(target: Path, top_level: list[str]) -> None:
    installed: set[str] = set()
    requirements = [Requirement(line) for line in top_level]
    for metadata_file in target.glob("*.dist-info/METADATA"):
        metadata = HeaderParser().parsestr(metadata_file.read_text(encoding="utf-8"))
        installed.add(canonicalize_name(metadata["Name"]))
        requirements.extend(Requirement(line) for line in metadata.get_all("Requires-Dist") or [])
    missing: dict[str, str] = {}
    for requirement in requirements:
        name = canonicalize_name(requirement.name)
        if name in installed or name in missing:
            continue
        if requirement.marker is None or any(
            requirement.marker.evaluate({"python_version": version, "python_full_version": f"{version}.0", "extra": ""})
            for version in SUPPORTED
        ):
            missing[name] = str(requirement).split(";")[0].strip()
    print("\n".join(missing.values()))


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2:])
