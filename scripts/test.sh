#!/usr/bin/env bash
# The whole test suite: lint, then every Python test (rules, evidence with real torch, CLI,
# language server, probe), then the extension's build, lint, packaging and end-to-end test.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh

.venv/bin/ruff check .
.venv/bin/python -m pytest -q -n 2 --dist loadfile "$@"
