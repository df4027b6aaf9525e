#!/usr/bin/env bash
# The main job: check the bundled examples, probe an example model on the CPU, build the .vsix.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh

echo "== torchdoctor check examples/ =="
# the examples hold planted pitfalls: exit code 1 (findings) is the expected outcome here
.venv/bin/torchdoctor check examples/ || [ $? -eq 1 ]

echo "== torchdoctor probe examples/models.py::SmallCNN (CPU) =="
.venv/bin/torchdoctor probe examples/models.py::SmallCNN --device cpu --iters 5

echo "== the VS Code extension: dist/torchdoctor-<version>.vsix =="
npm run package
