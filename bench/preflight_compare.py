"""`python -m bench.preflight_compare [PATH ...]`: torchdoctor and torch-preflight 0.5 on the same
files, check by check.

torch-preflight's semantic checks and their torchdoctor counterparts are in CHECKS. Both tools
run on the same Python files (default: tests/fixtures and examples/); the table gives, per file
and check, the lines each tool reported and a label for each: TP/FP from the `# expect: TDxxx`
(fixtures) and `# planted: TDxxx` (examples) markers, or from REVIEWED (findings on third-party
code read by hand); `?` where neither applies. A marker counts for a finding on the same line,
or on another line of the same function (tools point at different lines of one bug: the loss
call or the model definition, `step()` or `backward()`); each marker is claimed once.

torch-preflight is not a dependency: install it with `pip install 'torch-preflight==0.5.*'`
(it needs no torch) or point `--preflight` at its executable. Without it, this says so and
exits 0.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import re
import shutil
import subprocess
import sys
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from torchdoctor.analysis import Config, check

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_INPUTS = (ROOT / "tests" / "fixtures", ROOT / "examples")
MARKER = re.compile(r"#\s*(?:expect|planted):\s*(TD\d{3}(?:\s*,\s*TD\d{3})*)")
SKIP_DIRS = {".venv", "venv", "env", ".git", "__pycache__", "build", "dist", "node_modules"}
CHUNK = 400  # files per torch-preflight run (command-line length)


@dataclass(frozen=True)
class Check:
    name: str
    preflight: str
    ours: str
    also: tuple[str, ...] = ()  # other TD codes whose markers describe the same bug
    scope: str = "function"  # where a marker on another line still counts: function | file


CHECKS = (
    Check("graph-retaining loss accumulation", "TG001", "TD104", also=("TD401",)),
    Check("eval without no_grad", "TG002", "TD401"),
    Check("missing zero_grad", "TG003", "TD101"),
    Check("softmax before cross-entropy", "TG005", "TD305"),
    Check("BCE/sigmoid mismatch", "TG006", "TD306"),
    Check("host sync in the inner loop", "TG007", "TD205"),
    Check("DDP without DistributedSampler", "TG012", "TD604"),
    Check("repeated host-to-device copies", "TG013", "TD206"),
    Check("unscaled accumulation", "TG014", "TD109"),
    Check("stuck in eval", "TG011", "TD403"),
)
EXTRA_CHECKS = (  # with --extra: preflight checks outside the ten semantic ones
    Check("single-process data loading", "TG004", "TD504"),
    Check("unseeded run", "TG008", "TD715", scope="file"),
)

# Findings on third-party code (PyPI sdists), read by hand: (path suffix, code, source line
# stripped) -> (label, why). Lines that are not here show `?`.
REVIEWED: dict[tuple[str, str, str], tuple[str, str]] = {}


def _review(label: str, why: str, code: str, *places: tuple[str, str]) -> None:
    for suffix, line in places:
        REVIEWED[(suffix, code, line)] = (label, why)


_review(
    "FP",
    "not a tensor: a dict of SageMaker input channels",
    "TG001",
    ("accelerate/utils/launch.py", "sagemaker_inputs[l[0]] = l[1].strip()"),
)
_review(
    "FP",
    "a forward that returns its intermediate features on purpose",
    "TG001",
    ("timm/models/_features.py", "out[out_id] = x"),
    ("timm/models/_features.py", "out[out_id] = torch.cat(x, 1) if self.concat else x[0]"),
    ("timm/models/cspnet.py", "intermediates.append(x)"),
    ("timm/models/nfnet.py", "intermediates.append(x)"),
)
_review(
    "FP",
    "the terms of a loss summed inside its forward; the caller back-propagates the sum",
    "TG001",
    (
        "pytorch_metric_learning/losses/multiple_losses.py",
        "loss_func(embeddings, labels, curr_indices_tuple) * self.weights[i]",
    ),
    (
        "torchdistill/losses/mid_level.py",
        "chsim_loss += weight * loss",
    ),
)
_review(
    "FP",
    "Accumulator.add converts every argument with float()",
    "TG001",
    ("d2l/torch.py", "metric.add(l, acc, labels.shape[0], labels.numel())"),
)
_review(
    "TP",
    "evaluation loop over a data iterator with autograd on",
    "TG002",
    ("d2l/torch.py", "out = net(X)"),
)
_review(
    "FP",
    "one forward pass, no loop: argmax has no history, so the graph is dropped at once",
    "TG002",
    ("d2l/torch.py", "label = torch.argmax(net(sequence.reshape(1, -1)), dim=1)"),
    ("d2l/torch.py", "label = torch.argmax(net([premise.reshape((1, -1)),"),
)
_review(
    "FP",
    "skorch's NeuralNetClassifier takes the log of the module's probabilities before NLLLoss",
    "TG005",
    ("skorch/tests/test_net.py", "nn.Softmax(dim=-1),"),
)
_review(
    "FP",
    "a table of test cases, built once; the loop iterates over it",
    "TG013",
    ("skorch/tests/test_utils.py", "(z, torch.as_tensor(z).to('cuda')),"),
    ("skorch/tests/test_utils.py", "{'a': x, 'b': y, 'c': torch.as_tensor(z).to('cuda')}"),
    ("skorch/tests/test_utils.py", "(torch.as_tensor(55), torch.as_tensor(55).to('cuda')),"),
    ("skorch/tests/flycheck_test_utils.py", "(z, torch.as_tensor(z).to('cuda')),"),
    ("skorch/tests/flycheck_test_utils.py", "{'a': x, 'b': y, 'c': torch.as_tensor(z).to('cuda')}"),  # noqa: E501
    (
        "skorch/tests/flycheck_test_utils.py",
        "(torch.as_tensor(55), torch.as_tensor(55).to('cuda')),",
    ),
)
_review(
    "TP",
    "Fabric moves the batch to the GPU; .item() every iteration waits for it",
    "TD205",
    (
        "litgpt/finetune/adapter.py",
        'token_counts["raw_tokens"] += batch["token_counts"]["raw"].sum().item()',
    ),
    (
        "litgpt/finetune/adapter.py",
        'batch["token_counts"]["raw_plus_prompt_template"].sum().item()',
    ),
    (
        "litgpt/finetune/adapter_v2.py",
        'token_counts["raw_tokens"] += batch["token_counts"]["raw"].sum().item()',
    ),
    (
        "litgpt/finetune/adapter_v2.py",
        'batch["token_counts"]["raw_plus_prompt_template"].sum().item()',
    ),
    (
        "litgpt/finetune/full.py",
        'token_counts["raw_tokens"] += batch["token_counts"]["raw"].sum().item()',
    ),
    ("litgpt/finetune/full.py", 'batch["token_counts"]["raw_plus_prompt_template"].sum().item()'),  # noqa: E501
    (
        "litgpt/finetune/lora.py",
        'token_counts["raw_tokens"] += batch["token_counts"]["raw"].sum().item()',
    ),
    ("litgpt/finetune/lora.py", 'batch["token_counts"]["raw_plus_prompt_template"].sum().item()'),  # noqa: E501
    (
        "litgpt/finetune/lora_legacy.py",
        'token_counts["raw_tokens"] += batch["token_counts"]["raw"].sum().item()',
    ),
    (
        "litgpt/finetune/lora_legacy.py",
        'batch["token_counts"]["raw_plus_prompt_template"].sum().item()',
    ),
)
_review(
    "TP",
    "a sync every step (the test compares each step's loss with the previous one)",
    "TD205",
    ("timm-1.0.31/tests/test_optim.py", "loss = loss.item()"),
)
_review(
    "TP",
    "token-by-token generation with autograd on: the graph grows through the state",
    "TD401",
    ("d2l/torch.py", "rnn_outputs, state = self.rnn(embs, state)"),
    ("d2l/torch.py", "Y, dec_state = self.decoder(outputs[-1], dec_state)"),
)
_review(
    "TP",
    "evaluation loop over a data iterator with autograd on",
    "TD401",
    ("d2l/torch.py", "out = net(X)"),
)


@dataclass
class Hit:
    line: int
    label: str = "?"
    why: str = ""


@dataclass
class Cell:
    ours: list[Hit] = field(default_factory=list)
    theirs: list[Hit] = field(default_factory=list)
    markers: list[int] = field(default_factory=list)
    missed_ours: list[int] = field(default_factory=list)
    missed_theirs: list[int] = field(default_factory=list)


def find_preflight(explicit: str | None) -> str | None:
    candidates = [explicit, os.environ.get("TORCH_PREFLIGHT"), shutil.which("torch-preflight")]
    candidates.append(str(Path(sys.executable).parent / "torch-preflight"))
    for candidate in candidates:
        if candidate and Path(candidate).is_file() and os.access(candidate, os.X_OK):
            return candidate
    return None


def python_files(inputs: list[Path]) -> dict[Path, list[Path]]:
    found: dict[Path, list[Path]] = {}
    for root in inputs:
        if root.is_file():
            found[root] = [root.resolve()]
            continue
        files = []
        for directory, dirs, names in os.walk(root):
            dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS and not d.startswith("."))
            files += [Path(directory, n).resolve() for n in sorted(names) if n.endswith(".py")]
        found[root] = files
    return found


def run_preflight(exe: str, files: list[Path], codes: list[str], jobs: int) -> dict:
    findings: dict[tuple[Path, str], list[int]] = defaultdict(list)
    for start in range(0, len(files), CHUNK):
        chunk = [str(f) for f in files[start : start + CHUNK]]
        command = [exe, "check", "-f", "json", "--no-color", "-j", str(jobs)]
        command += ["--select", ",".join(codes), "--fail-on", "error", *chunk]
        result = subprocess.run(command, capture_output=True, text=True, check=False)
        try:
            report = json.loads(result.stdout)
        except json.JSONDecodeError:
            sys.exit(f"torch-preflight gave no JSON (exit {result.returncode}): {result.stderr}")
        for diagnostic in report["diagnostics"]:
            key = (Path(diagnostic["path"]).resolve(), diagnostic["code"])
            findings[key].append(diagnostic["line"])
    return findings


def run_torchdoctor(files: list[Path], codes: set[str]) -> dict[tuple[Path, str], list[int]]:
    config = Config(select=("ALL",))
    findings: dict[tuple[Path, str], list[int]] = defaultdict(list)
    for path in files:
        text = path.read_text(encoding="utf-8", errors="replace")
        for finding in check(text, str(path), config):
            if finding.code in codes:
                findings[(path, finding.code)].append(finding.span.start_line + 1)
    return findings


def _function_spans(text: str) -> list[tuple[int, int]]:
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return []
    return [
        (node.lineno, node.end_lineno or node.lineno)
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
    ]


def _innermost(spans: list[tuple[int, int]], line: int) -> tuple[int, int] | None:
    inside = [s for s in spans if s[0] <= line <= s[1]]
    return min(inside, key=lambda s: s[1] - s[0]) if inside else None


def _same_scope(spans: list[tuple[int, int]], first: int, second: int) -> bool:
    """Both lines in the same innermost function (or both at module level)."""
    return _innermost(spans, first) == _innermost(spans, second)


def label(hits: list[Hit], markers: list[int], spans, scope: str) -> list[int]:  # type: ignore[no-untyped-def]
    """Mark each hit TP/FP against the markers; return the markers no hit claimed."""
    free = sorted(set(markers))
    for hit in hits:
        if hit.line in free:
            hit.label = "TP"
            free.remove(hit.line)
    for hit in hits:
        if hit.label == "TP":
            continue
        near = [m for m in free if scope == "file" or _same_scope(spans, hit.line, m)]
        if near:
            hit.label, hit.why = "TP", f"marker on line {near[0]}"
            free.remove(near[0])
        else:
            hit.label = "FP"
    return free


def review(hits: list[Hit], path: Path, code: str, lines: list[str]) -> None:
    text = path.as_posix()
    for hit in hits:
        source = lines[hit.line - 1].strip() if 0 < hit.line <= len(lines) else ""
        for (suffix, rcode, rline), (verdict, why) in REVIEWED.items():
            if rcode == code and text.endswith(suffix) and source == rline:
                hit.label, hit.why = verdict, why


def compare(inputs: list[Path], exe: str, checks: tuple[Check, ...], jobs: int) -> dict:
    groups = python_files(inputs)
    files = sorted({f for fs in groups.values() for f in fs})
    theirs = run_preflight(exe, files, [c.preflight for c in checks], jobs)
    ours = run_torchdoctor(files, {c.ours for c in checks})
    table: dict[Path, dict[str, Cell]] = {}
    for path in files:
        text = path.read_text(encoding="utf-8", errors="replace")
        lines = text.splitlines()
        marks: dict[str, list[int]] = defaultdict(list)
        for number, line in enumerate(lines, start=1):
            match = MARKER.search(line)
            if match:
                for code in match.group(1).split(","):
                    marks[code.strip()].append(number)
        fixture = "fixtures" in path.parts
        has_markers = bool(marks)
        spans = _function_spans(text) if has_markers or fixture else []
        for item in checks:
            codes = (item.ours, *item.also)
            # a fixture speaks for its own rule and its markers; other files for their markers
            labelled = (
                path.parent.name in codes or any(marks.get(c) for c in codes)
                if fixture
                else has_markers
            )
            cell = Cell(
                ours=[Hit(n) for n in sorted(ours.get((path, item.ours), []))],
                theirs=[Hit(n) for n in sorted(theirs.get((path, item.preflight), []))],
                markers=sorted(n for code in codes for n in marks[code]),
            )
            primary = marks[item.ours]
            if labelled:
                cell.missed_ours = label(cell.ours, primary, spans, item.scope)
                cell.missed_theirs = label(cell.theirs, cell.markers, spans, item.scope)
                cell.missed_theirs = [m for m in cell.missed_theirs if m in primary]
            elif not fixture:
                review(cell.ours, path, item.ours, lines)
                review(cell.theirs, path, item.preflight, lines)
            if cell.ours or cell.theirs or primary:
                table.setdefault(path, {})[item.preflight] = cell
    return {"groups": groups, "table": table}


def _hits(hits: list[Hit]) -> str:
    return ", ".join(f"{h.line} {h.label}" for h in hits) or "-"


def _relative(path: Path, inputs: list[Path]) -> str:
    for root in inputs:
        base = root if root.is_dir() else root.parent
        if path.is_relative_to(base.resolve()):
            return f"{base.name}/{path.relative_to(base.resolve())}"
    return str(path)


def render(result: dict, inputs: list[Path], checks: tuple[Check, ...]) -> str:
    by_code = {c.preflight: c for c in checks}
    out = ["## Per file", "", "| file | check | torchdoctor | torch-preflight | missed |"]
    out.append("|---|---|---|---|---|")
    notes: list[str] = []
    for path, cells in sorted(result["table"].items()):
        for code, cell in cells.items():
            item = by_code[code]
            missed = []
            if cell.missed_ours:
                missed.append(f"torchdoctor {cell.missed_ours}")
            if cell.missed_theirs:
                missed.append(f"preflight {cell.missed_theirs}")
            out.append(
                f"| {_relative(path, inputs)} | {item.ours}/{code} | {_hits(cell.ours)} | "
                f"{_hits(cell.theirs)} | {'; '.join(missed) or '-'} |"
            )
            for tool, hits in (("torchdoctor", cell.ours), ("preflight", cell.theirs)):
                notes += [
                    f"- {_relative(path, inputs)}:{h.line} {tool} {h.label}: {h.why}"
                    for h in hits
                    if h.why and not h.why.startswith("marker")
                ]
    out += ["", "## Summary", ""]
    out.append(
        "| input | files | lines | check | torchdoctor found / TP / FP / ? / missed "
        "| torch-preflight found / TP / FP / ? / missed |"
    )
    out.append("|---|---|---|---|---|---|")
    groups = list(result["groups"].items())
    if len(groups) > 1:
        groups.append(("all inputs", sorted({f for _, fs in groups for f in fs})))
    for root, files in groups:
        line_count = sum(
            len(f.read_text(encoding="utf-8", errors="replace").splitlines()) for f in files
        )
        members = set(files)
        for item in checks:
            tally: dict[str, Counter[str]] = {"ours": Counter(), "theirs": Counter()}
            for path, cells in result["table"].items():
                cell = cells.get(item.preflight)
                if path not in members or cell is None:
                    continue
                for side, hits, missed in (
                    ("ours", cell.ours, cell.missed_ours),
                    ("theirs", cell.theirs, cell.missed_theirs),
                ):
                    tally[side]["found"] += len(hits)
                    tally[side].update(h.label for h in hits)
                    tally[side]["missed"] += len(missed)
            cells_text = [
                " / ".join(str(t[k]) for k in ("found", "TP", "FP", "?", "missed"))
                for t in (tally["ours"], tally["theirs"])
            ]
            out.append(
                f"| {root} | {len(files)} | {line_count} | {item.ours}/{item.preflight} "
                f"{item.name} | {cells_text[0]} | {cells_text[1]} |"
            )
    if notes:
        out += ["", "## Reviewed findings on third-party code", "", *notes]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.preflight_compare", description=__doc__)
    parser.add_argument(
        "paths", nargs="*", type=Path, help="files or folders (default: tests/fixtures examples)"
    )
    parser.add_argument("--preflight", help="the torch-preflight executable")
    parser.add_argument("--extra", action="store_true", help="also TG004/TD504 and TG008/TD715")
    parser.add_argument("-j", "--jobs", type=int, default=os.cpu_count() or 1)
    args = parser.parse_args(argv)
    exe = find_preflight(args.preflight)
    if exe is None:
        print(
            "skipped: torch-preflight is not installed (pip install 'torch-preflight==0.5.*', "
            "or pass --preflight PATH / set TORCH_PREFLIGHT)"
        )
        return 0
    version = subprocess.run([exe, "--version"], capture_output=True, text=True, check=False)
    inputs = args.paths or list(DEFAULT_INPUTS)
    checks = CHECKS + (EXTRA_CHECKS if args.extra else ())
    result = compare(inputs, exe, checks, args.jobs)
    print(f"# torchdoctor vs {version.stdout.strip() or 'torch-preflight'}\n")
    print(render(result, inputs, checks))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
