"""Summary lines for how the probed model was built and fed: the input (every tensor when it
has no pinnable spec), the constructor arguments, the precision."""

from __future__ import annotations

from .schema import ProbeReport


def input_text(report: ProbeReport) -> str:
    source = report.input
    if source.spec:
        return source.spec
    if not source.tensors:
        return "-"
    return ", ".join(
        f"{t.path}: {'x'.join(map(str, t.shape)) or 'scalar'} {t.dtype}" for t in source.tensors
    )


def build_rows(report: ProbeReport) -> list[tuple[str, str]]:
    rows: list[tuple[str, str]] = []
    built = report.construction
    if built is not None and (built.arguments or built.method != "default"):
        arguments = ", ".join(f"{name}={text}" for name, text in built.arguments.items())
        rows.append(("built with", f"{arguments or '-'}  ({built.detail})"))
    precision = report.precision
    if precision is not None:
        parts = [precision.dtype or "no floating parameters"]
        if precision.dtype_source == "input":
            parts[0] += " (from the input's dtype)"
        if precision.amp:
            scaler = " + GradScaler" if precision.grad_scaler else ""
            parts.append(f"autocast {precision.amp}{scaler}")
        if precision.memory_format != "contiguous":
            parts.append(precision.memory_format)
        rows.append(("precision", ", ".join(parts)))
    return rows
