"""The probe's input grammar: text in, a tree of tensor specs out (standard library only).

Both ends read it: the client to refuse a bad ``--input`` before any interpreter starts, the
runner (which loads this file by path, see runner/companions.py) to build the tensors. Examples:

    (8, 3, 224, 224)                                   one float32 tensor
    (8, 128):int64[0,50257)                            token ids below 50257
    (8, 16); (8, 16):bool                              two positional arguments
    [(8, 16), (8, 16):bool]                            the same (the older spelling)
    input_ids=(4, 128):int64, attention_mask=(4, 128):bool
    {"image": (2, 3, 32, 32), "ids": (2, 7):long}       one dict argument
    ((2, 5, 8), (2, 5, 8)), use_cache=False            a tuple argument and a plain value

A parenthesised list of integers is a tensor shape; a parenthesised list holding anything else
is a tuple. ``[...]`` is a list, ``{key: value}`` a dict (keys are names or quoted strings).
A bracket around the whole text is the argument list itself, so a single list argument is
written ``[[...]]``. Integer ranges are ``[low, high)`` (``]`` includes ``high``); a range on a
floating dtype draws uniformly from it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TypeAlias

# Every torch dtype a random example input can have, by its torch name and the usual aliases.
DTYPE_ALIASES: dict[str, str] = {
    "float32": "float32", "float": "float32", "fp32": "float32", "f32": "float32",
    "float16": "float16", "half": "float16", "fp16": "float16", "f16": "float16",
    "bfloat16": "bfloat16", "bf16": "bfloat16",
    "float64": "float64", "double": "float64", "fp64": "float64", "f64": "float64",
    "int64": "int64", "long": "int64", "i64": "int64",
    "int32": "int32", "int": "int32", "i32": "int32",
    "int16": "int16", "short": "int16", "i16": "int16",
    "int8": "int8", "i8": "int8",
    "uint8": "uint8", "u8": "uint8", "byte": "uint8",
    "bool": "bool",
    "complex64": "complex64", "cfloat": "complex64",
    "complex128": "complex128", "cdouble": "complex128",
}
FLOATING = frozenset({"float32", "float16", "bfloat16", "float64"})
COMPLEX = frozenset({"complex64", "complex128"})
MAX_DIMENSIONS = 16
MAX_DEPTH = 32  # nesting of tuples/lists/dicts: deep enough for any real call, bounded recursion


class InputSpecError(ValueError):
    """A spec that cannot be read; the message names the position (1-based) and what was
    expected there."""

    def __init__(self, problem: str, text: str, position: int) -> None:
        self.problem = problem
        self.position = position + 1
        before = text[max(0, position - 12) : position]
        shown = f' after "{before}"' if before.strip() else ""
        super().__init__(
            f"cannot read input {text!r} at position {self.position}{shown}: {problem}; "
            "write shapes like (8, 3, 224, 224), (8, 128):int64[0,50257), "
            "input_ids=(4, 128):int64, mask=(4, 128):bool"
        )


@dataclass(frozen=True)
class TensorSpec:
    """One random tensor: its shape, dtype and (optionally) the range its values come from."""

    shape: tuple[int, ...]
    dtype: str = "float32"
    low: float | None = None
    high: float | None = None
    """Exclusive upper bound."""

    def text(self) -> str:
        dims = ", ".join(str(d) for d in self.shape) + ("," if len(self.shape) == 1 else "")
        suffix = "" if self.dtype == "float32" and self.low is None else f":{self.dtype}"
        if self.low is not None and self.high is not None:
            suffix += f"[{_number_text(self.low)},{_number_text(self.high)})"
        return f"({dims}){suffix}"


# What a spec value is: a tensor, a container of values, or a plain Python constant.
Value: TypeAlias = (
    TensorSpec | tuple["Value", ...] | list["Value"] | dict[str, "Value"]
    | int | float | bool | str | None
)


@dataclass(frozen=True)
class CallSpec:
    """The arguments of one forward call."""

    args: tuple[Value, ...] = ()
    kwargs: dict[str, Value] = field(default_factory=dict)

    def text(self) -> str:
        """The call in this grammar, read back to the same CallSpec."""
        parts = [value_text(v) for v in self.args]
        if not self.kwargs:
            if len(self.args) == 1 and isinstance(self.args[0], list):
                return f"[{parts[0]}]"  # a bare bracket would read as the argument list
            return "; ".join(parts)  # the report's `spec` spelling for positional tensors
        parts += [f"{name}={value_text(v)}" for name, v in self.kwargs.items()]
        return ", ".join(parts)

    def tensors(self) -> list[TensorSpec]:
        found: list[TensorSpec] = []
        for value in (*self.args, *self.kwargs.values()):
            _collect(value, found)
        return found


def value_text(value: Value) -> str:
    if isinstance(value, TensorSpec):
        return value.text()
    if isinstance(value, tuple):
        inner = ", ".join(value_text(v) for v in value)
        return f"({inner},)" if len(value) == 1 else f"({inner})"
    if isinstance(value, list):
        return "[" + ", ".join(value_text(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k!r}: {value_text(v)}" for k, v in value.items()) + "}"
    if isinstance(value, str):
        return repr(value)
    return repr(value)  # int, float, bool, None: Python's spelling is the grammar's


def _collect(value: Value, found: list[TensorSpec]) -> None:
    if isinstance(value, TensorSpec):
        found.append(value)
    elif isinstance(value, (tuple, list)):
        for item in value:
            _collect(item, found)
    elif isinstance(value, dict):
        for item in value.values():
            _collect(item, found)


def _number_text(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(value)


def parse_call(text: str) -> CallSpec:
    """Read a whole --input / `# torchdoctor: input=` text; InputSpecError when it is not one."""
    if not isinstance(text, str):
        raise InputSpecError("the input is not text", repr(text), 0)
    return _Parser(text).call()


def parse_dtype(name: str) -> str:
    """The torch dtype name for `name` or an alias (bf16, half, long...); ValueError if none."""
    dtype = DTYPE_ALIASES.get(name.strip().lower())
    if dtype is None:
        raise ValueError(
            f"unknown dtype {name!r}; use a torch name (float32, bfloat16, float16, int64, "
            "bool...) or bf16, fp16, half, float, double, long"
        )
    return dtype


_NUMBER = re.compile(r"[-+]?(\d+\.?\d*([eE][-+]?\d+)?|\.\d+([eE][-+]?\d+)?|inf)")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_STRING = re.compile(r"'[^'\\\n]*'|\"[^\"\\\n]*\"")
_KEYWORD = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\s*=(?!=)")
_CONSTANTS = {"True": True, "False": False, "None": None}


class _Parser:
    """Recursive descent over the text; `self.at` is the index of the next unread character."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.at = 0

    # -- helpers ---------------------------------------------------------------------------

    def fail(self, problem: str, at: int | None = None) -> InputSpecError:
        return InputSpecError(problem, self.text, self.at if at is None else at)

    def skip_space(self) -> None:
        while self.at < len(self.text) and self.text[self.at].isspace():
            self.at += 1

    def peek(self) -> str:
        self.skip_space()
        return self.text[self.at] if self.at < len(self.text) else ""

    def expect(self, char: str, what: str) -> None:
        if self.peek() != char:
            found = repr(self.peek()) if self.peek() else "the end"
            raise self.fail(f"expected {what}, found {found}")
        self.at += 1

    def match(self, pattern: re.Pattern[str]) -> str | None:
        self.skip_space()
        found = pattern.match(self.text, self.at)
        if found is None:
            return None
        self.at = found.end()
        return found.group(0)

    # -- grammar ---------------------------------------------------------------------------

    def call(self) -> CallSpec:
        if not self.text.strip():
            raise self.fail("the input is empty")
        start = self.at
        if self.peek() == "[" and self._whole_text_is_one_bracket():
            self.at += 1
            spec = self.arguments(closing="]")
            self.expect("]", "',' or ']'")
        else:
            self.at = start
            spec = self.arguments(closing="")
        if self.peek():
            raise self.fail(f"unexpected {self.peek()!r}")
        if not spec.args and not spec.kwargs:
            raise self.fail("no input in it")
        return spec

    def _whole_text_is_one_bracket(self) -> bool:
        """True when the `[` here closes at the very end: `[(8, 16), (8, 16):bool]`."""
        depth = 0
        quote = ""
        for index in range(self.at, len(self.text)):
            char = self.text[index]
            if quote:
                quote = "" if char == quote else quote
            elif char in "'\"":
                quote = char
            elif char in "([{":
                depth += 1
            elif char in ")]}":
                depth -= 1
                if depth == 0:
                    return not self.text[index + 1 :].strip()
        return False

    def arguments(self, closing: str) -> CallSpec:
        args: list[Value] = []
        kwargs: dict[str, Value] = {}
        while self.peek() and self.peek() != closing:
            keyword_at = self.at  # peek() skipped the spaces: this is the name's first character
            keyword = self.match(_KEYWORD)
            if keyword is not None:
                name = keyword.rstrip("=").strip()
                if name in kwargs:
                    raise self.fail(f"keyword {name!r} given twice", keyword_at)
                kwargs[name] = self.value(0)
            elif kwargs:
                raise self.fail("a positional input after a keyword input")
            else:
                args.append(self.value(0))
            if self.peek() in (",", ";"):
                self.at += 1
            elif self.peek() and self.peek() != closing:
                raise self.fail(f"expected ',' or ';' between inputs, found {self.peek()!r}")
        return CallSpec(tuple(args), kwargs)

    def value(self, depth: int) -> Value:
        if depth > MAX_DEPTH:
            raise self.fail(f"nested deeper than {MAX_DEPTH} levels")
        char = self.peek()
        if char == "(":
            return self.parenthesised(depth)
        if char == "[":
            self.at += 1
            items = self.items("]", depth)
            return list(items)
        if char == "{":
            return self.dictionary(depth)
        string = self.match(_STRING)
        if string is not None:
            return string[1:-1]
        number = self.match(_NUMBER)
        if number is not None:
            return _to_number(number)
        at = self.at
        name = self.match(_NAME)
        if name is not None:
            if name in _CONSTANTS:
                return _CONSTANTS[name]
            raise self.fail(
                f"{name!r} is not a shape, a number, True/False/None or a quoted string", at
            )
        found = repr(char) if char else "the end"
        raise self.fail(f"expected a shape such as (8, 16), found {found}")

    def parenthesised(self, depth: int) -> Value:
        """`(8, 3)` with an optional `:dtype[range]` is a tensor; `((8, 3), 2.0)` a tuple."""
        start = self.at
        self.at += 1
        dims: list[int] = []
        while True:
            self.skip_space()
            dim_at = self.at
            token = self.match(_NUMBER)
            if token is None:
                break
            if not re.fullmatch(r"\d+", token):
                raise self.fail(f"a dimension is a whole number >= 0, not {token!r}", dim_at)
            dims.append(int(token))
            if self.peek() == ",":
                self.at += 1
            else:
                break
        if self.peek() == ")" and (dims or self.text[start + 1 : self.at].strip() == ""):
            self.at += 1
            if len(dims) > MAX_DIMENSIONS:
                raise self.fail(f"more than {MAX_DIMENSIONS} dimensions", start)
            return self.tensor_suffix(tuple(dims))
        if dims and self.peek() not in ("(", "[", "{", "'", '"') and not self.peek().isalpha():
            # `(8, 3` or `(8, x)`: a shape that went wrong, not a tuple
            found = repr(self.peek()) if self.peek() else "the end"
            raise self.fail(f"expected a number, ',' or ')' in a shape, found {found}")
        self.at = start + 1
        return tuple(self.items(")", depth))

    def items(self, closing: str, depth: int) -> list[Value]:
        values: list[Value] = []
        while self.peek() != closing:
            if not self.peek():
                raise self.fail(f"expected {closing!r}, found the end")
            values.append(self.value(depth + 1))
            if self.peek() == ",":
                self.at += 1
            elif self.peek() != closing:
                found = repr(self.peek()) if self.peek() else "the end"
                raise self.fail(f"expected ',' or {closing!r}, found {found}")
        self.at += 1
        return values

    def dictionary(self, depth: int) -> dict[str, Value]:
        self.at += 1
        result: dict[str, Value] = {}
        while self.peek() != "}":
            self.skip_space()
            key_at = self.at
            key = self.match(_STRING) or self.match(_NAME)
            if key is None:
                found = repr(self.peek()) if self.peek() else "the end"
                raise self.fail(f"expected a dict key (a name or a quoted string), found {found}")
            key = key[1:-1] if key[0] in "'\"" else key
            if key in result:
                raise self.fail(f"key {key!r} given twice", key_at)
            self.expect(":", "':' after a dict key")
            result[key] = self.value(depth + 1)
            if self.peek() == ",":
                self.at += 1
            elif self.peek() != "}":
                found = repr(self.peek()) if self.peek() else "the end"
                raise self.fail(f"expected ',' or '}}', found {found}")
        self.at += 1
        return result

    def tensor_suffix(self, shape: tuple[int, ...]) -> TensorSpec:
        if self.peek() != ":":
            return TensorSpec(shape)
        self.at += 1
        self.skip_space()
        name_at = self.at
        name = self.match(_NAME)
        if name is None:
            raise self.fail("expected a dtype after ':' (float32, bf16, int64, bool...)")
        try:
            dtype = parse_dtype(name)
        except ValueError as exc:
            raise self.fail(str(exc), name_at) from None
        # After the dtype a `[` can only start a range: a list never follows a tensor directly.
        if self.peek() != "[":
            return TensorSpec(shape, dtype)
        return self.ranged(shape, dtype)

    def ranged(self, shape: tuple[int, ...], dtype: str) -> TensorSpec:
        range_at = self.at
        self.at += 1
        low_text = self.match(_NUMBER)
        if low_text is None:
            raise self.fail("expected the range's low end, a number")
        self.expect(",", "',' between the range's ends")
        high_text = self.match(_NUMBER)
        if high_text is None:
            raise self.fail("expected the range's high end, a number")
        closing = self.peek()
        if closing not in (")", "]"):
            found = repr(closing) if closing else "the end"
            raise self.fail(f"expected ')' (high excluded) or ']' (high included), found {found}")
        self.at += 1
        low, high = _to_number(low_text), _to_number(high_text)
        if dtype == "bool" or dtype in COMPLEX:
            raise self.fail(f"a {dtype} tensor takes no value range", range_at)
        if dtype not in FLOATING:
            if not (isinstance(low, int) and isinstance(high, int)):
                raise self.fail(f"an {dtype} range has whole-number ends", range_at)
            if closing == "]":
                high += 1
        if not low < high:
            raise self.fail(f"the range is empty: low {low_text} is not below high", range_at)
        return TensorSpec(shape, dtype, low, high)


def _to_number(text: str) -> int | float:
    if re.fullmatch(r"[-+]?\d+", text):
        return int(text)
    return float(text)
