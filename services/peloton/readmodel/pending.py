"""Why a task waits, as a structured reason (pure: no I/O, no clock).

The read model stores what the services said in words: the resource manager's
AdmissionDeferred reason (shown as `waiting for admission to pool P: ...`), the placement
engine's PlacementFailed reason (`waiting for placement: ...`) and the job manager's
transition reasons (see store.shown_reason). `classify` turns the text a waiting task
shows into `{"code", "detail", "text", "permanent"}` without changing any event schema:

- POOL_OVER_ENTITLEMENT: `pool over [slack ]entitlement: cpu 40/38, ...`; per binding
  kind `needed` (the pool's allocation plus the gang), `entitlement`, and, when the pool's
  newest entitlement row is given, its `allocation` and `demand`; permanent when the gang
  alone is above the pool's limit.
- NON_PREEMPTIBLE_BEYOND_RESERVATION: `non-preemptible work beyond reservation: ...`;
  permanent when the pool reserves 0 of a kind the work needs (no allocation can ever
  make room: only a pool update or a preemptible job can).
  The resource manager republishes a task's reason only when what it says changes (which
  checks fail, for which kinds; resmgr/domain/admission.py `reason_key`), not at every
  admission that moves the figures: `needed` and `entitlement` are those of when the task
  began waiting for that reason; `allocation` and `demand` (from the pool's row) are
  current.
- CONTROLLER_LIMIT, HELD_BEHIND_GANG (a long-blocked gang reserves a budget: the gang
  named is the one that reserved it when this task was held back), UNKNOWN_POOL
  (permanent), GANG_INCOMPLETE (`waiting for N more gang members`, or the engine's
  `gang G incomplete: a of b tasks in this round`).
- NO_HOST_FITS: the engine's `no host with ... (N hosts; filter: left; ...)` with the host
  count left after each filter (`parse_no_host`), `only k of n tasks of this shape fit`,
  a gang that does not fit; permanent when no host has the capacity (the `capacity`
  filter leaves 0 hosts of a non-empty cluster), and given for a task at any stage
  when the caller passes its resources and the hosts' capacities and none can hold it.
- WAITING_FOR_HOST_MAINTENANCE / WAITING_FOR_PINNED_HOST: a run pinned to one host
  (placement/domain/pins.py wording); maintenance when that host is not UP.
- PLACEMENT_BACKOFF: the job manager's placement timeout put the run back to PENDING
  with a backoff (`placement timeout: ... admitted again after Ns`).
- QUEUED / ADMITTED: pending or ready with no note from the resource manager or the
  placement engine yet (or `admitted to pool P`, waiting for the job manager).
- UNKNOWN: any other text (the raw text is in `text` and `detail.raw`).

Several admission checks may fail at once ("; "-joined): all are in `detail.checks`; the
code is the first permanent one, else the resource manager's first.

`queue_position` orders a pool's waiting jobs as the resource manager's admission scan
orders gangs (resmgr/domain/admission.py `gang_order`: priority high first, then FIFO
by JobCreated's time, then id).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from peloton.readmodel.store import WAITING_STATES

__all__ = [
    "CODES", "WAITING_STATES", "PERMANENT_CODES", "classify", "fits_no_host", "parse_no_host",
    "parse_shortfall", "queue_position", "summarize",
]

CODES = (
    "POOL_OVER_ENTITLEMENT", "NON_PREEMPTIBLE_BEYOND_RESERVATION", "CONTROLLER_LIMIT",
    "HELD_BEHIND_GANG", "UNKNOWN_POOL", "GANG_INCOMPLETE", "NO_HOST_FITS",
    "WAITING_FOR_HOST_MAINTENANCE", "WAITING_FOR_PINNED_HOST", "PLACEMENT_BACKOFF",
    "QUEUED", "ADMITTED", "UNKNOWN",
)
#: codes that can be permanent (see `classify`'s `permanent`)
PERMANENT_CODES = frozenset({"NON_PREEMPTIBLE_BEYOND_RESERVATION", "UNKNOWN_POOL",
                             "NO_HOST_FITS"})
_NOT_UP = frozenset({"DRAINING", "DRAINED", "DOWN"})
_EPS = 1e-6

_ADMISSION = re.compile(r"^waiting for admission to pool (?P<pool>\S+): (?P<rest>.*)$", re.S)
_PLACEMENT = "waiting for placement: "
_ADMITTED = re.compile(r"^admitted to pool (?P<pool>\S+)$")
_SHORT_ITEM = re.compile(r"^(?P<kind>[a-z_]+) (?P<need>-?[0-9.e+-]+)/(?P<have>-?[0-9.e+-]+)$")
_CHECKS = (
    ("pool over slack entitlement: ", "POOL_OVER_ENTITLEMENT", True),
    ("pool over entitlement: ", "POOL_OVER_ENTITLEMENT", False),
    ("non-preemptible work beyond reservation: ", "NON_PREEMPTIBLE_BEYOND_RESERVATION", False),
    ("controller tasks beyond controller limit: ", "CONTROLLER_LIMIT", False),
)
_MEMBERS = re.compile(r"^waiting for (?P<n>\d+) more gang members$")
_HELD = re.compile(r"^held back: gang (?P<gang>.+) has waited too long and reserves the "
                   r"(?P<budget>\w+) budget$")
_UNKNOWN_POOL = re.compile(r"^unknown pool (?P<pool>.+)$")
_NO_HOST = re.compile(r"^no host with (?P<req>.*?) \((?P<total>\d+) hosts; (?P<detail>.*)\)$",
                      re.S)
_FILTER_ITEM = re.compile(r"(?:^|; )(?P<name>.+?): (?P<left>\d+)(?=; |$)", re.S)
_SHAPE = re.compile(r"^only (?P<placed>\d+) of (?P<size>\d+) tasks of this shape fit: the "
                    r"(?P<hosts>\d+) host\(s\) with (?P<req>.*) have no more room$", re.S)
_GANG_SHORT = re.compile(r"^gang (?P<gang>\S+) incomplete: (?P<have>\d+) of (?P<size>\d+) "
                         r"tasks in this round$")
_GANG_FIT = re.compile(r"^gang (?P<gang>\S+) needs (?P<size>\d+) tasks, (?P<placed>\d+) fit "
                       r"\(on (?P<hosts>\d+) host\(s\)\)(?:: (?P<why>.*))?$", re.S)
_PINNED = re.compile(r"^waiting for host (?P<host>\S+) \(the run is pinned to it\): "
                     r"(?P<why>.*)$", re.S)
_BACKOFF = re.compile(r"^placement timeout: .*\(attempt (?P<attempt>\d+)\).*?"
                      r"(?:admitted again after (?P<after>[0-9.e+]+)s|retried now)", re.S)


def _num(text: str) -> float:
    return float(text)


def parse_shortfall(text: str) -> dict[str, tuple[float, float]] | None:
    """`cpu 40/38, memory 300/256` (resmgr's format_shortfall) -> {kind: (need, have)};
    None when the text is not in that form."""
    out: dict[str, tuple[float, float]] = {}
    for part in text.split(", "):
        m = _SHORT_ITEM.match(part.strip())
        if m is None:
            return None
        try:
            out[m["kind"]] = (_num(m["need"]), _num(m["have"]))
        except ValueError:
            return None
    return out or None


def parse_no_host(text: str) -> dict[str, Any] | None:
    """The placement engine's `no host with REQ (N hosts; F1: n1; F2: n2)` ->
    {"requirement", "hosts", "filters": [{"filter", "hosts_left"}], "binding_filter"}
    (the first filter that left no host); None for any other text."""
    m = _NO_HOST.match(text.strip())
    if m is None:
        return None
    detail = m["detail"]
    filters = [{"filter": f["name"], "hosts_left": int(f["left"])}
               for f in _FILTER_ITEM.finditer(detail)]
    rebuilt = "; ".join(f"{f['filter']}: {f['hosts_left']}" for f in filters)
    if not filters or rebuilt != detail:
        return None
    binding = next((f["filter"] for f in filters if f["hosts_left"] == 0), None)
    return {"requirement": m["req"], "hosts": int(m["total"]), "filters": filters,
            "binding_filter": binding}


def _resources(short: Mapping[str, tuple[float, float]], have_name: str,
               pool_row: Mapping[str, Any] | None) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    for kind, (need, have) in short.items():
        entry = {"needed": need, have_name: have}
        if pool_row is not None:
            entry["allocation"] = float((pool_row.get("allocation") or {}).get(kind, 0.0))
            entry["demand"] = float((pool_row.get("demand") or {}).get(kind, 0.0))
            if have_name == "entitlement":
                entry["reservation"] = float((pool_row.get("reservation") or {}).get(kind, 0.0))
        out[kind] = entry
    return out


def _admission_check(part: str, pool: str, pool_row: Mapping[str, Any] | None
                     ) -> tuple[str, dict[str, Any], bool]:
    """(code, detail, permanent) of one `; `-separated admission failure."""
    for prefix, code, slack in _CHECKS:
        if part.startswith(prefix):
            short = parse_shortfall(part[len(prefix):])
            if short is None:
                break
            have = {"POOL_OVER_ENTITLEMENT": "entitlement",
                    "NON_PREEMPTIBLE_BEYOND_RESERVATION": "reservation",
                    "CONTROLLER_LIMIT": "controller_limit"}[code]
            detail: dict[str, Any] = {"pool": pool,
                                      "binding_resource": next(iter(short)),
                                      "resources": _resources(short, have, pool_row)}
            if code == "POOL_OVER_ENTITLEMENT":
                detail["slack"] = slack
            permanent = (code == "NON_PREEMPTIBLE_BEYOND_RESERVATION"
                         and any(h <= 0 < n for n, h in short.values()))
            if code == "POOL_OVER_ENTITLEMENT" and not slack and pool_row is not None:
                permanent = _beyond_limit(short, pool_row)
            return code, detail, permanent
    if (m := _MEMBERS.match(part)) is not None:
        return "GANG_INCOMPLETE", {"pool": pool, "missing_members": int(m["n"])}, False
    if (m := _HELD.match(part)) is not None:
        return "HELD_BEHIND_GANG", {"pool": pool, "gang": m["gang"],
                                    "budget": m["budget"]}, False
    if (m := _UNKNOWN_POOL.match(part)) is not None:
        return "UNKNOWN_POOL", {"pool": m["pool"]}, True
    return "UNKNOWN", {"pool": pool, "raw": part}, False


def _beyond_limit(short: Mapping[str, tuple[float, float]], pool_row: Mapping[str, Any]
                  ) -> bool:
    """Whether the gang alone is above the pool's limit (so above any entitlement): the
    text's need is the pool's non-revocable allocation plus the gang, and the row's
    allocation is at least that allocation, so need - allocation <= the gang. A limit
    of 0 is not trusted (a kind a config leaves out)."""
    limit = pool_row.get("limit") or {}
    alloc = pool_row.get("allocation") or {}
    return any(float(limit.get(k, 0.0)) > 0
               and need - float(alloc.get(k, 0.0)) > float(limit.get(k, 0.0)) + _EPS
               for k, (need, _) in short.items())


def fits_no_host(needs: Mapping[str, float], capacities: Sequence[Mapping[str, float]]
                 ) -> bool:
    """True when hosts are known and none has the capacity for `needs` in every kind."""
    return bool(capacities) and not any(
        all(float(v) <= float(c.get(k, 0.0)) + _EPS for k, v in needs.items())
        for c in capacities)


def _admission(pool: str, rest: str, pool_row: Mapping[str, Any] | None
               ) -> tuple[str, dict[str, Any], bool]:
    checks = [_admission_check(p, pool, pool_row) for p in rest.split("; ")]
    if any(c[0] == "UNKNOWN" for c in checks):  # a "; " inside a text: keep it whole
        checks = [_admission_check(rest, pool, pool_row)]
    code, detail, permanent = next((c for c in checks if c[2]), checks[0])
    if len(checks) > 1:
        detail = {**detail, "checks": [{"code": c, **d} for c, d, _ in checks]}
    return code, detail, permanent


def _placement(rest: str, hosts: Mapping[str, Mapping[str, Any]] | None
               ) -> tuple[str, dict[str, Any], bool]:
    rest = rest.strip()
    if (m := _PINNED.match(rest)) is not None:
        host, why = m["host"], m["why"]
        state = (hosts or {}).get(host, {}).get("maintenance_state")
        detail: dict[str, Any] = {"host": host, "why": why, "maintenance_state": state}
        counts = parse_no_host(why)
        if counts is not None:
            detail["placement"] = counts
        code = "WAITING_FOR_HOST_MAINTENANCE" if state in _NOT_UP else "WAITING_FOR_PINNED_HOST"
        return code, detail, False
    if (counts := parse_no_host(rest)) is not None:
        permanent = counts["hosts"] > 0 and any(
            f["filter"].startswith("capacity ") and f["hosts_left"] == 0
            for f in counts["filters"])
        return "NO_HOST_FITS", counts, permanent
    if rest == "no hosts in this round":
        return "NO_HOST_FITS", {"hosts": 0, "filters": [], "binding_filter": None}, False
    if (m := _SHAPE.match(rest)) is not None:
        return "NO_HOST_FITS", {"requirement": m["req"], "placed": int(m["placed"]),
                                "tasks": int(m["size"]), "hosts": int(m["hosts"])}, False
    if (m := _GANG_SHORT.match(rest)) is not None:
        return "GANG_INCOMPLETE", {"gang": m["gang"], "tasks_in_round": int(m["have"]),
                                   "gang_size": int(m["size"])}, False
    if (m := _GANG_FIT.match(rest)) is not None:
        detail = {"gang": m["gang"], "gang_size": int(m["size"]), "placed": int(m["placed"]),
                  "on_hosts": int(m["hosts"])}
        inner = parse_no_host(m["why"] or "")
        if inner is not None:
            detail["placement"] = inner
        return "NO_HOST_FITS", detail, False
    return "UNKNOWN", {"raw": rest}, False


def classify(task: Mapping[str, Any], *, pool: Mapping[str, Any] | None = None,
             hosts: Mapping[str, Mapping[str, Any]] | None = None,
             needs: Mapping[str, float] | None = None,
             capacities: Sequence[Mapping[str, float]] | None = None,
             ) -> dict[str, Any] | None:
    """The structured reason of a task (API shape: `state` and the shown `reason`), or
    None when it does not wait (not PENDING, READY or PLACING). `pool`: the newest
    entitlement row of the job's pool (allocation, demand, reservation, limit by kind);
    `hosts`: host name -> {"maintenance_state"} for pinned runs. With the task's
    resources (`needs`) and the live hosts' `capacities`, a task no host can hold is
    NO_HOST_FITS (permanent) whatever stage it waits in (the resource manager never
    places, so it says only that the pool is over its entitlement); what the services
    said is kept in `detail.services_say`."""
    state = str(task.get("state", ""))
    if state not in WAITING_STATES:
        return None
    text = str(task.get("reason") or "")
    permanent = False
    if (m := _ADMISSION.match(text)) is not None:
        code, detail, permanent = _admission(m["pool"], m["rest"], pool)
    elif text.startswith(_PLACEMENT):
        code, detail, permanent = _placement(text[len(_PLACEMENT):], hosts)
    elif (m := _ADMITTED.match(text)) is not None:
        code, detail = "ADMITTED", {"pool": m["pool"]}
    elif state == "PENDING" and (m := _BACKOFF.match(text)) is not None:
        code = "PLACEMENT_BACKOFF"
        detail = {"attempt": int(m["attempt"]),
                  "backoff_s": float(m["after"]) if m["after"] else 0.0}
    elif state == "PENDING":
        code, detail = "QUEUED", {"stage": "admission", "last_transition": text}
    else:
        code, detail = "QUEUED", {"stage": "placement", "last_transition": text}
    if (code != "NO_HOST_FITS" and needs is not None and capacities
            and fits_no_host(needs, capacities)):
        largest = {k: max(float(c.get(k, 0.0)) for c in capacities) for k in needs}
        detail = {"needs": dict(needs), "hosts": len(capacities), "largest_host": largest,
                  "services_say": {"code": code, "detail": detail}}
        code, permanent = "NO_HOST_FITS", True
    return {"code": code, "detail": detail, "text": text, "permanent": permanent}


def summarize(tasks: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """A job's waiting tasks by code: {"waiting", "by_code", "reasons"} where reasons
    holds each distinct (code, text) once with its instances (at most 10, most common
    first) and `permanent` says whether one of them can never be admitted as configured."""
    groups: dict[tuple[str, str], dict[str, Any]] = {}
    by_code: dict[str, int] = {}
    waiting = 0
    for t in tasks:
        reason = t.get("pending")
        if not reason:
            continue
        waiting += 1
        by_code[reason["code"]] = by_code.get(reason["code"], 0) + 1
        g = groups.setdefault((reason["code"], reason["text"]),
                              {**reason, "instances": []})
        g["instances"].append(int(t["instance"]))
    reasons = sorted(groups.values(), key=lambda g: (-len(g["instances"]), g["code"],
                                                     g["text"]))[:10]
    return {"waiting": waiting, "by_code": dict(sorted(by_code.items())),
            "reasons": reasons, "permanent": any(g["permanent"] for g in groups.values())}


def queue_position(job_id: str, jobs: Sequence[Mapping[str, Any]]
                   ) -> tuple[int | None, int]:
    """(1-based position of `job_id`, queue length) among a pool's jobs with pending
    tasks ({"job_id", "priority", "created_at"}), in the admission scan's order: higher
    priority first, then earlier JobCreated, then job id. None: the job is not queued."""
    order = sorted(jobs, key=lambda j: (-int(j["priority"]), int(j["created_at"] or 0),
                                        str(j["job_id"])))
    ids = [str(j["job_id"]) for j in order]
    return (ids.index(job_id) + 1 if job_id in ids else None), len(ids)
