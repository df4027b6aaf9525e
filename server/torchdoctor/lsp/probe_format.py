"""Probe measurements in the few characters a lens title, an inlay hint or a hover has."""

from __future__ import annotations

from collections.abc import Sequence


def count(value: int) -> str:
    """1234 → "1.2K", 1_234_567 → "1.2M"."""
    for limit, suffix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "K")):
        if abs(value) >= limit:
            return f"{value / limit:.3g}{suffix}"
    return str(value)


def size(value: int) -> str:
    """Bytes in binary units with their binary names, as the CLI and the report view print
    them: 8,512 → "8.31 KiB"."""
    amount = float(value)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(amount) < 1024 or unit == "GiB":
            return f"{amount:.0f} {unit}" if unit == "B" else f"{amount:.3g} {unit}"
        amount /= 1024
    return f"{amount:.3g} GiB"  # pragma: no cover - the loop always returns


def milliseconds(value: float) -> str:
    return f"{value:.3g} ms" if value < 1000 else f"{value / 1000:.3g} s"


def shape(value: Sequence[int] | None) -> str:
    """As torch prints a size: (8, 10), (8,), ()."""
    if value is None:
        return "?"
    if len(value) == 1:
        return f"({value[0]},)"
    return "(" + ", ".join(str(n) for n in value) + ")"


def share(value: float | None) -> str | None:
    return f"{value * 100:.0f}%" if value is not None else None
