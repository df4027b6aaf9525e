"""What a rule reports: findings, the fixes they carry, and the registry of rules.

Positions are 0-based lines and 0-based columns counted in Unicode code points (Python string
indices), end exclusive. The LSP adapter converts columns to UTF-16; the CLI adds 1 to both.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .context import RuleContext


class Severity(str, Enum):
    """error: raises at run time; warning: silently wrong or wasteful; information: a hint."""

    ERROR = "error"
    WARNING = "warning"
    INFORMATION = "information"
    HINT = "hint"


@dataclass(frozen=True, order=True)
class Span:
    """A range in a document: 0-based lines and code-point columns, end exclusive."""

    start_line: int
    start_col: int
    end_line: int
    end_col: int

    def contains(self, line: int, col: int) -> bool:
        if (line, col) < (self.start_line, self.start_col):
            return False
        return (line, col) <= (self.end_line, self.end_col)

    def overlaps(self, other: Span) -> bool:
        """True when the two spans share at least one character (touching ends do not count)."""
        return (self.start_line, self.start_col) < (other.end_line, other.end_col) and (
            other.start_line,
            other.start_col,
        ) < (self.end_line, self.end_col)


@dataclass(frozen=True)
class Edit:
    """Replace the text in `span` with `content` (an insertion when the span is empty)."""

    span: Span
    content: str


@dataclass(frozen=True)
class Fix:
    title: str
    edits: tuple[Edit, ...]
    # A fix that changes what the program computes on purpose (e.g. use_reentrant=False) is
    # offered in the editor but only applied by `--fix` when the user opts in with --unsafe-fixes.
    safe: bool = True


@dataclass(frozen=True)
class Finding:
    code: str
    name: str
    message: str
    span: Span
    severity: Severity
    fix: Fix | None = None


@dataclass(frozen=True)
class RuleInfo:
    code: str
    name: str
    severity: Severity
    summary: str
    fixable: bool
    enabled_by_default: bool = True
    # reported whatever the selection says (a file that does not parse must never pass)
    always_on: bool = False


RuleCheck = Callable[["RuleContext"], Iterable[Finding]]


@dataclass(frozen=True)
class Rule:
    info: RuleInfo
    check: RuleCheck


@dataclass
class Registry:
    """All known rules by code. Rule modules register themselves when imported."""

    rules: dict[str, Rule] = field(default_factory=dict)
    # Some checks report several codes (one pass over a loop finds TD101 and TD102): the codes
    # they emit besides their own are declared so selection can skip a check nobody asked for.
    infos: dict[str, RuleInfo] = field(default_factory=dict)

    def add(self, rule: Rule) -> None:
        if rule.info.code in self.infos:
            raise ValueError(f"rule {rule.info.code} registered twice")
        self.rules[rule.info.code] = rule
        self.infos[rule.info.code] = rule.info

    def __iter__(self) -> Iterator[RuleInfo]:
        return iter(sorted(self.infos.values(), key=lambda info: info.code))

    def get(self, code: str) -> RuleInfo | None:
        return self.infos.get(code)

    @property
    def always_on(self) -> frozenset[str]:
        return frozenset(code for code, info in self.infos.items() if info.always_on)


REGISTRY = Registry()


def rule(
    code: str,
    name: str,
    severity: Severity,
    summary: str,
    *,
    fixable: bool,
    enabled_by_default: bool = True,
    always_on: bool = False,
) -> Callable[[RuleCheck], RuleCheck]:
    """Register a check function as the rule `code`."""

    def register(check: RuleCheck) -> RuleCheck:
        info = RuleInfo(code, name, severity, summary, fixable, enabled_by_default, always_on)
        REGISTRY.add(Rule(info, check))
        return check

    return register
