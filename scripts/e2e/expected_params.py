"""Prints the parameter count of an nn.Module class defined in a training script, computed
here with torch alone (independently of torchdoctor), as JSON: {"class": ..., "total": ...}.

The script is not run: only its imports (torch ones), class and function definitions and
simple constant assignments are executed, so importing it never starts a training run.

usage: python expected_params.py FILE [CLASS]
"""

from __future__ import annotations

import ast
import json
import sys

import torch


def definitions_only(tree: ast.Module) -> ast.Module:
    kept: list[ast.stmt] = []
    for node in tree.body:
        if isinstance(node, ast.Import) and all(alias.name.split(".")[0] == "torch" for alias in node.names):
            kept.append(node)
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in {"torch", "__future__"}:
            kept.append(node)
        elif isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            kept.append(node)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)) and isinstance(node.value, ast.Constant):
            kept.append(node)
    tree.body = kept
    return tree


def main(path: str, class_name: str | None) -> None:
    with open(path, encoding="utf-8") as source:
        tree = definitions_only(ast.parse(source.read(), path))
    scope: dict[str, object] = {"__name__": "torchdoctor_e2e_target", "__file__": path}
    exec(compile(tree, path, "exec"), scope)
    modules = {
        name: value
        for name, value in scope.items()
        if isinstance(value, type) and issubclass(value, torch.nn.Module) and value.__module__ == scope["__name__"]
    }
    if class_name is None:
        # The first module class in source order.
        order = [node.name for node in tree.body if isinstance(node, ast.ClassDef) and node.name in modules]
        if not order:
            sys.exit(f"{path}: no nn.Module subclass")
        class_name = order[0]
    model = modules[class_name]()
    total = sum(parameter.numel() for parameter in model.parameters())
    print(json.dumps({"class": class_name, "total": total}))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else None)
