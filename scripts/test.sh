#!/usr/bin/env bash
# The whole test suite: lint, then every Python test (rules, evidence with real torch, CLI,
# language server with Neovim, probe), then the extension's type-check, lint and unit tests, and
# the end-to-end test that installs the packaged .vsix in a real VS Code (code-server) and drives
# it with headless Chromium. Set TORCHDOCTOR_SKIP_E2E=1 to stop before the end-to-end test.
# mypy checks the package's types (strict for analysis/ and lsp/, see pyproject.toml).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh

.venv/bin/ruff check .
.venv/bin/mypy
.venv/bin/python -m pytest -q -n 2 --dist loadfile "$@"

npm ci --no-audit --no-fund
npm run lint
npm test
if [ "${TORCHDOCTOR_SKIP_E2E:-0}" != 1 ]; then
  # builds dist/torchdoctor-<version>.vsix from nothing, then drives VS Code through it
  npm run test:e2e
fi
