"""What an agent gets to launch one run: the task spec, its ports and Peloton's env (pure).

`spec` is the spec of the run's config version (the placement's `config_version`): the
launch carries that version and the agent gets it as env `PELOTON_CONFIG_VERSION`.
The task's health check (`health_check_json`) and stateful volume path (`volume`) travel
as they are in the spec (None when absent); the agent runs the one and mounts the other.
"""

from __future__ import annotations

from typing import Any

from peloton.hostmgr.domain.records import Pending, RunKey
from peloton.model.ids import run_id
from peloton.model.spec import JobSpec

__all__ = ["launch_record", "is_revocable"]


def is_revocable(spec: JobSpec, instance: int) -> bool:
    """A run uses revocable (slack) resources when its task or its whole job says so."""
    return spec.revocable or spec.task(instance).revocable


def launch_record(spec: JobSpec, key: RunKey, p: Pending) -> dict[str, Any]:
    """The TaskLaunchRequested entry for run `key` placed by `p`. Declared ports are
    exported as `PORT_<NAME>` (or the env name after a colon: `http:MY_PORT`)."""
    task = spec.task(key[1])
    ports = dict(p.ports)
    env = dict(task.env)
    env.update({"PELOTON_JOB_ID": key[0], "PELOTON_INSTANCE_ID": str(key[1]),
                "PELOTON_TASK_ID": run_id(*key),
                "PELOTON_CONFIG_VERSION": str(p.config_version)})
    for declared in task.ports:
        name, _, env_name = declared.partition(":")
        if name in ports:
            env[env_name or f"PORT_{name.upper()}"] = str(ports[name])
    return {"job_id": key[0], "instance": key[1], "run": key[2], "command": task.command,
            "env": env, "resources": p.resources.as_dict(), "ports": ports,
            "kill_grace_period_s": task.kill_grace_period_s, "round": p.round,
            "health_check_json": task.get("health_check_json"), "volume": task.get("volume"),
            "config_version": p.config_version}
