"""HostBook state as plain JSON-able data, and back (pure).

`dump(book)` gives everything the book's decisions depend on; `load(book, state)` replaces
the book's state with it, so `load(b2, dump(b1))` makes b2 behave exactly as b1 (floats
are kept as they are, so sums are bit-for-bit the same). Derived indexes (a host's used
ports and per-job counts, a job's runs on hosts) are rebuilt from the runs. `load` raises
KeyError, TypeError or ValueError on data it cannot read (any other error of reading is
raised as a ValueError), and then leaves the book as it was. Bump `VERSION` whenever the
shape changes (2: `grace_until`).
"""

from __future__ import annotations

from typing import Any

from peloton.hostmgr.domain.hosts import HostBook
from peloton.hostmgr.domain.records import Early, HostRecord, JobRecord, Pending, RunAlloc
from peloton.model.resources import Resources
from peloton.model.spec import JobSpec

__all__ = ["VERSION", "dump", "load"]

VERSION = 2


def _res(r: Resources) -> list[float]:
    return [r.cpu, r.memory, r.disk, r.gpu]


def _res_of(v: Any) -> Resources:
    cpu, memory, disk, gpu = v
    return Resources(float(cpu), float(memory), float(disk), float(gpu))


def _run(key: tuple[str, int, int], a: RunAlloc) -> list[Any]:
    return [key[0], key[1], key[2], _res(a.resources), list(a.ports), a.at]


def _run_of(v: Any) -> tuple[tuple[str, int, int], RunAlloc]:
    job, instance, run, res, ports, at = v
    return (str(job), int(instance), int(run)), RunAlloc(_res_of(res),
                                                         tuple(int(x) for x in ports), int(at))


def _host(h: HostRecord) -> dict[str, Any]:
    return {"incarnation": h.incarnation, "capacity": _res(h.capacity), "labels": h.labels,
            "log_url": h.log_url, "ports": [h.port_begin, h.port_end],
            "last_seen_ms": h.last_seen_ms, "available": h.available, "lost_at": h.lost_at,
            "allocated": _res(h.allocated), "generation": h.generation, "past": list(h.past),
            "runs": [_run(k, a) for k, a in sorted(h.runs.items())]}


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
    return host


def _job(j: JobRecord) -> dict[str, Any]:
    return {"spec": j.spec.to_body() if j.spec is not None else None,
            "terminal": j.terminal, "last_at": j.last_at,
            "ended": [[i, r] for i, r in sorted(j.ended.items())],
            "decided": sorted([i, r, n] for i, (r, n) in j.decided.items())}


def _job_of(v: dict[str, Any]) -> JobRecord:
    return JobRecord(
        spec=JobSpec.from_body(v["spec"]) if v["spec"] is not None else None,
        terminal=bool(v["terminal"]), last_at=int(v["last_at"]),
        ended={int(i): int(r) for i, r in v["ended"]},
        decided={int(i): (int(r), int(n)) for i, r, n in v["decided"]})


def dump(book: HostBook) -> dict[str, Any]:
    return {
        "hosts": {name: _host(h) for name, h in sorted(book.hosts.items())},
        "jobs": {job_id: _job(j) for job_id, j in sorted(book.jobs.items())},
        "pending": [[k[0], k[1], k[2], p.host, p.incarnation, _res(p.resources),
                     [list(x) for x in p.ports], p.round, p.since]
                    for k, p in sorted(book.pending.items())],
        "early": [[host, inc, e.first_at, e.lost_at, [_run(k, a) for k, a in
                                                      sorted(e.launches.items())]]
                  for (host, inc), e in sorted(book.early.items())],
        "orphaned": [[host, inc, runs] for (host, inc), runs in sorted(book.orphaned.items())],
        "offered": dict(sorted(book.offered.items())),
        "next_prune": book.next_prune,
        "grace_until": book.grace_until,
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
    pending = {}
    for job_id, instance, run, host_name, inc, res, ports, round_, since in state["pending"]:
        pending[(str(job_id), int(instance), int(run))] = Pending(
            str(host_name), str(inc), _res_of(res),
            tuple((str(n), int(x)) for n, x in ports), int(round_), int(since))
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
    # everything read: only now replace the book's state
    book.hosts, book.jobs, book.pending, book.early = hosts, jobs, pending, early
    book.orphaned, book.offered, book.next_prune = orphaned, offered, next_prune
    book.grace_until = grace_until
