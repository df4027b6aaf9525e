"""CodeLens "Probe model" above every nn.Module subclass, including subclasses of the file's own
subclasses. The lens runs a client command: the editor decides how to show the probe's report."""

from __future__ import annotations

from lsprotocol import types

from .outline import Outline
from .positions import PositionMapper

PROBE_CLIENT_COMMAND = "torchdoctor.probe"
TITLES = {"en": "Probe model", "zh-CN": "探查模型"}


def probe_lenses(
    uri: str, outline: Outline, mapper: PositionMapper, locale: str
) -> list[types.CodeLens]:
    title = TITLES.get(locale, TITLES["en"])
    return [
        types.CodeLens(
            range=mapper.range(module_class.header),
            command=types.Command(
                title=title, command=PROBE_CLIENT_COMMAND, arguments=[uri, module_class.name]
            ),
        )
        for module_class in outline.module_classes
    ]
