"""Probe a PyTorch model inside the user's own interpreter and stream the results as JSON lines.

This package runs under the interpreter that has the user's torch (and CUDA), not under the
language server. It imports only the standard library, torch and the standard-library modules
next to its folder (COMPANION_MODULES, loaded by path), so it keeps working when the probe
folder is copied out of torchdoctor and started on its own, by the package folder's path:

    python probe/runner --file model.py --target Net [--input "(8, 3, 224, 224)"]
                        [--init JSON | --factory MOD:FN] [--dtype DTYPE] [--amp]
                        [--channels-last] [--device auto|cuda|cpu] [--iters N] [--threads N]
                        [--explain]
    python probe/runner --worker      # serve JSON requests from stdin, one per line

__main__.py loads this folder as a package under a private name (a user's own `timing` or
`inputs` module must neither shadow the runner's nor be shadowed by it) and calls worker.main.

Every line on stdout is one JSON event: ``{"event": "progress", ...}`` while it works, then
exactly one ``{"event": "result", "report": {...}}`` or ``{"event": "error", ...}`` per probe.
The user's own output (print, C-level writes to fd 1) is sent to stderr so it can never corrupt
that stream. The report's fields are documented in probe/REPORT.md.

Each probe runs in a child forked for it (worker.py): the process started by the client imports
torch, relays the child's events and kills whatever the probe started, and exits when the
client's request pipe closes.

Measurement passes are kept apart: timing passes run the bare model; shapes, checks, FLOPs and
the profiled step each run in their own pass, so no instrumentation shows up in the timings.

One module per part, lowest first: companions (the modules loaded by path), events, user_code,
loading (the user's file and the model), inputs, request, session (what every pass shares),
the passes (memory, shapes, checks, flops, timing, profiling, graph_breaks), distributed (the
DDP/FSDP recommendation), one_probe (a probe start to finish) and worker (forked children, the
worker loop, the command line). The names below are what rank_worker.py and the benchmarks use.
"""

from __future__ import annotations

from .checks import FindingCollector, make_check_mode, report_nonfinite_outputs, tracking_from_numpy
from .companions import COMPANION_MODULES, companion_module
from .events import EventStream, ProbeFailure, Progress
from .inputs import ChosenInput, choose_input
from .loading import OriginRecorder, build_model, import_user_file, resolve_target
from .memory import cpu_allocation_peak, tensor_bytes
from .one_probe import probe
from .request import ProbeRequest
from .session import Session, iter_tensors, loss_of, run_forward, shapes_of
from .timing import summarize
from .user_code import UserCode, user_code_phase
from .worker import main

__all__ = [
    "COMPANION_MODULES",
    "ChosenInput",
    "EventStream",
    "FindingCollector",
    "OriginRecorder",
    "ProbeFailure",
    "ProbeRequest",
    "Progress",
    "Session",
    "UserCode",
    "build_model",
    "choose_input",
    "companion_module",
    "cpu_allocation_peak",
    "import_user_file",
    "iter_tensors",
    "loss_of",
    "main",
    "make_check_mode",
    "probe",
    "report_nonfinite_outputs",
    "resolve_target",
    "run_forward",
    "shapes_of",
    "summarize",
    "tensor_bytes",
    "tracking_from_numpy",
    "user_code_phase",
]
