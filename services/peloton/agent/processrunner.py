"""`ProcessRunner`: runs each task as a real `/bin/sh -c <command>` process.

Contract
- Sandbox: `<sandbox_root>/<run_id>/` is the task's cwd; its stdout/stderr go to the files
  `stdout`/`stderr` there; stdin is /dev/null.
- Environment: exactly `env`, plus PELOTON_RUN_ID and PELOTON_SANDBOX, plus the agent's
  PATH if `env` has none. Nothing else of the agent's environment leaks into tasks.
- Volume: a launch with `volume` (a container path) also gets PELOTON_VOLUME, the
  instance's persistent directory, and PELOTON_VOLUME_PATH (`peloton.agent.volumes`).
- Health checks: probe() runs one check of a running run, a command in its sandbox with
  its environment or an HTTP GET on 127.0.0.1 (`peloton.agent.probes`); fail() stops a
  run as kill() does but reports it FAILED with the caller's message.
- Isolation: each task leads its own session and process group (pgid == pid). It receives
  SIGKILL if the agent dies (PR_SET_PDEATHSIG), and the guardian (`guardian.py`) SIGKILLs
  its whole group then, so grandchildren do not survive either.
- When the task's main process exits, whatever is left in its process group is SIGKILLed
  (before the main process is reaped, so the pgid cannot have been recycled): a run is
  over when its main process is, as in a container.
- Confinement (`peloton.agent.confinement`, default unconfined): the task, and its
  command health checks, run as the task user; its resources (launch(resources=...))
  become its cgroup v2 or rlimit limits. The sandbox is created for that user
  (`SandboxStore.create`), so is a volume (`VolumeStore.ensure`). A run that exceeded its
  memory ends FAILED with "out of memory: exceeded N MiB limit (...)" (or "possibly out
  of memory" when rlimits leave only a crash to go by).
- Garbage collection: `collect_sandboxes(now_ms, retention_ms)` deletes the sandboxes of
  runs that ended `retention_ms` ago and that this runner no longer knows (decision in
  `peloton.agent.domain.sandboxgc`; never a running or remembered run's, never volumes).
- Reports: STARTING (spawned, message "pid N"), RUNNING (exec confirmed), then SUCCEEDED
  (exit 0), FAILED ("exit code 3", "killed by signal 9 (SIGKILL)"; after a fail()
  request, its message) or KILLED (after a kill() request). A spawn error is a single
  FAILED ("spawn failed: ...").
- Idempotency: launch() of a run_id known to this runner, running or finished, is a no-op.
  After an agent restart on the same root, a sandbox that already exists means the run
  was launched by a previous incarnation. It is not run again; its outcome is reported
  once: the recorded terminal status ("recovered after agent restart: ..."), since the
  old agent may have died before publishing it, or FAILED ("lost: ...") when there is no
  exit record (the old agent's death killed the run). Consumers already dedupe reports
  under at-least-once delivery, so a repeated terminal status is harmless; a missing
  one would leave the task stuck.
- Exit detection uses a pidfd registered with the event loop (no thread per process);
  where pidfd_open is unavailable it falls back to a waiting thread. Do not install an
  asyncio child watcher that reaps every child (waitpid(-1)); the default one does not.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from peloton.agent import procutil
from peloton.agent.confinement import Confinement, RunConfinement
from peloton.agent.domain.limits import TaskLimits
from peloton.agent.domain.sandboxgc import expired
from peloton.agent.errors import RunnerClosedError, UnknownRunError
from peloton.agent.guardian import GroupGuardian
from peloton.agent.probes import ProbeResult, command_probe, http_probe
from peloton.agent.sandbox import ExitRecord, SandboxStore
from peloton.agent.status import (
    LogStream,
    RunState,
    StatusCallback,
    StatusFeed,
    TaskStatus,
    advance,
)
from peloton.agent.volumes import VOLUMES_DIR, VolumeStore, volume_env
from peloton.model.health import HealthCheck, HealthCheckType
from peloton.model.ids import parse_run_id
from peloton.model.resources import Resources

__all__ = ["ProcessRunner"]

SHELL = "/bin/sh"
_STDERR_TAIL = 4096  # bytes of stderr looked at for allocation failures (rlimits)
_CGROUP_RETRY_S = 0.2


@dataclass(slots=True, eq=False)
class _Run:
    run_id: str
    sandbox: Path
    done: asyncio.Event = field(default_factory=asyncio.Event)
    state: RunState | None = None
    proc: subprocess.Popen[bytes] | None = None
    env: dict[str, str] = field(default_factory=dict)  # what the task got (for checks)
    kill_requested: bool = False
    fail_message: str | None = None  # stopped by fail(): report FAILED with this
    escalated: bool = False
    confined: RunConfinement | None = None


class ProcessRunner:
    """Runs tasks as process groups in sandboxes under `sandbox_root`.

    on_status: called synchronously for every report; if None, reports go to
    `self.statuses` (an asyncio.Queue the caller drains).
    guard_groups: start the guardian helper process (default True).
    confinement: how tasks are confined (default `Confinement.unconfined()`).
    """

    def __init__(
        self,
        sandbox_root: Path,
        *,
        on_status: StatusCallback | None = None,
        guard_groups: bool = True,
        confinement: Confinement | None = None,
    ) -> None:
        self.sandboxes = SandboxStore(Path(sandbox_root))
        self.volumes = VolumeStore(Path(sandbox_root))
        self.confinement = confinement if confinement is not None else Confinement.unconfined()
        self._feed = StatusFeed(on_status)
        self._guardian = GroupGuardian() if guard_groups else None
        self._runs: dict[str, _Run] = {}
        self._closed = False

    @property
    def statuses(self) -> asyncio.Queue[TaskStatus]:
        if self._feed.queue is None:
            raise AttributeError("statuses is only available without an on_status callback")
        return self._feed.queue

    # ---------------------------------------------------------------- public surface

    async def launch(self, run_id: str, command: str, env: Mapping[str, str], *,
                     volume: str | None = None, resources: Resources | None = None) -> None:
        """Start `command` for `run_id` (see module docstring); returns once it is RUNNING
        or FAILED to spawn. `volume`: the container path of the instance's persistent
        volume, if it has one; `resources`: its cpu and memory become its limits. Raises
        InvalidRunIdError, RunnerClosedError."""
        sandbox = self.sandboxes.path_for(run_id)
        if run_id in self._runs:
            return
        if self._closed:
            raise RunnerClosedError("runner is closed")
        run = _Run(run_id, sandbox)
        self._runs[run_id] = run
        if sandbox.exists():
            self._adopt(run)
            return
        user = self.confinement.user
        self.sandboxes.create(run_id, user.gid if user.switched else None)
        limits = (TaskLimits() if resources is None
                  else TaskLimits.of(resources.cpu, resources.memory))
        try:
            if volume is not None:
                job_id, instance, _ = parse_run_id(run_id)
                directory = self.volumes.ensure(job_id, instance, user)
                env = {**env, **volume_env(directory, volume)}
            run.confined = self.confinement.prepare(run_id, limits)
            run.proc = self._spawn(run, command, env)
        except (OSError, ValueError, subprocess.SubprocessError) as exc:
            self._release(run)
            self._finish(run, RunState.FAILED, None, f"spawn failed: {exc}")
            return
        pid = run.proc.pid
        if self._guardian is not None:
            self._guardian.register(pid)
        self._report(run, RunState.STARTING, None, f"pid {pid}")
        # Popen returned, so exec of the shell succeeded (CLOEXEC error pipe): it is alive.
        self._report(run, RunState.RUNNING, None, f"pid {pid}")
        self._watch(run)

    async def kill(self, run_id: str, grace_s: float) -> None:
        """SIGTERM the run's process group, SIGKILL it after `grace_s` if still alive, and
        return once it is gone (reported KILLED). No-op for unknown or finished runs."""
        await self._stop(run_id, grace_s, None)

    async def fail(self, run_id: str, grace_s: float, message: str) -> None:
        """Stop the run as kill() does, but report it FAILED with `message` (the agent
        found it unhealthy). No-op for unknown or finished runs."""
        await self._stop(run_id, grace_s, message)

    async def probe(self, run_id: str, check: HealthCheck, port: int) -> ProbeResult:
        """Run one health check of a running run: its command in the run's sandbox with
        the run's environment, or GET `check.http_path` on 127.0.0.1:`port`. A run that is
        not running fails the check."""
        run = self._runs.get(run_id)
        if run is None or run.done.is_set() or run.proc is None:
            return ProbeResult(False, "the run is not running")
        if check.type is HealthCheckType.HTTP:
            if port == 0 and check.http_port_name:
                return ProbeResult(False, f"port {check.http_port_name!r} is not one of the "
                                          "run's ports")
            return await http_probe(port, check.http_path, check.timeout_secs)
        return await command_probe(check.command, run.sandbox, run.env, check.timeout_secs,
                                   self.confinement.probe_setup())

    async def _stop(self, run_id: str, grace_s: float, fail_message: str | None) -> None:
        run = self._runs.get(run_id)
        if run is None or run.done.is_set() or run.proc is None:
            return
        if fail_message is not None and not run.kill_requested:
            run.fail_message = fail_message
        pgid = run.proc.pid
        if not run.kill_requested:
            run.kill_requested = True
            procutil.signal_group(pgid, signal.SIGTERM)
        try:
            await asyncio.wait_for(run.done.wait(), timeout=max(0.0, grace_s))
        except TimeoutError:
            if not run.done.is_set():
                run.escalated = True
                procutil.signal_group(pgid, signal.SIGKILL)
                await run.done.wait()

    def running(self) -> list[str]:
        """run_ids whose process has not ended, in launch order."""
        return [r.run_id for r in self._runs.values() if r.proc is not None and not r.done.is_set()]

    def forget(self, run_id: str) -> None:
        """Drop a finished run from memory; its sandbox stays (read_log still works, and a
        later launch() of it is recovered from the exit record, never run again)."""
        run = self._runs.get(run_id)
        if run is not None and run.done.is_set():
            del self._runs[run_id]

    def pid_of(self, run_id: str) -> int | None:
        """The main process pid (== pgid) of a known run, None if it never spawned."""
        run = self._runs.get(run_id)
        if run is None:
            raise UnknownRunError(f"unknown run {run_id!r}")
        return run.proc.pid if run.proc is not None else None

    def read_log(self, run_id: str, stream: LogStream, tail_bytes: int | None = None) -> bytes:
        """The run's captured stdout/stderr (last `tail_bytes` only if given). Works for
        runs of previous agent incarnations too. Raises UnknownRunError (a KeyError),
        InvalidRunIdError (a ValueError) or ValueError."""
        return self.sandboxes.read_log(run_id, stream, tail_bytes)

    async def collect_sandboxes(self, now_ms: int, retention_ms: int) -> list[str]:
        """Delete the sandboxes whose retention is over (see the module doc); returns
        their run_ids. The deletion runs in a worker thread."""
        doomed = expired(self.sandboxes.entries(), set(self._runs), now_ms, retention_ms,
                         VOLUMES_DIR)

        def delete() -> list[str]:
            removed = []
            for name in doomed:
                try:
                    self.sandboxes.remove(name)
                except OSError:
                    continue  # tried again at the next collection
                removed.append(name)
            return removed

        return await asyncio.to_thread(delete) if doomed else []

    async def close(self, grace_s: float = 5.0) -> None:
        """Refuse new launches, kill every running task (grace `grace_s`), stop the guardian."""
        self._closed = True
        await asyncio.gather(*(self.kill(r, grace_s) for r in self.running()))
        if self._guardian is not None:
            self._guardian.close()

    # ---------------------------------------------------------------- internals

    def _spawn(self, run: _Run, command: str, env: Mapping[str, str]) -> subprocess.Popen[bytes]:
        child_env = {"PELOTON_RUN_ID": run.run_id, "PELOTON_SANDBOX": str(run.sandbox)}
        if "PATH" not in env and "PATH" in os.environ:
            child_env["PATH"] = os.environ["PATH"]
        child_env.update(env)
        run.env = child_env
        assert run.confined is not None
        out = self.sandboxes.open_log(run.run_id, "stdout")
        try:
            err = self.sandboxes.open_log(run.run_id, "stderr")
        except OSError:
            os.close(out)
            raise
        with open(out, "wb") as out_f, open(err, "wb") as err_f:
            return subprocess.Popen(
                [SHELL, "-c", command],
                cwd=run.sandbox,
                env=child_env,
                stdin=subprocess.DEVNULL,
                stdout=out_f,
                stderr=err_f,
                close_fds=True,
                start_new_session=True,
                preexec_fn=run.confined.preexec(),
            )

    def _watch(self, run: _Run) -> None:
        assert run.proc is not None
        proc = run.proc
        loop = asyncio.get_running_loop()
        try:
            pidfd = os.pidfd_open(proc.pid)
        except (AttributeError, OSError):
            waiter = loop.run_in_executor(None, proc.wait)
            waiter.add_done_callback(lambda _: self._on_exit(run))
            return

        def readable() -> None:
            loop.remove_reader(pidfd)
            os.close(pidfd)
            self._on_exit(run)

        loop.add_reader(pidfd, readable)

    def _on_exit(self, run: _Run) -> None:
        assert run.proc is not None
        pgid = run.proc.pid
        # The leader is a zombie until reaped, so its pgid cannot be reused yet.
        procutil.signal_group(pgid, signal.SIGKILL)
        returncode = run.proc.wait()
        if self._guardian is not None:
            self._guardian.unregister(pgid)
        outcome = procutil.describe_exit(returncode)
        oom = None
        if run.confined is not None and not run.kill_requested:
            oom = run.confined.oom_message(returncode, outcome, lambda: self._stderr_tail(run))
        self._release(run)
        if run.fail_message is not None:
            self._finish(run, RunState.FAILED, procutil.exit_code_of(returncode),
                         run.fail_message)
        elif run.kill_requested:
            how = "SIGKILL after grace period" if run.escalated else "SIGTERM"
            self._finish(
                run,
                RunState.KILLED,
                procutil.exit_code_of(returncode),
                f"killed on request ({how}); {outcome}",
            )
        elif oom is not None:
            self._finish(run, RunState.FAILED, procutil.exit_code_of(returncode), oom)
        elif returncode == 0:
            self._finish(run, RunState.SUCCEEDED, 0, outcome)
        else:
            self._finish(run, RunState.FAILED, procutil.exit_code_of(returncode), outcome)

    def _stderr_tail(self, run: _Run) -> bytes:
        try:
            return self.sandboxes.read_log(run.run_id, "stderr", _STDERR_TAIL)
        except (OSError, ValueError, KeyError):
            return b""

    def _release(self, run: _Run) -> None:
        """Remove the run's cgroup, again a little later while the kernel still holds it."""
        confined = run.confined
        if confined is None or confined.release():
            return
        loop = asyncio.get_running_loop()
        tries = iter(range(50))

        def retry() -> None:
            if not confined.release() and next(tries, None) is not None:
                loop.call_later(_CGROUP_RETRY_S, retry)

        loop.call_later(_CGROUP_RETRY_S, retry)

    def _adopt(self, run: _Run) -> None:
        record = self.sandboxes.read_exit(run.run_id)
        if record is None:
            self._finish(
                run,
                RunState.FAILED,
                None,
                "lost: sandbox exists from a previous agent incarnation without an exit",
            )
            return
        # The previous agent may have died before its report was published: repeat it once.
        run.done.set()
        message = f"recovered after agent restart: {record.message}"
        self._report(run, record.state, record.exit_code, message)

    def _finish(self, run: _Run, state: RunState, exit_code: int | None, message: str) -> None:
        with contextlib.suppress(OSError):
            self.sandboxes.write_exit(run.run_id, ExitRecord(state, exit_code, message))
        run.done.set()
        self._report(run, state, exit_code, message)

    def _report(self, run: _Run, state: RunState, exit_code: int | None, message: str) -> None:
        run.state = advance(run.state, state)
        self._feed.publish(TaskStatus(run.run_id, state, exit_code, message, str(run.sandbox)))
