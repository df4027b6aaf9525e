"""Parity with TorchFix: every TorchFix finding has a torchdoctor counterpart.

TorchFix's checker fixtures (`tests/fixtures/**/checker/*.py`, each with a `.txt` of expected
`LINE:COL CODE message` lines) are a peer test suite. The torchfix 0.7.0 sdist on PyPI does not
ship them (it holds `tests/test_torchfix.py` and no `tests/fixtures`), so this file carries its
own cases: for every TorchFix checker fixture, code of our own that exercises the same patterns,
with the lines TorchFix reports marked `# torchfix: TORxxx <symbol>`. The cases were written from
the behaviour TorchFix's public repository documents; no TorchFix code or fixture is copied.

When a TorchFix checkout is at hand, point `TORCHFIX_FIXTURES` at its `tests/fixtures` folder and
the same comparison runs on TorchFix's own files. Without it, the newest torchfix sdist is
fetched into `.cache/torchfix` and searched for fixtures (skipped, saying why, when the download
fails or the sdist has none).

Every expected line must carry the mapped TD code (MAPPING below) unless it is listed in
DELIBERATE_DIFFERENCES with the reason.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tarfile
from dataclasses import dataclass
from pathlib import Path

import pytest
from torchdoctor.analysis import Config, check

from .conftest import ROOT

ALL = Config(select=("ALL",))
# TorchFix reports a bare `torch.load` (TOR102); since torch 2.6 it is safe (weights_only=True by
# default), so TD702 reports it only for an older target. TOR102 cases are checked at 2.5.
BEFORE_SAFE_LOAD = Config(select=("ALL",), target_torch=(2, 5))

# TorchFix code -> torchdoctor code (the README's rule table names the TD rules).
MAPPING = {
    "TOR001": "TD707",
    "TOR004": "TD707",
    "TOR101": "TD708",
    "TOR103": "TD708",
    "TOR002": "TD105",
    "TOR003": "TD709",
    "TOR102": "TD702",
    "TOR104": "TD712",
    "TOR105": "TD712",
    "TOR106": "TD710",
    "TOR107": "TD710",
    "TOR108": "TD710",
    "TOR201": "TD701",
    "TOR202": "TD711",
    "TOR203": "TD714",
    "TOR401": "TD504",
    "TOR402": "TD110",
}

# Differences we keep on purpose. Each entry: TorchFix code -> why torchdoctor does not report it.
DELIBERATE_DIFFERENCES = {
    # foreach is already the default on CUDA: torch.optim's docs say that with foreach=None "we
    # will try to use foreach over the for-loop implementation on CUDA". Asking every script to
    # pass foreach=True would be noise.
    "TOR403": "no counterpart: torch already picks the foreach implementation on CUDA",
    # Calls of underscore names such as torch._check_with have no public replacement to offer;
    # TD712 reports only private names that have a public twin.
    "TOR801": "no counterpart: private names without a public replacement are not reported",
    # A rule for pytorch/pytorch's own test files.
    "TOR901": "no counterpart: internal to the pytorch repository's tests",
    # `a / torch.sqrt(b)` -> `a * torch.rsqrt(b)` is a speed hint, not a bug, and the rewrite does
    # not give the same numbers: with torch 2.13 on CPU, `x / torch.sqrt(y)` and
    # `x * torch.rsqrt(y)` differ in the last bit for about 28% of random float32 inputs
    # (`1 / torch.sqrt(y)` and `torch.rsqrt(y)` for about 0.5%). No rule in the catalogue
    # (the README's rule table) covers it.
    "TOR109": "no counterpart: a speed hint whose rewrite changes results in the last bit",
}


# TorchFix's code for a use -> its code for the import of the same name.
IMPORT_CODE_OF_USE = {"TOR104": "TOR105", "TOR101": "TOR103", "TOR001": "TOR004"}


def is_repeat_of_reported_import(item: Expected, expected: list[Expected]) -> bool:
    """TorchFix reports a private, deprecated or removed name at its import and again at every
    use. torchdoctor reports it once, at the import (whose fix, where there is one, makes the
    uses right too); a use that carries a fix of its own is still reported. A use after the
    import of the same name is therefore not required: a deliberate difference."""
    import_code = IMPORT_CODE_OF_USE.get(item.code)
    return import_code is not None and any(
        other.code == import_code and other.detail == item.detail and other.line < item.line
        for other in expected
    )


# Beyond TorchFix (reported by us, silent in TorchFix), listed for the record; they do not make
# a parity line fail:
# - TD708 also reports a deprecated function referenced without a call
#   (`f = nn.UpsamplingNearest2d`), which TorchFix's own fixture marks "not detected currently".
# - TD710 reports `torch.log(torch.sum(torch.exp(x)))` without `dim` or with `dim=None` (TorchFix
#   stays quiet because `torch.logsumexp` needs `dim`); torchdoctor reports it without a fix.
# - TD702 also reports `torch.hub.load_state_dict_from_url` (still weights_only=False by default).
# Stricter than TorchFix on purpose (quiet where TorchFix reports), not exercised by the cases:
# - TD710 stays quiet on `m + torch.log(torch.sum(torch.exp(x - m)))`: subtracting the maximum
#   first is the stable log-sum-exp written by hand (the BiLSTM-CRF tutorial does this).
# - TD703/TD707/TD708/TD712 stay quiet inside version-compatibility code: an `except` fallback,
#   a `try` guarded by `except ImportError`, or a branch of `if hasattr(...)`/a version test.


@dataclass(frozen=True)
class Expected:
    line: int  # 1-based, as TorchFix prints it
    code: str  # TORxxx
    detail: str  # the symbol or message TorchFix names


@dataclass(frozen=True)
class Case:
    mirrors: str  # the TorchFix checker fixture whose patterns this case exercises
    source: str

    def expected(self) -> list[Expected]:
        found = []
        for number, text in enumerate(self.source.splitlines(), start=1):
            match = re.search(r"#\s*torchfix:\s*(.+)$", text)
            if match:
                for part in match.group(1).split(";"):
                    code, _, detail = part.strip().partition(" ")
                    found.append(Expected(number, code, detail.strip()))
        return found


def mapped_code(expected: Expected) -> str | None:
    if expected.code in ("TOR101", "TOR103") and ".amp." in expected.detail:
        return "TD703"  # the amp functions have their own rule
    return MAPPING.get(expected.code)


CASES = [
    Case(
        "deprecated_symbols/checker/amp.py",
        """\
import torch

with torch.cuda.amp.autocast():  # torchfix: TOR101 torch.cuda.amp.autocast
    pass
fwd = torch.cuda.amp.custom_fwd(lambda x: x)  # torchfix: TOR101 torch.cuda.amp.custom_fwd
bwd = torch.cuda.amp.custom_bwd(lambda g: g)  # torchfix: TOR101 torch.cuda.amp.custom_bwd

half = torch.bfloat16
ctx1 = torch.cpu.amp.autocast()  # torchfix: TOR101 torch.cpu.amp.autocast
ctx2 = torch.cpu.amp.autocast(dtype=half)  # torchfix: TOR101 torch.cpu.amp.autocast
""",
    ),
    Case(
        "deprecated_symbols/checker/deprecated_from_nn.py",
        """\
import torch
up1 = torch.nn.UpsamplingNearest2d(scale_factor=2)  # torchfix: TOR101 torch.nn.UpsamplingNearest2d

from torch import nn as layers
up2 = layers.UpsamplingNearest2d(scale_factor=2)  # torchfix: TOR101 torch.nn.UpsamplingNearest2d

import torch.nn as tnn
up3 = tnn.UpsamplingNearest2d(scale_factor=2)  # torchfix: TOR101 torch.nn.UpsamplingNearest2d
""",
    ),
    Case(
        "deprecated_symbols/checker/deprecated_qr.py",
        """\
import torch
Q, R = torch.qr(torch.eye(3))  # torchfix: TOR101 torch.qr

import torch as th
Q, R = th.qr(torch.eye(3), some=False)  # torchfix: TOR101 torch.qr

from torch import qr  # torchfix: TOR103 torch.qr
Q, R = qr(torch.eye(3))  # torchfix: TOR101 torch.qr

from torch import qr as decompose  # torchfix: TOR103 torch.qr
Q, R = decompose(torch.eye(3))  # torchfix: TOR101 torch.qr
""",
    ),
    Case(
        "deprecated_symbols/checker/deprecated_register_pytree_node.py",
        """\
from torch.utils._pytree import _register_pytree_node  # torchfix: TOR103 _register_pytree_node

_register_pytree_node(dict, None, None)  # torchfix: TOR101 _register_pytree_node

from torch.utils import _pytree as pytree
pytree._register_pytree_node(list, None, None)  # torchfix: TOR101 _register_pytree_node
""",
    ),
    Case(
        "deprecated_symbols/checker/functorch.py",
        """\
import functorch

# one report for the line, not one per call in it
per_sample = functorch.vmap(model, (None, 0))(x, w)  # torchfix: TOR101 functorch.vmap

from functorch import vmap, jacrev  # torchfix: TOR103 functorch.vmap; TOR103 functorch.jacrev
""",
    ),
    Case(
        "deprecated_symbols/checker/sdp_kernel.py",
        """\
import torch
from torch.backends import cuda
from torch.backends.cuda import sdp_kernel  # torchfix: TOR103 sdp_kernel

with torch.backends.cuda.sdp_kernel(enable_flash=False):  # torchfix: TOR101 sdp_kernel
    pass
with cuda.sdp_kernel():  # torchfix: TOR101 sdp_kernel
    pass
with sdp_kernel(enable_math=True):  # torchfix: TOR101 sdp_kernel
    pass
""",
    ),
    Case(
        "deprecated_symbols/checker/weight_norm.py",
        """\
from torch import nn
layer = nn.utils.weight_norm(nn.Linear(8, 16), name="weight")  # torchfix: TOR101 weight_norm
""",
    ),
    Case(
        "deprecated_symbols/checker/chain_matmul, cholesky, range (ours)",
        """\
import torch
a = torch.ones(2, 2)
p = torch.chain_matmul(a, a, a)  # torchfix: TOR101 torch.chain_matmul
L = torch.cholesky(a @ a.T + torch.eye(2))  # torchfix: TOR101 torch.cholesky
r = torch.range(1, 5)  # torchfix: TOR101 torch.range
o = torch.ger(a[0], a[1])  # torchfix: TOR101 torch.ger
n = torch.norm(a)  # torchfix: TOR101 torch.norm
""",
    ),
    Case(
        "deprecated_symbols/checker/removed_solve.py",
        """\
import torch
A, B = torch.eye(3), torch.ones(3, 1)

X = torch.solve(B, A).solution  # torchfix: TOR001 torch.solve
""",
    ),
    Case(
        "deprecated_symbols/checker/removed_symeig.py",
        """\
import torch
from torch import symeig  # torchfix: TOR004 torch.symeig

vals, vecs = symeig(torch.eye(3), eigenvectors=True)  # torchfix: TOR001 torch.symeig
vals, _ = torch.symeig(torch.eye(3))  # torchfix: TOR001 torch.symeig
""",
    ),
    Case(
        "misc/checker/require_grad.py (ours)",
        """\
import torch
x = torch.zeros(3)
x.require_grad = True  # torchfix: TOR002 require_grad
""",
    ),
    Case(
        "misc/checker/reentrant_checkpoint.py",
        """\
import torch
import torch.utils.checkpoint


def block(a, b):
    return torch.tanh(a @ b)


def run(a, b):
    out = torch.utils.checkpoint.checkpoint(block, a, b)  # torchfix: TOR003 checkpoint
    return torch.utils.checkpoint.checkpoint(block, a, b, use_reentrant=False) + out


from torch.utils.checkpoint import checkpoint


def run2(a, b):
    out = checkpoint(block, a.cos(), b)  # torchfix: TOR003 checkpoint
    return checkpoint(block, a, b, use_reentrant=True) + out
""",
    ),
    Case(
        "misc/checker/log1p.py",
        """\
import torch
v = torch.rand(4)
p = torch.log(1 + v)  # torchfix: TOR106 log1p
q = torch.log(v + 1)  # torchfix: TOR106 log1p
r = torch.log(1.0 + v)  # torchfix: TOR106 log1p
s = torch.log(v + 1.0)  # torchfix: TOR106 log1p
""",
    ),
    Case(
        "misc/checker/expm1.py",
        """\
import torch
v = torch.rand(4)
p = torch.exp(v) - 1  # torchfix: TOR107 expm1
q = torch.exp(v) - 1.0  # torchfix: TOR107 expm1

mixed = (torch.exp(v) - 1) * torch.exp(3 * p)  # torchfix: TOR107 expm1
""",
    ),
    Case(
        "misc/checker/logsumexp.py",
        """\
import torch

z = torch.rand(2, 5)

a = torch.log(torch.sum(torch.exp(z), 1, keepdim=True))  # torchfix: TOR108 logsumexp
b = torch.log(torch.sum(torch.exp(z), dim=1, keepdim=True))  # torchfix: TOR108 logsumexp
c = torch.log(torch.sum(torch.exp(0.5 * z), 1))  # torchfix: TOR108 logsumexp
d = torch.log(torch.sum(torch.exp(z + 1), dim=-1))  # torchfix: TOR108 logsumexp

e = torch.log(torch.sum(torch.exp(z), 1) + 1.5)
f = torch.log(torch.sum(torch.exp(z) + 1.5, 1))
g = torch.sum(torch.log(torch.exp(z)), 1)
""",
    ),
    Case(
        "nonpublic/checker/default_collate_convert.py",
        """\
from torch.utils.data import _utils
batch = _utils.collate.default_collate(batch)  # torchfix: TOR104 default_collate

from torch.utils.data._utils.collate import default_collate  # torchfix: TOR105 default_collate
xs, ys = default_collate(xs), default_collate(ys)  # torchfix: TOR104 default_collate

from torch.utils.data._utils.collate import default_convert  # torchfix: TOR105 default_convert
items = default_convert(items)  # torchfix: TOR104 default_convert

import torch
items = torch.utils.data._utils.collate.default_convert(items)  # torchfix: TOR104 default_convert
""",
    ),
    Case(
        "security/checker/load.py (ours)",
        """\
import torch
state = torch.load("model.pt")  # torchfix: TOR102 torch.load
state = torch.load("model.pt", map_location="cpu")  # torchfix: TOR102 torch.load
state = torch.load("model.pt", weights_only=True)
""",
    ),
    Case(
        "performance/checker/zerograd.py",
        """\
import torch
net = torch.nn.Linear(4, 4)
opt = torch.optim.SGD(net.parameters(), lr=0.1)

opt.zero_grad(set_to_none=False)  # torchfix: TOR402 zero_grad
net.zero_grad(set_to_none=False)  # torchfix: TOR402 zero_grad

opt.zero_grad()
net.zero_grad()
""",
    ),
    Case(
        "performance/checker/dataloader.py (ours)",
        """\
import torch
from torch.utils.data import DataLoader


def train(model, dataset, optimizer):
    loader = DataLoader(dataset, batch_size=32, shuffle=True)  # torchfix: TOR401 DataLoader
    for x, y in loader:
        optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()
""",
    ),
    Case(
        "performance/checker/singletensor.py",
        """\
import torch
net = torch.nn.Linear(4, 4)
adam = torch.optim.Adam(net.parameters())  # torchfix: TOR403 foreach
fast = torch.optim.Adam(net.parameters(), foreach=True)
""",
    ),
    Case(
        "misc/checker/rsqrt.py",
        """\
import torch
v = torch.rand(4) + 0.5
inv = 1 / torch.sqrt(v)  # torchfix: TOR109 rsqrt
inv2 = 2.0 / torch.sqrt(v + 1)  # torchfix: TOR109 rsqrt
unit = v / torch.sqrt(v.sum())  # torchfix: TOR109 rsqrt
""",
    ),
    Case(
        "private_symbols/checker/underscore.py",
        """\
import torch
torch._check_with(RuntimeError, True, lambda: "message")  # torchfix: TOR801 torch._check_with
""",
    ),
    Case(
        "vision/checker/pretrained.py",
        """\
import random

import torchvision
from torchvision.models import detection as det
from torchvision.models import quantization as quant

torchvision.models.resnet50(pretrained=True)  # torchfix: TOR201 pretrained
torchvision.models.resnet50(True)  # torchfix: TOR201 pretrained
torchvision.models.resnet50(pretrained=False)  # torchfix: TOR201 pretrained
torchvision.models.resnet50(False)  # torchfix: TOR201 pretrained
det.ssdlite320_mobilenet_v3_large(pretrained_backbone=True)  # torchfix: TOR201 backbone
det.ssdlite320_mobilenet_v3_large(pretrained=True, pretrained_backbone=1)  # torchfix: TOR201 both

flag = random.random() > 0.5
torchvision.models.resnet18(pretrained=flag)  # torchfix: TOR201 pretrained
det.resnet_fpn_backbone(pretrained=flag)  # torchfix: TOR201 pretrained
det.resnet_fpn_backbone(pretrained=flag, pretrained_backbone=True)  # torchfix: TOR201 both
quant.resnet18(pretrained=flag)  # torchfix: TOR201 pretrained
quant.resnet18(pretrained=flag, pretrained_backbone=True)  # torchfix: TOR201 both

from torchvision.models import ResNet50_Weights
torchvision.models.resnet50(weights=ResNet50_Weights.IMAGENET1K_V1)
torchvision.models.resnet50(weights=None)

from torchvision.models.vgg import cfgs, make_layers
make_layers(cfgs["E"], False)
""",
    ),
    Case(
        "vision/checker/singleton_import.py",
        """\
import torchvision.models as models  # torchfix: TOR203 models
import torchvision.models as backbones
from torchvision.models import resnet50, resnet101
import torchvision.models
import torchvision.models as models, torch  # torchfix: TOR203 models
import torchvision.datasets as datasets  # torchfix: TOR203 datasets
import torchvision.transforms as transforms  # torchfix: TOR203 transforms
""",
    ),
    Case(
        "vision/checker/to_tensor.py (ours)",
        """\
import torchvision
from torchvision.transforms import v2
from torchvision.transforms.v2 import ToTensor  # torchfix: TOR202 ToTensor

a = v2.ToTensor()  # torchfix: TOR202 ToTensor
b = torchvision.transforms.v2.ToTensor()  # torchfix: TOR202 ToTensor
c = torchvision.transforms.ToTensor()
""",
    ),
]


def _compare(source: str, expected: list[Expected], path: str) -> list[str]:
    """The expected lines torchdoctor misses (deliberate differences excluded)."""
    needs_old_target = any(item.code == "TOR102" for item in expected)
    findings = {(f.span.start_line + 1, f.code) for f in check(source, path, ALL)}
    if needs_old_target:
        findings |= {
            (f.span.start_line + 1, f.code)
            for f in check(source, path, BEFORE_SAFE_LOAD)
            if f.code == "TD702"
        }
    missing = []
    for item in expected:
        if item.code in DELIBERATE_DIFFERENCES or is_repeat_of_reported_import(item, expected):
            continue
        code = mapped_code(item)
        assert code is not None, f"{item.code} has no mapping and no recorded difference"
        if (item.line, code) not in findings:
            missing.append(f"{path}:{item.line} {item.code} {item.detail} -> {code} not reported")
    return missing


@pytest.mark.parametrize("case", CASES, ids=[case.mirrors for case in CASES])
def test_torchfix_case_has_counterparts(case: Case) -> None:
    expected = case.expected()
    assert expected, "every case marks at least one TorchFix line"
    missing = _compare(case.source, expected, case.mirrors)
    assert not missing, "\n".join(missing)


def test_bare_torch_load_is_safe_from_torch_2_6() -> None:
    """The one TorchFix line torchdoctor drops on purpose for new torch: a bare torch.load."""
    source = 'import torch\nstate = torch.load("model.pt")\n'
    assert not [f for f in check(source, "x.py", ALL) if f.code == "TD702"]
    assert [f for f in check(source, "x.py", BEFORE_SAFE_LOAD) if f.code == "TD702"]


def test_parity_numbers() -> None:
    """Expected lines, lines matched, deliberate differences: all lines are accounted for."""
    total = matched = deliberate = 0
    missing: list[str] = []
    for case in CASES:
        expected = case.expected()
        total += len(expected)
        deliberate += sum(
            item.code in DELIBERATE_DIFFERENCES or is_repeat_of_reported_import(item, expected)
            for item in expected
        )
        case_missing = _compare(case.source, expected, case.mirrors)
        missing += case_missing
        matched += len(
            [
                i
                for i in expected
                if i.code not in DELIBERATE_DIFFERENCES
                and not is_repeat_of_reported_import(i, expected)
            ]
        ) - len(case_missing)
    print(f"torchfix parity: {total} expected lines, {matched} matched, {deliberate} deliberate")
    assert matched + deliberate == total, "\n".join(missing)


# ---- TorchFix's own fixture files, when available ---------------------------------------------
TORCHFIX_CACHE = ROOT / ".cache" / "torchfix"
EXPECTED_LINE = re.compile(r"^(\d+):(\d+):?\s+(TOR\d{3})\s*(.*)$")


def _torchfix_fixture_root() -> tuple[Path | None, str]:
    configured = os.environ.get("TORCHFIX_FIXTURES")
    if configured:
        root = Path(configured)
        return (root, "") if root.is_dir() else (None, f"TORCHFIX_FIXTURES={root} is no folder")
    TORCHFIX_CACHE.mkdir(parents=True, exist_ok=True)
    archives = sorted(TORCHFIX_CACHE.glob("torchfix-*.tar.gz"))
    if not archives:
        command = [
            sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
            "--quiet", "torchfix", "-d", str(TORCHFIX_CACHE),
        ]  # fmt: skip
        try:
            subprocess.run(command, check=True, capture_output=True, timeout=120)
        except (OSError, subprocess.SubprocessError) as error:
            return None, f"could not download the torchfix sdist: {error}"
        archives = sorted(TORCHFIX_CACHE.glob("torchfix-*.tar.gz"))
        if not archives:
            return None, "pip download gave no torchfix sdist"
    archive = archives[-1]
    target = TORCHFIX_CACHE / archive.name.removesuffix(".tar.gz")
    if not target.is_dir():
        with tarfile.open(archive) as tar:
            tar.extractall(TORCHFIX_CACHE, filter="data")
    fixtures = target / "tests" / "fixtures"
    if not any(fixtures.glob("**/checker/*.py")):
        reason = f"{archive.name} ships no tests/fixtures/**/checker files"
        return None, f"{reason} (point TORCHFIX_FIXTURES at a torchfix checkout's tests/fixtures)"
    return fixtures, ""


def test_torchfix_own_fixture_files() -> None:
    root, reason = _torchfix_fixture_root()
    if root is None:
        pytest.skip(reason)
    missing: list[str] = []
    for source_path in sorted(root.glob("**/checker/*.py")):
        expected_path = source_path.with_suffix(".txt")
        if not expected_path.is_file():
            continue
        expected = []
        for line in expected_path.read_text(encoding="utf-8").splitlines():
            match = EXPECTED_LINE.match(line.strip())
            if match:
                expected.append(Expected(int(match.group(1)), match.group(3), match.group(4)))
        source = source_path.read_text(encoding="utf-8")
        missing += _compare(source, expected, str(source_path.relative_to(root)))
    assert not missing, "\n".join(missing)
