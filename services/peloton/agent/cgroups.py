"""cgroup v2 limits for task runs: detection of a usable subtree, one child cgroup per run.

Detection (`detect_cgroup2(name)`), in order; the first failure is the returned reason
(a string) and the agent falls back to rlimits (`peloton.agent.confinement`):
1. `/sys/fs/cgroup` is a cgroup2 mount (not cgroup v1 or the "hybrid" layout where v2
   sits at /sys/fs/cgroup/unified without controllers);
2. the agent's own cgroup (the `0::<path>` line of /proc/self/cgroup) offers the `cpu`
   and `memory` controllers (`cgroup.controllers`);
3. they can be enabled for its children (`cgroup.subtree_control`). cgroup v2 allows that
   only in a cgroup without processes of its own: if the agent is alone in its cgroup
   (as in a container or a systemd unit with Delegate=yes), it moves itself into a leaf
   `peloton-agent` first; if other processes live there, detection fails (the agent does
   not move processes it does not own);
4. it creates `peloton-<name>/` there (one per agent: several agents may share a
   machine) with both controllers enabled for its children. Leftover run cgroups of a
   previous incarnation there are killed (`cgroup.kill`) and removed.

Per run (`Cgroup2Tree.create`): `peloton-<name>/<run_id>/` with `memory.max` (bytes,
"max" when unlimited), `memory.swap.max` 0 when memory is limited (so the limit is not
dodged by swapping), `memory.oom.group` 1 (an OOM kill takes the whole task, as in a
container), `cpu.max` (`domain.limits.cpu_max`). The forked child joins it before it
drops privileges (`join`, by writing its pid to `cgroup.procs`), so everything the task
forks is inside. After the run: `oom_kills` reads `memory.events`; `remove` kills what is
left (`cgroup.kill`, which also catches processes that left the task's process group) and
removes the directory, False while the kernel still tears processes down (try again).

All paths are injectable (`mount`, `proc_self`) so the file protocol can be tested on a
plain directory; the kernel's enforcement only on a host that offers cgroup v2.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
from dataclasses import dataclass
from pathlib import Path

from peloton.agent.domain.limits import TaskLimits, cpu_max, oom_kills

__all__ = ["Cgroup2Tree", "detect_cgroup2", "CONTROLLERS"]

CONTROLLERS = ("cpu", "memory")
MOUNT = Path("/sys/fs/cgroup")
AGENT_LEAF = "peloton-agent"


@dataclass(frozen=True, slots=True)
class Cgroup2Tree:
    """The agent's cgroup for its runs (`peloton-<name>/`)."""

    base: Path

    def path_for(self, run_id: str) -> Path:
        return self.base / run_id

    def create(self, run_id: str, limits: TaskLimits) -> Path:
        path = self.path_for(run_id)
        path.mkdir(exist_ok=True)
        mem = limits.memory_bytes
        _write(path / "memory.max", "max" if mem is None else str(mem))
        if mem is not None and (path / "memory.swap.max").exists():
            _write(path / "memory.swap.max", "0")
        if (path / "memory.oom.group").exists():
            _write(path / "memory.oom.group", "1")
        _write(path / "cpu.max", cpu_max(limits.cpu))
        return path

    @staticmethod
    def join(path: Path) -> None:
        """In the forked child (still privileged): move this process into `path`."""
        fd = os.open(path / "cgroup.procs", os.O_WRONLY)
        try:
            os.write(fd, str(os.getpid()).encode())
        finally:
            os.close(fd)

    @staticmethod
    def oom_kills(path: Path) -> int:
        try:
            return oom_kills((path / "memory.events").read_text())
        except OSError:
            return 0

    @staticmethod
    def remove(path: Path) -> bool:
        """Kill whatever is left in the run's cgroup and remove it; True once gone."""
        if not path.is_dir():
            return True
        with contextlib.suppress(OSError):
            _write(path / "cgroup.kill", "1")
        try:
            path.rmdir()
        except FileNotFoundError:
            return True
        except OSError as exc:
            if exc.errno in (errno.EBUSY, errno.ENOTEMPTY):
                return False
            raise
        return True

    def leftovers(self) -> list[Path]:
        return sorted(p for p in self.base.iterdir() if p.is_dir())


def _write(path: Path, text: str) -> None:
    # as a shell's `echo > file` opens it: works on cgroupfs, and on a plain test tree
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def _own_cgroup(proc_self: Path) -> str | None:
    for line in (proc_self / "cgroup").read_text().splitlines():
        if line.startswith("0::"):
            return line[3:]
    return None


def _is_cgroup2(mount: Path, proc_self: Path) -> bool:
    fstype = None  # the last mount on the point is the visible one
    for line in (proc_self / "mounts").read_text().splitlines():
        parts = line.split()
        if len(parts) >= 3 and parts[1] == str(mount):
            fstype = parts[2]
    return fstype == "cgroup2"


def _enable(cgroup: Path) -> None:
    wanted = " ".join(f"+{c}" for c in CONTROLLERS)
    try:
        enabled = (cgroup / "cgroup.subtree_control").read_text().split()
    except FileNotFoundError:  # only on a plain test tree: cgroupfs always has it
        enabled = []
    if not all(c in enabled for c in CONTROLLERS):
        _write(cgroup / "cgroup.subtree_control", wanted)


def detect_cgroup2(name: str, mount: Path = MOUNT,
                   proc_self: Path = Path("/proc/self")) -> Cgroup2Tree | str:
    """A usable tree for this agent's runs, or why there is none (see the module doc)."""
    try:
        if not _is_cgroup2(mount, proc_self):
            return f"{mount} is not a cgroup2 mount (cgroup v1 or hybrid host)"
        own_path = _own_cgroup(proc_self)
        if own_path is None:
            return "no cgroup v2 entry in /proc/self/cgroup"
        own = mount / own_path.lstrip("/")
        if own.name == AGENT_LEAF:  # moved there by an earlier detection in this process
            own = own.parent
        offered = (own / "cgroup.controllers").read_text().split()
        missing = [c for c in CONTROLLERS if c not in offered]
        if missing:
            return f"cgroup {own} does not offer the {'/'.join(missing)} controller(s)"
        try:
            _enable(own)
        except OSError as exc:
            if exc.errno != errno.EBUSY:
                raise
            others = {int(p) for p in (own / "cgroup.procs").read_text().split()} - {os.getpid()}
            if others:
                return (f"cgroup {own} holds other processes ({len(others)}), so its "
                        "controllers cannot be delegated to the agent's children")
            leaf = own / AGENT_LEAF
            leaf.mkdir(exist_ok=True)
            _write(leaf / "cgroup.procs", str(os.getpid()))
            _enable(own)
        base = own / ("peloton-" + re.sub(r"[^A-Za-z0-9._-]", "_", name))
        base.mkdir(exist_ok=True)
        _enable(base)
        tree = Cgroup2Tree(base)
        for stale in tree.leftovers():
            Cgroup2Tree.remove(stale)
        return tree
    except OSError as exc:
        return f"cgroup v2 not usable: {exc}"
