"""Evidence tests run the bad snippet of a rule's doc page with real torch and assert exactly
what the page claims. They skip (saying why) only when torch is not installed."""

import pytest

torch = pytest.importorskip("torch", reason="evidence tests need torch (pip install -e '.[probe]')")


@pytest.fixture(autouse=True)
def _deterministic() -> None:
    torch.manual_seed(0)
    torch.set_num_threads(1)
