"""TD701: `pretrained=` on torchvision builders is deprecated since torchvision 0.13; the weights
`pretrained=True` loads are the builder's legacy weights, which `weights="DEFAULT"` may not be.

The builders and their weight tables tested here are pure Python: torchvision is imported
without its compiled operators where they cannot load (tests/torchvision_import.py).
No weights are downloaded: the download is replaced by a stub that reports the URL it was given.
"""

from __future__ import annotations

import inspect
import warnings

import pytest
from torchdoctor.analysis.rules.api.symbols import (
    DEPENDS,
    NO_WEIGHTS,
    TORCHVISION_LEGACY_WEIGHTS,
)

from .. import torchvision_import

PRETRAINED_WARNING = (
    "The parameter 'pretrained' is deprecated since 0.13 and may be removed in the future, "
    "please use 'weights' instead."
)


def import_torchvision():
    try:
        return torchvision_import.import_torchvision()
    except ImportError as error:
        if error.name == "torchvision":
            pytest.skip(
                "torchvision is not installed (`pip install torchvision==0.28.0` runs these "
                "tests; see tests/torchvision_import.py for why its compiled operators are left "
                "out)"
            )
        pytest.skip(f"torchvision cannot be imported: {error}")


class Download(Exception):
    """Raised instead of downloading weights; carries the URL."""


@pytest.fixture
def torchvision(monkeypatch):
    tv = import_torchvision()
    from torchvision.models import _api

    def no_download(self, *args, **kwargs):
        raise Download(self.url)

    monkeypatch.setattr(_api.WeightsEnum, "get_state_dict", no_download)
    return tv


def url_loaded(build) -> tuple[str, list[str]]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(Download) as download:
            build()
    return str(download.value), [str(w.message) for w in caught]


def test_pretrained_warns_and_loads_the_legacy_weights(torchvision) -> None:
    models = torchvision.models
    legacy_url, legacy_warnings = url_loaded(lambda: models.resnet50(pretrained=True))
    assert PRETRAINED_WARNING in legacy_warnings

    named_url, named_warnings = url_loaded(lambda: models.resnet50(weights="IMAGENET1K_V1"))
    assert named_url == legacy_url
    assert named_warnings == []

    default_url, _ = url_loaded(lambda: models.resnet50(weights="DEFAULT"))
    assert default_url != legacy_url  # DEFAULT is IMAGENET1K_V2 for resnet50
    assert models.ResNet50_Weights.DEFAULT is models.ResNet50_Weights.IMAGENET1K_V2


def test_pretrained_false_is_weights_none(torchvision) -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        old = torchvision.models.resnet18(pretrained=False)
    messages = [str(w.message) for w in caught]
    assert PRETRAINED_WARNING in messages
    assert (
        "Arguments other than a weight enum or `None` for 'weights' are deprecated since 0.13 "
        "and may be removed in the future. The current behavior is equivalent to passing "
        "`weights=None`." in messages
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        new = torchvision.models.resnet18(weights=None)
    assert type(old) is type(new)


def test_positional_true_is_deprecated_too(torchvision) -> None:
    url, messages = url_loaded(lambda: torchvision.models.resnet18(True))
    positional = "Using 'weights' as positional parameter(s) is deprecated since 0.13"
    assert any(positional in message for message in messages)
    assert url == url_loaded(lambda: torchvision.models.resnet18(weights="IMAGENET1K_V1"))[0]


def test_pretrained_backbone_maps_to_weights_backbone(torchvision) -> None:
    detection = torchvision.models.detection
    old_url, messages = url_loaded(
        lambda: detection.fasterrcnn_resnet50_fpn(pretrained=False, pretrained_backbone=True)
    )
    assert any("'pretrained_backbone' is deprecated since 0.13" in m for m in messages)
    new_url, new_messages = url_loaded(
        lambda: detection.fasterrcnn_resnet50_fpn(weights=None, weights_backbone="IMAGENET1K_V1")
    )
    assert new_url == old_url
    assert new_messages == []


def test_builders_without_weights_raise(torchvision) -> None:
    with pytest.raises(ValueError, match="No weights available for model vit_h_14"):
        torchvision.models.vit_h_14(pretrained=True)


def _legacy_table(builder) -> dict:
    function = builder
    while function is not None:
        found = inspect.getclosurevars(function).nonlocals.get("weights")
        if isinstance(found, dict) and found:
            return found
        function = getattr(function, "__wrapped__", None)
    return {}


def test_the_rule_table_matches_torchvision(torchvision) -> None:
    """Every weights name in TORCHVISION_LEGACY_WEIGHTS is what the builder's legacy handler
    substitutes for `pretrained=True` / `pretrained_backbone=True`."""
    models = torchvision.models
    checked = 0
    for (namespace, name), values in TORCHVISION_LEGACY_WEIGHTS.items():
        module = getattr(models, namespace) if namespace else models
        if namespace == "detection" and name in ("resnet_fpn_backbone", "mobilenet_backbone"):
            from torchvision.models.detection import backbone_utils as module
        table = _legacy_table(getattr(module, name))
        for old, value in zip(("pretrained", "pretrained_backbone"), values, strict=False):
            new = "weights" if old == "pretrained" else "weights_backbone"
            legacy_old, legacy_value = table[new]
            assert legacy_old == old
            if value == DEPENDS:
                assert callable(legacy_value) and not hasattr(legacy_value, "name")
            elif value == NO_WEIGHTS:
                assert legacy_value is None
            else:
                assert legacy_value.name == value, (namespace, name, old)
            checked += 1
    assert checked > 120
