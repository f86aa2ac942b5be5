"""The host agent: registers its host, heartbeats, launches and kills task runs.

It runs in the common service shell (decode, dead-letter, publish). It consumes launch and
kill requests for every host and keeps those for its own host; launches must also name its
current incarnation, so a restarted agent never runs what was meant for its previous life
(whose processes died with it). Statuses from the runner are batched into one
TaskStatusReported per tick; a heartbeat (HostStatusReported) lists the runs still alive.
Log files are served over HTTP at /logs/{run_id}/{stream} on the agent's web port.

Health checks and volumes. A launch with `health_check_json` is watched by a `HealthBook`
(`peloton.agent.domain.healthbook`, pure): every status of the run from RUNNING on carries
its health (PENDING until a check passes, then HEALTHY, or UNHEALTHY), and each change of
health is one more status, state RUNNING, in the same batched report. `tick` starts the
checks that are due (the runner runs them, `runner.probe`, off the lock); a result is
folded as it arrives, at the tick time the check started plus its duration. An UNHEALTHY
run is stopped with its kill grace period and ends FAILED ("health check failed: <n>
checks in a row (<last error>)"). Runs without a check report health "". A launch with a
`volume` gets its instance's persistent directory (`peloton.agent.volumes`).

Confinement (real runs only, `peloton.agent.confinement`): chosen at start from
`task_user` and `confinement` ("auto", "cgroup2", "rlimits"); logged, and announced in
the registration as the host labels `peloton.confinement` (cgroup2 | rlimits) and
`peloton.task_user`. A launch's resources become its run's limits. The agent refuses to
start when its tasks could not reach their sandbox root (a parent directory the task
user cannot search). Finished runs' sandboxes are deleted `sandbox_retention_s` after
they ended, once the runner has forgotten them (checked every `SANDBOX_GC_INTERVAL_MS`).

Bounded state and idempotency: the runs the agent knows live in a `RunBook`
(`peloton.agent.domain.runbook`, pure). A run ended and reported leaves it (and the runner's
memory) `retention_s` after its report reached the log; a launch redelivered after that is
still not started again (the book's horizons, argued there).

Two agents for one host (bad input): the newer registration wins, by the order of the
host's HostRegistered records in the log (one key, one partition), the order the host
manager reads them in. An agent's shell (`peloton.agent.shell`) hands it its hosts'
HostRegistered records from before its own registration on; one of another incarnation
read AFTER its own means another agent registered the host later: this agent logs it
(warning), kills its runs without reporting them (the host manager already declared them
lost when the newer incarnation replaced this one, as after an agent restart, and the job
manager runs them again) and stops serving the host: no heartbeat, status or
registration from it any more. One read before its own is an older agent it replaced.

Heartbeats: every `heartbeat_s`; the first `heartbeat_phase_s` after the registration
(a fleet spreads its hosts' phases over the interval, so each tick sends a slice of them,
not all at once).

Reconciliation: a `TaskReconcileRequested` (the job manager's question about runs of this
host it has had no news of, `peloton.jobmgr.domain.reconciliation`) is answered per run in
the next report: RUNNING if it runs; its end again (the status it was reported with) if
it ended and is still known; nothing if it was launched and has not started yet; LOST if
the agent does not know it (never launched here, or forgotten after its retention), with a
tombstone in the run book, as for a kill read before its launch: a launch of that run read
later (the question travels on another topic) is not started.

Decide, publish, then commit: `tick` hands its statuses (and `after_replay` the
registration) to the shell, which publishes them. The shell calls `discard_unpublished`
right after a call whose events did not reach the log, before any other call; so when the
next call begins, the previous call's events are in the log. Only then does a reported end
start its run's retention window; discarded statuses (and a discarded registration or
heartbeat) are sent again at the next tick, never lost.
"""

from __future__ import annotations

import asyncio
import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from peloton.agent.confinement import Confinement
from peloton.agent.domain.healthbook import HealthBook, Probe
from peloton.agent.domain.runbook import KillAction, RunBook
from peloton.agent.domain.sandboxgc import DEFAULT_SANDBOX_RETENTION_S
from peloton.agent.errors import AgentError
from peloton.agent.runner import (
    ProbeResult,
    ProcessRunner,
    SimulatedRunner,
    TaskRunner,
    TaskStatus,
)
from peloton.agent.status import TERMINAL_STATES, RunState
from peloton.agent.taskuser import TaskUserError
from peloton.model.event import Event
from peloton.model.health import HealthCheck
from peloton.model.ids import parse_run_id, run_id
from peloton.model.resources import Resources

__all__ = ["AgentConfig", "AgentCore"]

log = logging.getLogger(__name__)

#: the ends a report may carry (LOST: a run the agent does not know, see `_reconciled`)
_TERMINAL = frozenset(s.value for s in TERMINAL_STATES) | {"LOST"}
DEFAULT_GRACE_S = 10.0  # a launch record without kill_grace_period_s (tests, old tools)
SANDBOX_GC_INTERVAL_MS = 60_000


@dataclass(frozen=True)
class AgentConfig:
    host: str
    incarnation: str
    capacity: Resources
    labels: dict[str, str] = field(default_factory=dict)
    sandbox_root: Path = Path("/tmp/peloton-sandboxes")
    simulated: bool = False
    log_url: str = ""
    heartbeat_s: float = 1.0
    port_range: tuple[int, int] = (31000, 32000)
    retention_s: float = 600.0  # how long a run ended and reported stays known
    task_user: str | None = None  # None: peloton-task, else nobody (when root)
    confinement: str = "auto"  # auto | cgroup2 | rlimits
    sandbox_retention_s: float = DEFAULT_SANDBOX_RETENTION_S
    heartbeat_phase_s: float = 0.0  # the first heartbeat after the registration (< heartbeat_s)


class AgentCore:
    inputs: tuple[str, ...] = ("task-launch-requested", "task-kill-requested")
    replay: tuple[str, ...] = ()
    tick_interval: float | None = 0.05

    def __init__(self, config: AgentConfig) -> None:
        self.config = config
        self.runner: TaskRunner
        self.process_runner: ProcessRunner | None = None
        self.confinement: Confinement | None = None
        if config.simulated:
            self.runner = SimulatedRunner(on_status=self._observe)
        else:
            self.confinement = _confinement(config)
            self.process_runner = ProcessRunner(
                config.sandbox_root / config.host, on_status=self._observe,
                confinement=self.confinement)
            self.runner = self.process_runner
        self._last_gc = 0
        self.book = RunBook(round(config.retention_s * 1000))
        self.health = HealthBook()
        self._pending: list[dict[str, Any]] = []  # statuses for the next report
        self._ends: dict[str, dict[str, Any]] = {}  # run -> its end's status, while known
        self._sent: list[dict[str, Any]] = []  # statuses of the last call, not yet confirmed
        self._register_due = False  # the registration was discarded: send it again
        self._register_sent = False
        self._last_heartbeat = 0
        self._heartbeat_before = 0  # restored if the last heartbeat is discarded
        self._tasks: set[asyncio.Task[None]] = set()
        self._own_registration_read = False
        self.superseded_by: str | None = None  # the incarnation that replaced this agent

    def fold(self, etype: str, body: dict[str, Any]) -> None:
        """The agent keeps no replayed state."""

    def handle(self, etype: str, body: dict[str, Any], now: int) -> list[Event]:
        self._confirm(now)
        if body["host"] != self.config.host or self.superseded_by is not None:
            return []
        if etype == "HostRegistered":
            self._registration_read(body["incarnation"])
        elif etype == "TaskLaunchRequested" and body["incarnation"] == self.config.incarnation:
            at = int(body["at"])
            for launch in body["launches"]:
                rid = run_id(launch["job_id"], launch["instance"], launch["run"])
                if self.book.admit_launch(rid, at):
                    self._start(rid, launch)
        elif etype == "TaskKillRequested":
            at = int(body["at"])
            for kill in body["kills"]:
                rid = run_id(kill["job_id"], kill["instance"], kill["run"])
                action = self.book.admit_kill(rid, at)
                if action is KillAction.KILL:
                    self._spawn(self.runner.kill(rid, kill["grace_period_s"]))
                elif action is KillAction.REPORT_KILLED:
                    self._pending.append(self._ended(
                        _status(rid, RunState.KILLED.value, None, "killed before launch")))
        elif etype == "TaskReconcileRequested":
            running = set(self.runner.running())
            for ref in body["runs"]:
                answer = self._reconciled(run_id(ref["job_id"], ref["instance"], ref["run"]),
                                          int(body["at"]), running)
                if answer is not None:
                    self._pending.append(answer)
        return []

    def _ended(self, status: dict[str, Any]) -> dict[str, Any]:
        """Keep a run's end (its status) while the run is known, for a reconciliation."""
        self._ends[run_id(status["job_id"], status["instance"], status["run"])] = status
        return status

    def _reconciled(self, rid: str, at: int, running: set[str]) -> dict[str, Any] | None:
        """The answer to the job manager's question about a run (module doc): RUNNING, its
        end again, nothing while it is starting, LOST when this agent does not know it.
        A run answered LOST gets the book's tombstone, as a kill before its launch does: a
        launch of it read later is not started (the job manager runs it again elsewhere)."""
        if rid in running:
            return _status(rid, RunState.RUNNING.value, None, "running (reconciliation)")
        end = self._ends.get(rid)
        if end is not None:
            return {**end, "message": f"{end['message']} (reported again: reconciliation)"}
        if rid in self.book:
            return None  # launched, not started yet: its statuses are on their way
        if self.book.admit_kill(rid, at) is not KillAction.REPORT_KILLED:
            return None  # a question redelivered after its run left the book: answered
        log.warning("agent %s: the job manager asked about run %s, which this agent "
                    "(incarnation %s) does not know: answered LOST", self.config.host, rid,
                    self.config.incarnation)
        return self._ended(_status(
            rid, "LOST", None, f"the agent of {self.config.host} (incarnation "
            f"{self.config.incarnation}) does not know this run (reconciliation)"))

    def _registration_read(self, incarnation: str) -> None:
        """A HostRegistered of this host, in log order (see the module doc)."""
        if incarnation == self.config.incarnation:
            self._own_registration_read = True
            return
        if not self._own_registration_read:
            return  # written before ours: an older agent of this host, which ours replaced
        self.superseded_by = incarnation
        running = self.runner.running()
        log.warning(
            "agent %s: another agent registered this host after this one (incarnation %s "
            "after %s): the newer one serves it; this agent stops serving it and kills its "
            "%d run(s) unreported (the host manager declared them lost, as after an agent "
            "restart)", self.config.host, incarnation, self.config.incarnation, len(running))
        for rid in running:
            self._spawn(self.runner.kill(rid, 0.0))
        self._pending, self._sent, self._ends = [], [], {}
        self._register_due = False

    def discard_unpublished(self) -> None:
        """The last call's events did not reach the log: send them again at the next tick
        (the runs' ends are not reported yet, so their windows do not start)."""
        self._pending = self._sent + self._pending
        self._sent = []
        if self._register_sent:
            self._register_sent, self._register_due = False, True
        self._last_heartbeat = self._heartbeat_before

    def _confirm(self, now: int) -> None:
        """The previous call's events are in the log (see the module doc)."""
        for st in self._sent:
            if st["state"] in _TERMINAL:
                self.book.reported(run_id(st["job_id"], st["instance"], st["run"]), now)
        self._sent = []
        self._register_sent = False
        self._heartbeat_before = self._last_heartbeat

    def _observe(self, status: TaskStatus) -> None:
        """The runner's report of one run (called synchronously by the runner)."""
        if status.state in TERMINAL_STATES:
            self.book.ended(status.run_id)
            health = self.health.ended(status.run_id)
        elif status.state is RunState.RUNNING:
            health = self.health.running(status.run_id, status.sandbox)
        else:
            health = self.health.health(status.run_id)
        reported = _status(status.run_id, status.state.value, status.exit_code,
                           status.message, status.sandbox, health)
        self._pending.append(self._ended(reported) if status.state in TERMINAL_STATES
                             else reported)

    def _start(self, rid: str, launch: dict[str, Any]) -> None:
        raw_check = launch.get("health_check_json")
        if raw_check is not None:
            try:
                check = HealthCheck.from_body(json.loads(raw_check))
            except ValueError as exc:  # the job manager validated it: a bug upstream
                self._observe(TaskStatus(rid, RunState.FAILED, None,
                                         f"launch refused: invalid health check: {exc}", ""))
                return
            grace = launch.get("kill_grace_period_s")
            self.health.watch(rid, check, launch.get("ports") or {},
                              DEFAULT_GRACE_S if grace is None else float(grace))
        resources = Resources.from_mapping(launch.get("resources"))  # read by every runner
        if isinstance(self.runner, SimulatedRunner):  # starts without waiting: no task
            try:
                self.runner.launch_now(rid, launch["command"], launch["env"])
            except (AgentError, OSError) as exc:
                self._refused(rid, exc)
            return
        self._spawn(self._launch(rid, launch["command"], launch["env"], launch.get("volume"),
                                 resources))

    async def _launch(self, rid: str, command: str, env: dict[str, str],
                      volume: str | None, resources: Resources) -> None:
        try:
            await self.runner.launch(rid, command, env, volume=volume, resources=resources)
        except (AgentError, OSError) as exc:
            self._refused(rid, exc)

    def _refused(self, rid: str, exc: Exception) -> None:
        """Not started: say so, or it waits forever."""
        self._observe(TaskStatus(rid, RunState.FAILED, None, f"launch refused: {exc}", ""))

    async def _probe(self, probe: Probe) -> None:
        """Run one health check and fold its result (see the module doc)."""
        loop = asyncio.get_running_loop()
        started = loop.time()
        try:
            result = await self.runner.probe(probe.rid, probe.check, probe.port)
        except (AgentError, OSError) as exc:
            result = ProbeResult(False, f"the check could not run: {exc}")
        elapsed_ms = max(0, round((loop.time() - started) * 1000))
        change = self.health.record(probe.rid, result.passed, elapsed_ms, result.error,
                                    probe.at_ms + elapsed_ms)
        if change is None:
            return
        self._pending.append(_status(probe.rid, RunState.RUNNING.value, None, change.message,
                                     change.sandbox, change.health.value))
        if change.fail:
            await self.runner.fail(probe.rid, change.grace_s, change.message)

    def _spawn(self, coro: Any) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("agent %s: runner call failed: %r", self.config.host, task.exception())

    async def _collect(self, now: int) -> None:
        assert self.process_runner is not None
        removed = await self.process_runner.collect_sandboxes(
            now, round(self.config.sandbox_retention_s * 1000))
        if removed:
            log.info("agent %s: removed %d expired sandbox(es)", self.config.host, len(removed))

    def tick(self, now: int) -> list[Event]:
        self._confirm(now)
        if self.superseded_by is not None:
            self._pending = []  # the kills' reports: nobody needs them (module doc)
            return []
        for rid in self.book.expire(now):
            self.runner.forget(rid)
            self._ends.pop(rid, None)
        for probe in self.health.due(now):
            self._spawn(self._probe(probe))
        if self.process_runner is not None and now - self._last_gc >= SANDBOX_GC_INTERVAL_MS:
            self._last_gc = now
            self._spawn(self._collect(now))
        events: list[Event] = []
        if self._register_due:
            self._register_due = False
            self._register_sent = True
            events.extend(self._registration(now))
        statuses, self._pending = self._pending, []
        self._sent = statuses
        if statuses:
            events.append(
                Event(
                    "TaskStatusReported",
                    self.config.host,
                    {
                        "host": self.config.host,
                        "incarnation": self.config.incarnation,
                        "at": now,
                        "statuses": statuses,
                    },
                )
            )
        if now - self._last_heartbeat >= self.config.heartbeat_s * 1000:
            self._last_heartbeat = now
            events.append(
                Event(
                    "HostStatusReported",
                    self.config.host,
                    {
                        "host": self.config.host,
                        "incarnation": self.config.incarnation,
                        "at": now,
                        "running": self.runner.running(),
                    },
                )
            )
        return events

    def next_heartbeat_ms(self) -> int:
        """When this agent's next heartbeat is due (a fleet ticks only agents with
        something due: this, or `quiet()` False)."""
        return self._last_heartbeat + round(self.config.heartbeat_s * 1000)

    def quiet(self) -> bool:
        """Whether a tick before `next_heartbeat_ms()` would do nothing: nothing to report
        or confirm, no run known, no health check, no sandbox to collect."""
        return (not self._pending and not self._sent and not self._register_sent
                and not self._register_due and not len(self.book) and not len(self.health)
                and self.process_runner is None
                and self._last_heartbeat == self._heartbeat_before)

    def after_replay(self, now: int) -> list[Event]:
        self._confirm(now)
        self._register_sent = True
        # the first heartbeat `heartbeat_phase_s` from now (then every `heartbeat_s`)
        self._last_heartbeat = self._heartbeat_before = (
            now - round((self.config.heartbeat_s - self.config.heartbeat_phase_s) * 1000))
        return self._registration(now)

    def _registration(self, now: int) -> list[Event]:
        c = self.config
        return [
            Event(
                "HostRegistered",
                c.host,
                {
                    "host": c.host,
                    "incarnation": c.incarnation,
                    "at": now,
                    "capacity": c.capacity.as_dict(),
                    "labels": {**c.labels, **(self.confinement.labels()
                                               if self.confinement is not None else {})},
                    "log_url": c.log_url,
                    "port_range_begin": c.port_range[0],
                    "port_range_end": c.port_range[1],
                    "simulated": c.simulated,
                },
            )
        ]

    def read_log(self, rid: str, stream: str, tail_bytes: int | None) -> bytes:
        if stream not in ("stdout", "stderr"):
            raise AgentError(f"unknown stream {stream!r}")
        return self.runner.read_log(rid, stream, tail_bytes)  # type: ignore[arg-type]


def _confinement(config: AgentConfig) -> Confinement:
    """Pick and log how tasks are confined; refuse a sandbox root they cannot reach."""
    confinement = Confinement.setup(config.task_user, config.confinement, config.host)
    blocked = confinement.user.unreachable(config.sandbox_root / config.host)
    if blocked is not None:
        raise TaskUserError(
            f"tasks run as {confinement.user.name} could not reach their sandboxes under "
            f"{config.sandbox_root}: {blocked} is not searchable by that user; choose "
            "another sandbox root or let that user search it")
    log.info("agent %s: %s", config.host, confinement.describe())
    return confinement


def _status(
    rid: str, state: str, exit_code: int | None, message: str, sandbox: str = "",
    health: str = "",
) -> dict[str, Any]:
    job_id, instance, run = parse_run_id(rid)
    return {
        "job_id": job_id,
        "instance": instance,
        "run": run,
        "state": state,
        "exit_code": exit_code,
        "message": message,
        "sandbox": sandbox,
        "health": health,
    }
