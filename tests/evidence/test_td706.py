"""TD706: renamed TrainingArguments keywords raise TypeError in current transformers."""

from __future__ import annotations

import dataclasses

import pytest
from torchdoctor.analysis.rules.api.symbols import TRAINING_ARGUMENT_RENAMES

transformers = pytest.importorskip("transformers", reason="transformers is not installed")


def test_old_names_are_gone_and_new_names_exist() -> None:
    fields = {field.name for field in dataclasses.fields(transformers.TrainingArguments)}
    for old, (new, _) in TRAINING_ARGUMENT_RENAMES.items():
        assert old not in fields
        assert new in fields


@pytest.mark.parametrize("old", sorted(TRAINING_ARGUMENT_RENAMES))
def test_old_names_raise(old: str) -> None:
    with pytest.raises(TypeError) as error:
        transformers.TrainingArguments(output_dir="out", **{old: "epoch"})
    assert str(error.value) == (
        f"TrainingArguments.__init__() got an unexpected keyword argument '{old}'"
    )
