"""HostBook state as plain JSON-able data, and back (pure).

`dump(book)` gives everything the book's decisions depend on; `load(book, state)` replaces
the book's state with it, so `load(b2, dump(b1))` makes b2 behave exactly as b1 (floats
are kept as they are, so sums are bit-for-bit the same). Derived indexes (a host's used
ports and per-job counts, a job's runs on hosts) are rebuilt from the runs. `load` raises
KeyError, TypeError or ValueError on data it cannot read (any other error of reading is
raised as a ValueError), and then leaves the book as it was. Bump `VERSION` whenever the
shape changes (2: `grace_until`; 3: `maintenance`, `maint_undecided`, and a job's
`versions` and a pending placement's config version, uncommitted together; 4: a host's
`holds`, a run's `volume` flag, a job's `void`). Data without versions loads as config
version 1.
"""

from __future__ import annotations

from typing import Any

from peloton.hostmgr.domain.hosts import HostBook
from peloton.hostmgr.domain.maintenance import HostMaint, Maintenance
from peloton.hostmgr.domain.records import (
    Early,
    HostRecord,
    JobRecord,
    Pending,
    RoomHold,
    RunAlloc,
)
from peloton.model.hoststate import HostState
from peloton.model.resources import Resources
from peloton.model.spec import JobSpec

__all__ = ["VERSION", "dump", "load"]

VERSION = 4


def _res(r: Resources) -> list[float]:
    return [r.cpu, r.memory, r.disk, r.gpu]


def _res_of(v: Any) -> Resources:
    cpu, memory, disk, gpu = v
    return Resources(float(cpu), float(memory), float(disk), float(gpu))


def _run(key: tuple[str, int, int], a: RunAlloc) -> list[Any]:
    return [key[0], key[1], key[2], _res(a.resources), list(a.ports), a.at, a.volume]


def _run_of(v: Any) -> tuple[tuple[str, int, int], RunAlloc]:
    job, instance, run, res, ports, at, volume = v
    if not isinstance(volume, bool):
        raise TypeError(f"a run's volume flag must be a boolean, got {volume!r}")
    return (str(job), int(instance), int(run)), RunAlloc(
        _res_of(res), tuple(int(x) for x in ports), int(at), volume)


def _hold_of(v: Any) -> tuple[tuple[str, int], RoomHold]:
    job, instance, run, res, at = v
    return (str(job), int(instance)), RoomHold(int(run), _res_of(res), int(at))


def _host(h: HostRecord) -> dict[str, Any]:
    return {"incarnation": h.incarnation, "capacity": _res(h.capacity), "labels": h.labels,
            "log_url": h.log_url, "ports": [h.port_begin, h.port_end],
            "last_seen_ms": h.last_seen_ms, "available": h.available, "lost_at": h.lost_at,
            "allocated": _res(h.allocated), "generation": h.generation, "past": list(h.past),
            "runs": [_run(k, a) for k, a in sorted(h.runs.items())],
            "holds": [[k[0], k[1], x.run, _res(x.resources), x.at]
                      for k, x in sorted(h.holds.items())]}


def _host_of(name: str, v: dict[str, Any]) -> HostRecord:
    begin, end = v["ports"]
    host = HostRecord(
        name, str(v["incarnation"]), _res_of(v["capacity"]), dict(v["labels"]),
        str(v["log_url"]), int(begin), int(end), int(v["last_seen_ms"]),
        available=bool(v["available"]), lost_at=int(v["lost_at"]),
        allocated=_res_of(v["allocated"]), generation=int(v["generation"]),
        past=tuple(str(x) for x in v["past"]))
    for item in v["runs"]:
        key, alloc = _run_of(item)
        host.runs[key] = alloc
        host.used_ports.update(alloc.ports)
        host.job_counts[key[0]] += 1
    for item in v["holds"]:
        task, held = _hold_of(item)
        host.holds[task] = held
    return host


def _job(j: JobRecord) -> dict[str, Any]:
    return {"spec": j.spec.to_body() if j.spec is not None else None,
            "versions": [[v, s.to_body()] for v, s in sorted(j.versions.items())],
            "terminal": j.terminal, "last_at": j.last_at,
            "ended": [[i, r] for i, r in sorted(j.ended.items())],
            "decided": sorted([i, r, n] for i, (r, n) in j.decided.items()),
            "void": [[i, r] for i, r in sorted(j.void.items())]}


def _job_of(v: dict[str, Any]) -> JobRecord:
    return JobRecord(
        spec=JobSpec.from_body(v["spec"]) if v["spec"] is not None else None,
        versions=_versions_of(v.get("versions", [])),
        terminal=bool(v["terminal"]), last_at=int(v["last_at"]),
        ended={int(i): int(r) for i, r in v["ended"]},
        decided={int(i): (int(r), int(n)) for i, r, n in v["decided"]},
        void={int(i): int(r) for i, r in v["void"]})


def _versions_of(rows: Any) -> dict[int, JobSpec]:
    versions = {}
    for version, body in rows:
        if int(version) <= 1:
            raise ValueError(f"a job's later config version must be > 1, got {version}")
        versions[int(version)] = JobSpec.from_body(body)
    return versions


def _maint(m: HostMaint) -> list[Any]:
    return [m.state.value, m.deadline_ms, m.reason, m.announced, m.present,
            dict(sorted(m.labels.items())), m.decided_at]


def _maint_of(v: Any) -> HostMaint:
    state, deadline, reason, announced, present, labels, decided_at = v
    if not isinstance(labels, dict):
        raise TypeError(f"labels: a mapping expected, got {labels!r}")
    return HostMaint(HostState(state), None if deadline is None else int(deadline),
                     str(reason), bool(announced), bool(present),
                     {str(k): str(x) for k, x in labels.items()}, int(decided_at))


def _request_of(v: Any) -> dict[str, Any]:
    if not isinstance(v, dict):
        raise TypeError(f"a request body expected, got {v!r}")
    deadline = v["deadline_ms"]
    return {"host": str(v["host"]), "command": str(v["command"]),
            "deadline_ms": None if deadline is None else int(deadline),
            "requested_by": str(v["requested_by"]), "at": int(v["at"])}


def dump(book: HostBook) -> dict[str, Any]:
    return {
        "hosts": {name: _host(h) for name, h in sorted(book.hosts.items())},
        "jobs": {job_id: _job(j) for job_id, j in sorted(book.jobs.items())},
        "pending": [[k[0], k[1], k[2], p.host, p.incarnation, _res(p.resources),
                     [list(x) for x in p.ports], p.round, p.since, p.config_version]
                    for k, p in sorted(book.pending.items())],
        "early": [[host, inc, e.first_at, e.lost_at, [_run(k, a) for k, a in
                                                      sorted(e.launches.items())]]
                  for (host, inc), e in sorted(book.early.items())],
        "orphaned": [[host, inc, runs] for (host, inc), runs in sorted(book.orphaned.items())],
        "offered": dict(sorted(book.offered.items())),
        "next_prune": book.next_prune,
        "grace_until": book.grace_until,
        "maintenance": {name: _maint(m) for name, m in sorted(book.maint.hosts.items())},
        "maint_undecided": [_request_of(b) for b in book.maint.undecided],
    }


def load(book: HostBook, state: dict[str, Any]) -> None:
    try:
        _load(book, state)
    except (KeyError, TypeError, ValueError):
        raise
    except (AttributeError, IndexError, LookupError, ArithmeticError) as exc:
        # e.g. a list where a mapping belongs: still "cannot read", never a crash
        raise ValueError(f"unreadable hostmgr snapshot: {exc!r}") from exc


def _load(book: HostBook, state: dict[str, Any]) -> None:
    hosts = {str(name): _host_of(str(name), v) for name, v in state["hosts"].items()}
    jobs = {str(job_id): _job_of(v) for job_id, v in state["jobs"].items()}
    for host in hosts.values():
        for key in host.runs:
            jobs.setdefault(key[0], JobRecord()).on_host[key[1:]] = host.name
        for task in host.holds:
            job = jobs.setdefault(task[0], JobRecord())
            if task[1] in job.held:
                raise ValueError(f"two holds for task {task[0]}/{task[1]}")
            job.held[task[1]] = host.name
    pending = {}
    for row in state["pending"]:
        (job_id, instance, run, host_name, inc, res, ports, round_, since, version) = (
            [*row, 1] if len(row) == 9 else row)  # 9 fields: written before versions
        pending[(str(job_id), int(instance), int(run))] = Pending(
            str(host_name), str(inc), _res_of(res),
            tuple((str(n), int(x)) for n, x in ports), int(round_), int(since), int(version))
    early = {}
    for host_name, inc, first_at, lost_at, launches in state["early"]:
        e = Early(int(first_at), lost_at=int(lost_at))
        for item in launches:
            key, alloc = _run_of(item)
            e.launches[key] = alloc
        early[(str(host_name), str(inc))] = e
    orphaned = {(str(h), str(inc)): [str(r) for r in runs]
                for h, inc, runs in state["orphaned"]}
    offered = {str(h): int(g) for h, g in state["offered"].items()}
    next_prune, grace_until = int(state["next_prune"]), int(state["grace_until"])
    maint = Maintenance({str(h): _maint_of(v) for h, v in state["maintenance"].items()},
                        [_request_of(b) for b in state["maint_undecided"]])
    # everything read: only now replace the book's state
    book.hosts, book.jobs, book.pending, book.early = hosts, jobs, pending, early
    book.orphaned, book.offered, book.next_prune = orphaned, offered, next_prune
    book.grace_until, book.maint = grace_until, maint
    book.derived_reset()
