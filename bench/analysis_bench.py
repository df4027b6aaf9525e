"""Analysis cost against parse cost: per-file analysis time divided by `ast.parse` time on the
same text, for small, medium, 2,000- and 3,000-line files (medians of repeated runs); for the
3,000-line file, one keystroke analysed incrementally (what the language server's analyser does
per edit: only the edited top-level statement is parsed again); summed over the generated corpus
the throughput section checks and, where the mirrors of the ecosystem corpus are on the machine,
over its public Python files, with the median file's own ratio beside each sum."""

from __future__ import annotations

import ast
import multiprocessing
import statistics
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from itertools import cycle

from torchdoctor.analysis import IncrementalAnalyser
from torchdoctor.analysis.config import Config
from torchdoctor.analysis.engine import check

from .corpus import corpus_texts, make_file

SIZES = {
    "small (100 lines)": 100,
    "medium (500 lines)": 500,
    "2,000 lines": 2000,
    "3,000 lines": 3000,
}


# Untimed runs of each side before its timed ones. The first checks in a process pay what a
# run over many files pays once, not per file: modules and tables loaded on first use, caches
# filled, and CPython 3.11 specialising each function's bytecode once it has run eight times
# (a rule runs once per file). Without them the first row measured counted that cost and the
# other rows did not: its check read about 2% slower. `ast.parse` gets the same runs.
WARMUP_RUNS = 10


def _median_seconds(action: Callable[[], object], repeats: int, warmups: int) -> float:
    for _ in range(warmups):
        action()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        action()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def run_analysis_bench(quick: bool = False) -> dict[str, dict[str, float]]:
    repeats = 3 if quick else 25
    warmups = 0 if quick else WARMUP_RUNS
    config = Config(select=("ALL",))
    results: dict[str, dict[str, float]] = {}
    for label, lines in SIZES.items():
        if quick and lines > 500:
            continue
        text = make_file(lines, seed=lines)
        parse = _median_seconds(lambda text=text: ast.parse(text), repeats, warmups)
        full = _median_seconds(lambda text=text: check(text, config=config), repeats, warmups)
        results[label] = {
            "lines": float(text.count("\n")),
            "ast_parse_ms": parse * 1000,
            "analysis_ms": full * 1000,
            "ratio": full / parse,
        }
        if lines == max(SIZES.values()):
            results[f"{label}, one keystroke (incremental)"] = _keystroke_row(
                text, parse, config, repeats, warmups
            )
    if not quick:
        results[
            f"generated corpus: the throughput section's {GENERATED_FILES} files, summed"
        ] = _summed(corpus_texts(GENERATED_FILES), config)
        corpus = _corpus_row()
        if corpus is not None:
            results["public code: the ecosystem corpus's Python files"] = corpus
    return results


# the throughput section's default corpus (`python -m bench --corpus-files`)
GENERATED_FILES = 100


def _corpus_row() -> dict[str, float] | None:
    """`ast.parse` against parse + every rule, summed over the pinned corpus of public code
    (`python -m bench ecosystem`); None without its mirrors. Measured in a process of its own:
    the 1,500 files' trees would leave this one large, and every tool a later section starts
    would report that size as its own peak memory (a child's peak counts the parent's pages
    it was forked with)."""
    spawn = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=1, mp_context=spawn) as pool:
        return pool.submit(_measure_corpus).result()


def _measure_corpus(repeats: int = 3) -> dict[str, float] | None:
    """Each file's best of `repeats`, summed."""
    from .ecosystem import (
        corpus_config,
        default_corpus_dir,
        default_mirror_dir,
        git_dir,
        read_files,
        read_manifest,
    )

    mirrors = default_mirror_dir()
    texts: list[str] = []
    for repository in read_manifest(default_corpus_dir()):
        if git_dir(mirrors, repository) is not None:
            texts.extend(
                source.data.decode("utf-8", "replace")
                for source in read_files(mirrors, repository, ".py")
            )
    if not texts:
        return None
    return _summed(texts, corpus_config(), repeats)


def _summed(texts: list[str], config: Config, repeats: int = 3) -> dict[str, float]:
    """`ast.parse` against parse + every rule, each file's best of `repeats`, summed over the
    files that parse."""
    parse = analysis = 0.0
    per_file: list[float] = []
    for text in texts:
        try:
            ast.parse(text)
        except (SyntaxError, ValueError):
            continue  # not Python 3.11: neither side is timed
        parsed = min(_seconds(lambda text=text: ast.parse(text)) for _ in range(repeats))
        analysed = min(
            _seconds(lambda text=text: check(text, config=config)) for _ in range(repeats)
        )
        parse += parsed
        analysis += analysed
        per_file.append(analysed / parsed)
    return {
        "lines": float(sum(text.count("\n") for text in texts)),
        "ast_parse_ms": parse * 1000,
        "analysis_ms": analysis * 1000,
        "ratio": analysis / parse if parse else float("nan"),
        # the sum is weighed by the long files; a small file's own ratio is higher (a fixed
        # cost per file), so the median file is shown beside it
        "median_file_ratio": statistics.median(per_file) if per_file else float("nan"),
    }


def _seconds(action: Callable[[], object]) -> float:
    start = time.perf_counter()
    action()
    return time.perf_counter() - start


def _keystroke_row(
    text: str, parse: float, config: Config, repeats: int, warmups: int
) -> dict[str, float]:
    """A `#` typed at the end of a line in the middle of the file, then deleted, in turn."""
    lines = text.split("\n")
    middle = len(lines) // 2
    while not lines[middle].strip():
        middle += 1
    typed = "\n".join([*lines[:middle], lines[middle] + "#", *lines[middle + 1 :]])
    analyser = IncrementalAnalyser()
    analyser.analyse(text, config)
    versions = cycle([typed, text])
    seconds = _median_seconds(
        lambda: analyser.analyse(next(versions), config), repeats, warmups
    )
    return {
        "lines": float(text.count("\n")),
        "ast_parse_ms": parse * 1000,
        "analysis_ms": seconds * 1000,
        "ratio": seconds / parse,
    }


def markdown(results: dict[str, dict[str, float]]) -> str:
    rows = [
        "| file | lines | ast.parse (ms) | parse + analysis (ms) | ratio |",
        "|---|---|---|---|---|",
    ]
    for label, row in results.items():
        ratio = f"{row['ratio']:.2f}×"
        if "median_file_ratio" in row:
            ratio += f" (median file {row['median_file_ratio']:.2f}×)"
        rows.append(
            f"| {label} | {row['lines']:.0f} | {row['ast_parse_ms']:.2f} | "
            f"{row['analysis_ms']:.2f} | {ratio} |"
        )
    return "\n".join(rows)


if __name__ == "__main__":
    print(markdown(run_analysis_bench()))
