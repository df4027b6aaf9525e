"""Hover content: a finding's documentation page, or a torch API's pitfall note with jedi's
signature and docstring."""

from __future__ import annotations

from ..analysis import REGISTRY, Finding
from ..docs import doc_page
from ..probe.schema import ModuleRow
from . import probe_format
from .jedi_support import ApiDoc
from .pitfall_notes import NOTES
from .torch_names import ApiTarget

SEPARATOR = "\n\n---\n\n"


def findings_markdown(findings: list[Finding], locale: str) -> str:
    """The doc page of each distinct rule among `findings` (the page says what, why and how)."""
    pages: list[str] = []
    seen: set[str] = set()
    for finding in findings:
        if finding.code in seen:
            continue
        seen.add(finding.code)
        page = doc_page(finding.code, locale)
        if page is None:
            info = REGISTRY.get(finding.code)
            summary = info.summary if info is not None else ""
            page = f"**{finding.code} {finding.name}**\n\n{finding.message}\n\n{summary}".strip()
        pages.append(page.strip())
    return SEPARATOR.join(pages)


def api_markdown(target: ApiTarget, locale: str, doc: ApiDoc | None) -> str | None:
    """The note (when the API has one) and jedi's signature and docstring (when jedi had them)."""
    parts: list[str] = []
    note = NOTES.get(target.note) if target.note else None
    title = doc.full_name if doc is not None else (note.title if note else target.label)
    if note is not None:
        parts.append(f"**{title}**\n\n{note.text(locale)}")
    if doc is not None:
        if note is None:
            parts.append(f"**{title}**")
        if doc.signatures:
            block = "\n".join(doc.signatures)
            parts.append(f"```python\n{block}\n```")
        if doc.docstring:
            parts.append(f"```text\n{doc.docstring}\n```")
    if not parts:
        return None
    return "\n\n".join(parts)


def as_plain_text(markdown: str) -> str:
    """For clients that cannot render markdown: drop the fences and emphasis markers."""
    lines = [line for line in markdown.splitlines() if not line.startswith("```")]
    return "\n".join(lines).replace("**", "").replace("\n---\n", "\n")


def probe_modules_markdown(rows: list[ModuleRow], stale: bool) -> str:
    """What the last probe measured for the submodules declared on one line."""
    parts: list[str] = []
    for row in rows:
        facts = [
            f"output {', '.join(probe_format.shape(s) for s in row.output_shapes)}"
            if row.output_shapes
            else "not called by forward",
            f"{probe_format.count(row.params)} params",
        ]
        if row.flops is not None:
            facts.append(f"{probe_format.count(row.flops)} FLOPs")
        if row.forward_ms is not None:
            facts.append(f"{probe_format.milliseconds(row.forward_ms)} forward")
        if row.calls > 1:
            facts.append(f"{row.calls} calls")
        name = row.name or "(model)"
        parts.append(f"**{name}** `{row.type}`: " + " · ".join(facts))
    heading = "**Probe**" + (" (stale: the file changed since)" if stale else "")
    return heading + "\n\n" + "\n\n".join(parts)
