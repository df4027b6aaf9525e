"""Batch check throughput: `torchdoctor check` against TorchFix (all rules) and ruff (a fast
linter, all rules) on the same corpus, in one run: files/s, lines/s, peak RSS and the ratios.

Each tool runs as its own process, as a user would run it; the median of `repeats` runs is kept,
except for TorchFix, which runs once: it is 20-40 times slower and one run of it already takes
longer than all the other runs together. Peak RSS comes from `os.wait4` for the tool's process.
The corpus generator writes any number of files (`python -m bench --corpus-files 2000`); the
default keeps the whole bench under 10 minutes on 2 cores.
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from .corpus import write_corpus


@dataclass
class ToolRun:
    tool: str
    seconds: float
    peak_rss_mb: float
    exit_code: int


def _bin(name: str) -> str | None:
    local = Path(sys.executable).parent / name
    if local.exists():
        return str(local)
    return shutil.which(name)


def commands(corpus: Path, jobs: int) -> dict[str, list[str]]:
    """The command of each tool on `corpus`; a tool that is not installed is left out."""
    found: dict[str, list[str]] = {}
    torchdoctor = _bin("torchdoctor")
    if torchdoctor:
        found["torchdoctor"] = [
            torchdoctor,
            "check",
            "--select",
            "ALL",
            "-q",
            "--no-color",
            "-j",
            str(jobs),
            str(corpus),
        ]
    torchfix = _bin("torchfix")
    if torchfix:
        found["torchfix"] = [torchfix, "--select", "ALL", "-j", str(jobs), str(corpus)]
    ruff = _bin("ruff")
    if ruff:
        # ruff has no job setting: it always uses every core
        found["ruff"] = [ruff, "check", "--select", "ALL", "--no-cache", "--quiet", str(corpus)]
    return found


def timed_run(command: list[str], env: dict[str, str]) -> ToolRun:
    start = time.perf_counter()
    process = subprocess.Popen(
        command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env
    )
    _, status, usage = os.wait4(process.pid, 0)
    seconds = time.perf_counter() - start
    process.returncode = os.waitstatus_to_exitcode(status)
    return ToolRun(Path(command[0]).name, seconds, usage.ru_maxrss / 1024, process.returncode)


def count_lines(files: list[Path]) -> int:
    return sum(path.read_bytes().count(b"\n") for path in files)


def real_code() -> list[Path]:
    """Real PyTorch code present on this machine: torch's own optim and data packages (about
    23,000 lines; torch.nn would add 49,000 lines and minutes of TorchFix time)."""
    try:
        import importlib.util

        spec = importlib.util.find_spec("torch")
    except (ImportError, ValueError):
        return []
    if spec is None or not spec.submodule_search_locations:
        return []
    root = Path(next(iter(spec.submodule_search_locations)))
    files: list[Path] = []
    for package in ("optim", "utils/data"):
        files.extend(sorted((root / package).rglob("*.py")))
    return files


def run_throughput_bench(
    work: Path, files: int = 100, repeats: int = 3, quick: bool = False
) -> dict[str, object]:
    if quick:
        files, repeats = 6, 1
    corpus = work / "corpus"
    if corpus.exists():
        shutil.rmtree(corpus)
    written = write_corpus(corpus, files)
    real = real_code()
    real_folder = work / "real"
    if real_folder.exists():
        shutil.rmtree(real_folder)
    if real and not quick:
        for index, path in enumerate(real):
            target = real_folder / f"{index:04}_{path.name}"
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, target)
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    results: dict[str, object] = {}
    for label, folder, count in (
        ("generated", corpus, len(written)),
        ("real (torch.optim, torch.utils.data)", real_folder, len(real)),
    ):
        if not folder.exists():
            continue
        lines = count_lines(sorted(folder.rglob("*.py")))
        section: dict[str, object] = {"files": count, "lines": lines}
        for jobs in (1, os.cpu_count() or 1) if not quick else (1,):
            for tool, command in commands(folder, jobs).items():
                if tool == "ruff" and jobs != 1:
                    continue
                times = 1 if tool == "torchfix" else repeats
                runs = [timed_run(command, env) for _ in range(times)]
                seconds = statistics.median(run.seconds for run in runs)
                section[f"{tool} -j{jobs}" if tool != "ruff" else "ruff"] = {
                    "seconds": seconds,
                    "files_per_s": count / seconds,
                    "lines_per_s": lines / seconds,
                    "peak_rss_mb": max(run.peak_rss_mb for run in runs),
                    "exit_code": runs[-1].exit_code,
                }
        results[label] = section
    return results


def markdown(results: dict[str, object]) -> str:
    rows = []
    for label, section in results.items():
        assert isinstance(section, dict)
        rows.append(f"**{label}** — {section['files']} files, {section['lines']:,} lines\n")
        rows.append("| tool | seconds | files/s | lines/s | peak RSS (MB) | torchdoctor -j1 is |")
        rows.append("|---|---|---|---|---|---|")
        reference = section.get("torchdoctor -j1")
        for tool, figures in section.items():
            if not isinstance(figures, dict):
                continue
            ratio = ""
            if isinstance(reference, dict) and tool != "torchdoctor -j1":
                speed = figures["seconds"] / reference["seconds"]
                ratio = f"{speed:.1f}× faster" if speed >= 1 else f"{1 / speed:.1f}× slower"
            rows.append(
                f"| {tool} | {figures['seconds']:.2f} | {figures['files_per_s']:,.0f} | "
                f"{figures['lines_per_s']:,.0f} | {figures['peak_rss_mb']:.0f} | {ratio} |"
            )
        rows.append("")
    return "\n".join(rows)
