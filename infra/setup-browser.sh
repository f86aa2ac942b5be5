#!/usr/bin/env bash
# Installs what the web UI's browser tests (tests/ui) drive: Debian's chromium (apt) and
# the Python Playwright driver (PyPI; it ships its own node driver inside the wheel).
# Playwright's own browser builds are never downloaded (`playwright install` is not run):
# the tests start the system chromium through executable_path (PELOTON_CHROMIUM, default
# the first of chromium / chromium-browser on PATH). Idempotent; run as root.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v chromium >/dev/null 2>&1 && ! command -v chromium-browser >/dev/null 2>&1; then
  if command -v apt-get >/dev/null 2>&1; then
    echo "== installing chromium (apt)"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core >/dev/null
  else
    echo "!! no apt-get: chromium not installed (tests/ui will skip, naming the reason)" >&2
  fi
fi
if ! python3 -c "import playwright" >/dev/null 2>&1; then
  echo "== installing playwright (pip; no browser download)"
  python3 -m pip install -q --disable-pip-version-check "playwright>=1.45"
fi
echo "== browser: $( (chromium --version || chromium-browser --version) 2>/dev/null | head -1)"
