"""Shared by the pool and preemption tests (tests/resmgr, tests/runner): a pool config of
one cpu reservation and limit, and a job document submitted to a pool."""

from __future__ import annotations

from typing import Any

from peloton.model.jobfile import parse_job_file
from peloton.model.resources import Resources
from peloton.resmgr.domain.poolbook import config_record
from peloton.resmgr.domain.poolconfig import PoolConfig

JOB = """\
name: {name}
owner: team
instanceCount: {n}
respool: {pool}
sla: {{priority: {priority}, preemptible: {preemptible}}}
defaultConfig:
  resource: {{cpuLimit: {cpu}, memLimitMb: 64, diskLimitMb: 16}}
  command: {{value: "sleep 600"}}
  killGracePeriodSeconds: 7
"""


def pool_config(name: str, cpu_res: float, cpu_lim: float) -> dict[str, Any]:
    return config_record(PoolConfig.uniform(
        name, Resources(cpu_res, 1024, 1024, 0), Resources(cpu_lim, 12288, 30720, 0)))


def job_body(job_id: str, pool: str, n: int, now: int, priority: int = 1,
             preemptible: bool = True, cpu: float = 1.0) -> dict[str, Any]:
    """The JobSubmitted body of `n` tasks of `cpu` cpus in `pool` (sleep 600)."""
    text = JOB.format(name=job_id, n=n, pool=pool, priority=priority,
                      preemptible=str(preemptible).lower(), cpu=cpu)
    return parse_job_file(text, job_id, now)
