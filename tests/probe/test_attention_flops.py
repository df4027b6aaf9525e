"""Attention's FLOPs, worked out by hand: FlopCounterMode alone counts 0 for the CPU kernel of
scaled_dot_product_attention, and before torch 2.13 raised on grouped-query attention on a
GPU, which failed the whole probe."""

from __future__ import annotations

import pytest
from torchdoctor.probe.build_options import BuildOptions

from .conftest import FIXTURES, WarmProbe, needs_torch, report_of

pytestmark = needs_torch

ATTENTION = FIXTURES / "attention_flops.py"
BATCH, QUERY_HEADS, POSITIONS, FEATURES = 2, 4, 16, 8
# one (positions x features) @ (features x positions) product per batch item and query head
PRODUCT = 2 * BATCH * QUERY_HEADS * POSITIONS * POSITIONS * FEATURES
FORWARD = 2 * PRODUCT  # scores, then scores @ values
BACKWARD = 5 * PRODUCT  # the scores again, then the gradients of both products


def cuda_available() -> bool:
    import torch

    return torch.cuda.is_available()


@pytest.mark.parametrize("target", ["MultiHeadAttention", "GroupedQueryAttention"])
def test_attention_flops_on_the_cpu(warm: WarmProbe, target: str) -> None:
    report = report_of(warm.probe(ATTENTION, target))
    assert report.flops.forward == FORWARD
    assert report.flops.forward_backward == FORWARD + BACKWARD


@pytest.mark.gpu
@pytest.mark.skipif(not cuda_available(), reason="no CUDA device: attention kernels on the GPU")
@pytest.mark.parametrize("target", ["MultiHeadAttention", "GroupedQueryAttention"])
def test_attention_flops_on_the_gpu_in_bfloat16(warm: WarmProbe, target: str) -> None:
    # bfloat16 takes the flash kernel, which handles grouped heads itself
    report = report_of(warm.probe(ATTENTION, target, device="cuda",
                                  build=BuildOptions(dtype="bf16")))
    assert report.device.kind == "cuda"
    assert report.flops.forward == FORWARD
    assert report.flops.forward_backward == FORWARD + BACKWARD
