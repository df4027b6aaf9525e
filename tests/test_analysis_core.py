"""The shared analysis core: data flow, value kinds, and the edits that fixes are built from."""

from __future__ import annotations

import ast
import keyword
from collections.abc import Callable

from hypothesis import example, given, settings
from hypothesis import strategies as st
from torchdoctor.analysis import Config, Document, check
from torchdoctor.analysis.call_edits import add_keyword
from torchdoctor.analysis.context import RuleContext
from torchdoctor.analysis.dataflow import flow_of
from torchdoctor.analysis.fixes import apply_edits, apply_fixes
from torchdoctor.analysis.semantics import (
    MODEL_NAME,
    OPTIMIZER_NAME,
    SCHEDULER_NAME,
    ValueKind,
    build_semantics,
)

ALL = Config(select=("ALL",))


def _context(text: str) -> RuleContext:
    doc = Document.parse(text)
    return RuleContext(doc, build_semantics(doc.tree), ALL)


def _names(tree: ast.AST, name: str) -> list[ast.Name]:
    found = [n for n in ast.walk(tree) if isinstance(n, ast.Name) and n.id == name]
    return sorted(found, key=lambda n: (n.lineno, n.col_offset))


# ---- dataflow.reaching ---------------------------------------------------------------------
def test_reaching_from_inside_an_assignment_sees_the_earlier_binding() -> None:
    ctx = _context("y = make()\ny = y.t()\n")
    flow = flow_of(ctx.sem, ctx.sem.tree)
    right_side = _names(ctx.sem.tree, "y")[2]  # the `y` in `y.t()`
    definition = flow.reaching("y", right_side)
    assert definition is not None and definition.node is ctx.sem.tree.body[0]
    # asking from the statement itself gives the same answer
    assert flow.reaching("y", ctx.sem.tree.body[1]) is definition


def test_reaching_inside_a_loop_iterable_and_body() -> None:
    ctx = _context("x = start()\nfor x in step(x):\n    use(x)\n")
    flow = flow_of(ctx.sem, ctx.sem.tree)
    _, _, in_iterable, in_body = _names(ctx.sem.tree, "x")
    assert flow.reaching("x", in_iterable).node is ctx.sem.tree.body[0]  # type: ignore[union-attr]
    assert flow.reaching("x", in_body).node is ctx.sem.tree.body[1]  # type: ignore[union-attr]


def test_reaching_sees_an_earlier_item_of_the_same_with() -> None:
    ctx = _context("with open_a() as a, wrap(a) as b:\n    pass\n")
    flow = flow_of(ctx.sem, ctx.sem.tree)
    in_second_item = _names(ctx.sem.tree, "a")[1]
    definition = flow.reaching("a", in_second_item)
    assert definition is not None and definition.node is ctx.sem.tree.body[0]


def test_reaching_in_a_function_starts_from_its_parameters() -> None:
    ctx = _context("def f(loss):\n    loss = loss * 2\n    return loss\n")
    function = ctx.sem.functions[0]
    flow = flow_of(ctx.sem, function)
    doubled = _names(function, "loss")[0]  # `loss` in `loss * 2`
    definition = flow.reaching("loss", doubled)
    assert definition is not None and definition.node is function
    returned = _names(function, "loss")[-1]
    assert flow.reaching("loss", returned).node is function.body[0]  # type: ignore[union-attr]


# ---- value kinds ---------------------------------------------------------------------------
def test_transformers_schedule_factories_are_schedulers() -> None:
    sem = _context(
        "import transformers\n"
        "from transformers import AutoModel, get_cosine_schedule_with_warmup\n"
        "model = AutoModel.from_pretrained('bert')\n"
        "warm = transformers.get_linear_schedule_with_warmup(opt, 10, 100)\n"
        "cosine = get_cosine_schedule_with_warmup(opt, 10, 100)\n"
        "sched = transformers.optimization.get_scheduler('linear', opt)\n"
    ).sem
    assert sem.kinds["model"] is ValueKind.MODEL
    assert sem.kinds["warm"] is ValueKind.SCHEDULER
    assert sem.kinds["cosine"] is ValueKind.SCHEDULER
    assert sem.kinds["sched"] is ValueKind.SCHEDULER


# ---- fixes never lose user text ------------------------------------------------------------
def test_moving_zero_grad_keeps_its_comment() -> None:
    text = (
        "def train(model, loader, optimizer, criterion):\n"
        "    for x, y in loader:\n"
        "        loss = criterion(model(x), y)\n"
        "        loss.backward()\n"
        "        optimizer.zero_grad()  # reset: keep this note\n"
        "        optimizer.step()\n"
    )
    findings = [f for f in check(text, "t.py", ALL) if f.code == "TD102"]
    assert findings and findings[0].fix is not None
    fixed = apply_fixes(text, findings).text
    assert fixed.count("# reset: keep this note") == 1
    assert "optimizer.zero_grad()  # reset: keep this note\n        loss.backward()" in fixed


# ---- adding a keyword argument -------------------------------------------------------------
def _with_keyword(source: str) -> str:
    ctx = _context(source)
    call = ctx.sem.calls[0]
    edit = add_keyword(ctx, call, "retain_graph=True")
    assert edit is not None
    return apply_edits(source, [edit])


def test_add_keyword_after_a_trailing_comma() -> None:
    fixed = _with_keyword("foo(a, b,)\n")
    ast.parse(fixed)
    assert fixed == "foo(a, b, retain_graph=True,)\n"


def test_add_keyword_to_a_multi_line_call_ending_with_a_comma() -> None:
    fixed = _with_keyword("foo(\n    a,\n    b,\n)\n")
    ast.parse(fixed)
    assert fixed == "foo(\n    a,\n    b,\n    retain_graph=True,\n)\n"


def test_add_keyword_to_an_empty_call_and_a_plain_call() -> None:
    assert _with_keyword("foo()\n") == "foo(retain_graph=True)\n"
    assert _with_keyword("foo(a)\n") == "foo(a, retain_graph=True)\n"


def test_retain_graph_fix_on_a_call_with_a_trailing_comma_parses() -> None:
    text = (
        "def two_heads(model, x, y, criterion, weights):\n"
        "    out = model(x)\n"
        "    loss_a = criterion(out, y)\n"
        "    loss_a.backward(inputs=weights,)\n"
        "    out.pow(2).mean().backward()\n"
        "    loss_b = out.sum()\n"
        "    loss_b.backward()\n"
    )
    findings = [f for f in check(text, "t.py", ALL) if f.code == "TD103" and f.fix]
    assert findings
    fixed = apply_fixes(text, findings).text
    ast.parse(fixed)
    assert "loss_a.backward(inputs=weights, retain_graph=True,)" in fixed


@settings(max_examples=400, deadline=None)
@given(
    st.lists(
        st.sampled_from(
            ["model", "net", "netD", "unet", "encoder", "vae", "teacher", "sched", "lr_policy"]
            + ["warmup", "optim", "opt", "loss", "x", "G", "ema_model", "Backbone", "critic"]
        )
        | st.text(alphabet="abcdefgHIJKLMNOPZ0123456789_", max_size=4),
        min_size=1,
        max_size=3,
    ),
    st.sampled_from(["", "_"]),
    st.sampled_from([str, str.upper, str.swapcase]),
)
@example(["def"], "", str)  # spelt from the alphabet, a keyword
def test_a_name_says_what_it_holds_as_the_name_patterns_do(
    parts: list[str], joiner: str, case: Callable[[str], str]
) -> None:
    """The kind a name alone suggests (`scheduler`, `opt_g`, `netD`) is what the three name
    patterns say, though most names are answered without them (`semantics._kind_by_name`)."""
    name = case(joiner.join(parts)) or "a"
    expected = next(
        (
            kind
            for pattern, kind in (
                (SCHEDULER_NAME, ValueKind.SCHEDULER),
                (OPTIMIZER_NAME, ValueKind.OPTIMIZER),
                (MODEL_NAME, ValueKind.MODEL),
            )
            if pattern.search(name)
        ),
        None,
    )
    # a keyword (`def`) is no name: nothing to parse it in
    parses = name.isidentifier() and not keyword.iskeyword(name)
    sem = build_semantics(ast.parse(f"{name}.step()" if parses else "pass"))
    assert sem.kind_of_name(name) is expected
