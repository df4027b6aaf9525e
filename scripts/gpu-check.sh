#!/usr/bin/env bash
# Everything that needs a GPU, in one go (under 10 minutes on one GPU): every CUDA test of the
# suite, then a CUDA probe of each model in examples/ checked for a CUDA report. Without a CUDA
# device the tests skip with their reasons (shown), no example is probed, and the script exits
# with status 3: nothing was checked on a GPU.
#
#   scripts/gpu-check.sh            # uses .venv (scripts/setup.sh makes it)
#   PYTHON=/path/to/python scripts/gpu-check.sh
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-.venv/bin/python}

failed=0
# every test marked gpu (tests/cuda_selection.py); a failure does not stop the checks below,
# so one run on a borrowed GPU shows everything that fails there
PYTHONPATH=".${PYTHONPATH:+:$PYTHONPATH}" "$PYTHON" -m pytest -q -p no:cacheprovider \
  -p tests.cuda_selection -rs tests || failed=1

if ! "$PYTHON" -c "import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)"; then
  echo "gpu-check: torch.cuda.is_available() is False here: the CUDA tests skipped, no" \
    "example was probed on a GPU" >&2
  exit 3
fi

for target in examples/models.py::SmallCNN examples/models.py::TinyTransformer \
  examples/models.py::LSTMTagger examples/finetune.py::ConvNet examples/train_mnist.py::MLP; do
  out=$(mktemp)
  # exit status 1 means findings, which is a successful probe
  status=0
  "$PYTHON" -m torchdoctor probe "$target" --device cuda --iters 3 --json >"$out" || status=$?
  if [ "$status" -gt 1 ] || ! "$PYTHON" - "$out" <<'PY'
import json, sys

event = json.load(open(sys.argv[1], encoding="utf-8"))
report = event.get("report") or {}
ok = (
    event.get("event") == "result"
    and report["device"]["kind"] == "cuda"
    and report["latency"]["method"] == "cuda_events"
    and report["memory"]["method"] == "cuda_allocator"
)
print(f"{report.get('target', '?')}: {report.get('device', {}).get('name', event)}")
sys.exit(0 if ok else 1)
PY
  then
    echo "gpu-check: the CUDA probe of $target failed:" >&2
    cat "$out" >&2
    failed=1
  fi
  rm -f "$out"
done
scripts/gpu-check-distributed.sh || failed=1  # NCCL ranks, DDP and FSDP2
exit "$failed"
