"""The "Adding a rule" checklist of docs/architecture.md, checked for every registered rule, and
that page kept true: it names every package of server/torchdoctor/, its links lead to files that
exist, and the import boundaries its layout section states hold.

Per rule: its module is `analysis/rules/<family>/td<NNN>_<name>.py` in the family whose range
(analysis/rules/README.md) holds its code, and is registered; it has a doc page in English and in
Simplified Chinese, a positive and a negative fixture, a fix in its fixtures exactly when the
rule says it is fixable, an evidence test, and a row in the README's rule table.
"""

from __future__ import annotations

import ast
import re
import sys
from functools import cache
from pathlib import Path

import pytest
from torchdoctor.analysis import REGISTRY, Config, check

from .conftest import FIXTURES, ROOT, fixture_files

PACKAGE = ROOT / "server" / "torchdoctor"
RULES = PACKAGE / "analysis" / "rules"
DOC_PAGES = PACKAGE / "docs"
EVIDENCE = ROOT / "tests" / "evidence"
ARCHITECTURE = ROOT / "docs" / "architecture.md"
README = (ROOT / "README.md").read_text(encoding="utf-8")
ALL = Config(select=("ALL",))
CODES = [info.code for info in REGISTRY]

# Rules that only the probe reports have no fixtures: the static check yields nothing, so no
# file can show a finding. Each entry says why the rule cannot be found without running code.
PROBE_ONLY = {
    "TD601": (
        "which parameters get no gradient under DDP is known only by running the model: the "
        "distributed probe reports it (probe/distributed_summary.py, lsp/runtime_diagnostics.py)"
    ),
}


# ---- the rule checklist -----------------------------------------------------------------------
def _family_ranges() -> dict[str, tuple[int, int]]:
    """Package → (first code, last code), from the family table of analysis/rules/README.md."""
    table = (RULES / "README.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| [^|]+ \| TD(\d{3})(?:–TD(\d{3}))? \| `(\w+)/` \|$", table, re.MULTILINE)
    return {package: (int(first), int(last or first)) for first, last, package in rows}


FAMILY_RANGES = _family_ranges()


def test_the_family_table_lists_every_rule_package() -> None:
    packages = {path.parent.name for path in RULES.glob("*/__init__.py")}
    assert set(FAMILY_RANGES) == packages, "analysis/rules/README.md's family table is stale"


@pytest.mark.parametrize("code", CODES)
def test_rule_module_is_named_after_the_rule_in_its_family(code: str) -> None:
    info = REGISTRY.rules[code].info
    number = int(code[2:])
    families = [name for name, (low, high) in FAMILY_RANGES.items() if low <= number <= high]
    assert len(families) == 1, (
        f"{code} is in the range of {families or 'no family'} in analysis/rules/README.md: "
        "widen the range of its family there"
    )
    module = f"td{code[2:]}_{info.name.replace('-', '_')}"
    expected = f"torchdoctor.analysis.rules.{families[0]}.{module}"
    assert REGISTRY.rules[code].check.__module__ == expected


def test_every_rule_module_is_registered_and_exported() -> None:
    """A rule module left out of its family's __init__.py is never imported, so never run."""
    registered = {REGISTRY.rules[code].check.__module__ for code in CODES}
    for family in sorted(path.parent for path in RULES.glob("*/__init__.py")):
        modules = {path.stem for path in family.glob("td[0-9][0-9][0-9]_*.py")}
        prefix = f"torchdoctor.analysis.rules.{family.name}."
        assert {prefix + name for name in modules} <= registered, (
            f"{family.name}/: a rule module that registers no rule, or is not imported by "
            "its __init__.py"
        )
        exported = _all_of(family / "__init__.py")
        assert modules <= exported, (
            f"{family.name}/__init__.py: add {modules - exported} to __all__"
        )


def _all_of(path: Path) -> set[str]:
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and any(
            isinstance(target, ast.Name) and target.id == "__all__" for target in node.targets
        ):
            return set(ast.literal_eval(node.value))
    return set()


@pytest.mark.parametrize("code", CODES)
def test_rule_has_doc_pages_in_english_and_chinese(code: str) -> None:
    name = REGISTRY.rules[code].info.name
    for locale in ("en", "zh-CN"):
        page = DOC_PAGES / locale / f"{code}.md"
        assert page.is_file(), f"missing {page.relative_to(ROOT)}"
        first_line = page.read_text(encoding="utf-8").split("\n", 1)[0]
        assert first_line.startswith(f"# {code} {name}"), f"{page.relative_to(ROOT)}: {first_line}"


@pytest.mark.parametrize("code", CODES)
def test_rule_has_positive_and_negative_fixtures(code: str) -> None:
    folder = FIXTURES / code
    if code in PROBE_ONLY:
        pytest.skip(f"{code} comes from the probe only: {PROBE_ONLY[code]}")
    assert list(folder.glob("positive_*.py")), f"no tests/fixtures/{code}/positive_*.py"
    assert list(folder.glob("negative_*.py")), f"no tests/fixtures/{code}/negative_*.py"


def test_probe_only_rules_are_never_found_statically() -> None:
    """An exemption above must stay true: no fixture folder, no fix, no static finding."""
    for code in PROBE_ONLY:
        info = REGISTRY.get(code)
        assert info is not None, f"{code} is not a rule: remove it from PROBE_ONLY"
        assert not info.fixable
        assert not (FIXTURES / code).exists(), f"{code} has fixtures: remove it from PROBE_ONLY"
    only = Config(select=tuple(PROBE_ONLY))
    samples = [*fixture_files(), *sorted((ROOT / "examples").glob("*.py"))]
    for path in samples:
        found = {f.code for f in check(path.read_text(encoding="utf-8"), str(path), only)}
        assert not found & set(PROBE_ONLY), f"{path.relative_to(ROOT)}: {found & set(PROBE_ONLY)}"


@pytest.mark.parametrize("code", CODES)
def test_rule_offers_a_fix_exactly_when_it_says_it_is_fixable(code: str) -> None:
    fixes = []
    for path in sorted((FIXTURES / code).glob("*.py")):
        text = path.read_text(encoding="utf-8")
        fixes += [f.fix for f in check(text, str(path), ALL) if f.code == code]
    offered = any(fix is not None for fix in fixes)
    if REGISTRY.rules[code].info.fixable:
        assert offered, f"{code} is fixable: a positive fixture must show a finding with a fix"
    else:
        assert not offered, f"{code} is not fixable, but a finding carries a fix"


@pytest.mark.parametrize("code", CODES)
def test_rule_has_an_evidence_test(code: str) -> None:
    path = EVIDENCE / f"test_{code.lower()}.py"
    assert path.is_file(), f"missing {path.relative_to(ROOT)} (the page's claims, run with torch)"


@pytest.mark.parametrize("code", CODES)
def test_rule_has_a_row_in_the_readme_table(code: str) -> None:
    name = REGISTRY.rules[code].info.name
    row = rf"^\| \[{code}\]\(server/torchdoctor/docs/en/{code}\.md\) \| {re.escape(name)} \|"
    assert re.search(row, README, re.MULTILINE), (
        f"{code} has no row in README.md: python -m torchdoctor.reporting.rule_table --write "
        "README.md"
    )


# ---- docs/architecture.md -------------------------------------------------------------------
def _architecture() -> str:
    return ARCHITECTURE.read_text(encoding="utf-8")


def test_architecture_names_every_package() -> None:
    packages = sorted(path.parent.name for path in PACKAGE.glob("*/__init__.py"))
    text = _architecture()
    missing = [name for name in packages if f"server/torchdoctor/{name}/" not in text]
    assert not missing, f"docs/architecture.md's layout does not describe {missing}"


LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^\s*(```|````).*?^\s*\1\s*$", re.MULTILINE | re.DOTALL)
CODE_SPAN = re.compile(r"(`+).+?\1")


def test_architecture_links_point_at_files_that_exist() -> None:
    text = CODE_SPAN.sub("code", FENCE.sub("", _architecture()))
    targets = [target for target in LINK.findall(text) if not re.match(r"[a-z]+:|#", target)]
    assert targets, "no relative links found: has the link syntax changed?"
    broken = [t for t in targets if not (ARCHITECTURE.parent / t.split("#")[0]).exists()]
    assert not broken, f"docs/architecture.md links to files that do not exist: {broken}"


# ---- the import boundaries of the layout ------------------------------------------------------
@cache
def _imports(path: Path, *, at_run_time: bool = False) -> list[str]:
    """The absolute names `path` imports, relative imports resolved. `at_run_time` leaves out
    the imports under `if TYPE_CHECKING:`, which only a type checker reads."""
    parts = ["torchdoctor", *path.relative_to(PACKAGE).with_suffix("").parts]
    package = parts[:-1]  # for __init__.py too: its package is the folder
    names: list[str] = []
    pending: list[ast.AST] = [ast.parse(path.read_text(encoding="utf-8"))]
    while pending:
        node = pending.pop()
        if at_run_time and isinstance(node, ast.If) and _is_type_checking(node.test):
            pending += node.orelse
            continue
        pending += ast.iter_child_nodes(node)
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level == 0:
                names.append(node.module or "")
                continue
            base = package[: len(package) - (node.level - 1)]
            if node.module:
                names.append(".".join([*base, node.module]))
            else:
                names += [".".join([*base, alias.name]) for alias in node.names]
    return names


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def test_analysis_imports_only_the_standard_library_and_itself() -> None:
    allowed_roots = set(sys.stdlib_module_names) | {"tomli"}
    wrong = {
        f"{path.relative_to(PACKAGE)}: {name}"
        for path in sorted((PACKAGE / "analysis").rglob("*.py"))
        for name in _imports(path)
        if not (name == "torchdoctor.analysis" or name.startswith("torchdoctor.analysis."))
        and name.split(".")[0] not in allowed_roots
    }
    assert not wrong, sorted(wrong)


RUNNER = PACKAGE / "probe" / "runner"
"""The runner package: started by its folder's path, loaded under a private name."""


@cache
def _runner_side() -> frozenset[str]:
    """The runner package, rank_worker.py and the modules the runner loads from next to its
    folder."""
    companions: list[str] = []
    defined = False
    listing = RUNNER / "companions.py"
    for node in ast.parse(listing.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign):
            target, value = node.targets[0], node.value
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign)) and node.value is not None:
            target, value = node.target, node.value
        else:
            continue
        if isinstance(target, ast.Name) and target.id == "COMPANION_MODULES":
            defined = defined or not isinstance(node, ast.AugAssign)
            companions += ast.literal_eval(value)
    assert defined and companions, "runner/companions.py no longer lists COMPANION_MODULES"
    package = {path.relative_to(PACKAGE).as_posix() for path in RUNNER.glob("*.py")}
    return frozenset({"probe/rank_worker.py", *package}) | {
        f"probe/{name}.py" for name in companions
    }


def test_only_the_probe_runner_side_imports_torch() -> None:
    importing_torch = {
        path.relative_to(PACKAGE).as_posix()
        for path in PACKAGE.rglob("*.py")
        if any(name.split(".")[0] == "torch" for name in _imports(path, at_run_time=True))
    }
    assert importing_torch <= _runner_side(), sorted(importing_torch - _runner_side())


def test_the_runner_side_never_imports_torchdoctor() -> None:
    """It runs in the user's interpreter, where torchdoctor may not be installed. The runner
    package's relative imports of its own modules are no exception: at run time they resolve
    inside the private package its folder is loaded as."""
    own = "torchdoctor.probe.runner."
    wrong = {
        f"{relative}: {name}"
        for relative in sorted(_runner_side())
        for name in _imports(PACKAGE / relative, at_run_time=True)
        if name.split(".")[0] == "torchdoctor"
        and not (relative.startswith("probe/runner/") and name.startswith(own))
    }
    assert not wrong, sorted(wrong)
