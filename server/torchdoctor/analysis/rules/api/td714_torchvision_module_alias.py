"""TD714 torchvision-module-alias: `import torchvision.models as models`: `from torchvision
import models` says the same."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from ...context import RuleContext
from ...findings import Finding, Fix, Severity, rule
from .references import import_nodes


@rule(
    "TD714",
    "torchvision-module-alias",
    Severity.INFORMATION,
    "`import torchvision.models as models`: `from torchvision import models` says the same.",
    fixable=True,
    enabled_by_default=False,
)
def torchvision_module_alias(ctx: RuleContext) -> Iterator[Finding]:
    imports = ctx.sem.imports
    # one scan in C over every imported target first: most files import nothing from
    # torchvision's modules (a target that starts with it holds it)
    if "torchvision." not in "\n".join(imports.values()) or not any(
        target.startswith("torchvision.") and target.rsplit(".", 1)[-1] == name
        for name, target in imports.items()
    ):
        return
    for node in import_nodes(ctx):
        if not isinstance(node, ast.Import):
            continue
        for alias in node.names:
            package, _, module = alias.name.rpartition(".")
            if not package.startswith("torchvision") or alias.asname != module:
                continue
            text = f"from {package} import {module}"
            message = f"`import {alias.name} as {module}` is `{text}`"
            fix = None
            if len(node.names) == 1 and ctx.is_single_line_statement(node):
                fix = Fix(f"Use `{text}`", (ctx.replace(node, text),))
            yield ctx.finding("TD714", node, message, fix)
