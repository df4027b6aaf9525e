"""One rule's check on one document, isolated: a rule that raises loses its own findings for that
file and nothing else.

A crash becomes an `InternalError` record instead of an exception. Callers that want the records
(`check`, the language server) run the analysis inside `collecting_internal_errors()`; the engine,
whichever of its entry points runs the rules (whole file, focused blocks, one code), calls
`findings_of(rule, context)` for each rule, so the records reach the caller without every return
type in between carrying them.
"""

from __future__ import annotations

import logging
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field

from .context import RuleContext
from .findings import Finding, Rule

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class InternalError:
    """A rule that raised instead of returning findings: a bug in torchdoctor, not in the file."""

    code: str
    path: str
    error: str  # "ValueError: message"
    # the innermost frame of the traceback, "rules/autograd.py:120", so a bug report can point
    # at the code without the user pasting a whole traceback
    raised_at: str
    # the whole traceback, for the log of whoever reports the record
    traceback: str = field(default="", compare=False, repr=False)

    @classmethod
    def of(cls, code: str, path: str, exception: BaseException) -> InternalError:
        text = "".join(traceback.format_exception(exception)).rstrip()
        return cls(code, path, _one_line(exception), _raised_at(exception), text)

    def describe(self, shown_path: str | None = None) -> str:
        """One line for the user; `shown_path` replaces the path (e.g. with control characters
        escaped for a terminal)."""
        path = shown_path or self.path
        return (
            f"internal error: rule {self.code} failed on {path} ({self.error}, at "
            f"{self.raised_at}); its findings for this file are missing, the other rules ran"
        )


@dataclass(frozen=True)
class RuleRun:
    findings: list[Finding]
    error: InternalError | None = None


def run_rule(rule: Rule, context: RuleContext) -> RuleRun:
    """The rule's findings, or none and the record of what it raised."""
    return RuleRun(*_run(rule, context))


def _run(rule: Rule, context: RuleContext) -> tuple[list[Finding], InternalError | None]:
    try:
        return list(rule.check(context)), None
    except Exception as exception:  # any bug in one rule must not cost the others
        return [], _failure(rule, context, exception)


def _failure(rule: Rule, context: RuleContext, exception: Exception) -> InternalError | None:
    """The record of what a rule raised; None for a RecursionError, which is logged instead."""
    if isinstance(exception, RecursionError):
        # absurdly deep expressions: a limit of the tree walk, not a bug worth reporting
        path = context.doc.path
        log.warning("%s skipped on %s: expression nesting too deep", rule.info.code, path)
        return None
    return InternalError.of(rule.info.code, context.doc.path, exception)


_collector: ContextVar[list[InternalError] | None] = ContextVar(
    "torchdoctor_internal_errors", default=None
)


def findings_of(rule: Rule, context: RuleContext) -> list[Finding]:
    """What the engine calls per rule: `run_rule`, with a crash added to the records of the
    `collecting_internal_errors()` block around the analysis; logged when there is none, since
    nobody else will report it."""
    # the rule called here, not through `_run`: the engine asks this of every rule for every
    # file, and most rules find nothing, so the call is most of what it costs
    try:
        return list(rule.check(context))
    except Exception as exception:  # any bug in one rule must not cost the others
        error = _failure(rule, context, exception)
    if error is not None:
        records = _collector.get()
        if records is not None:
            records.append(error)  # the collector's owner reports it, once
        else:
            log.error("%s\n%s", error.describe(), error.traceback)
    return []


@contextmanager
def collecting_internal_errors() -> Iterator[list[InternalError]]:
    """The records of the rules that crashed in the analyses run inside the block (this thread
    or task only: context variables are not shared between threads)."""
    records: list[InternalError] = []
    token = _collector.set(records)
    try:
        yield records
    finally:
        _collector.reset(token)


def _one_line(exception: BaseException) -> str:
    text = str(exception).strip().splitlines()
    return f"{type(exception).__name__}: {text[0]}" if text else type(exception).__name__


def _raised_at(exception: BaseException) -> str:
    frames = traceback.extract_tb(exception.__traceback__)
    if not frames:
        return "unknown place"
    frame = frames[-1]
    parts = frame.filename.replace("\\", "/").split("/")
    # the path inside the package: the same on every machine
    if "torchdoctor" in parts:
        parts = parts[len(parts) - parts[::-1].index("torchdoctor") :]
    else:
        parts = parts[-1:]
    return f"{'/'.join(parts)}:{frame.lineno}"
