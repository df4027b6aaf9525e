"""TD000 syntax-error: code that Python refuses to compile.

The tolerant parser keeps analysing the statements around a broken one, so every other rule
still reports on the rest of the file; this rule makes sure the file itself never passes.
"""

from . import td000_syntax_error

__all__ = [
    "td000_syntax_error",
]
