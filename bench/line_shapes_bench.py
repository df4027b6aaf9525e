"""What the shapes-by-line pass costs: one traced forward (probe/line_shapes.py, the way the
runner calls it) against one plain forward of the same model, same input, same process.

The acceptance models are the ones of tests/probe/fixtures/line_shapes_models.py (a GPT-style
attention block with a helper function; a CNN whose forward loops over its blocks and flattens),
at the test's tiny size and at a working size. The goal is a traced forward of at most 3x a
plain one. Each figure is the fastest of many runs (the one least disturbed by other work on a
shared machine; medians there swing by 2x from one minute to the next); one torch thread.

    python bench/line_shapes_bench.py [--quick]     # prints a markdown table
"""

from __future__ import annotations

import argparse
import importlib.util
import linecache
import sys
import time
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
TRACER = ROOT / "server" / "torchdoctor" / "probe" / "line_shapes.py"
MODELS = ROOT / "tests" / "probe" / "fixtures" / "line_shapes_models.py"
GOAL = 3.0


def load(path: Path, name: str) -> types.ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def cases(models: types.ModuleType, quick: bool) -> list[tuple[str, Any, tuple[int, ...]]]:
    found = [
        ("attention, test size", models.CausalSelfAttention(), (2, 5, 32)),
        ("CNN, test size", models.SmallCNN(), (2, 3, 16, 16)),
    ]
    if not quick:
        found += [
            (
                "attention, 8x128x256 (8 heads)",
                models.CausalSelfAttention(n_embd=256, n_head=8, block_size=128),
                (8, 128, 256),
            ),
        ]
    return found


def fastest_ms(step: Callable[[], Any], repeats: int) -> float:
    samples = []
    for _ in range(repeats):
        started = time.perf_counter()
        step()
        samples.append((time.perf_counter() - started) * 1000)
    return min(samples)


def measure(quick: bool = False) -> list[dict[str, Any]]:
    import torch

    torch.set_num_threads(1)
    tracer = load(TRACER, "_bench_line_shapes")
    models = load(MODELS, "_bench_line_shapes_models")
    model_file = str(MODELS)

    def is_user_code(code: types.CodeType) -> bool:
        return code.co_filename == model_file

    def source_line(file: str, line: int) -> str:
        return linecache.getline(file, line).strip()

    rows = []
    repeats = 20 if quick else 200
    for label, model, shape in cases(models, quick):
        x = torch.randn(shape)
        for _ in range(3):  # lazy initialisation, caches
            model(x)

        def plain() -> None:
            model(x)  # noqa: B023 - used inside this iteration only

        def traced() -> None:
            tracer.line_shapes_pass(
                lambda: model(x), is_user_code, torch.Tensor, source_line  # noqa: B023
            )

        plain_ms = fastest_ms(plain, repeats)
        traced_ms = fastest_ms(traced, repeats)
        info = tracer.line_shapes_pass(lambda: model(x), is_user_code, torch.Tensor, source_line)  # noqa: B023
        rows.append(
            {
                "model": label,
                "plain_forward_ms": plain_ms,
                "traced_forward_ms": traced_ms,
                "ratio": traced_ms / plain_ms,
                "line_events": info["line_events"],
                "lines": len(info["lines"]),
                "method": info["method"],
            }
        )
    return rows


def markdown(rows: list[dict[str, Any]]) -> str:
    out = [
        f"| model | plain forward | traced forward | ratio (goal ≤ {GOAL:g}x) | lines run | "
        "lines recorded |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        out.append(
            f"| {row['model']} | {row['plain_forward_ms']:.3f} ms | "
            f"{row['traced_forward_ms']:.3f} ms | {row['ratio']:.2f}x | {row['line_events']} | "
            f"{row['lines']} |"
        )
    method = rows[0]["method"] if rows else "?"
    out.append(f"\nTracing with {method}, Python {sys.version.split()[0]}, 1 torch thread.")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats, test sizes only")
    args = parser.parse_args(argv)
    print(markdown(measure(args.quick)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
