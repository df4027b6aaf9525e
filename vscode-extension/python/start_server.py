"""Starts the torchdoctor language server for the VS Code extension without running any code
from the folder the user opened.

`python -m torchdoctor serve` started in a workspace folder would put that folder first on
`sys.path`: a workspace holding `torchdoctor/__init__.py`, `pathspec.py` or `sitecustomize.py`
would run as the server starts, trusted folder or not. So the extension runs this script as

    <python> -I -S -X utf8 start_server.py [--path DIR]... [--bundled DIR] [serve options]

- `-I` (isolated): neither the current folder nor this script's folder is on `sys.path`, the user
  site is off, and PYTHONPATH, PYTHONHOME, PYTHONSTARTUP and every other PYTHON* variable are
  ignored, whatever the environment the editor was started from says.
- `-S`: no `site` at start-up, so no `.pth` file or `sitecustomize` runs before this script
  decides what the server imports.
- `-X utf8`: the server reads and writes UTF-8 whatever the locale (PYTHONUTF8 would be ignored
  under `-I`, and would leak into every process the server starts).

Then this script puts the libraries on `sys.path` itself: each `--path` first (a source checkout,
for development), then `--bundled` (the Python libraries shipped inside the extension). Without
`--bundled` the server comes from the interpreter's own installation (torchdoctor installed
there, e.g. in development): `site` then runs for the interpreter's site-packages only, still
without the user site.

Standard library only: nothing else can be imported before `sys.path` is set up.
"""

from __future__ import annotations

import sys

USAGE = "usage: start_server.py [--path DIR]... [--bundled DIR] [torchdoctor serve options]"


def isolated() -> bool:
    """Started with `-I -S`: the only start that keeps workspace code out (see above)."""
    return bool(sys.flags.isolated and sys.flags.no_site)


def split_arguments(argv: list[str]) -> tuple[list[str], str | None, list[str]]:
    """(--path folders in order, the --bundled folder, the options left for `serve`)."""
    paths: list[str] = []
    bundled: str | None = None
    rest: list[str] = []
    index = 0
    while index < len(argv):
        argument = argv[index]
        if argument in ("--path", "--bundled"):
            if index + 1 >= len(argv):
                raise ValueError(f"{argument} needs a folder")
            value = argv[index + 1]
            if argument == "--path":
                paths.append(value)
            else:
                bundled = value
            index += 2
        else:
            rest.append(argument)
            index += 1
    return paths, bundled, rest


def main(argv: list[str]) -> int:
    if not isolated():
        print(
            "start_server.py must be run as `python -I -S start_server.py ...`: without -I and -S "
            "the current folder, PYTHONPATH and the user site could run code before the server "
            "starts",
            file=sys.stderr,
        )
        return 2
    try:
        paths, bundled, rest = split_arguments(argv)
    except ValueError as error:
        print(f"start_server.py: {error}\n{USAGE}", file=sys.stderr)
        return 2
    if bundled is None:
        # torchdoctor from the interpreter's installation. site runs before our folders are on
        # sys.path, so the sitecustomize it imports can only come from the interpreter's own
        # folders; -I keeps the user site (and its usercustomize) off.
        import site

        site.main()
    sys.path[0:0] = [*paths, *([bundled] if bundled is not None else [])]

    from torchdoctor.cli import main as torchdoctor_main

    return torchdoctor_main(["serve", *rest])


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
