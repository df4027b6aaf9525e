"""TD708: what torch 2.13 says about each deprecated function, and that each mechanical
replacement computes the same thing."""

from __future__ import annotations

import warnings

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torchdoctor.analysis.rules.api.symbols import DEFINING_MODULE_PATHS, DEPRECATED


def spd() -> torch.Tensor:
    a = torch.tensor([[2.0, 0.5, 0.0], [0.5, 3.0, 0.2], [0.0, 0.2, 1.5]])
    return a @ a.T + torch.eye(3)


def image() -> torch.Tensor:
    return torch.arange(16.0).reshape(1, 1, 4, 4)


# Calls that make each "warns" entry of the table run once.
RUNS = {
    "torch.qr": lambda: torch.qr(spd()),
    "torch.chain_matmul": lambda: torch.chain_matmul(spd(), spd()),
    "torch.cholesky": lambda: torch.cholesky(spd()),
    "torch.lu": lambda: torch.lu(spd()),
    "torch.lu_solve": lambda: torch.lu_solve(torch.ones(3, 1), *torch.linalg.lu_factor(spd())),
    "torch.triangular_solve": lambda: torch.triangular_solve(torch.ones(3, 1), spd()),
    "torch.range": lambda: torch.range(0, 3),
    "torch.set_default_tensor_type": lambda: torch.set_default_tensor_type(torch.FloatTensor),
    "torch.testing.assert_allclose": lambda: torch.testing.assert_allclose(spd(), spd()),
    "torch.nn.functional.upsample": lambda: F.upsample(image(), scale_factor=2),
    "torch.nn.functional.upsample_nearest": lambda: F.upsample_nearest(image(), scale_factor=2),
    "torch.nn.functional.upsample_bilinear": lambda: F.upsample_bilinear(image(), scale_factor=2),
    "torch.nn.utils.weight_norm": lambda: nn.utils.weight_norm(nn.Linear(2, 2)),
    "torch.nn.utils.clip_grad_norm": lambda: nn.utils.clip_grad_norm(
        [nn.Parameter(torch.ones(2))], 1.0
    ),
    "torch.nn.utils.stateless.functional_call": lambda: nn.utils.stateless.functional_call(
        nn.Linear(2, 1), {}, (torch.ones(2),)
    ),
    "torch.nn.init.uniform": lambda: nn.init.uniform(torch.empty(2, 2)),
    "torch.nn.init.normal": lambda: nn.init.normal(torch.empty(2, 2)),
    "torch.nn.init.constant": lambda: nn.init.constant(torch.empty(2, 2), 0.0),
    "torch.nn.init.eye": lambda: nn.init.eye(torch.empty(2, 2)),
    "torch.nn.init.dirac": lambda: nn.init.dirac(torch.empty(2, 2, 3)),
    "torch.nn.init.xavier_uniform": lambda: nn.init.xavier_uniform(torch.empty(2, 2)),
    "torch.nn.init.xavier_normal": lambda: nn.init.xavier_normal(torch.empty(2, 2)),
    "torch.nn.init.kaiming_uniform": lambda: nn.init.kaiming_uniform(torch.empty(2, 2)),
    "torch.nn.init.kaiming_normal": lambda: nn.init.kaiming_normal(torch.empty(2, 2)),
    "torch.nn.init.orthogonal": lambda: nn.init.orthogonal(torch.empty(2, 2)),
    "torch.nn.init.sparse": lambda: nn.init.sparse(torch.empty(2, 2), 0.5),
    "torch.backends.cuda.sdp_kernel": lambda: torch.backends.cuda.sdp_kernel().__enter__(),
    "torch.utils._pytree._register_pytree_node": lambda: torch.utils._pytree._register_pytree_node(
        type("Box", (), {}), lambda box: ([], None), lambda values, context: None
    ),
    "torch.cuda.memory_cached": lambda: torch.cuda.memory_cached(),
    "torch.cuda.max_memory_cached": lambda: torch.cuda.max_memory_cached(),
}
for _name in ("vmap", "grad", "grad_and_value", "jacrev", "jacfwd", "hessian"):
    RUNS[f"functorch.{_name}"] = (lambda n: lambda: getattr(__import__("functorch"), n)(torch.sin))(
        _name
    )
RUNS["functorch.vjp"] = lambda: __import__("functorch").vjp(torch.sin, torch.ones(2))
RUNS["functorch.jvp"] = lambda: __import__("functorch").jvp(
    torch.sin, (torch.ones(2),), (torch.ones(2),)
)
RUNS["functorch.functionalize"] = lambda: __import__("functorch").functionalize(torch.sin)
RUNS["functorch.make_functional"] = lambda: __import__("functorch").make_functional(nn.Linear(1, 1))
RUNS["functorch.make_functional_with_buffers"] = lambda: __import__(
    "functorch"
).make_functional_with_buffers(nn.Linear(1, 1))
RUNS["functorch.combine_state_for_ensemble"] = lambda: __import__(
    "functorch"
).combine_state_for_ensemble([nn.Linear(1, 1), nn.Linear(1, 1)])


@pytest.fixture(autouse=True)
def _restore_default_dtype():
    dtype = torch.get_default_dtype()
    yield
    torch.set_default_dtype(dtype)


# each function once, under its public name (the defining-module paths are checked below)
WARNING_ENTRIES = sorted(
    q for q, s in DEPRECATED.items() if s.evidence == "warns" and q == s.qualname
)
DOC_ENTRIES = sorted(q for q, s in DEPRECATED.items() if s.evidence == "docs" and q == s.qualname)


@pytest.mark.parametrize("path", sorted(DEFINING_MODULE_PATHS))
def test_defining_module_path_is_the_public_object(path: str) -> None:
    """`from torch.nn.utils.weight_norm import weight_norm` imports the very function
    `torch.nn.utils.weight_norm` is: the rule reports it the same way."""
    assert _resolve(path) is _resolve(DEFINING_MODULE_PATHS[path])


@pytest.mark.parametrize("qualname", WARNING_ENTRIES)
def test_deprecated_functions_warn(qualname: str) -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        RUNS[qualname]()
    messages = " | ".join(str(w.message) for w in caught)
    assert "deprecat" in messages or "renamed" in messages, (qualname, messages)


def _resolve(qualname: str):
    module_name, _, name = qualname.rpartition(".")
    module = __import__(module_name, fromlist=[name])
    return getattr(module, name)


@pytest.mark.parametrize("qualname", DOC_ENTRIES)
def test_documentation_only_deprecations(qualname: str) -> None:
    function = _resolve(qualname)
    assert "deprecated" in (function.__doc__ or "")


def test_norm_and_ger_do_not_warn_at_run_time() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        torch.norm(spd())
        torch.ger(torch.ones(2), torch.ones(2))
        torch.svd(spd())
    assert "torch.norm is deprecated and may be removed in a future PyTorch release" in (
        torch.norm.__doc__
    )


def test_sigmoid_and_tanh_are_not_deprecated() -> None:
    """F.sigmoid/F.tanh are often called deprecated; torch 2.13 neither warns nor says so."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        F.sigmoid(torch.ones(2))
        F.tanh(torch.ones(2))
    assert "deprecat" not in F.sigmoid.__doc__.lower()
    assert "deprecat" not in F.tanh.__doc__.lower()


def test_replacements_compute_the_same() -> None:
    A = spd()
    b = torch.tensor([[1.0], [2.0], [3.0]])
    x3 = torch.arange(24.0).reshape(2, 3, 4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        q_old, r_old = torch.qr(A, some=False)
        lu, pivots = torch.lu(A)
        pairs = [
            (q_old, torch.linalg.qr(A, mode="complete")[0]),
            (r_old, torch.linalg.qr(A, mode="complete")[1]),
            (torch.cholesky(A), torch.linalg.cholesky(A)),
            (torch.cholesky(A, upper=True), torch.linalg.cholesky(A).mH),
            (lu, torch.linalg.lu_factor(A)[0]),
            (torch.lu_solve(b, lu, pivots), torch.linalg.lu_solve(lu, pivots, b)),
            (torch.chain_matmul(A, A, A), torch.linalg.multi_dot([A, A, A])),
            (torch.norm(x3), torch.linalg.vector_norm(x3)),
            (torch.ger(b[:, 0], b[:, 0]), torch.outer(b[:, 0], b[:, 0])),
            (
                nn.UpsamplingBilinear2d(scale_factor=2)(image()),
                nn.Upsample(scale_factor=2, mode="bilinear", align_corners=True)(image()),
            ),
            (
                nn.UpsamplingNearest2d(scale_factor=2)(image()),
                nn.Upsample(scale_factor=2, mode="nearest")(image()),
            ),
            (
                F.upsample_nearest(image(), scale_factor=2),
                F.interpolate(image(), scale_factor=2, mode="nearest"),
            ),
            (
                F.upsample_bilinear(image(), scale_factor=2),
                F.interpolate(image(), scale_factor=2, mode="bilinear", align_corners=True),
            ),
        ]
        old_range = torch.range(0, 9)
    for old, new in pairs:
        assert torch.allclose(old, new)
    new_range = torch.arange(0, 10, dtype=torch.float32)
    assert old_range.dtype == new_range.dtype == torch.float32
    assert torch.equal(old_range, new_range)
    assert torch.arange(0, 10).dtype == torch.int64  # why the fix spells out the dtype


def test_default_tensor_type_and_default_dtype_agree() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.set_default_tensor_type(torch.DoubleTensor)
    old = torch.zeros(1).dtype
    torch.set_default_dtype(torch.float32)
    torch.set_default_dtype(torch.float64)
    assert old == torch.zeros(1).dtype == torch.float64
