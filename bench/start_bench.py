"""Process start → first diagnostics of a file the client opens at once, and → the first answer
of the whole server (a CodeLens, which the early front leaves to it), by torchdoctor and by
`ruff server` in the same run, the starts of the servers taking turns.

`python -m bench.start_bench [--starts N] [--against TREE]`: TREE is another source tree (a
`git worktree` of an older commit), whose server is started with its `server/` folder first on
PYTHONPATH, in turn with this checkout's; both trees are byte-compiled first (see
`lsp_bench.byte_compile`). ruff starts in an empty folder: in a folder with files its start
includes reading them.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
from pathlib import Path

from .corpus import make_dense_file, make_file
from .lsp_bench import CHECKOUT, RUFF_SERVER, SERVER, StdioClient, byte_compile

FILES = {
    "300 lines, models and training functions": lambda: make_file(300, seed=300),
    "3,002 lines dense with findings": lambda: make_dense_file(3000, seed=3),
}


def one_start(
    command: list[str], root: Path, text: str, env: dict[str, str] | None, whole: bool
) -> tuple[float, float | None]:
    """(seconds to the first diagnostics, seconds to the whole server's first answer)."""
    client = StdioClient(command, env=env)
    try:
        client.initialize({"hoverSignatures": False}, root)
        uri = (root / "start.py").as_uri()
        client.open(uri, text)
        first = client.diagnostics_for(uri, 1).received - client.started
        loaded = client.wait_until_loaded(uri) - client.started if whole else None
        return first, loaded
    finally:
        client.close()


def measure(starts: int, against: Path | None) -> dict[str, dict[str, list[float]]]:
    servers: dict[str, tuple[list[str], dict[str, str] | None, bool]] = {
        "torchdoctor": (SERVER, None, True)
    }
    byte_compile(CHECKOUT)
    if against is not None:
        byte_compile(against.resolve())
        env = {**os.environ, "PYTHONPATH": str(against.resolve() / "server")}
        servers[f"torchdoctor at {against}"] = (SERVER, env, False)
    if Path(RUFF_SERVER[0]).exists():
        servers["ruff server"] = (RUFF_SERVER, None, False)
    results: dict[str, dict[str, list[float]]] = {}
    for name, make in FILES.items():
        text = make()
        for _ in range(starts):
            for server, (command, env, whole) in servers.items():
                with tempfile.TemporaryDirectory(prefix="torchdoctor-start-") as folder:
                    first, loaded = one_start(command, Path(folder), text, env, whole)
                figures = results.setdefault(f"{name} | {server}", {"first": [], "whole": []})
                figures["first"].append(first)
                if loaded is not None:
                    figures["whole"].append(loaded)
    return results


def markdown(results: dict[str, dict[str, list[float]]]) -> str:
    rows = [
        "| file | server | first diagnostics, median (range) | whole server answers, median |",
        "|---|---|---|---|",
    ]
    for key, figures in results.items():
        first = figures["first"]
        whole = figures["whole"]
        whole_cell = f"{statistics.median(whole):.2f} s" if whole else ""
        rows.append(
            f"| {key} | {statistics.median(first):.2f} s ({min(first):.2f}–{max(first):.2f}) | "
            f"{whole_cell} |"
        )
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--starts", type=int, default=5, help="starts of each server per file")
    parser.add_argument("--against", type=Path, help="another source tree to compare with")
    options = parser.parse_args(argv)
    print(markdown(measure(options.starts, options.against)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
