"""Why pending, in the CLI: submission warnings, a job's waiting summary, a task's code.

The API gives every waiting task a structured reason and a job its summary and queue
position (peloton.api.whypending); POST /v1/jobs may answer with `warnings` (a job that
can never be admitted as configured, peloton.api.admissibility). These helpers turn them
into lines; `never_admissible(job)` is what makes `peloton job create --wait` stop
instead of waiting forever: the reasons of a job whose waiting tasks show a permanent
reason (readmodel/pending.py), else [].
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rich.markup import escape

__all__ = ["warning_lines", "pending_rows", "reason_cell", "never_admissible"]


def warning_lines(accepted: Mapping[str, Any]) -> list[str]:
    """`warning: CODE: message` for each warning of a 202 answer."""
    return [f"warning: {w['code']}: {w['message']}" for w in accepted.get("warnings") or []]


def _instances(ids: list[int]) -> str:
    shown = ",".join(map(str, ids[:8]))
    return shown + (f",… ({len(ids)})" if len(ids) > 8 else "")


def pending_rows(job: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(label, value) rows for `job get`: the queue position and each distinct reason
    (rich markup escaped: reasons may hold brackets)."""
    p = job.get("pending")
    if not p:
        return []
    rows: list[tuple[str, str]] = []
    if p.get("queue_position") is not None:
        rows.append(("queue", f"{p['queue_position']} of {p['queue_length']} in pool "
                              f"{job.get('respool', '')}"))
    codes = ", ".join(f"{c} {n}" for c, n in p.get("by_code", {}).items())
    rows.append(("waiting", f"{p.get('waiting', 0)} task(s): {codes}"))
    for r in p.get("reasons", []):
        never = " (never, as configured)" if r.get("permanent") else ""
        rows.append(("why", escape(f"{r['code']}{never} (instances "
                                   f"{_instances(r['instances'])}): {r['text']}")))
    return rows


def reason_cell(task: Mapping[str, Any]) -> str:
    """A task's reason, prefixed with its pending code when it waits."""
    p = task.get("pending")
    return escape(f"{p['code']}: {task['reason']}" if p else str(task["reason"]))


def never_admissible(job: Mapping[str, Any]) -> list[str]:
    """The permanent reasons of a job's waiting tasks ([] when none)."""
    p = job.get("pending")
    if not p or not p.get("permanent"):
        return []
    return [f"{r['code']} (instances {_instances(r['instances'])}): {r['text']}"
            for r in p.get("reasons", []) if r.get("permanent")]
