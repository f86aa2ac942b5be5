"""`peloton serve SERVICE`: run one service process (what the minicluster and Helm start)."""

from __future__ import annotations

import os
import uuid
from pathlib import Path
from typing import Annotated, Any

import typer

from peloton.bus import eventloop, stopdeadline
from peloton.bus.logformat import LogFormat
from peloton.bus.logformat import configure as configure_logging

__all__ = ["register", "build", "snapshot_options", "health_options"]

Bootstrap = Annotated[str, typer.Option(envvar="PELOTON_BOOTSTRAP", help="Kafka bootstrap")]
Etcd = Annotated[str | None, typer.Option(envvar="PELOTON_ETCD", help="etcd host:port")]
SnapshotInterval = Annotated[float, typer.Option(
    envvar="PELOTON_SNAPSHOT_INTERVAL", min=0,
    help="seconds between core snapshots (restart = newest snapshot + log tail); "
         "0: not by time")]
SnapshotEvery = Annotated[int, typer.Option(
    envvar="PELOTON_SNAPSHOT_EVERY", min=0,
    help="also snapshot after this many records; 0: not by count")]
Snapshots = Annotated[bool, typer.Option(
    "--snapshots/--no-snapshots", envvar="PELOTON_SNAPSHOTS",
    help="--no-snapshots: never write or read snapshots (every start replays the whole "
         "log)")]
HealthPort = Annotated[int | None, typer.Option(
    envvar="PELOTON_HEALTH_PORT", min=0, max=65535,
    help="serve /healthz, /readyz and /metrics (Prometheus) on this port; unset: no "
         "health server")]
HealthBind = Annotated[str, typer.Option(
    envvar="PELOTON_HEALTH_BIND", help="address the health server listens on")]
Partitioned = Annotated[bool, typer.Option(
    help="run as one instance of the partitioned service (its keys spread over every "
         "instance of the consumer group peloton-<service>; peloton.bus.partitioned)")]
Instance = Annotated[str, typer.Option(
    help="this instance's name (partitioned: unique in the group, stable across "
         "restarts, e.g. the StatefulSet pod name)")]
StaticMembership = Annotated[bool, typer.Option(
    envvar="PELOTON_STATIC_MEMBERSHIP",
    help="partitioned: join the group with group.instance.id peloton-<service>-<instance> "
         "(Kafka static membership: a restarted instance takes its partitions back "
         "without a rebalance)")]
LogFormatOption = Annotated[LogFormat, typer.Option(
    envvar="PELOTON_LOG_FORMAT", case_sensitive=False,
    help="text, or json: one JSON object per line (ts, level, logger, message, service)")]


def snapshot_options(interval: float, every: int, enabled: bool) -> dict[str, Any]:
    """The ServiceShell keyword arguments of the snapshot options."""
    return {"snapshot_interval_s": interval, "snapshot_every": every, "snapshots": enabled}


def run_partitioned(name: str, instance: str, route: Any, factory: Any, bootstrap: str,
                    log_format: LogFormat, static_membership: bool, **options: Any) -> None:
    """Run one instance of a partitioned service (`peloton.bus.partitioned`); exit 2,
    saying why, when its topics have other partition counts on the broker."""
    from peloton.bus.brokercounts import PartitionCountMismatch
    from peloton.bus.partitioned import PartitionedShell

    _logging(f"{name}-{instance}", log_format)
    try:
        PartitionedShell(name, instance, route, factory, bootstrap,
                         static_membership=static_membership, **options).run()
    except PartitionCountMismatch as exc:
        typer.echo(f"peloton serve {name}: {exc}", err=True)
        raise typer.Exit(2) from None


def health_options(port: int | None, bind: str) -> dict[str, Any]:
    """The ServiceShell keyword arguments of the health server options."""
    return {"health_port": port, "health_bind": bind}


def _logging(name: str, fmt: LogFormat = LogFormat.text) -> None:
    configure_logging(name, fmt, os.environ.get("PELOTON_LOG_LEVEL", "INFO"))


def register(app: typer.Typer) -> None:
    app.add_typer(build(), name="serve")


def build() -> typer.Typer:
    """The `serve` command group (also the entry point `python -m peloton.serve`)."""
    serve = typer.Typer(no_args_is_help=True, help="Run one service process.")

    @serve.callback()
    def _process(stop_timeout: Annotated[float, typer.Option(
            envvar="PELOTON_STOP_TIMEOUT_S", min=0,
            help="seconds a service may take to stop (SIGTERM); past them it exits with "
                 "code 3, e.g. when the broker is gone (peloton.bus.stopdeadline); 0: wait "
                 "as long as Faust does")] = stopdeadline.DEFAULT_STOP_TIMEOUT_S) -> None:
        # uvloop where installed (peloton.bus.eventloop), set before any Faust app or
        # loop is made: an app keeps the loop it was made with
        eventloop.install()
        stopdeadline.configure(stop_timeout)

    @serve.command("jobmgr")
    def jobmgr(bootstrap: Bootstrap = "127.0.0.1:9092",
               snapshot_interval: SnapshotInterval = 10.0,
               snapshot_every: SnapshotEvery = 20_000, snapshots: Snapshots = True,
               health_port: HealthPort = None, health_bind: HealthBind = "0.0.0.0",
               log_format: LogFormatOption = LogFormat.text,
               partitioned: Partitioned = False, instance: Instance = "1",
               static_membership: StaticMembership = False) -> None:
        """Job manager: validates jobs, owns task and job state."""
        from peloton.bus.service import ServiceShell
        from peloton.jobmgr.service import JobManagerCore

        if partitioned:
            from peloton.jobmgr.shard import JOB_ROUTE, JobShardCore

            JobShardCore.from_env(os.environ, partition=0)  # a bad setting fails here
            run_partitioned("jobmgr", instance, JOB_ROUTE,
                            lambda p: JobShardCore.from_env(os.environ, partition=p), bootstrap,
                            log_format, static_membership,
                            **snapshot_options(snapshot_interval, snapshot_every, snapshots),
                            **health_options(health_port, health_bind))
            return
        _logging("jobmgr", log_format)
        ServiceShell("jobmgr", "1", JobManagerCore.from_env(os.environ), bootstrap,
                     **snapshot_options(snapshot_interval, snapshot_every, snapshots),
                     **health_options(health_port, health_bind)).run()

    @serve.command("hostmgr")
    def hostmgr(bootstrap: Bootstrap = "127.0.0.1:9092", etcd: Etcd = None,
                heartbeat_timeout: Annotated[float, typer.Option(
                    envvar="PELOTON_HEARTBEAT_TIMEOUT_S",
                    help="a host silent this long is lost; keep it 3x the agents' "
                         "--heartbeat or more")] = 5.0,
                mass_silence_fraction: Annotated[float, typer.Option(
                    envvar="PELOTON_MASS_SILENCE_FRACTION", min=0.01,
                    help="when more than this share of the hosts (10 or more) is silent at "
                         "once, suspect this host manager or the broker, not the hosts: "
                         "declare hosts lost only after --mass-silence-factor timeouts "
                         "(1 turns this off)")] = 0.5,
                mass_silence_factor: Annotated[int, typer.Option(
                    envvar="PELOTON_MASS_SILENCE_FACTOR", min=1,
                    help="heartbeat timeouts a host may be silent during a mass "
                         "silence")] = 6,
                instance: str = "1",
                snapshot_interval: SnapshotInterval = 10.0,
                snapshot_every: SnapshotEvery = 20_000, snapshots: Snapshots = True,
                health_port: HealthPort = None, health_bind: HealthBind = "0.0.0.0",
                log_format: LogFormatOption = LogFormat.text,
                partitioned: Partitioned = False,
                static_membership: StaticMembership = False) -> None:
        """Host manager: hosts, offers, placement validation, launches, lost hosts."""
        from peloton.bus.service import ServiceShell
        from peloton.hostmgr.domain.silence import SilenceGuard
        from peloton.hostmgr.service import HostManagerCore

        guard = SilenceGuard(fraction=mass_silence_fraction, factor=mass_silence_factor)
        if partitioned:
            from peloton.hostmgr.shard import HOST_ROUTE, HostShardCore

            run_partitioned("hostmgr", instance, HOST_ROUTE,
                            lambda p: HostShardCore(p, heartbeat_timeout, silence_guard=guard),
                            bootstrap,
                            log_format, static_membership,
                            **snapshot_options(snapshot_interval, snapshot_every, snapshots),
                            **health_options(health_port, health_bind))
            return

        _logging(f"hostmgr-{instance}", log_format)
        ServiceShell("hostmgr", instance,
                     HostManagerCore(heartbeat_timeout, silence_guard=guard), bootstrap,
                     etcd=etcd, leader_key="/peloton/leader/hostmgr" if etcd else None,
                     **snapshot_options(snapshot_interval, snapshot_every, snapshots),
                     **health_options(health_port, health_bind)).run()

    @serve.command("resmgr")
    def resmgr(
        bootstrap: Bootstrap = "127.0.0.1:9092", etcd: Etcd = None,
        instance: str = "1",
        cycle: Annotated[float, typer.Option(
            envvar="PELOTON_RESMGR_CYCLE", help="entitlement cycle, seconds")] = 10.0,
        lease_ttl: float = 2.0,
        preemption: Annotated[bool, typer.Option(
            envvar="PELOTON_RESMGR_PREEMPTION",
            help="preempt pools over their entitlement (and within pools for higher "
                 "priority); also limits non-preemptible work to the reservation")] = True,
        preemption_cycles: Annotated[int, typer.Option(
            envvar="PELOTON_RESMGR_PREEMPTION_CYCLES", min=1,
            help="consecutive cycles a pool must be over its entitlement before its "
                 "excess is preempted")] = 3,
        in_pool_preemption: Annotated[bool, typer.Option(
            envvar="PELOTON_RESMGR_IN_POOL_PREEMPTION",
            help="let higher-priority pending gangs preempt within their pool")] = True,
        snapshot_interval: SnapshotInterval = 10.0,
        snapshot_every: SnapshotEvery = 20_000,
        snapshots: Snapshots = True,
        health_port: HealthPort = None,
        health_bind: HealthBind = "0.0.0.0",
        log_format: LogFormatOption = LogFormat.text,
    ) -> None:
        """Resource manager (one leader through etcd): pools, entitlement, admission,
        preemption."""
        from peloton.bus.service import ServiceShell
        from peloton.resmgr.service import ResourceManagerCore

        _logging(f"resmgr-{instance}", log_format)
        core = ResourceManagerCore(entitlement_cycle_s=cycle,
                                   preemption_cycles=preemption_cycles,
                                   preemption=preemption,
                                   in_pool_preemption=in_pool_preemption)
        ServiceShell("resmgr", instance, core, bootstrap, etcd=etcd,
                     leader_key="/peloton/leader/resmgr", lease_ttl=lease_ttl,
                     **snapshot_options(snapshot_interval, snapshot_every, snapshots),
                     **health_options(health_port, health_bind)).run()

    @serve.command("placement")
    def placement(bootstrap: Bootstrap = "127.0.0.1:9092", etcd: Etcd = None,
                  instance: str = "1", snapshot_interval: SnapshotInterval = 10.0,
                  snapshot_every: SnapshotEvery = 20_000, snapshots: Snapshots = True,
                  health_port: HealthPort = None, health_bind: HealthBind = "0.0.0.0",
                  log_format: LogFormatOption = LogFormat.text,
                  partitioned: Partitioned = False,
                  static_membership: StaticMembership = False) -> None:
        """Placement engine: places admitted tasks on offered hosts in rounds."""
        from peloton.bus.service import ServiceShell
        from peloton.placement.service import PlacementCore

        if partitioned:  # several engines, each placing the pools of its partitions
            from peloton.placement.shard import PLACEMENT_ROUTE, PlacementShardCore

            run_partitioned("placement", instance, PLACEMENT_ROUTE, PlacementShardCore,
                            bootstrap, log_format, static_membership,
                            **snapshot_options(snapshot_interval, snapshot_every, snapshots),
                            **health_options(health_port, health_bind))
            return

        _logging(f"placement-{instance}", log_format)
        ServiceShell("placement", instance, PlacementCore(), bootstrap, etcd=etcd,
                     leader_key="/peloton/leader/placement" if etcd else None,
                     **snapshot_options(snapshot_interval, snapshot_every, snapshots),
                     **health_options(health_port, health_bind)).run()

    @serve.command("agent")
    def agent(
        host: Annotated[str | None, typer.Option(
            help="host name (required unless --hosts)")] = None,
        bootstrap: Bootstrap = "127.0.0.1:9092",
        cpu: float = 4.0, memory: float = 4096.0, disk: float = 10240.0, gpu: float = 0.0,
        label: Annotated[list[str] | None, typer.Option(help="k=v, repeatable")] = None,
        web_port: int = 0, sandbox: Path = Path("/tmp/peloton-sandboxes"),
        web_bind: Annotated[str, typer.Option(help="address the log server listens on")] =
        "127.0.0.1",
        advertise_host: Annotated[str | None, typer.Option(
            help="address others reach this agent's logs at (default: the bind address)")] =
        None,
        simulated: bool = False,
        heartbeat: Annotated[float, typer.Option(
            envvar="PELOTON_HEARTBEAT_S",
            help="seconds between heartbeats (the host manager's --heartbeat-timeout: 3x "
                 "or more)")] = 1.0,
        port_range: str = "31000-32000",
        health_port: HealthPort = None,
        health_bind: HealthBind = "0.0.0.0",
        log_format: LogFormatOption = LogFormat.text,
        task_user: Annotated[str | None, typer.Option(
            envvar="PELOTON_TASK_USER",
            help="user tasks run as when the agent is root (default: peloton-task if it "
                 "exists, else nobody)")] = None,
        confinement: Annotated[str, typer.Option(
            envvar="PELOTON_CONFINEMENT",
            help="how cpu/memory limits are enforced: auto, cgroup2 or rlimits")] = "auto",
        sandbox_retention: Annotated[float, typer.Option(
            envvar="PELOTON_SANDBOX_RETENTION_S",
            help="seconds a finished run's sandbox (and logs) is kept")] = 6 * 3600.0,
        hosts: Annotated[int | None, typer.Option(
            min=1, help="with --simulated: serve this many simulated hosts in this process, "
                        "named <host-prefix><host-start + i> (peloton.minicluster.fleet)")] =
        None,
        host_prefix: Annotated[str, typer.Option(help="with --hosts: host name prefix")] =
        "host-",
        host_start: Annotated[int, typer.Option(help="with --hosts: first host number")] = 1,
    ) -> None:
        """Host agent: runs task commands as real processes (or simulated; --hosts N: many
        simulated hosts in one process). Reads only the launches and kills of its hosts
        (peloton.agent.shell)."""
        from peloton.agent.app import AgentConfig, AgentCore
        from peloton.agent.shell import AgentShell
        from peloton.model.resources import Resources

        labels = dict(item.split("=", 1) for item in (label or []))
        if hosts is not None:
            from peloton.minicluster.fleet import AgentFleetCore, fleet_configs, host_names

            if not simulated:
                raise typer.BadParameter("--hosts needs --simulated (one real host per "
                                         "agent process)")
            names = host_names(hosts, host_prefix, host_start)
            name = f"agent-fleet-{names[0]}"
            _logging(name, log_format)
            fleet = AgentFleetCore(fleet_configs(names, Resources(cpu, memory, disk, gpu),
                                                 labels, heartbeat))
            AgentShell(name, fleet, bootstrap, names,
                       **health_options(health_port, health_bind)).run()
            return
        if host is None:
            raise typer.BadParameter("--host is required (or --simulated --hosts N)")
        _logging(f"agent-{host}", log_format)
        begin, end = (int(x) for x in port_range.split("-"))
        config = AgentConfig(
            host=host, incarnation=uuid.uuid4().hex[:12],
            capacity=Resources(cpu, memory, disk, gpu), labels=labels, sandbox_root=sandbox,
            simulated=simulated, heartbeat_s=heartbeat, port_range=(begin, end),
            log_url=f"http://{advertise_host or web_bind}:{web_port}" if web_port else "",
            task_user=task_user, confinement=confinement,
            sandbox_retention_s=sandbox_retention)
        AgentShell(f"agent-{host}", AgentCore(config), bootstrap, [host],
                   web_port=web_port or None, web_bind=web_bind,
                   **health_options(health_port, health_bind)).run()

    @serve.command("api")
    def api(bootstrap: Bootstrap = "127.0.0.1:9092",
            dsn: Annotated[str, typer.Option(envvar="PELOTON_CLICKHOUSE_DSN")] =
            "chdb:///tmp/peloton-chdb",
            port: int = 5290, instance: str = "1",
            host: Annotated[str, typer.Option(help="listen address (0.0.0.0 in a pod)")] =
            "127.0.0.1", log_format: LogFormatOption = LogFormat.text,
            tokens_file: Annotated[Path | None, typer.Option(
                envvar="PELOTON_API_TOKENS_FILE",
                help="bearer tokens, users and roles (YAML/JSON, see peloton.api.tokens); "
                     "this or --oidc-issuer is required")] = None,
            oidc_issuer: Annotated[str | None, typer.Option(
                envvar="PELOTON_OIDC_ISSUER",
                help="accept JWTs of this OIDC issuer (peloton.api.oidc)")] = None,
            oidc_audience: Annotated[str | None, typer.Option(
                envvar="PELOTON_OIDC_AUDIENCE", help="the audience OIDC tokens must name")] =
            None,
            oidc_jwks_url: Annotated[str | None, typer.Option(
                envvar="PELOTON_OIDC_JWKS_URL",
                help="the issuer's JWKS (default: from its openid-configuration)")] = None,
            ) -> None:
        """Read model (ClickHouse) + HTTP API in one process."""
        from peloton.api.auth import AuthConfigError, configured
        from peloton.api.service import run_api

        _logging("api", log_format)
        try:
            authenticator = configured(tokens_file, oidc_issuer, oidc_audience, oidc_jwks_url)
        except AuthConfigError as exc:
            typer.echo(f"peloton serve api: {exc}", err=True)
            raise typer.Exit(2) from None
        run_api(bootstrap, dsn, port, instance, host, authenticator)

    return serve

