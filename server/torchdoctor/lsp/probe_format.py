"""Probe measurements in the few characters a lens title, an inlay hint or a hover has: the
one formatter of measurements (probe/units.py), so the editor says what the CLI says."""

from __future__ import annotations

from ..probe.units import count, milliseconds, percent, shape, size

__all__ = ["count", "milliseconds", "shape", "share", "size"]


def share(value: float | None) -> str | None:
    """A share of the step as a percentage; None when the probe did not measure one."""
    return percent(value) if value is not None else None
