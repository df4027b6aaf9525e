#!/usr/bin/env bash
# The distributed probe on GPUs: `torchdoctor probe --nproc N --backend nccl` of the example
# transformer, DDP and FSDP2, checked for NCCL ranks measured with the CUDA allocator: one rank
# per GPU, at most 2 (one GPU still checks the CUDA path, without traffic between ranks). Skips,
# saying why, on a host without an NVIDIA GPU. scripts/gpu-check.sh calls it (and already runs
# tests/probe/test_distributed.py's NCCL test, marked gpu).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-.venv/bin/python}
gpus=0
if [ -d /proc/driver/nvidia/gpus ]; then
  gpus=$(find /proc/driver/nvidia/gpus -mindepth 1 -maxdepth 1 | wc -l)
fi
if [ "$gpus" -lt 1 ]; then
  echo "gpu-check-distributed: skipped, no NVIDIA GPU on this host"
  exit 0
fi
nproc=$((gpus < 2 ? gpus : 2))
out=$(mktemp)
status=0
"$PYTHON" -m torchdoctor probe examples/models.py::TinyTransformer --input "(8, 64):int64" \
  --iters 3 --nproc "$nproc" --backend nccl --strategy both --json >"$out" || status=$?
if [ "$status" -gt 1 ] || ! "$PYTHON" - "$out" <<'PY'
import json, sys

event = json.load(open(sys.argv[1], encoding="utf-8"))
section = (event.get("report") or {}).get("distributed") or event.get("distributed") or {}
results = section.get("strategies") or []
ok = (
    section.get("backend") == "nccl"
    and {r["strategy"] for r in results if r["ok"]} == {"ddp", "fsdp"}
    and all(rank["memory_method"] == "cuda_allocator" for r in results for rank in r["ranks"])
)
for r in results:
    print(f"{r['strategy']}: step {r['step_ms']} ms, peak {r['peak_memory_bytes']} B per rank")
sys.exit(0 if ok else 1)
PY
then
  echo "gpu-check-distributed: the NCCL probe failed:" >&2
  cat "$out" >&2
  rm -f "$out"
  exit 1
fi
rm -f "$out"
