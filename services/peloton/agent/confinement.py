"""How an agent confines its tasks: which user they run as, and how their cpu and memory
limits are enforced. Chosen once at agent start and reported (log line, host labels).

Mechanisms (`mode`: "auto" picks the first that works; "cgroup2" or "rlimits" forces one,
and a forced cgroup2 that the host does not offer is an error):
- "cgroup2": one cgroup per run (`peloton.agent.cgroups`): memory.max and cpu.max from
  the task's resources; the kernel kills the task (never the agent, which is outside the
  run's cgroup) when it exceeds its memory, and `memory.events` says so.
- "rlimits": RLIMIT_DATA = the task's memory, per process. Chosen over RLIMIT_AS because
  the address space counts every mapping (shared libraries, thread stacks reserved but
  untouched, the Go and JVM heaps' reservations): a 16 MiB RLIMIT_AS stops python3 from
  even importing http.server, while RLIMIT_DATA (heap, brk and private writable mappings,
  Linux >= 4.7) limits what a task really allocates. Neither bounds a process tree as a
  whole (each process gets the limit) nor resident memory. cpu is NOT rate-limited in
  this mode: RLIMIT_CPU caps total cpu seconds (SIGXCPU then SIGKILL), which would kill
  every long-running service, so it is not set; tasks run at nice `RLIMIT_NICE` instead,
  so the agent and its health checks keep priority over them.
- "unconfined": no limits, tasks as the agent's user (`Confinement.unconfined()`, for
  tests of the runner itself; never chosen by mode).

Whatever the mechanism, every task's oom_score_adj is `OOM_SCORE_ADJ` (the kernel's
global OOM killer takes tasks before the agent) and it runs as the task user
(`peloton.agent.taskuser`): health-check commands too (`probe_setup`).

Per run, `prepare(run_id, limits)` gives a `RunConfinement`: `preexec` (for Popen, in
the child, in order: join the cgroup, oom_score_adj, rlimits and nice, drop to the task
user, then PR_SET_PDEATHSIG, which a change of user would reset), `oom_message` (after
the exit: the OOM reason, or None) and `release` (remove the run's cgroup).
"""

from __future__ import annotations

import logging
import os
import resource
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from peloton.agent import procutil
from peloton.agent.cgroups import Cgroup2Tree, detect_cgroup2
from peloton.agent.domain.limits import TaskLimits, oom_message, rlimit_oom_evidence
from peloton.agent.errors import AgentError
from peloton.agent.taskuser import TaskUser, resolve_task_user

__all__ = ["Confinement", "RunConfinement", "ConfinementError", "MODES", "Mechanism"]

log = logging.getLogger(__name__)

Mechanism = Literal["cgroup2", "rlimits", "unconfined"]
MODES = ("auto", "cgroup2", "rlimits")
OOM_SCORE_ADJ = 1000
RLIMIT_NICE = 10


class ConfinementError(AgentError):
    """The requested confinement is not possible on this host."""


@dataclass(frozen=True, slots=True)
class RunConfinement:
    mechanism: Mechanism
    user: TaskUser
    limits: TaskLimits
    cgroup: Path | None = None

    def preexec(self) -> Callable[[], None] | None:
        """The preexec_fn of the run's process (see the module doc)."""
        return procutil.child_setup(before=self._in_child)

    def _in_child(self) -> None:
        if self.cgroup is not None:
            Cgroup2Tree.join(self.cgroup)
        if self.mechanism != "unconfined":
            _write_self("oom_score_adj", str(OOM_SCORE_ADJ))
        if self.mechanism == "rlimits":
            if self.limits.memory_bytes is not None:
                _, hard = resource.getrlimit(resource.RLIMIT_DATA)
                lim = self.limits.memory_bytes
                if hard != resource.RLIM_INFINITY:  # a non-root agent cannot raise it
                    lim = min(lim, hard)
                resource.setrlimit(resource.RLIMIT_DATA, (lim, lim))
            os.nice(RLIMIT_NICE)
        self.user.switch()

    def oom_message(self, returncode: int, outcome: str,
                    stderr_tail: Callable[[], bytes]) -> str | None:
        """The run's end message when it ran out of memory, else None."""
        limit = self.limits.memory_bytes
        if limit is None or returncode == 0:
            return None
        if self.cgroup is not None:
            kills = Cgroup2Tree.oom_kills(self.cgroup)
            if kills == 0:
                return None
            return oom_message(limit, "cgroup memory.max", outcome,
                               f"{kills} process(es) OOM-killed")
        if self.mechanism == "rlimits":
            evidence = rlimit_oom_evidence(returncode, stderr_tail())
            if evidence is None:
                return None
            detail, certain = evidence
            return oom_message(limit, "RLIMIT_DATA", outcome, detail, certain)
        return None

    def release(self) -> bool:
        """Remove the run's cgroup (killing leftovers); False: try again later."""
        if self.cgroup is None:
            return True
        try:
            return Cgroup2Tree.remove(self.cgroup)
        except OSError as exc:
            log.warning("cannot remove cgroup %s: %s", self.cgroup, exc)
            return True


@dataclass(frozen=True, slots=True)
class Confinement:
    mechanism: Mechanism
    user: TaskUser
    tree: Cgroup2Tree | None = None
    why: str = ""  # why cgroup2 was not used, when it was not

    @classmethod
    def unconfined(cls) -> Confinement:
        me = os.geteuid()
        return cls("unconfined", TaskUser(str(me), me, os.getegid()))

    @classmethod
    def setup(cls, task_user: str | None, mode: str, name: str) -> Confinement:
        """Resolve the task user and pick the mechanism (see the module doc). Raises
        ConfinementError, TaskUserError."""
        if mode not in MODES:
            raise ConfinementError(f"confinement must be one of {MODES}, not {mode!r}")
        user = resolve_task_user(task_user)
        if mode == "rlimits":
            return cls("rlimits", user, why="rlimits forced by configuration")
        found = detect_cgroup2(name)
        if isinstance(found, Cgroup2Tree):
            return cls("cgroup2", user, found)
        if mode == "cgroup2":
            raise ConfinementError(f"cgroup2 confinement requested but unavailable: {found}")
        return cls("rlimits", user, why=found)

    def describe(self) -> str:
        if self.mechanism == "cgroup2":
            assert self.tree is not None
            how = f"cgroup2 under {self.tree.base} (memory.max, cpu.max)"
        elif self.mechanism == "rlimits":
            how = (f"rlimits (memory: RLIMIT_DATA per process; cpu: not rate-limited, "
                   f"nice {RLIMIT_NICE}) because {self.why}")
        else:
            how = "unconfined (no limits)"
        return f"confinement {how}; {self.user.describe()}"

    def labels(self) -> dict[str, str]:
        """What the agent's registration says about it (host labels)."""
        return {"peloton.confinement": self.mechanism, "peloton.task_user": self.user.name}

    def prepare(self, run_id: str, limits: TaskLimits) -> RunConfinement:
        """The run's confinement; creates its cgroup (raises OSError if it cannot)."""
        cgroup = self.tree.create(run_id, limits) if self.tree is not None else None
        return RunConfinement(self.mechanism, self.user, limits, cgroup)

    def probe_setup(self) -> Callable[[], None] | None:
        """The preexec_fn of a health-check command: the task user, PDEATHSIG."""
        return procutil.child_setup(before=self.user.switch)


def _write_self(name: str, text: str) -> None:
    fd = os.open(f"/proc/self/{name}", os.O_WRONLY)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)
