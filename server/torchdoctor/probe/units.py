"""Measurements as people read them, the same everywhere torchdoctor prints one: the CLI's
probe report, CodeLens titles, inlay hints, hovers, the runner's advice text, and (in
TypeScript, `vscode-extension/src/probe/format.ts`) the report view. `tests/fixtures/
format_cases.json` holds the cases both sides are tested against.

The spec: three significant digits at most (two decimals below 10, one below 100, none from
100), without trailing zeros; bytes in binary units (KiB = 1024 B) up to TiB; counts and FLOPs
with SI prefixes K, M, G, T; times in µs below 1 ms and in s from 1000 ms; shapes as torch
prints a size's tuple; shares as percentages, "<0.1%" for what would round to nothing.

Standard library only: the probe runner loads this file by path (see runner.companion_module).
"""

from __future__ import annotations

from collections.abc import Sequence

BYTE_UNITS = ("KiB", "MiB", "GiB", "TiB")
SI_PREFIXES = ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "K"))


def significant(value: float) -> str:
    """At most three significant digits, trailing zeros dropped: 8.314 → "8.31", 44.63 →
    "44.6", 512.4 → "512", 2.5 → "2.5", 5.0 → "5"."""
    magnitude = abs(value)
    decimals = 2 if magnitude < 10 else 1 if magnitude < 100 else 0
    text = f"{value:.{decimals}f}"
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return "0" if text == "-0" else text


def size(value: float) -> str:
    """Bytes: 512 → "512 B", 8512 → "8.31 KiB", 46_758_048 → "44.6 MiB"."""
    if abs(value) < 1024:
        return f"{value:.0f} B"
    amount = value / 1024
    for unit in BYTE_UNITS:
        if abs(amount) < 1024 or unit == BYTE_UNITS[-1]:
            return f"{significant(amount)} {unit}"
        amount /= 1024
    raise AssertionError("unreachable: the last unit always returns")  # pragma: no cover


def _si(value: float, unit: str) -> str:
    for scale, prefix in SI_PREFIXES:
        if abs(value) >= scale:
            return f"{significant(value / scale)} {prefix}{unit}"
    return f"{significant(value)} {unit}".rstrip()


def count(value: float) -> str:
    """950 → "950", 20_490 → "20.5 K", 11_689_512 → "11.7 M"."""
    return _si(value, "")


def flops(value: float) -> str:
    """14.6e9 → "14.6 GFLOP", 950 → "950 FLOP"."""
    return _si(value, "FLOP")


def milliseconds(value: float) -> str:
    """A duration given in ms: 0.0421 → "42.1 µs", 120.54 → "121 ms", 2500 → "2.5 s"."""
    if abs(value) >= 1000:
        return f"{significant(value / 1000)} s"
    if abs(value) >= 1 or value == 0:
        return f"{significant(value)} ms"
    return f"{significant(value * 1000)} µs"


def shape(value: Sequence[int] | None) -> str:
    """As torch prints a size's tuple: (8, 10), (8,), (); "?" when not known."""
    if value is None:
        return "?"
    if len(value) == 1:
        return f"({value[0]},)"
    return "(" + ", ".join(str(n) for n in value) + ")"


def shapes(values: Sequence[Sequence[int]]) -> str:
    """Several outputs, e.g. an LSTM's: "(8, 16, 128), (2, 8, 64), (2, 8, 64)"."""
    return ", ".join(shape(value) for value in values)


def percent(fraction: float) -> str:
    """A share 0..1: 0.6642 → "66%", 0.0213 → "2.1%", 0.0001 → "<0.1%", 0 → "0.0%"."""
    value = fraction * 100
    if 0 < value < 0.05:
        return "<0.1%"
    return f"{value:.0f}%" if value >= 10 else f"{value:.1f}%"
