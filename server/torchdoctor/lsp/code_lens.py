"""CodeLens "Probe model" above every nn.Module subclass, including subclasses of the file's own
subclasses. The lens runs a client command: the editor decides how to show the probe's report.
Once a class has been probed, its lens title carries the headline numbers of the last report."""

from __future__ import annotations

from lsprotocol import types

from ..probe.schema import ProbeReport
from . import probe_format
from .outline import Outline
from .positions import PositionMapper

PROBE_CLIENT_COMMAND = "torchdoctor.probe"
TITLES = {"en": "Probe model", "zh-CN": "探查模型"}
PARAMS = {"en": "params", "zh-CN": "参数"}
STALE = {"en": "stale", "zh-CN": "已过期"}


def probe_lenses(
    uri: str,
    outline: Outline,
    mapper: PositionMapper,
    locale: str,
    probed: tuple[str, ProbeReport, bool] | None = None,
) -> list[types.CodeLens]:
    """`probed`: (class name, its last report, whether the file changed since)."""
    title = TITLES.get(locale, TITLES["en"])
    lenses: list[types.CodeLens] = []
    for module_class in outline.module_classes:
        text = title
        if probed is not None and probed[0] == module_class.name:
            text = probed_title(title, probed[1], probed[2], locale)
        lenses.append(
            types.CodeLens(
                range=mapper.range(module_class.header),
                command=types.Command(
                    title=text, command=PROBE_CLIENT_COMMAND, arguments=[uri, module_class.name]
                ),
            )
        )
    return lenses


def probed_title(title: str, report: ProbeReport, stale: bool, locale: str) -> str:
    """e.g. "Probe model · 1.2M params · 3.4 ms · 56 MiB": parameters, median forward latency,
    peak memory of a training step."""
    parts = [
        title,
        f"{probe_format.count(report.params.total)} {PARAMS.get(locale, PARAMS['en'])}",
        probe_format.milliseconds(report.latency.forward.median_ms),
        probe_format.size(report.memory.peak_bytes),
    ]
    text = " · ".join(parts)
    return f"{text} ({STALE.get(locale, STALE['en'])})" if stale else text
