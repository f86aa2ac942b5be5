"""Submission warnings: a job that can never be admitted or placed as configured.

POST /v1/jobs answers 202 with `warnings` (a list of {code, message}) when, against what
the read model knows right now:
- NON_PREEMPTIBLE_BEYOND_RESERVATION: the job is non-preemptible and one of its gangs (a
  task, or the gang of `minimumRunningInstances` tasks) needs more of some kind than its
  pool reserves: the resource manager admits non-preemptible work only within the
  reservation, so it would wait forever;
- NO_HOST_FITS: a task needs more than any host's capacity (hosts not LOST) in one go.

The job is still accepted (a warning, not a 400), because these are facts about the
cluster, not the job file: the pool's reservation may be raised or a bigger host may
join after the submission, and the job manager, the only judge of a job, accepts it.
Nothing is checked while the read model knows no host (or no pool config/cycle for the
reservation), so a fresh cluster never warns wrongly. `peloton job create` prints the
warnings; `--wait` stops when the tasks then show a permanent reason (readmodel/pending).
`warnings_for` is pure; `submission_warnings` reads the store (call it in a thread).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from peloton.jobmgr.domain.validation import validate_submission
from peloton.model.resources import KINDS, Resources
from peloton.model.spec import JobSpec
from peloton.readmodel.store import Store

__all__ = ["warnings_for", "submission_warnings"]


def _text(r: Resources, kinds: Sequence[str] | None = None) -> str:
    return ", ".join(f"{k} {r.get(k):g}" for k in (kinds or KINDS) if kinds or r.get(k))


def _instances(ids: Sequence[int]) -> str:
    shown = ", ".join(map(str, ids[:10]))
    return shown + (f" and {len(ids) - 10} more" if len(ids) > 10 else "")


def warnings_for(body: Mapping[str, Any], reservation: Mapping[str, float] | None,
                 host_capacities: Sequence[Mapping[str, float]]) -> list[dict[str, str]]:
    """The warnings of a JobSubmitted body (already validated) given its pool's
    reservation by kind (None: unknown) and the capacities of the live hosts."""
    created, problems = validate_submission(dict(body), None, None,
                                            int(body.get("submitted_at", 0)))
    if created is None or problems:
        return []
    spec = JobSpec.from_body(created)
    n = spec.instance_count
    # the distinct task shapes, each with the instances that have it
    shapes: dict[Resources, list[int]] = {}
    overridden = sorted(i for i in spec.instance_tasks if i < n)
    for i in overridden:
        shapes.setdefault(spec.resources(i), []).append(i)
    default_ids = [i for i in range(min(n, 10 + len(overridden) + 1))
                   if i not in spec.instance_tasks]
    if n > len(overridden):
        shapes.setdefault(spec.default_task.resources, []).extend(default_ids)
    out: list[dict[str, str]] = []
    if reservation is not None and not spec.preemptible:
        reserved = Resources.from_mapping({k: float(reservation.get(k, 0.0)) for k in KINDS})
        gang = spec.gang_members(0) if n and spec.gang_id(0) is not None else 1
        units = [(sum((spec.resources(i) for i in range(gang)), Resources.zero()),
                  f"the gang of {gang} tasks")] if gang > 1 else []
        units += [(r, f"instance(s) {_instances(ids)}") for r, ids in shapes.items()]
        for need, who in units:
            over = need.exceeding(reserved)
            if over:
                out.append({"code": "NON_PREEMPTIBLE_BEYOND_RESERVATION", "message": (
                    f"{who} of this non-preemptible job need {_text(need, over)} but pool "
                    f"{spec.respool} reserves {_text(reserved, over)}: the resource manager "
                    "admits non-preemptible work only within the reservation, so it would "
                    "wait forever (make the job preemptible or raise the reservation)")})
                break
    caps = [Resources.from_mapping({k: float(c.get(k, 0.0)) for k in KINDS})
            for c in host_capacities]
    if caps:
        largest = Resources.zero()
        for c in caps:
            largest = largest.max(c)
        for need, ids in shapes.items():
            if not any(need.fits_in(c) for c in caps):
                out.append({"code": "NO_HOST_FITS", "message": (
                    f"instance(s) {_instances(ids)} need {_text(need)}, more than any of the "
                    f"{len(caps)} host(s) has (largest per kind: {_text(largest)}): no host "
                    "can ever run them as configured")})
    return out


def _reservation(store: Store, pool: str) -> dict[str, float] | None:
    config = store.pool_configs(pool).get(pool)
    if config is not None:
        return {str(r["kind"]): float(r["reservation"])
                for r in config["config"].get("resources", [])}
    row = next((p for p in store.pools() if p["pool"] == pool), None)
    return None if row is None else {k: float(v) for k, v in row["reservation"].items()}


def submission_warnings(store: Store, body: Mapping[str, Any]) -> list[dict[str, str]]:
    """`warnings_for` with the pool's reservation and the live hosts of the read model."""
    hosts = [h["capacity"] for h in store.hosts() if h["state"] != "LOST"]
    return warnings_for(body, _reservation(store, str(body["respool"])), hosts)
