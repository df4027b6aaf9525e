"""`python -m bench [--quick] [--only SECTION ...]`: every benchmark in one run, side by side with
the references, written as markdown and JSON to bench/results/. `python -m bench ecosystem`: every
rule over the pinned corpus of public code, judged by the ledger (bench/ecosystem.py)."""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from collections.abc import Callable
from pathlib import Path

from . import analysis_bench, throughput

RESULTS = Path(__file__).parent / "results"


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    memory = ""
    try:
        pages = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        memory = f", {pages / 2**30:.0f} GiB"
    except (ValueError, OSError):
        pass
    return f"{os.cpu_count()} cores ({cpu}){memory}, Python {platform.python_version()}"


def sections(
    quick: bool, work: Path, corpus_files: int = 100
) -> dict[str, Callable[[], tuple[object, str]]]:
    def analysis() -> tuple[object, str]:
        result = analysis_bench.run_analysis_bench(quick)
        return result, analysis_bench.markdown(result)

    def batch() -> tuple[object, str]:
        result = throughput.run_throughput_bench(work, files=corpus_files, quick=quick)
        return result, throughput.markdown(result)

    found: dict[str, Callable[[], tuple[object, str]]] = {
        "analysis": analysis,
        "throughput": batch,
    }
    try:
        from . import lsp_bench
    except ImportError:
        pass
    else:

        def lsp() -> tuple[object, str]:
            result = lsp_bench.run_lsp_bench(quick)
            return result, lsp_bench.markdown(result)

        found["lsp"] = lsp
    try:
        from . import probe_bench
    except ImportError:
        pass
    else:

        def probe() -> tuple[object, str]:
            result = probe_bench.run_probe_bench(quick)
            return result, probe_bench.markdown(result)

        found["probe"] = probe
    return found


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["ecosystem"]:
        from . import ecosystem

        return ecosystem.main(argv[1:])
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="tiny inputs (a smoke run)")
    parser.add_argument("--only", nargs="*", help="run only these sections")
    parser.add_argument(
        "--corpus-files",
        type=int,
        default=100,
        help="generated files for the throughput section (default 100, about 48,000 lines)",
    )
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    work = args.out / "work"
    work.mkdir(exist_ok=True)
    report = [f"Machine: {machine()}. Date: {time.strftime('%Y-%m-%d')}.", ""]
    data: dict[str, object] = {"machine": machine()}
    for name, run in sections(args.quick, work, args.corpus_files).items():
        if args.only and name not in args.only:
            continue
        start = time.perf_counter()
        result, table = run()
        data[name] = result
        report += [f"### {name} ({time.perf_counter() - start:.0f} s)", "", table, ""]
        print("\n".join(report[-4:]), flush=True)
    (args.out / "results.json").write_text(json.dumps(data, indent=2, default=str))
    (args.out / "results.md").write_text("\n".join(report))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
