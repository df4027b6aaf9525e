"""What a rule reports: findings, the fixes they carry, and the registry of rules.

Positions are 0-based lines and 0-based columns counted in Unicode code points (Python string
indices), end exclusive. The LSP adapter converts columns to UTF-16; the CLI adds 1 to both.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Iterator
from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .context import RuleContext
    from .semantics import Semantics


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
    # names of which a file must spell one for the check to find anything in it (see `rule`)
    spells: frozenset[str] = frozenset()

    def may_find_in(self, sem: Semantics) -> bool:
        """The file spells one of `spells`, or the rule names none: what the engine asks
        before it runs the check (`Registry.skipped_on`)."""
        return not self.spells or sem.spells_any(self.spells)


@dataclass
class Registry:
    """All known rules by code. Rule modules register themselves when imported."""

    rules: dict[str, Rule] = field(default_factory=dict)
    # Some checks report several codes (one pass over a loop finds TD101 and TD102): the codes
    # they emit besides their own are declared so selection can skip a check nobody asked for.
    infos: dict[str, RuleInfo] = field(default_factory=dict)

    # the names each rule that names them needs one of (`rule(spells=)`), by code
    gates: dict[str, frozenset[str]] = field(default_factory=dict)

    def add(self, rule: Rule) -> None:
        if rule.info.code in self.infos:
            raise ValueError(f"rule {rule.info.code} registered twice")
        self.rules[rule.info.code] = rule
        self.infos[rule.info.code] = rule.info
        if rule.spells:
            self.gates[rule.info.code] = rule.spells

    def skipped_on(self, sem: Semantics) -> set[str]:
        """The codes of the rules whose names the file spells none of: the engine does not run
        them there."""
        return _unspelt(self.gates, sem)

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
    spells: Collection[str] = (),
) -> Callable[[RuleCheck], RuleCheck]:
    """Register a check function as the rule `code`. With `spells`, the engine runs the check
    only on a file that spells one of those names: as a name, an attribute, a parameter or a
    keyword argument, or as the last part of what an import binds (`load` for `from torch
    import load as L`). It must hold for every finding the check can make, of its own code and
    of any other it reports: a check that looks for calls of `torch.load` spells `load`, since
    a call reaches it only through an attribute so named or a name imported as it (see
    `called_names`). Most files use few of the APIs a rule looks for, and a look at the file's
    names costs less than the check's own first look at them."""

    def register(check: RuleCheck) -> RuleCheck:
        info = RuleInfo(code, name, severity, summary, fixable, enabled_by_default, always_on)
        REGISTRY.add(Rule(info, check, frozenset(spells)))
        return check

    return register


def _unspelt(gates: dict[str, frozenset[str]], sem: Semantics) -> set[str]:
    """The codes in `gates` none of whose names the file spells: `Semantics.spells_any` asked
    of every gated rule at once, once per analysis. A file analysed once is one block, whose
    identifiers are the file's: its gates cost one or two set operations each, no call (a
    call each costs the check of a small file about 1%)."""
    whole = sem.whole
    if not whole.one_shot:
        return {code for code, needs in gates.items() if not whole.spells_any(needs)}
    imported = whole.imported_last_names()
    spelt = whole.blocks[0].identifiers
    return {
        code
        for code, needs in gates.items()
        if needs.isdisjoint(imported) and needs.isdisjoint(spelt)
    }


def called_names(*qualnames: str) -> frozenset[str]:
    """What a call of one of `qualnames` spells (`rule(spells=)`): the last part of each, the
    attribute a call through a module names (`torch.load(...)`) or the imported name a call by
    name is bound to (`from torch import load as L`; `L(...)`)."""
    return frozenset(qualname.rpartition(".")[2] for qualname in qualnames)
