"""TD702: since torch 2.6 `torch.load` defaults to weights_only=True and refuses arbitrary
objects; `weights_only=False` (and `torch.hub.load_state_dict_from_url`, whose default is still
False) runs whatever the pickle says."""

from __future__ import annotations

import inspect
import io
import pickle

import pytest
import torch
from torchdoctor.analysis import Config, check

CALLS: list[str] = []


def record(message: str) -> str:
    CALLS.append(message)
    return message


class Payload:
    def __reduce__(self):
        return (record, ("code ran while loading",))


def crafted_file() -> io.BytesIO:
    buffer = io.BytesIO()
    torch.save({"weights": torch.ones(2), "payload": Payload()}, buffer)
    buffer.seek(0)
    return buffer


def test_default_torch_load_refuses_arbitrary_objects() -> None:
    CALLS.clear()
    with pytest.raises(pickle.UnpicklingError) as error:
        torch.load(crafted_file())
    text = str(error.value)
    assert text.startswith("Weights only load failed.")
    assert (
        "In PyTorch 2.6, we changed the default value of the `weights_only` argument in "
        "`torch.load` from `False` to `True`." in text
    )
    assert "WeightsUnpickler error: Unsupported global" in text
    assert CALLS == []


def test_weights_only_false_runs_the_payload() -> None:
    CALLS.clear()
    loaded = torch.load(crafted_file(), weights_only=False)
    assert CALLS == ["code ran while loading"]
    assert loaded["payload"] == "code ran while loading"


def test_plain_state_dicts_load_with_weights_only() -> None:
    buffer = io.BytesIO()
    torch.save(torch.nn.Linear(2, 2).state_dict(), buffer)
    buffer.seek(0)
    assert set(torch.load(buffer, weights_only=True)) == {"weight", "bias"}


def test_torch_load_defaults_to_weights_only_none() -> None:
    assert inspect.signature(torch.load).parameters["weights_only"].default is None


def test_hub_loader_still_defaults_to_weights_only_false(tmp_path) -> None:
    assert (
        inspect.signature(torch.hub.load_state_dict_from_url).parameters["weights_only"].default
        is False
    )
    path = tmp_path / "weights.pth"
    path.write_bytes(crafted_file().getvalue())
    CALLS.clear()
    torch.hub.load_state_dict_from_url(
        path.as_uri(), model_dir=str(tmp_path / "hub"), progress=False
    )
    assert CALLS == ["code ran while loading"]


def test_rule_follows_the_target_version() -> None:
    source = 'import torch\nstate = torch.load("model.pt")\n'
    old = Config(select=("TD702",), target_torch=(2, 5))
    new = Config(select=("TD702",), target_torch=(2, 6))
    assert [f.code for f in check(source, "x.py", old)] == ["TD702"]
    assert check(source, "x.py", new) == []
