"""Persistent volumes of stateful instances on one host.

A launch with a `volume` (the container path the task expects, e.g. "/data") gets the
directory `<sandbox_root>/volumes/<job_id>/<instance>`, created when absent and never
deleted by the agent: not when a run ends, not when its sandbox is cleaned, not when the
agent restarts. So every run of that instance on this host sees what earlier runs wrote.
The task finds it through its environment:

    PELOTON_VOLUME       the host directory (absolute)
    PELOTON_VOLUME_PATH  the container path from the job file (informational: tasks are
                         plain processes, nothing is mounted there)

`<sandbox_root>` is the runner's root (one per host), so hosts sharing a machine in a
minicluster keep separate volumes, as separate machines would.

Confined tasks: `ensure(job_id, instance, user)` makes the instance's directory the task
user's (`TaskUser.give`; the parents stay the agent's, 0755). Only the directory itself
changes owner: what an earlier run wrote under another task user keeps its owner.
"""

from __future__ import annotations

from pathlib import Path

from peloton.agent.sandbox import RESERVED_NAME, validate_run_id
from peloton.agent.taskuser import TaskUser

__all__ = ["VOLUMES_DIR", "VolumeStore", "volume_env"]

VOLUMES_DIR = RESERVED_NAME


def volume_env(directory: Path, container_path: str) -> dict[str, str]:
    return {"PELOTON_VOLUME": str(directory), "PELOTON_VOLUME_PATH": container_path}


class VolumeStore:
    def __init__(self, sandbox_root: Path) -> None:
        self.root = Path(sandbox_root) / VOLUMES_DIR

    def path_for(self, job_id: str, instance: int) -> Path:
        """The instance's directory; raises InvalidRunIdError if `job_id` is not a safe
        single path component, ValueError for a negative instance."""
        validate_run_id(job_id)
        if instance < 0:
            raise ValueError(f"instance must be >= 0, got {instance}")
        return self.root / job_id / str(instance)

    def ensure(self, job_id: str, instance: int, user: TaskUser | None = None) -> Path:
        """Create the instance's directory if absent (keeping whatever it holds), owned by
        `user` when given."""
        path = self.path_for(job_id, instance)
        path.mkdir(parents=True, exist_ok=True)
        if user is not None:
            user.give(path)
        return path
