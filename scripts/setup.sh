#!/usr/bin/env bash
# The Python side from nothing, idempotently: a virtual environment with torchdoctor and its
# test and probe extras (torch pinned to the CPU-sized 2.13.0), and Neovim, which an LSP test
# drives. Fast when already done. The extension's Node packages come with `npm ci` (test.sh,
# demo.sh's `npm run package`), the end-to-end test's tools with scripts/e2e/install.sh.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
stamp=.venv/.torchdoctor-installed
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  .venv/bin/python -m pip install --quiet --upgrade pip
  .venv/bin/python -m pip install --quiet -e '.[dev,probe]'
  touch "$stamp"
fi

# Neovim runs the LSP test with a client we did not write; install it where we may.
if ! command -v nvim >/dev/null 2>&1 && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  (apt-get update -qq && apt-get install -y -qq neovim >/dev/null) || echo "setup: neovim not installed; its test will skip" >&2
fi

