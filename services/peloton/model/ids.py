"""Identifiers: a task is (job_id, instance); a run (attempt) of it is (job_id, instance, run)."""

from __future__ import annotations

__all__ = ["task_id", "run_id", "parse_run_id"]


def task_id(job_id: str, instance: int) -> str:
    return f"{job_id}-{instance}"


def run_id(job_id: str, instance: int, run: int) -> str:
    return f"{job_id}-{instance}-{run}"


def parse_run_id(value: str) -> tuple[str, int, int]:
    """Inverse of run_id; job ids may contain '-', instance and run never do."""
    job_id, instance, run = value.rsplit("-", 2)
    return job_id, int(instance), int(run)
