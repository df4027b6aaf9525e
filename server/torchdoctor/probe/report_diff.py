"""What changed between two probe reports of a model: per module (parameters, output shapes,
forward time, FLOPs) and overall (latency, peak memory), and which thresholds were passed.
Pure: two `ProbeReport`s in, a `ReportDiff` out."""

from __future__ import annotations

from dataclasses import dataclass, field

from .schema import ModuleRow, ProbeReport


@dataclass(frozen=True)
class Thresholds:
    max_slowdown: float | None = None
    """Fail when new latency / old latency is above this (1.1: 10% slower)."""
    max_memory_growth: float | None = None
    """Fail when new peak memory / old peak memory is above this."""


@dataclass(frozen=True)
class ModuleChange:
    name: str
    """"" is the model itself."""
    status: str
    """"changed", "added" (only in the new report) or "removed"."""
    type: str
    params: tuple[int | None, int | None]
    output_shapes: tuple[list[list[int]] | None, list[list[int]] | None]
    forward_ms: tuple[float | None, float | None]
    flops: tuple[int | None, int | None]

    @property
    def shapes_changed(self) -> bool:
        return self.output_shapes[0] != self.output_shapes[1]

    @property
    def params_changed(self) -> bool:
        return self.params[0] != self.params[1]


@dataclass(frozen=True)
class Overall:
    what: str
    """"forward", "forward+backward", "peak memory", "parameters", "FLOPs"."""
    old: float | None
    new: float | None

    @property
    def ratio(self) -> float | None:
        if self.old is None or self.new is None or self.old <= 0:
            return None
        return self.new / self.old


@dataclass
class ReportDiff:
    target: tuple[str, str]
    overall: list[Overall]
    modules: list[ModuleChange]
    failures: list[str] = field(default_factory=list)
    """One sentence per threshold passed; empty when none was."""


# a module's forward time from hooks is noisy below this: it is shown, never judged
TIME_NOISE_MS = 0.05


def diff_reports(old: ProbeReport, new: ProbeReport, thresholds: Thresholds) -> ReportDiff:
    overall = [
        Overall("forward", old.latency.forward.median_ms, new.latency.forward.median_ms),
        Overall(
            "forward+backward",
            _median(old.latency.forward_backward),
            _median(new.latency.forward_backward),
        ),
        Overall("peak memory", old.memory.peak_bytes, new.memory.peak_bytes),
        Overall("parameters", old.params.total, new.params.total),
        Overall("FLOPs", old.flops.forward_backward or old.flops.forward,
                new.flops.forward_backward or new.flops.forward),
    ]
    diff = ReportDiff((old.target, new.target), overall, module_changes(old, new))
    latency = overall[1] if overall[1].ratio is not None else overall[0]
    if thresholds.max_slowdown is not None and latency.ratio is not None:
        if latency.ratio > thresholds.max_slowdown:
            diff.failures.append(
                f"{latency.what} is {latency.ratio:.2f}x the old median "
                f"({latency.old:.3f} ms → {latency.new:.3f} ms), above --max-slowdown "
                f"{thresholds.max_slowdown:g}"
            )
    memory = overall[2]
    if thresholds.max_memory_growth is not None and memory.ratio is not None:
        if memory.ratio > thresholds.max_memory_growth:
            diff.failures.append(
                f"peak memory is {memory.ratio:.2f}x the old peak ({memory.old:.0f} B → "
                f"{memory.new:.0f} B), above --max-memory-growth {thresholds.max_memory_growth:g}"
            )
    return diff


def _median(stats: object) -> float | None:
    return getattr(stats, "median_ms", None)


def module_changes(old: ProbeReport, new: ProbeReport) -> list[ModuleChange]:
    before = {row.name: row for row in old.modules}
    after = {row.name: row for row in new.modules}
    names = list(before) + [name for name in after if name not in before]
    changes = []
    for name in names:
        change = _change(name, before.get(name), after.get(name))
        if change is not None:
            changes.append(change)
    return changes


def _change(name: str, old: ModuleRow | None, new: ModuleRow | None) -> ModuleChange | None:
    status = "added" if old is None else "removed" if new is None else "changed"
    row = new or old
    assert row is not None
    change = ModuleChange(
        name=name,
        status=status,
        type=row.type if old is None or new is None or old.type == new.type
        else f"{old.type} → {new.type}",
        params=(old.params if old else None, new.params if new else None),
        output_shapes=(old.output_shapes if old else None, new.output_shapes if new else None),
        forward_ms=(old.forward_ms if old else None, new.forward_ms if new else None),
        flops=(old.flops if old else None, new.flops if new else None),
    )
    if status != "changed":
        return change
    assert old is not None and new is not None
    slower = _time_changed(old.forward_ms, new.forward_ms)
    if change.params_changed or change.shapes_changed or old.type != new.type or slower:
        return change
    if old.flops != new.flops:
        return change
    return None


def _time_changed(old: float | None, new: float | None) -> bool:
    """A module's time moved by more than a quarter and more than the noise floor."""
    if old is None or new is None:
        return old != new
    return abs(new - old) > max(TIME_NOISE_MS, 0.25 * old)
