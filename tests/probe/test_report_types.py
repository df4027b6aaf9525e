"""The extension's report types are generated from the report's one definition (the schema
dataclasses): the checked-in file is what the generator writes now, and the generator follows
the schema's rules (required stays required, a default makes a field optional, None is null)."""

from __future__ import annotations

import dataclasses
import importlib.util
import sys
from types import ModuleType

from ..conftest import ROOT

SCRIPT = ROOT / "scripts" / "generate_report_types.py"


def generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("generate_report_types", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses and typing look modules up by name
    spec.loader.exec_module(module)
    return module


def test_the_generated_typescript_is_current() -> None:
    module = generator()
    assert module.OUTPUT.read_text(encoding="utf-8") == module.render(), (
        "vscode-extension/src/probe/reportSchema.ts is stale: "
        ".venv/bin/python scripts/generate_report_types.py"
    )


def test_required_optional_and_null_follow_the_dataclass() -> None:
    @dataclasses.dataclass
    class Sample:
        needed: int
        """Always sent."""
        maybe: list[str] | None
        later: dict[str, float] = dataclasses.field(default_factory=dict)

    lines = generator().interface(Sample)
    assert lines == [
        "export interface Sample {",
        "  /** Always sent. */",
        "  needed: number;",
        "  maybe: string[] | null;",
        "  later?: Record<string, number>;",
        "}",
    ]


def test_every_schema_class_reaches_the_typescript() -> None:
    from torchdoctor.probe.schema import ProbeReport

    module = generator()
    text = module.OUTPUT.read_text(encoding="utf-8")
    for cls in module.reachable_dataclasses(ProbeReport):
        assert f"export interface {cls.__name__} {{" in text
