"""The --input grammar (input_spec.py): what each spelling means, that every spec reads back
from its own text, and that a bad spec says where and what is wrong."""

from __future__ import annotations

import pytest
from torchdoctor.probe.input_spec import (
    CallSpec,
    InputSpecError,
    TensorSpec,
    parse_call,
    parse_dtype,
)


def test_one_shape_is_one_float32_tensor() -> None:
    assert parse_call("(8, 3, 224, 224)") == CallSpec((TensorSpec((8, 3, 224, 224)),))
    assert parse_call("(8,)") == CallSpec((TensorSpec((8,)),))
    assert parse_call("()") == CallSpec((TensorSpec(()),))


@pytest.mark.parametrize("text", ["(8, 16); (8, 16):bool", "[(8, 16), (8, 16):bool]",
                                  "(8,16),(8,16):bool", " ( 8 , 16 ) ;  ( 8 , 16 ) : bool "])
def test_several_positional_inputs_in_every_spelling(text: str) -> None:
    expected = CallSpec((TensorSpec((8, 16)), TensorSpec((8, 16), "bool")))
    assert parse_call(text) == expected


def test_keyword_inputs() -> None:
    call = parse_call("input_ids=(4, 128):int64, attention_mask=(4, 128):bool")
    assert call.args == ()
    assert call.kwargs == {
        "input_ids": TensorSpec((4, 128), "int64"),
        "attention_mask": TensorSpec((4, 128), "bool"),
    }
    mixed = parse_call("(2, 5, 8), mask=(2, 5):bool")
    assert mixed.args == (TensorSpec((2, 5, 8)),)
    assert list(mixed.kwargs) == ["mask"]


def test_nested_tuples_lists_dicts_and_constants() -> None:
    call = parse_call(
        "((2, 5, 8), (2, 5, 8)), [(1, 2), (3,)], {\"image\": (2, 3, 32, 32), ids: (2, 7):long}, "
        "scale=0.5, use_cache=False, mode='train', extra=None"
    )
    pair, items, batch = call.args
    assert pair == (TensorSpec((2, 5, 8)), TensorSpec((2, 5, 8)))
    assert items == [TensorSpec((1, 2)), TensorSpec((3,))]
    assert batch == {"image": TensorSpec((2, 3, 32, 32)), "ids": TensorSpec((2, 7), "int64")}
    assert call.kwargs == {"scale": 0.5, "use_cache": False, "mode": "train", "extra": None}
    assert len(call.tensors()) == 6


def test_a_single_list_argument_is_written_in_double_brackets() -> None:
    assert parse_call("[[(2, 3), (2, 3)]]").args == ([TensorSpec((2, 3)), TensorSpec((2, 3))],)


@pytest.mark.parametrize(
    ("alias", "dtype"),
    [("bf16", "bfloat16"), ("fp16", "float16"), ("half", "float16"), ("float", "float32"),
     ("double", "float64"), ("long", "int64"), ("int64", "int64"), ("bool", "bool"),
     ("BFloat16", "bfloat16"), ("uint8", "uint8")],
)
def test_dtype_aliases(alias: str, dtype: str) -> None:
    assert parse_dtype(alias) == dtype
    assert parse_call(f"(2, 3):{alias}").args[0].dtype == dtype


def test_integer_and_float_ranges() -> None:
    tokens = parse_call("(4, 128):int64[0,50257)").args[0]
    assert (tokens.low, tokens.high) == (0, 50257)
    inclusive = parse_call("(4,):int64[1, 9]").args[0]
    assert (inclusive.low, inclusive.high) == (1, 10)  # `]` includes 9: exclusive bound 10
    unit = parse_call("(3, 3):float[-1.5, 2.5)").args[0]
    assert (unit.dtype, unit.low, unit.high) == ("float32", -1.5, 2.5)


@pytest.mark.parametrize(
    "text",
    ["(8, 3, 224, 224)", "(8, 128):int64[0,50257)", "(8, 16); (8, 16):bool",
     "input_ids=(4, 128):int64, attention_mask=(4, 128):int64[1,2)",
     "((2, 5, 8), (2, 5, 8)), use_cache=False", "{'a': [(1,), (2, 2):bf16]}",
     "[[(2, 3), (2, 3)]]", "(3,):float16[0,1)", "x=[], y={}", "(2,), k=-3, f=1e-05"],
)
def test_every_spec_reads_back_from_its_own_text(text: str) -> None:
    call = parse_call(text)
    assert parse_call(call.text()) == call


@pytest.mark.parametrize(
    ("text", "position", "words"),
    [
        ("(8, three)", 5, "'three' is not a shape"),
        ("(8, 3", 6, "expected a number, ',' or ')'"),
        ("", 1, "empty"),
        ("(8, 3):bf17", 8, "unknown dtype 'bf17'"),
        ("x=(1,), x=(2,)", 9, "keyword 'x' given twice"),
        ("(2, 3):int64[5,2)", 13, "the range is empty"),
        ("(2, 3):bool[0,1)", 12, "takes no value range"),
        ("(2, 3) (4, 5)", 8, "expected ',' or ';' between inputs"),
        ("(2.5, 3)", 2, "whole number"),
        ("(2, -3)", 5, "whole number"),
        ("x=(1,), (2,)", 9, "a positional input after a keyword input"),
        ("{a (1,)}", 4, "expected ':' after a dict key"),
        ("(1, 2):int64[0,1.5)", 13, "whole-number ends"),
        ("(2, 3):int64[0,10", 18, "expected ')' (high excluded) or ']'"),
        ("$(reboot)", 1, "expected a shape"),
        ("(2, 4); touch pwned", 9, "'touch' is not a shape"),
        ("[(1,), (2,)", 12, "expected ',' or ']'"),
    ],
)
def test_a_bad_spec_names_the_position_and_the_problem(
    text: str, position: int, words: str
) -> None:
    with pytest.raises(InputSpecError) as caught:
        parse_call(text)
    assert caught.value.position == position, str(caught.value)
    assert words in str(caught.value)
    assert f"position {position}" in str(caught.value)
    assert "(8, 3, 224, 224)" in str(caught.value)  # and shows how to write one


def test_deep_nesting_is_refused_not_a_crash() -> None:
    with pytest.raises(InputSpecError, match="nested deeper"):
        parse_call("[" * 200 + "(1,)" + "]" * 200)
