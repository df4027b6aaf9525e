"""The incremental engine alone, edit by edit: what the language server's analysis of a keystroke
costs without the protocol around it.

`python -m bench.edit_bench` types the edits of `lsp_bench --dense-only` (a letter added to the
name an assignment in a function binds, then deleted) into the dense files and times
`IncrementalAnalyser.analyse` of each version, back to back.

`--enter` times Enter keystrokes instead: a line break typed after a line of a function in the
first tenth of the file, then deleted, in turn. Each one moves every block below it by a line,
which the letters never do.

`python -m bench.edit_bench --against TREE` compares this checkout with another source tree (a
`git worktree` of an older commit): each engine runs in its own process, and the two take the
edits in turn, so each pauses while the other works, as an engine does between an editor's
keystrokes, and a machine whose speed drifts slows both alike. The ratio is the median of the
per-edit ratios.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from .corpus import make_dense_file
from .lsp_bench import _code_edits

ROOT = Path(__file__).resolve().parents[1]
SIZES = {3000: 3, 10000: 10}  # lines → the seed lsp_bench's dense files use


def dense_text(lines: int) -> str:
    return make_dense_file(lines, seed=SIZES.get(lines, 3))


def edit_times_ms(text: str, count: int, enter: bool = False) -> list[float]:
    """Milliseconds of each incremental analysis of `count` edits of `text`, in order."""
    from torchdoctor.analysis.config import Config
    from torchdoctor.analysis.incremental import IncrementalAnalyser

    config = Config()
    analyser = IncrementalAnalyser("dense.py")
    analyser.analyse(text, config)
    times: list[float] = []
    for version in versions(text, count, enter):
        started = time.perf_counter()
        analyser.analyse(version, config)
        times.append((time.perf_counter() - started) * 1000)
    return times


def versions(text: str, count: int, enter: bool) -> Iterator[str]:
    """The texts of `count` edits of `text` in turn: letters typed and deleted, or Enter."""
    lines = text.split("\n")
    if enter:
        yield from _enter_versions(lines, count, seed=len(text))
        return
    for line, column, typed in _code_edits(lines, count, seed=len(text)):
        lines[line] = _typed(lines[line], column, typed)
        yield "\n".join(lines)


def _enter_versions(lines: list[str], count: int, seed: int) -> Iterator[str]:
    """A line break after a function's line in the file's first tenth, then deleted again."""
    rng = random.Random(seed)
    inside = [i for i, line in enumerate(lines[: len(lines) // 10]) if line.startswith("    ")]
    for edit in range(count):
        if edit % 2 == 0:
            line = rng.choice(inside)
            yield "\n".join([*lines[: line + 1], "", *lines[line + 1 :]])
        else:
            yield "\n".join(lines)


def _typed(line: str, column: int, typed: str) -> str:
    return line[:column] + typed + line[column:] if typed else line[:column] + line[column + 1 :]


def summary(times: list[float]) -> str:
    ordered = sorted(times)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return f"p50 {statistics.median(ordered):.1f} ms, p99 {p99:.1f} ms"


def _worker(lines: int, count: int, enter: int) -> None:
    """One engine of a comparison: an edit each time a line arrives on stdin."""
    from torchdoctor.analysis.config import Config
    from torchdoctor.analysis.incremental import IncrementalAnalyser

    text = dense_text(lines)
    config = Config()
    analyser = IncrementalAnalyser("dense.py")
    analyser.analyse(text, config)
    print("ready", flush=True)
    for version in versions(text, count, bool(enter)):
        sys.stdin.readline()
        started = time.perf_counter()
        analyser.analyse(version, config)
        print((time.perf_counter() - started) * 1000, flush=True)


def compare(trees: list[Path], lines: int, count: int, enter: bool = False) -> list[list[float]]:
    """Per-edit milliseconds of each tree's engine, the trees taking the edits in turn."""
    workers = []
    for tree in trees:
        environment = dict(os.environ, PYTHONPATH=f"{tree / 'server'}{os.pathsep}{ROOT}")
        worker = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "bench.edit_bench",
                "--worker",
                str(lines),
                str(count),
                str(int(enter)),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=environment,
            cwd=ROOT,
        )
        assert worker.stdout is not None and worker.stdout.readline().strip() == "ready"
        workers.append(worker)
    times: list[list[float]] = [[] for _ in trees]
    for edit in range(count):
        # which engine goes first alternates: neither always follows the other's work
        order = range(len(workers)) if edit % 2 == 0 else reversed(range(len(workers)))
        for which in order:
            worker = workers[which]
            assert worker.stdin is not None and worker.stdout is not None
            worker.stdin.write("next\n")
            worker.stdin.flush()
            times[which].append(float(worker.stdout.readline()))
    for worker in workers:
        assert worker.stdin is not None
        worker.stdin.close()
        worker.wait()
    return times


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.edit_bench", description=__doc__)
    parser.add_argument("--lines", type=int, nargs="+", default=[3000, 10000])
    parser.add_argument("--edits", type=int, default=150)
    parser.add_argument("--against", type=Path, help="another source tree to compare with")
    parser.add_argument("--enter", action="store_true", help="time Enter keystrokes instead")
    parser.add_argument("--worker", nargs=3, type=int, help=argparse.SUPPRESS)
    options = parser.parse_args(argv)
    if options.worker:
        _worker(*options.worker)
        return 0
    for lines in options.lines:
        edits = f"{options.edits} {'Enter keystrokes' if options.enter else 'edits'}"
        if options.against is None:
            times = edit_times_ms(dense_text(lines), options.edits, options.enter)
            print(f"dense {lines:,} lines, {edits} back to back: {summary(times)}")
            continue
        theirs, mine = compare([options.against, ROOT], lines, options.edits, options.enter)
        ratio = statistics.median(b / a for a, b in zip(theirs, mine, strict=True))
        print(
            f"dense {lines:,} lines, {edits} in turn: this tree {summary(mine)}; "
            f"{options.against} {summary(theirs)}; median ratio {ratio:.2f}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
