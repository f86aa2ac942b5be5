"""The local minicluster: broker, etcd, every service and N agents as real processes.

`up(layout)` starts everything (detached when asked, so it outlives the shell), writes
`<run_dir>/cluster.json` (what runs where) and waits until the API answers and every
agent's host is registered (then, with `reserve_default`, /default reserves the
hosts' capacity: peloton.minicluster.defaultpool). The API takes bearer tokens: `up`
gives it one admin token (`Cluster.admin_token`, `Cluster.api_headers`;
peloton.minicluster.admintoken).
`down(run_dir)` stops what the state file names; `status` reports it. Tests use the same
code with free ports in a temporary directory.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import httpx

from peloton.minicluster.admintoken import ensure_admin_token, read_admin_token, tokens_file
from peloton.minicluster.servers import free_ports, start_etcd, start_tansu

__all__ = ["AgentSpec", "Layout", "Cluster", "up", "down", "status", "load", "pid_alive"]


#: the services that run as one process, or partitioned as `<service>-<n>` (Layout's
#: `<service>_instances`), in start order
PARTITIONABLE = ("jobmgr", "hostmgr", "placement")


@dataclass
class AgentSpec:
    name: str
    cpu: float = 4.0
    memory: float = 4096.0
    disk: float = 10240.0
    gpu: float = 0.0
    labels: dict[str, str] = field(default_factory=dict)
    web_port: int = 0
    # the ports the agent hands out to tasks; the local cluster's hosts share one machine,
    # so each gets its own range (two "hosts" giving out one port would collide)
    port_range: tuple[int, int] = (31000, 31999)


@dataclass
class Layout:
    run_dir: Path
    broker_port: int = 9092
    etcd_port: int = 2379
    etcd_peer_port: int = 2380
    api_port: int = 5290
    agents: list[AgentSpec] = field(default_factory=list)
    simulated: bool = False
    resmgr_instances: int = 2
    # 0: one job manager ("jobmgr"); N: the job manager partitioned by job id over N
    # instances of one consumer group ("jobmgr-1".."jobmgr-N", peloton.bus.partitioned)
    jobmgr_instances: int = 0
    # the same for the host manager (by host): "hostmgr" or "hostmgr-1".."hostmgr-N"
    hostmgr_instances: int = 0
    # and for placement (engines over shares of the pools): "placement" or "placement-N"
    placement_instances: int = 0
    heartbeat_timeout_s: float = 5.0
    entitlement_cycle_s: float = 10.0
    lease_ttl_s: float = 2.0
    detach: bool = True
    with_api: bool = True
    # /default reserves the registered hosts' capacity once they are up, so a first
    # non-preemptible job runs (peloton.minicluster.defaultpool; `peloton cluster up`)
    reserve_default: bool = False
    # environment the cluster's service and agent processes get on top of the caller's
    # (e.g. PELOTON_KAFKA_SESSION_TIMEOUT_S for `bench scale`'s partitioned configuration)
    env: dict[str, str] = field(default_factory=dict)

    @classmethod
    def local(cls, run_dir: Path, agents: int = 3, cpu: float = 4.0, free: bool = False,
              **kw: Any) -> Layout:
        """N agents named host-1..N, zones a/b/c in turn; `free` picks free ports."""
        ports = free_ports(4 + agents) if free else [19092, 12379, 12380, 5290] + [
            5300 + i for i in range(agents)]
        specs = [AgentSpec(f"host-{i + 1}", cpu=cpu, labels={"zone": "abc"[i % 3]},
                           web_port=ports[4 + i],
                           port_range=(31000 + 1000 * i, 31999 + 1000 * i))
                 for i in range(agents)]
        return cls(run_dir=run_dir, broker_port=ports[0], etcd_port=ports[1],
                   etcd_peer_port=ports[2], api_port=ports[3], agents=specs, **kw)

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.broker_port}"

    def process_env(self) -> dict[str, str]:
        """The environment the cluster's processes start with: the caller's, with `env` on
        top (its partition counts are also those `up` creates the topics with)."""
        return dict(os.environ, **self.env)

    @property
    def sandbox_dir(self) -> Path:
        """The agents' sandbox root: `<run_dir>/sandboxes`, unless they run as root (tasks
        then run as an unprivileged user, `peloton.agent.taskuser`) and others cannot
        search the run dir's path (pytest's tmp dirs are under a 0700 directory): then a
        directory of the system temp dir named after the run dir, removed by `down`."""
        own = self.run_dir / "sandboxes"
        if os.geteuid() != 0 or all(p.stat().st_mode & stat.S_IXOTH
                                    for p in (self.run_dir.resolve(),
                                              *self.run_dir.resolve().parents)):
            return own
        digest = hashlib.sha256(str(self.run_dir.resolve()).encode()).hexdigest()[:12]
        return Path(tempfile.gettempdir()) / f"peloton-sandboxes-{digest}"

    @property
    def etcd(self) -> str:
        return f"127.0.0.1:{self.etcd_port}"

    @property
    def api_url(self) -> str:
        return f"http://127.0.0.1:{self.api_port}"


@dataclass
class Proc:
    name: str
    pid: int
    log: str
    argv: list[str]


class Cluster:
    """A running (or described) minicluster; the state file is its memory."""

    def __init__(self, layout: Layout, procs: dict[str, Proc] | None = None) -> None:
        self.layout = layout
        self.procs: dict[str, Proc] = procs or {}

    @property
    def admin_token(self) -> str | None:
        """The API's admin token (peloton.minicluster.admintoken), once `up` made it."""
        return read_admin_token(self.layout.run_dir)

    @property
    def api_headers(self) -> dict[str, str]:
        """The header that carries the admin token (empty before `up`)."""
        token = self.admin_token
        return {"Authorization": f"Bearer {token}"} if token else {}

    @property
    def state_file(self) -> Path:
        return self.layout.run_dir / "cluster.json"

    def save(self) -> None:
        data = {"layout": {**asdict(self.layout), "run_dir": str(self.layout.run_dir)},
                "procs": {k: asdict(v) for k, v in self.procs.items()}}
        self.state_file.write_text(json.dumps(data, indent=2))

    def spawn(self, name: str, argv: list[str]) -> Proc:
        log = self.layout.run_dir / "logs" / f"{name}.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        ready = self.layout.run_dir / "ready" / name
        ready.unlink(missing_ok=True)
        env = dict(self.layout.process_env(), PYTHONUNBUFFERED="1",
                   PELOTON_READY_FILE=str(ready))
        with log.open("ab") as out:
            popen = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out,
                                     stderr=subprocess.STDOUT, env=env,
                                     start_new_session=self.layout.detach)
        proc = Proc(name, popen.pid, str(log), argv)
        self.procs[name] = proc
        self.save()
        return proc

    def service_argv(self, name: str) -> list[str]:
        lay = self.layout
        base = [sys.executable, "-m", "peloton.serve"]
        boot = ["--bootstrap", lay.bootstrap]
        if name.startswith("resmgr-"):
            return base + ["resmgr", *boot, "--etcd", lay.etcd, "--instance",
                           name.split("-", 1)[1], "--cycle", str(lay.entitlement_cycle_s),
                           "--lease-ttl", str(lay.lease_ttl_s)]
        service, _, instance = name.partition("-")
        if service in PARTITIONABLE:  # "jobmgr": one instance; "jobmgr-2": partitioned
            options = (["--heartbeat-timeout", str(lay.heartbeat_timeout_s)]
                       if service == "hostmgr" else [])
            part = ["--partitioned", "--instance", instance] if instance else []
            return base + [service, *boot, *options, *part]
        if name == "api":
            return base + ["api", *boot, "--dsn", f"chdb://{lay.run_dir / 'chdb'}",
                           "--port", str(lay.api_port),
                           "--tokens-file", str(tokens_file(lay.run_dir))]
        spec = next(a for a in lay.agents if f"agent-{a.name}" == name)
        argv = base + ["agent", *boot, "--host", spec.name, "--cpu", str(spec.cpu),
                       "--memory", str(spec.memory), "--disk", str(spec.disk),
                       "--gpu", str(spec.gpu), "--web-port", str(spec.web_port),
                       "--sandbox", str(lay.sandbox_dir),
                       "--port-range", f"{spec.port_range[0]}-{spec.port_range[1]}"]
        for k, v in spec.labels.items():
            argv += ["--label", f"{k}={v}"]
        if lay.simulated:
            argv.append("--simulated")
        return argv

    def service_names(self) -> list[str]:
        names = [f"resmgr-{i + 1}" for i in range(self.layout.resmgr_instances)]
        for service in PARTITIONABLE:
            count = getattr(self.layout, f"{service}_instances")
            names += [f"{service}-{i + 1}" for i in range(count)] or [service]
        names += ["api"] if self.layout.with_api else []
        return names + [f"agent-{a.name}" for a in self.layout.agents]

    def start_service(self, name: str) -> Proc:
        return self.spawn(name, self.service_argv(name))

    def stop(self, name: str, sig: int = signal.SIGTERM, timeout: float = 10.0) -> None:
        self.stop_many([name], sig, timeout)

    def stop_many(self, names: list[str], sig: int = signal.SIGTERM,
                  timeout: float = 10.0) -> None:
        """Signal every named process at once, wait until all have exited or `timeout`
        ran out, then kill what is left (a service stops within its own deadline,
        peloton.bus.stopdeadline; one whose broker is gone takes that long)."""
        pids = [self.procs[n].pid for n in names if n in self.procs]
        for pid in pids:
            _signal(pid, sig)
        deadline = time.monotonic() + timeout
        while any(pid_alive(pid) for pid in pids) and time.monotonic() < deadline:
            time.sleep(0.05)
        for pid in pids:
            if pid_alive(pid):
                _signal(pid, signal.SIGKILL)
            _reap(pid)

    def kill(self, name: str) -> None:
        """kill -9: what a crash looks like."""
        self.stop(name, signal.SIGKILL, timeout=5.0)

    def alive(self, name: str) -> bool:
        proc = self.procs.get(name)
        return proc is not None and pid_alive(proc.pid)

    def wait_consuming(self, names: list[str], timeout: float = 90.0) -> None:
        """Wait until each named service has joined its consumer group (its ready file)."""
        deadline = time.monotonic() + timeout
        for name in names:
            marker = self.layout.run_dir / "ready" / name
            while not marker.exists():
                if not self.alive(name):
                    raise RuntimeError(f"{name} exited; see {self.layout.run_dir}/logs/{name}.log")
                if time.monotonic() > deadline:
                    raise TimeoutError(f"{name} did not start consuming in {timeout:.0f}s")
                time.sleep(0.1)

    def wait_ready(self, timeout: float = 90.0, progress: Callable[[str], None] | None = None
                   ) -> None:
        self.wait_consuming([n for n in self.procs if n not in ("broker", "etcd")], timeout)
        deadline = time.monotonic() + timeout
        want = {a.name for a in self.layout.agents}
        last = ""
        while time.monotonic() < deadline:
            dead = [n for n in self.procs if not self.alive(n)]
            if dead:
                raise RuntimeError(f"{', '.join(dead)} exited; see {self.layout.run_dir}/logs")
            try:
                hosts = httpx.get(f"{self.layout.api_url}/v1/hosts", timeout=2,
                                  headers=self.api_headers).json()
                up = {h["host"] for h in hosts.get("hosts", hosts) if h.get("state") != "LOST"}
                msg = f"hosts registered: {len(up & want)}/{len(want)}"
                if want <= up:
                    return
            except (httpx.HTTPError, ValueError, TypeError, AttributeError):
                msg = "waiting for the API"
            if progress is not None and msg != last:
                progress(msg)
                last = msg
            time.sleep(0.3)
        raise TimeoutError(f"minicluster not ready after {timeout:.0f}s ({last})")


def up(layout: Layout, progress: Callable[[str], None] | None = None) -> Cluster:
    layout.run_dir.mkdir(parents=True, exist_ok=True)
    cluster = Cluster(layout)
    say = progress or (lambda _m: None)
    say(f"broker on {layout.bootstrap}")
    broker = start_tansu(layout.broker_port, layout.run_dir / "logs" / "broker.log",
                         detach=layout.detach)
    cluster.procs["broker"] = Proc("broker", broker.pid, str(broker.log_path), [])
    say(f"etcd on {layout.etcd}")
    etcd = start_etcd(layout.etcd_port, layout.etcd_peer_port, layout.run_dir / "etcd",
                      layout.run_dir / "logs" / "etcd.log", detach=layout.detach)
    cluster.procs["etcd"] = Proc("etcd", etcd.pid, str(etcd.log_path), [])
    cluster.save()
    from peloton.bus.faustapp import ensure_topics
    from peloton.minicluster.servers import _run_sync

    # with the counts the services will read them with (`layout.env` may set them)
    _run_sync(lambda: ensure_topics(layout.bootstrap, layout.process_env()))
    if layout.with_api:
        ensure_admin_token(layout.run_dir)  # the API's tokens file, before the API starts
    for name in cluster.service_names():
        say(f"starting {name}")
        cluster.start_service(name)
    say("waiting for every service to join its consumer group")
    if layout.with_api:
        cluster.wait_ready(progress=say)
        if layout.reserve_default:
            from peloton.cli.client import PelotonClient
            from peloton.minicluster.defaultpool import reserve_default

            with PelotonClient(layout.api_url, token=cluster.admin_token) as client:
                reserve_default(client, say=say)
    else:
        cluster.wait_consuming(cluster.service_names())
    return cluster


def load(run_dir: Path) -> Cluster | None:
    path = run_dir / "cluster.json"
    if not path.exists():
        return None
    data = json.loads(path.read_text())
    lay = data["layout"]
    lay["run_dir"] = Path(lay["run_dir"])
    lay["agents"] = [AgentSpec(**{**a, "port_range": tuple(a.get("port_range",
                                                                  (31000, 31999)))})
                     for a in lay["agents"]]
    return Cluster(Layout(**lay), {k: Proc(**v) for k, v in data["procs"].items()})


def down(run_dir: Path) -> list[str]:
    cluster = load(run_dir)
    if cluster is None:
        return []
    # the services and agents together (each one's stop is bounded, and an unreachable
    # broker makes them all wait), then etcd and the broker they used
    stopped = []
    for group in ([n for n in cluster.procs if n not in ("broker", "etcd")],
                  ["etcd", "broker"]):
        alive = [name for name in group if cluster.alive(name)]
        cluster.stop_many(alive, timeout=5.0)
        stopped += alive
    cluster.state_file.unlink(missing_ok=True)
    if cluster.layout.sandbox_dir != run_dir / "sandboxes":
        shutil.rmtree(cluster.layout.sandbox_dir, ignore_errors=True)
    return stopped


def status(run_dir: Path) -> list[dict[str, Any]]:
    cluster = load(run_dir)
    if cluster is None:
        return []
    return [{"name": p.name, "pid": p.pid, "alive": cluster.alive(p.name), "log": p.log}
            for p in cluster.procs.values()]


def _signal(pid: int, sig: int) -> None:
    try:
        os.killpg(pid, sig) if _is_group_leader(pid) else os.kill(pid, sig)
    except ProcessLookupError:
        pass


def _is_group_leader(pid: int) -> bool:
    try:
        return os.getpgid(pid) == pid
    except ProcessLookupError:
        return False


def pid_alive(pid: int) -> bool:
    """Whether the process runs (a zombie does not; a child of ours that ended is reaped)."""
    try:
        waited, _ = os.waitpid(pid, os.WNOHANG)
        if waited == pid:
            return False
    except ChildProcessError:
        pass
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def _reap(pid: int) -> None:
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass
