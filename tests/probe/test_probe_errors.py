"""Errors at the user's line with the other results kept, imports as the project sees them, the
runtime findings that depend on layouts and on how a model keeps its parts, and signals to
`torchdoctor probe`. Every probe runs the real runner under real torch; every claim a finding
makes about torch is checked here by running torch."""

from __future__ import annotations

import importlib.util
import os
import signal
import subprocess
import sys
import time
import types
from pathlib import Path

import pytest
from torchdoctor.probe.schema import ErrorEvent

from .conftest import (
    FIXTURES,
    WarmProbe,
    error_of,
    marked_line,
    needs_torch,
    report_of,
)

pytestmark = [needs_torch, pytest.mark.timeout(180)]

INPLACE = FIXTURES / "inplace_backward.py"
LAYOUTS = FIXTURES / "runtime_layouts.py"


def load_fixture_module(path: Path) -> types.ModuleType:
    """The fixture imported in this process, to check with real torch what the probe claims."""
    spec = importlib.util.spec_from_file_location(f"fixture_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_backward_error_points_at_the_inplace_op_and_keeps_the_forward_results(
    warm: WarmProbe,
) -> None:
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    model_class = load_fixture_module(INPLACE).InplaceAfterSave
    torch.manual_seed(0)
    model = model_class()
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        model(torch.randn(4, 8)).sum().backward()  # the claim: real torch raises in backward
    with FlopCounterMode(display=False) as counter:
        model(torch.randn(4, 8))

    report = report_of(warm.probe(INPLACE, "InplaceAfterSave"))
    inplace_line = marked_line(INPLACE, "error-here")
    [failed] = report.failed_passes
    assert (failed.stage, failed.kind, failed.file, failed.line) == (
        "checks", "backward", str(INPLACE), inplace_line,
    )
    assert f"(line {marked_line(INPLACE, 'saved-here')})" in failed.message
    assert "mul_" in failed.message
    errors = [f for f in report.findings if f.kind == "backward_error"]
    assert [(f.severity, f.file, f.line) for f in errors] == [("error", str(INPLACE), inplace_line)]
    # what needs no backward is all there, and equal to a plain run
    assert report.params.total == sum(p.numel() for p in model.parameters())
    assert report.flops.forward == counter.get_total_flops()
    assert report.flops.forward_backward is None
    assert report.latency.forward.iterations >= 1 and report.latency.forward_backward is None
    assert {row.name: row.output_shapes for row in report.modules}["head"] == [[4, 2]]
    assert report.lines and any("failed in the checks pass" in w for w in report.warnings)


def test_a_failure_in_a_later_pass_names_it_and_carries_what_was_measured(
    warm: WarmProbe, tmp_path: Path
) -> None:
    path = tmp_path / "filling_cache.py"
    path.write_text(
        "import torch\n"
        "from torch import nn\n\n\n"
        "# torchdoctor: input=(2, 4)\n"
        "class FillingCache(nn.Module):\n"
        "    def __init__(self) -> None:\n"
        "        super().__init__()\n"
        "        self.fc = nn.Linear(4, 4)\n"
        "        self.cache: list[torch.Tensor] = []\n\n"
        "    def forward(self, x: torch.Tensor) -> torch.Tensor:\n"
        "        if len(self.cache) == 5:\n"
        "            raise RuntimeError('cache full')  # error-here\n"
        "        self.cache.append(x)\n"
        "        return self.fc(x)\n",
        encoding="utf-8",
    )
    error = error_of(warm.probe(path, "FillingCache"))
    error_line = marked_line(path, "error-here")
    assert (error.kind, error.file, error.line) == ("forward", str(path), error_line)
    assert error.failed_pass not in (None, "load", "build", "input", "shapes")
    assert error.partial is not None
    assert error.partial["params"]["total"] == 4 * 4 + 4
    assert [row["name"] for row in error.partial["modules"]] == ["", "fc"]
    assert error.partial["modules"][1]["output_shapes"] == [[2, 4]]


def test_a_failure_before_the_passes_carries_no_partial_report(warm: WarmProbe) -> None:
    error = error_of(warm.probe(FIXTURES / "init_raises.py", "InitRaises"))
    assert isinstance(error, ErrorEvent)
    assert error.failed_pass is None and error.partial is None


def test_nanogpt_attention_view_after_split_gives_no_finding(warm: WarmProbe) -> None:
    import torch

    # the claim: view after split of the last dimension works for every shape
    for batch, steps, heads, width in ((1, 1, 1, 1), (2, 16, 4, 8), (3, 7, 6, 5)):
        embed = heads * width
        q, _, _ = torch.randn(batch, steps, 3 * embed).split(embed, dim=2)
        assert not q.is_contiguous() or steps == 1
        assert q.view(batch, steps, heads, width).shape == (batch, steps, heads, width)
    report = report_of(warm.probe(LAYOUTS, "CausalSelfAttention"))
    assert report.findings == []


def test_a_view_that_holds_only_for_size_one_is_reported_at_its_line(warm: WarmProbe) -> None:
    import torch

    x = torch.randn(4, 8, 16)
    assert x[:, -1:, :].transpose(1, 2).view(4, -1).shape == (4, 16)
    with pytest.raises(RuntimeError, match="view size is not compatible"):
        x[:, -2:, :].transpose(1, 2).view(4, -1)  # the claim: one more step and view raises
    report = report_of(warm.probe(LAYOUTS, "LastStepView"))
    assert [(f.kind, f.file, f.line) for f in report.findings] == [
        ("non_contiguous_view", str(LAYOUTS), marked_line(LAYOUTS, "expect: non_contiguous_view"))
    ]


def test_blocks_in_a_plain_list_are_a_finding_at_the_list_and_rows_in_the_table(
    warm: WarmProbe,
) -> None:
    model = load_fixture_module(LAYOUTS).BlocksInAList()
    registered = sum(p.numel() for p in model.parameters())
    block_params = sum(p.numel() for block in model.blocks for p in block.parameters())
    assert registered == sum(p.numel() for p in model.stem.parameters())  # the claim

    report = report_of(warm.probe(LAYOUTS, "BlocksInAList"))
    [finding] = report.findings
    assert (finding.kind, finding.file, finding.line, finding.count) == (
        "unregistered_module", str(LAYOUTS), marked_line(LAYOUTS, "expect: unregistered_module"), 3,
    )
    assert f"{block_params:,} parameters" in finding.message and "nn.ModuleList" in finding.message
    assert report.params.total == registered
    rows = {row.name: row for row in report.modules}
    for index in range(3):
        block, inner = rows[f"blocks[{index}]"], rows[f"blocks[{index}].fc"]
        assert not block.registered and not inner.registered
        assert (block.calls, block.output_shapes, block.type) == (1, [[4, 16]], "Block")
    assert rows["spare['unused']"].calls == 0  # reachable, never run: a row, no finding
    assert rows["stem"].registered


def test_blocks_a_move_left_behind_are_named_with_where_they_are() -> None:
    import torch
    from torchdoctor.probe import unregistered_modules

    model = load_fixture_module(LAYOUTS).BlocksInAList()
    strays = unregistered_modules.StrayModules(model, torch)
    meta = torch.device("meta")
    model.to(meta)  # moves the stem, not the blocks of the plain list
    assert model.stem.weight.device == meta and model.blocks[0].fc.weight.device.type == "cpu"
    with strays.watching(lambda: None, lambda _: None), pytest.raises(RuntimeError):
        model(torch.zeros(4, 16, device=meta))  # the first block mixes devices
    # the blocks the forward reached; not the spare module it never called
    [finding] = strays.left_behind(meta, {}, lambda _: None)
    assert finding["count"] == 3 and finding["detail"] == "blocks[0], blocks[1], blocks[2]"
    assert "model.to(meta) did not move them: they are still on cpu" in finding["message"]
    assert strays.left_behind(torch.device("cpu"), {}, lambda _: None) == []


def test_float64_tensors_are_reported_where_they_are_made(warm: WarmProbe) -> None:
    import torch

    model = load_fixture_module(LAYOUTS).Float64Sources()
    assert model.scale.dtype == model.table.dtype == model.offset.dtype == torch.float64
    assert "table" not in model.state_dict() and "scale" in model.state_dict()

    report = report_of(warm.probe(LAYOUTS, "Float64Sources"))
    found = sorted((f.kind, f.line) for f in report.findings)
    expected = sorted(
        ("float64", marked_line(LAYOUTS, f"expect: float64-{what}"))
        for what in ("buffer", "numpy", "attribute")
    )
    assert found == expected
    assert all(f.file == str(LAYOUTS) for f in report.findings)


def test_imports_resolve_from_the_project_root_as_python_dash_m_does(
    warm: WarmProbe, tmp_path: Path
) -> None:
    models = tmp_path / "src" / "models"
    models.mkdir(parents=True)
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'demo'\n", encoding="utf-8")
    (models / "layers.py").write_text(
        "from torch import nn\n\n\nclass Block(nn.Linear):\n    pass\n", encoding="utf-8"
    )
    net = models / "net.py"
    net.write_text(
        "from torch import nn\n\nfrom src.models.layers import Block\n\n\n"
        "# torchdoctor: input=(2, 6)\n"
        "class Net(nn.Module):\n"
        "    def __init__(self) -> None:\n"
        "        super().__init__()\n"
        "        self.block = Block(6, 3)\n\n"
        "    def forward(self, x):\n"
        "        return self.block(x)\n",
        encoding="utf-8",
    )
    plain = subprocess.run(
        [sys.executable, "-c", "from src.models.net import Net; Net()"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
    )
    assert plain.returncode == 0, plain.stderr  # how the project itself imports it
    report = report_of(warm.probe(net, "Net"))
    assert report.params.total == 6 * 3 + 3


def live_descendants(root: int) -> set[int]:
    parents: dict[int, int] = {}
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{entry}/stat", encoding="utf-8") as handle:
                fields = handle.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if fields[0] not in ("Z", "X"):
            parents[int(entry)] = int(fields[1])
    found: set[int] = set()
    frontier = [root]
    while frontier:
        pid = frontier.pop()
        children = [child for child, parent in parents.items() if parent == pid]
        found.update(children)
        frontier.extend(children)
    return found


def is_alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="the process tree is read from /proc")
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
def test_a_signal_to_the_cli_kills_the_whole_probe(signum: int) -> None:
    command = [
        sys.executable, "-m", "torchdoctor", "probe", f"{FIXTURES / 'endless.py'}::Endless",
        "--timeout", "150",
    ]
    cli = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        # wait for the runner (a session of its own) and the child it forked for the probe
        probe_tree: set[int] = set()
        for _ in range(1200):
            probe_tree = live_descendants(cli.pid)
            if len(probe_tree) >= 2:
                break
            time.sleep(0.05)
        assert len(probe_tree) >= 2, "the probe never started"
        cli.send_signal(signum)
        _, stderr = cli.communicate(timeout=60)
    finally:
        if cli.poll() is None:
            cli.kill()
    assert cli.returncode == 128 + signum, stderr
    assert signal.Signals(signum).name in stderr.decode()
    left = {pid for pid in probe_tree if is_alive(pid)}
    for _ in range(200):  # the kill is done before the CLI exits; reaping may lag a moment
        if not left:
            break
        time.sleep(0.05)
        left = {pid for pid in left if is_alive(pid)}
    assert not left, f"processes left behind: {sorted(left)}"


def cuda_available() -> bool:
    import torch

    return torch.cuda.is_available()


@pytest.mark.gpu
@pytest.mark.skipif(not cuda_available(), reason="no CUDA device: the GPU path of these checks")
def test_on_cuda_the_backward_error_and_the_findings_point_at_the_same_lines(
    warm: WarmProbe,
) -> None:
    report = report_of(warm.probe(INPLACE, "InplaceAfterSave", device="cuda"))
    assert report.device.kind == "cuda"
    [failed] = report.failed_passes
    assert failed.line == marked_line(INPLACE, "error-here")
    # .to("cuda") leaves the plain list's blocks on the CPU, so on a GPU the forward fails
    # mixing devices; the error names the list as the cause and its partial report has the
    # finding at the list's line
    container = marked_line(LAYOUTS, "expect: unregistered_module")
    error = error_of(warm.probe(LAYOUTS, "BlocksInAList", device="cuda"))
    assert error.kind == "forward" and "same device" in error.message
    assert f"still on cpu. Wrap them in nn.ModuleList (line {container})" in error.message
    assert error.partial is not None
    assert [(f["kind"], f["line"]) for f in error.partial["findings"]] == [
        ("unregistered_module", container)
    ]
    attention = report_of(warm.probe(LAYOUTS, "CausalSelfAttention", device="cuda"))
    assert attention.findings == []


@pytest.mark.gpu
@pytest.mark.skipif(not cuda_available(), reason="no CUDA device: the GPU path of these checks")
def test_a_model_on_the_gpu_may_also_compute_on_the_cpu(warm: WarmProbe) -> None:
    # the NaN/Inf check reads every op's sum at the end: one read per device, not one stack
    report = report_of(warm.probe(LAYOUTS, "ScalesMadeOnTheCpu", device="cuda"))
    assert report.device.kind == "cuda"
    assert report.findings == []

