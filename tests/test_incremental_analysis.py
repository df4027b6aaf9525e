"""Incremental analysis gives exactly what a fresh analysis of the final text gives: the same
tree (positions included), the same syntax problems and the same findings (codes, ranges,
messages, fixes), after any sequence of edits, whether each edit could reuse the previous
version's statements or not."""

from __future__ import annotations

import ast

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from torchdoctor.analysis import Config, Document, analyse
from torchdoctor.analysis.bindings import module_functions
from torchdoctor.analysis.blocks import scan
from torchdoctor.analysis.findings import Finding
from torchdoctor.analysis.incremental import IncrementalAnalyser
from torchdoctor.analysis.rules.api.references import attribute_references
from torchdoctor.analysis.rules.data._shared import passed_names_in_block
from torchdoctor.analysis.rules.data.td505_workers_without_main_guard import (
    calls_by_function,
    module_level_calls,
)
from torchdoctor.analysis.rules.evaluation._shared import training_by_function, training_by_loop
from torchdoctor.analysis.rules.layout.td202_float64_leak import float64_conversions
from torchdoctor.analysis.rules.modules.activations import names_assigned_losses
from torchdoctor.analysis.scoped import FILE_RULES
from torchdoctor.analysis.semantics import position
from torchdoctor.analysis.summaries import summaries_of
from torchdoctor.analysis.training import training_of

from bench.corpus import make_dense_file, make_file
from bench.fuzz import TOKENS

from .conftest import ROOT, fixture_files

ALL = Config(select=("ALL",))
PATH = "edited.py"
SEEDS = [
    *(path.read_text(encoding="utf-8") for path in fixture_files()),
    *(path.read_text(encoding="utf-8") for path in sorted((ROOT / "examples").glob("*.py"))),
    make_file(300, seed=7),
    make_dense_file(300, seed=5),
    make_dense_file(200, seed=6, broken_tail=True),
]
# what a typist adds: tokens that open and close brackets, strings, blocks and continuations
TYPED = st.sampled_from(
    [*TOKENS, "#", "x", " ", "\t", '"""', "'", "\\", "else:", "@dec", "    ", ".view(", "\r"]
    + ["loss.backward()", "optimizer.zero_grad()", "model.eval()", ".double()", "def f(", "class"]
    + ["\f"]
) | st.text(max_size=6)


def _edit(data: st.DataObject, text: str) -> str:
    lines = text.split("\n")
    line = data.draw(st.integers(0, len(lines) - 1))
    content = lines[line]
    kind = data.draw(st.sampled_from(["type", "delete", "replace-line", "newline", "join"]))
    if kind == "type":
        column = data.draw(st.integers(0, len(content)))
        lines[line] = content[:column] + data.draw(TYPED) + content[column:]
    elif kind == "delete" and content:
        start = data.draw(st.integers(0, len(content) - 1))
        end = data.draw(st.integers(start + 1, len(content)))
        lines[line] = content[:start] + content[end:]
    elif kind == "replace-line":
        lines[line] = data.draw(st.sampled_from(lines) | TYPED)
    elif kind == "newline":
        column = data.draw(st.integers(0, len(content)))
        lines[line : line + 1] = [content[:column], content[column:]]
    elif kind == "join" and line + 1 < len(lines):
        lines[line : line + 2] = [content + lines[line + 1]]
    return "\n".join(lines)


def _dump(document: Document) -> str:
    return ast.dump(document.tree, include_attributes=True)


def _assert_same_as_fresh(analyser: IncrementalAnalyser, text: str) -> None:
    document, findings = analyser.analyse(text, ALL)
    fresh = Document.parse(text, PATH)
    assert _dump(document) == _dump(fresh)
    assert document.syntax_problems == fresh.syntax_problems
    assert document.parsed_whole == fresh.parsed_whole
    assert document.text == fresh.text
    assert document.index == fresh.index
    assert findings == analyse(fresh, ALL)
    blocks = analyser.blocks()
    if blocks is not None:
        # the blocks it keeps are where a fresh scan of the lines puts them
        assert [(block.start, block.end) for block in blocks] == scan(fresh.index.lines).blocks()


@settings(max_examples=80, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.data())
def test_edit_sequences_give_the_findings_of_a_fresh_analysis(data: st.DataObject) -> None:
    text = data.draw(st.sampled_from(SEEDS))
    analyser = IncrementalAnalyser(PATH)
    _assert_same_as_fresh(analyser, text)
    for _ in range(data.draw(st.integers(1, 8))):
        edited = _edit(data, text)
        _assert_same_as_fresh(analyser, edited)
        # an undo: back to the text before the edit, or carry on from the edited one
        if data.draw(st.booleans()):
            _assert_same_as_fresh(analyser, text)
        else:
            text = edited


def test_a_keystroke_reuses_the_other_statements() -> None:
    text = make_file(300, seed=7)
    analyser = IncrementalAnalyser(PATH)
    before = analyser.parse(text)
    lines = text.split("\n")
    middle = len(lines) // 2
    while not lines[middle].strip():
        middle += 1
    lines[middle] += "  # typed"
    after = analyser.parse("\n".join(lines))
    assert after.tree.body[0] is before.tree.body[0]
    assert after.tree.body[-1] is before.tree.body[-1]
    assert _dump(after) == _dump(Document.parse("\n".join(lines), PATH))


def test_continuations_across_the_edited_region_fall_back_to_a_full_parse() -> None:
    analyser = IncrementalAnalyser(PATH)
    text = "x = 1 + \\\n    2\ny = 3\n\nz = 4\n"
    analyser.parse(text)
    for edited in [
        "x = 1 + \\\n    2\ny = 3 \\\n\nz = 4\n",  # the edited line continues into the next
        "x = 1 + \\\n    5\ny = 3\n\nz = 4\n",  # an edit inside a continued statement
        "x = 1 + \\\n    5\nif y:\n    pass\nelse: z = 4\n",
        "x = 1 + \\\n    5\nif y:\n    pass\n\n@dec\n",
    ]:
        _assert_same_as_fresh(analyser, edited)


def _type_in_function(text: str, needle: str, typed: str) -> str:
    """`typed` appended to the first line holding `needle`."""
    lines = text.split("\n")
    number = next(i for i, line in enumerate(lines) if needle in line)
    lines[number] += typed
    return "\n".join(lines)


def _findings_before_and_after(
    analyser: IncrementalAnalyser, text: str, edited: str
) -> tuple[list[Finding], list[Finding]]:
    """The findings of `text`, then of `edited` analysed incrementally, which must be those of
    a fresh analysis of `edited`."""
    _, before = analyser.analyse(text, ALL)
    _, after = analyser.analyse(edited, ALL)
    assert after == analyse(Document.parse(edited, PATH), ALL)
    return before, after


def test_an_edit_inside_one_function_runs_the_rules_on_its_block_only() -> None:
    text = make_dense_file(600, seed=2)
    analyser = IncrementalAnalyser(PATH)
    edited = _type_in_function(text, "correct = 0", "  # counted")
    before, after = _findings_before_and_after(analyser, text, edited)
    assert analyser.runs == (1, 1)  # the first version whole, then one focused run
    # the findings of the other blocks are the very objects of the version before
    edited_line = next(i for i, line in enumerate(edited.split("\n")) if "# counted" in line)
    blocks = analyser.blocks()
    assert blocks is not None
    block = next(b for b in blocks if b.start <= edited_line < b.end)
    kept = {id(finding) for finding in before}
    renewed = [finding for finding in after if id(finding) not in kept]
    assert renewed
    assert all(
        finding.code in FILE_RULES or block.start <= finding.span.start_line < block.end
        for finding in renewed
    )


def test_lines_added_above_move_the_findings_below_without_analysing_them() -> None:
    text = make_dense_file(400, seed=4)
    analyser = IncrementalAnalyser(PATH)
    edited = _type_in_function(text, "correct = 0", "\n    seen = 0\n    seen += 1")
    _findings_before_and_after(analyser, text, edited)
    assert analyser.runs == (1, 1)


SCRIPT = """import torch
from torch import nn

model = nn.Linear(4, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
total = 0
for batch in [torch.randn(8, 4) for _ in range(3)]:
    optimizer.zero_grad()
    loss = model(batch).sum()
    loss.backward()
    optimizer.step()
    total += loss


def flatten(x):
    return x.transpose(0, 1).view(-1)
"""


def test_a_line_break_or_comment_in_top_level_code_analyses_that_block_alone() -> None:
    """A script's top-level code tells the rest of the file what it does, not how it is laid
    out: a blank line or a comment in it re-analyses that block only, and a change to what it
    does (here the zeroing it drops) still analyses the whole file."""
    lines = SCRIPT.split("\n")
    loop = next(i for i, line in enumerate(lines) if line.startswith("for "))
    analyser = IncrementalAnalyser(PATH)
    _, first = analyser.analyse(SCRIPT, ALL)
    assert first, "the script must have findings for the comparisons to mean anything"
    for runs, edited in (
        ((1, 1), "\n".join([*lines[: loop + 1], "", *lines[loop + 1 :]])),
        ((1, 2), "\n".join([*lines[:loop], "# the epochs", *lines[loop:]])),
        ((2, 2), SCRIPT.replace("    optimizer.zero_grad()\n", "")),
    ):
        _, findings = analyser.analyse(edited, ALL)
        assert analyser.runs == runs
        assert findings == analyse(Document.parse(edited, PATH), ALL)


def test_a_helper_that_stops_restoring_train_mode_is_seen_after_imports_broke_and_came_back() -> (
    None
):
    """The file's key holds what each block tells the others. A helper that no longer puts the
    model back in train mode (its `model.train()` joined to the line above, a syntax error)
    changes what its caller's loop does (TD403), also when the imports were broken and repaired
    just before (the edits the property test once found to hide it)."""
    text = (ROOT / "tests" / "fixtures" / "TD403" / "negative_lookalikes.py").read_text()
    lines = text.split("\n")
    restore = next(i for i, line in enumerate(lines) if "out[split] = losses.mean()" in line)

    def joined(at: int) -> str:
        return "\n".join([*lines[:at], lines[at] + lines[at + 1], *lines[at + 2 :]])

    analyser = IncrementalAnalyser(PATH)
    for version in (text, joined(0), text, joined(restore)):
        _assert_same_as_fresh(analyser, version)
    _, findings = analyser.analyse(joined(restore), ALL)
    assert "TD403" in {finding.code for finding in findings}


def test_a_syntax_error_costs_its_own_block_only() -> None:
    """A file that ends in an unfinished block: each edit elsewhere parses and analyses one
    block, and the other blocks keep their findings; the syntax error stays where it is."""
    text = make_dense_file(400, seed=8, broken_tail=True)
    analyser = IncrementalAnalyser(PATH)
    first, _ = analyser.analyse(text, ALL)
    assert first.syntax_problems
    edited = _type_in_function(text, "correct = 0", "  # counted")
    document, findings = analyser.analyse(edited, ALL)
    assert analyser.runs == (1, 1)
    fresh = Document.parse(edited, PATH)
    assert document.syntax_problems == fresh.syntax_problems
    assert findings == analyse(fresh, ALL)
    assert [f.code for f in findings].count("TD000") == 1
    # typing inside the broken block re-parses that block alone
    blocks = analyser.blocks()
    assert blocks is not None
    untouched = {id(block) for block in blocks[:-1]}
    document, findings = analyser.analyse(edited + "x", ALL)
    after = analyser.blocks()
    assert after is not None and {id(block) for block in after[:-1]} == untouched
    assert findings == analyse(Document.parse(edited + "x", PATH), ALL)


def test_a_change_another_block_depends_on_analyses_the_file_again() -> None:
    """A helper that starts to switch the model to eval mode changes what the training loop
    that calls it does: the loop's block is analysed again though its text did not change."""
    text = (
        "import torch\n\n\ndef helper(model):\n    return model\n\n\n"
        "def fit(model, loader, opt):\n    for x in loader:\n        opt.zero_grad()\n"
        "        model(x).sum().backward()\n        opt.step()\n        helper(model)\n"
    )
    edited = text.replace("    return model", "    model.eval()\n    return model")
    before, after = _findings_before_and_after(IncrementalAnalyser(PATH), text, edited)
    assert "TD403" in {finding.code for finding in after} - {finding.code for finding in before}


def test_a_fix_spells_torch_as_a_fresh_analysis_does_after_an_import_is_repeated() -> None:
    """`import torch` added again below `import torch as T` reorders the names bound to torch
    without changing them: the fix then writes `torch.inference_mode()`, as it does for the
    file opened afresh, not the `T.` of the version before."""
    text = (
        "import torch\nimport torch as T\n\n\n"
        "def check(model, loader):\n    for x in loader:\n        model(x)\n"
    )
    edited = text.replace("as T\n", "as T\nimport torch\n")
    _, after = _findings_before_and_after(IncrementalAnalyser(PATH), text, edited)
    titles = {f.fix.title for f in after if f.code == "TD401" and f.fix is not None}
    assert titles == {"Wrap the loop in `with torch.inference_mode():`"}


@given(
    st.lists(st.sampled_from(["a", "b", ""]), max_size=12),
    st.lists(st.sampled_from(["a", "b", ""]), max_size=12),
)
def test_the_unchanged_start_and_end_of_two_versions_are_found_exactly(
    old: list[str], new: list[str]
) -> None:
    from torchdoctor.analysis.blocks import common_prefix, common_suffix

    first = 0
    while first < min(len(old), len(new)) and old[first] == new[first]:
        first += 1
    assert common_prefix(tuple(old), tuple(new)) == first
    limit = min(len(old), len(new)) - first
    same = 0
    while same < limit and old[-1 - same] == new[-1 - same]:
        same += 1
    assert common_suffix(tuple(old), tuple(new), limit) == same


# names the edits below add (a helper, a criterion, a deprecated symbol, a float64 model, a
# class), remove (a deleted line) or change (`x` typed before a statement's first name)
MENTIONED = [
    frozenset({"helper"}),
    frozenset({"MSELoss", "crit"}),
    frozenset({"custom_fwd"}),
    frozenset({"double"}),
    frozenset({"Wide"}),
    frozenset({"xmodel", "xloss", "xoptimizer"}),
    frozenset({"zero_grad"}),
]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.tuples(
            st.integers(0, 10_000),
            st.sampled_from(
                [
                    "type",
                    "insert",
                    "delete",
                    "call",
                    "helper",
                    "class",
                    "kind",
                    "reference",
                    "double",
                ]
            ),
        ),
        min_size=1,
        max_size=6,
    )
)
def test_what_is_carried_between_versions_equals_a_fresh_parse(
    edits: list[tuple[int, str]],
) -> None:
    """The calls by attribute, by name and by qualname, the functions by name, the groups made
    by `Semantics.gathered` (assignments by target, module-level functions, names assigned a
    loss, attribute references), the import statements, the model
    classes, the kinds of names, the enclosing loops and functions, the dotted names, the
    function summaries and whether the file spells a name are carried from version to version
    for the blocks an edit left alone (semantics.merge_blocks, summaries.summaries_of): after
    any edits they are what a fresh parse finds."""
    lines = make_dense_file(200, seed=7).split("\n")
    analyser = IncrementalAnalyser("carried.py")
    analyser.analyse("\n".join(lines))
    inserted = {
        "insert": ["model = model.to(device)"],
        # a call of a local function, a helper that back-propagates (a second one of the same
        # name makes both calls unresolved), and a model class whose base is another's
        "call": ["evaluate_buggy_0(model, loader)", "helper(loss)"],
        "helper": ["def helper(loss):", "    loss.backward()"],
        "class": ["class Wide(Head2):", "    pass"],
        "kind": ["crit = nn.MSELoss()"],
        # a deprecated symbol used as a value, and an import
        "reference": ["fwd = torch.cuda.amp.custom_fwd", "import os.path"],
        # a model converted to float64, and gradients zeroed
        "double": ["model.double()", "optimizer.zero_grad()"],
    }
    for where, kind in edits:
        line = where % len(lines)
        if kind == "type":
            # into the name a statement starts with: `sampler = ...` binds `xsampler`
            text_of_line = lines[line]
            indent = len(text_of_line) - len(text_of_line.lstrip())
            lines[line] = text_of_line[:indent] + "x" + text_of_line[indent:]
        elif kind in inserted:
            lines[line:line] = inserted[kind]
        elif len(lines) > 1:
            del lines[line]
        text = "\n".join(lines)
        document, _ = analyser.analyse(text)
        carried, fresh = document.semantics, Document.parse(text, "carried.py").semantics

        def located(
            nodes: list[ast.stmt] | list[ast.expr],
        ) -> list[tuple[int, int, int | None, int | None]]:
            return [(n.lineno, n.col_offset, n.end_lineno, n.end_col_offset) for n in nodes]

        for groups in (
            "calls_by_attr",
            "calls_by_name",
            "calls_by_qualname",
            "methods_by_name",
            "plain_functions_by_name",
        ):
            assert {k: located(v) for k, v in getattr(carried, groups).items()} == {
                k: located(v) for k, v in getattr(fresh, groups).items()
            }
        assert {k: located(v) for k, v in carried.assignments_by_target().items()} == {
            k: located(v) for k, v in fresh.assignments_by_target().items()
        }
        assert {k: located(v) for k, v in names_assigned_losses(carried).items()} == {
            k: located(v) for k, v in names_assigned_losses(fresh).items()
        }
        assert [(r.qualname, position(r.node)) for r in attribute_references(carried)] == [
            (r.qualname, position(r.node)) for r in attribute_references(fresh)
        ]
        assert located(carried.import_statements) == located(fresh.import_statements)
        assert located(carried.functions) == located(fresh.functions)
        assert located(carried.bindings_by_scope[id(carried.tree)]) == located(
            fresh.bindings_by_scope[id(fresh.tree)]
        )
        assert sorted(located(nodes) for nodes in carried.bindings_by_scope.values()) == sorted(
            located(nodes) for nodes in fresh.bindings_by_scope.values()
        )
        assert located(training_of(carried).zeroing_nodes) == located(
            training_of(fresh).zeroing_nodes
        )
        conversions = [
            sem.gathered("layout:float64-model", float64_conversions, reads_kinds=True)
            for sem in (carried, fresh)
        ]
        assert located(conversions[0].get("", [])) == located(conversions[1].get("", []))
        for group, part in (
            ("evaluation:training-by-function", training_by_function),
            ("evaluation:training-by-loop", training_by_loop),
        ):
            mine, theirs = (sem.gathered(group, part, reads_kinds=True) for sem in (carried, fresh))
            assert sorted(located(nodes) for nodes in mine.values()) == sorted(
                located(nodes) for nodes in theirs.values()
            )
        by_function = [
            sem.gathered("data:calls-by-function", calls_by_function) for sem in (carried, fresh)
        ]
        assert sorted(located(nodes) for nodes in by_function[0].values()) == sorted(
            located(nodes) for nodes in by_function[1].values()
        )
        for group, named in (
            ("data:passed-names", passed_names_in_block),
            ("data:module-level-calls", module_level_calls),
        ):
            mine, theirs = (sem.gathered(group, named) for sem in (carried, fresh))
            assert {k: located(v) for k, v in mine.items()} == {
                k: located(v) for k, v in theirs.items()
            }
        for name in ("model", "optimizer", "criterion", "crit", "sampler", "fwd", "self.proj"):
            assert located(carried.assigned_values(name)) == located(fresh.assigned_values(name))
        assert {k: position(v) for k, v in module_functions(carried).items()} == {
            k: position(v) for k, v in module_functions(fresh).items()
        }
        assert list(carried.module_classes) == list(fresh.module_classes)
        assert carried.kinds == fresh.kinds
        # asked of every version, so each answer is the previous version's carried over
        for names in MENTIONED:
            assert carried.mentions(names) == fresh.mentions(names), names
        mine_summaries, their_summaries = summaries_of(carried), summaries_of(fresh)
        assert [
            (position(call), position(target)) for call, target in mine_summaries.local_calls
        ] == [(position(call), position(target)) for call, target in their_summaries.local_calls]
        for mine_function, theirs_function in zip(carried.functions, fresh.functions, strict=True):
            mine_summary = mine_summaries.of(mine_function)
            theirs_summary = their_summaries.of(theirs_function)
            assert mine_summary is not None and theirs_summary is not None
            assert (mine_summary.spread_facts(), mine_summary.runs_without_grad) == (
                theirs_summary.spread_facts(),
                theirs_summary.runs_without_grad,
            )
        for mine, theirs in zip(carried.calls, fresh.calls, strict=True):
            assert carried.dotted(mine.func) == fresh.dotted(theirs.func)
            assert [position(loop) for loop in carried.enclosing_loops(mine)] == [
                position(loop) for loop in fresh.enclosing_loops(theirs)
            ]
            mine_function = carried.enclosing_function(mine)
            theirs_function = fresh.enclosing_function(theirs)
            assert (mine_function and mine_function.name) == (
                theirs_function and theirs_function.name
            )


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_the_change_between_two_versions_names_the_blocks_that_went_and_came(
    data: st.DataObject,
) -> None:
    """`BlockChange.between` (semantics.merge_blocks) against a plain comparison of the lists:
    the blocks of each version are distinct objects; an edit replaces a run of them, and may
    move one of those it keeps."""
    from torchdoctor.analysis.semantics import BlockChange

    before = [object() for _ in range(data.draw(st.integers(0, 12)))]
    cut = sorted(data.draw(st.lists(st.integers(0, len(before)), min_size=2, max_size=2)))
    inserted = [object() for _ in range(data.draw(st.integers(0, 3)))]
    after = before[: cut[0]] + inserted + before[cut[1] :]
    if len(after) > 1 and data.draw(st.booleans()):
        i, j = data.draw(st.lists(st.integers(0, len(after) - 1), min_size=2, max_size=2))
        after[i], after[j] = after[j], after[i]
    change = BlockChange.between(before, after)  # type: ignore[arg-type]
    assert change.gone == [block for block in before if block not in after]
    assert change.gone_at == [place for place, block in enumerate(before) if block not in after]
    assert change.added == [block for block in after if block not in before]
    assert change.added_at == [place for place, block in enumerate(after) if block not in before]
    kept_old_places = [before.index(block) for block in after if block in before]
    assert change.in_order == (kept_old_places == sorted(kept_old_places))


def test_a_renamed_optimizer_changes_the_training_steps_of_the_blocks_that_use_it() -> None:
    """A fact kept on a block that reads kinds (here: which calls step an optimizer) is found
    again when the kind it read changes in another block, also when another fact built on it
    was made first (the kinds one fact reads are those of the facts it is built on)."""
    text = (
        "import torch\n"
        "\n"
        "thing = torch.optim.SGD([], lr=0.1)\n"
        "\n"
        "\n"
        "def train(model, loader):\n"
        "    for x in loader:\n"
        "        model(x).sum()\n"
        "        thing.step()\n"
    )
    analyser = IncrementalAnalyser(PATH)
    analyser.analyse(text, ALL)
    renamed = text.replace("thing = ", "other = ")
    document, _ = analyser.analyse(renamed, ALL)
    fresh = Document.parse(renamed, PATH)
    for group, part in (
        ("evaluation:training-by-loop", training_by_loop),
        ("evaluation:training-by-function", training_by_function),
    ):
        mine = document.semantics.gathered(group, part, reads_kinds=True)
        theirs = fresh.semantics.gathered(group, part, reads_kinds=True)
        assert [position(n) for nodes in mine.values() for n in nodes] == [
            position(n) for nodes in theirs.values() for n in nodes
        ]
    assert not list(
        fresh.semantics.gathered(
            "evaluation:training-by-loop", training_by_loop, reads_kinds=True
        ).values()
    )  # `thing.step()` steps no optimizer once `thing` is not one
    _assert_same_as_fresh(analyser, renamed)


def test_a_first_line_that_starts_no_block_starts_none_when_lines_are_added_above() -> None:
    """Every file's first block starts at line 0, even when that line continues nothing it
    could (`)import torch`); once a line is added above it, the rescan must not keep that
    start (blocks.rescan against a fresh scan)."""
    from torchdoctor.analysis.blocks import rescan

    before = ")import torch\n\n\ndef train(model):\n    pass\n".split("\n")
    after = ["", *before]
    assert rescan(scan(before), tuple(after)).starts == scan(after).starts == (0, 4)


def test_form_feeds_start_blocks_where_python_puts_top_level_statements() -> None:
    """A form feed in a line's leading whitespace sets Python's column count back to 0: a form
    feed typed before an indented line of a function keeps the line in the function, a page
    break between two functions starts nothing, and a statement right after a form feed is at
    the top. The blocks, the tree and the findings after each edit are a fresh analysis's."""
    text = make_file(300, seed=7)
    lines = text.split("\n")
    indented = next(n for n, line in enumerate(lines) if line.startswith("        ") and n > 20)
    defined = next(n for n, line in enumerate(lines) if line.startswith("def ") and n > indented)
    page_break = [*lines[:defined], "\f", *lines[defined:]]
    analyser = IncrementalAnalyser(PATH)
    _assert_same_as_fresh(analyser, text)
    for edited in (
        [*lines[:indented], "\f" + lines[indented], *lines[indented + 1 :]],
        [*lines[:indented], "    \f" + lines[indented], *lines[indented + 1 :]],
        page_break,
        [*page_break[:defined], "\fx = 1", *page_break[defined + 1 :]],
    ):
        _assert_same_as_fresh(analyser, "\n".join(edited))
        statements = Document.parse("\n".join(edited), PATH).tree.body
        tops = {_first_line(statement) for statement in statements}
        assert set(scan(edited).starts) - {0} == tops - {0}


def _first_line(statement: ast.stmt) -> int:
    decorators = getattr(statement, "decorator_list", [])
    return min([statement.lineno, *(d.lineno for d in decorators)]) - 1


def test_a_seed_elsewhere_in_the_file_decides_the_fsdp_finding_after_any_edit() -> None:
    """TD602 stays quiet while the file seeds every rank alike, wherever the seed is: an edit
    of the FSDP block alone must still see the seed in another block, and removing the seed
    from another function must bring the finding back (the seed is a fact of the file's key)."""
    text = (
        "import torch\n"
        "from torch.distributed.fsdp import FullyShardedDataParallel as FSDP\n"
        "\n"
        "\n"
        "def setup():\n"
        "    torch.manual_seed(0)\n"
        "\n"
        "\n"
        "def build(make_model):\n"
        "    return FSDP(make_model(), device_id=torch.cuda.current_device())\n"
    )
    analyser = IncrementalAnalyser(PATH)
    _assert_same_as_fresh(analyser, text)
    edited = text.replace("def build(make_model):", "def build(make_model):  # sharded")
    _assert_same_as_fresh(analyser, edited)
    unseeded = edited.replace("torch.manual_seed(0)", "pass")
    _assert_same_as_fresh(analyser, unseeded)
    assert "TD602" in {finding.code for finding in analyser.analyse(unseeded, ALL)[1]}


def test_whether_the_file_spells_a_name_follows_each_edit() -> None:
    """`Semantics.mentions` answers from the previous version's answer where an edit left the
    names and kinds alone: the blocks it added are looked at, or every block again when it
    removed the one that spelt the name. Each version answers as a fresh parse does."""
    # twelve functions: an edit of one or two is patched from the previous version
    functions = [f"def step_{n}(x):\n    y = x.relu()\n    return y\n" for n in range(12)]
    softmax = frozenset({"softmax"})
    spelt_last = functions[11].replace("relu", "softmax")
    versions = [
        functions,
        # the first spelling, in one function: found among the blocks the edit added
        [*functions[:2], functions[2].replace("relu", "softmax"), *functions[3:]],
        # and gone again with the block that spelt it
        functions,
        # spelt twice, then the first one found is edited away: another block still spells it
        [functions[0].replace("relu", "softmax"), *functions[1:11], spelt_last],
        [*functions[:11], spelt_last],
        functions,
    ]
    analyser = IncrementalAnalyser(PATH)
    for blocks in versions:
        text = "import torch\n\n\n" + "\n\n".join(blocks)
        document, _ = analyser.analyse(text, ALL)
        fresh = Document.parse(text, PATH).semantics
        assert document.semantics.mentions(softmax) == fresh.mentions(softmax)
        assert document.semantics.mentions(frozenset({"relu"})) == fresh.mentions(
            frozenset({"relu"})
        )
