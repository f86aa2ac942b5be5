"""What the placement service knows between rounds, folded from facts (pure).

Contract:
- `fold` applies JobCreated (decoded once into a `JobSpec`), JobSpecChanged (a later
  config version of a job's spec), JobStateChanged (a finished job), TasksAdmitted (runs
  to place), PlacementMade and PlacementRejected (its own decisions and hostmgr's
  refusals), TaskLaunchRequested (a placement reached its host),
  TaskStateChanged (runs that ended, went back to PENDING or are on a host) and
  OfferReceived (hosts' free and slack resources). Idempotent (every record may come
  twice) and blind to the order across topics: runbook.py states how each fact about a
  run is judged, hostviews.py how offers and placements make a host's view.
- `next_round(now_ms)` runs the engine over the queued runs whose job spec is known,
  when something changed since the last round (a run queued, an offer, a hold dropped:
  a launch an offer already counts, a rejection, an ended run), and returns
  PlacementMade / PlacementFailed events (already folded). A run waiting for its
  JobCreated makes the board dirty when that JobCreated arrives, so it never waits for
  an unrelated change.
- Pins: a run admitted with a `pinned_host` (TasksAdmitted v2) is placed on that host
  only, and while it waits its PlacementFailed reason starts `waiting for host <host>
  (the run is pinned to it)` (see pins.py).
- Holds: room the host's offer holds for a stateful task between runs (OfferReceived v3
  `holds`) is given to no run but a pinned run of that task. Such a run (not a gang
  member) is placed first in the round, alone against its host's `held_view` (the hold
  added back), so its reason, per-filter counts included, is about that room; then the
  other pinned runs (daemon instances) in one pass, as they have one host each; the rest
  of the round is placed afterwards, against the views that already count them.
- Config versions (rolling updates): JobCreated is version 1 of a job's spec, each
  JobSpecChanged a later one (`versions`, every version kept while the job lives: a not
  yet updated instance may start a new run of an old version). A run is placed with the
  task spec of its own version (`config_version` of its TasksAdmitted v2; job-level
  fields, i.e. priority, gang size and strategy, stay JobCreated's), and its
  PlacementMade entry carries that version. A run whose version's spec is not known yet
  waits like a run admitted before its JobCreated, and the JobSpecChanged makes the
  board dirty. A JobSpecChanged of a job the board does not know (never seen, or gone
  after its end) is ignored: JobCreated comes first on the job's partition.
- Gangs: the gang rule is the spec's (`spec.gang_id` / `gang_members`). One case is the
  board's: a gang member hostmgr refused after its gang was placed together (a mate was
  placed, reached its host or ended) is placed alone, as a retried member is; a gang
  refused whole is placed as a gang again.
- One partition per record: a round's PlacementMade and PlacementFailed are written one
  record per partition of placement-made (`shard_of_job`: the partition a job's records
  land in), each holding only that partition's jobs, all with the round's number; so the
  job manager instance that owns a job reads its placements on its own partition (as
  the resource manager does for TasksAdmitted). Without `shard_of_job`: one record each.
- Round numbers: `max(previous round + 1, now_ms)`, and above every round seen in a fact,
  so a new leader's rounds never repeat an old leader's (hostmgr decides each
  (run, round) once and ignores a placement of a round it already decided).
- Bounded state, by event time (the board's clock is the newest `at` or `now_ms` seen):
  ended runs keep no record (one integer per instance, see runbook.py); a job's spec and
  records leave `retention_ms` after its terminal JobStateChanged (a job still alive
  keeps its spec, however long its tasks wait in resmgr); a run whose job spec never
  arrived within `retention_ms` is a stale fact about a job that already left and is
  dropped (jobmgr writes JobCreated before any admission of the job, so a live run's
  spec arrives within consumer lag, far less than the window). Late duplicates cannot
  re-place an ended run: while its job lives the per-instance ended run number rejects
  them, and after the job left there is no spec to place it with.
- Shares (several engines, placement/shard.py): with `share` set the board places only
  its share's runs and folds job-events only of its share's jobs (its shell reads only its
  partition; another job's fact is skipped). Another engine's runs it knows from
  placement-made, placement-rejected and task-launch-requested alone (foreign.py): they
  hold room in the views until the host manager's answer, an offer that counts the
  launch, or the expiry of their short-lived record, whichever comes first.
- `snapshot()` / `restore()`: plain JSON-able state; caches and the engine's host table
  are rebuilt lazily. A restored board decides exactly as the original.
"""

from __future__ import annotations

from collections.abc import Callable
from itertools import repeat
from operator import itemgetter
from typing import Any

from peloton.model.event import Event
from peloton.model.jobshards import by_job_shard
from peloton.model.resources import Resources
from peloton.model.spec import JobSpec
from peloton.model.taskstate import (
    LEAVES_PLACEMENT,
    QUEUED,
    STAGE,
    TERMINAL_JOB,
    JobState,
    TaskState,
    task_state,
)
from peloton.placement.domain.engine import place
from peloton.placement.domain.foreign import ForeignRuns
from peloton.placement.domain.hostviews import Hold, HostViews, Offer
from peloton.placement.domain.pins import pinned_reason
from peloton.placement.domain.requests import Request, Requests
from peloton.placement.domain.runbook import RunBook, RunKey, Where
from peloton.placement.domain.snapshotdata import as_dict, as_list, as_row
from peloton.placement.domain.types import Placement

__all__ = ["PlacementBoard", "RunKey", "DEFAULT_RETENTION_MS"]

DEFAULT_RETENTION_MS = 10 * 60_000
_MAX_ROUND = 20_000
_ON_HOST_STAGE = STAGE[TaskState.LAUNCHING]
_JOB = itemgetter(0)


class PlacementBoard:
    def __init__(self, retention_ms: int = DEFAULT_RETENTION_MS) -> None:
        self.retention_ms = retention_ms
        self.jobs: dict[str, JobSpec] = {}  # JobCreated's spec (config version 1)
        self.versions: dict[str, dict[int, JobSpec]] = {}  # job -> version (>= 2) -> spec
        self.finished: dict[str, int] = {}  # job -> event time of its terminal state
        self.book = RunBook()
        self.foreign = ForeignRuns()  # other engines' runs (only with `share`)
        self.hosts = HostViews()
        self.reasons: dict[RunKey, str] = {}
        self.round = 0
        self.clock = 0
        self.orphans_dropped = 0
        self._next_sweep = 0
        self._dirty = False
        self._arrivals_seen = 0  # the run book's arrivals at the last round
        self._waiting: set[str] = set()  # jobs with queued runs but no spec yet
        self._rank: dict[str, int] = {}  # job -> -priority
        self._requests = Requests()
        self._resources: dict[tuple[tuple[str, float], ...], Resources] = {}
        #: the jobs (by id) whose runs this engine places (None: every job). One of several
        #: engines (placement/shard.py) reads only its share's job-events; the others'
        #: runs it knows from host-side facts (`foreign`), so its host views count them.
        self.share: Callable[[str], bool] | None = None
        #: the partition of placement-made a job's records land in (None: one record per
        #: round for every job; see the module doc)
        self.shard_of_job: Callable[[str], int] | None = None

    # ---- read-only views (tests, benches) --------------------------------------------
    @property
    def queue(self) -> dict[RunKey, int]:
        """Runs waiting for a placement -> arrival order."""
        return self.book.queue

    @property
    def inflight(self) -> dict[RunKey, Hold]:
        """Runs holding resources on a host that its latest offer does not count."""
        return self.hosts.holds

    @property
    def offers(self) -> dict[str, Offer]:
        return self.hosts.offers

    # ---- fold -----------------------------------------------------------------------
    def fold(self, etype: str, body: dict[str, Any]) -> None:
        at = body.get("at")
        if isinstance(at, int) and at > self.clock:
            self.clock = at
        handler = _FOLDS.get(etype)
        if handler is not None and not (etype in _JOB_FACTS and self._foreign(body["job_id"])):
            handler(self, body)
            if self.book.superseded:
                for key in self.book.superseded:
                    self._forget_run(key)
                self.book.superseded.clear()
            if self.hosts.freed:  # a host may have room for a queued run now
                self.hosts.freed = False
                self._dirty = True

    def _foreign(self, job_id: str) -> bool:
        """Whether the job is another engine's (its runs are known from host-side facts
        only: foreign.py, which judges them where the run book judges the engine's own;
        what a judged fact does to the views is the same, and `_revocable` is False for
        them, as no spec of theirs is folded)."""
        return self.share is not None and not self.share(job_id)

    def _job_created(self, body: dict[str, Any]) -> None:
        job_id = body["job_id"]
        if job_id in self.jobs:
            return
        spec = self.jobs[job_id] = JobSpec.from_body(body)
        self._rank[job_id] = -spec.priority
        if job_id in self._waiting:
            self._waiting.discard(job_id)
            self._dirty = True

    def _job_spec_changed(self, body: dict[str, Any]) -> None:
        job_id, version = body["job_id"], int(body["version"])
        known = self.versions.setdefault(job_id, {}) if job_id in self.jobs else None
        if known is None or version <= 1 or version in known:
            return
        known[version] = JobSpec.from_body(body)
        if job_id in self._waiting:
            self._waiting.discard(job_id)
            self._dirty = True

    def _spec_of(self, job_id: str, version: int | None) -> JobSpec | None:
        """The spec of one config version of a job (None: not known yet)."""
        if version == 1:
            return self.jobs.get(job_id)
        if version is None:
            return None
        return self.versions.get(job_id, {}).get(version)

    def _job_state_changed(self, body: dict[str, Any]) -> None:
        if JobState(body["state"]) in TERMINAL_JOB:
            self.finished[body["job_id"]] = max(body["at"], self.finished.get(body["job_id"], 0))
        else:  # running again (a restart): it keeps its spec
            self.finished.pop(body["job_id"], None)

    def _tasks_admitted(self, body: dict[str, Any]) -> None:
        at = body["at"]
        for t in body["tasks"]:
            pinned = t.get("pinned_host") or None  # absent in v1 records
            if self.book.admit((t["job_id"], t["instance"], t["run"]), at, self.clock,
                               pinned, int(t.get("config_version", 1))):
                self._dirty = True

    def _placement_made(self, body: dict[str, Any]) -> None:
        round_ = body["round"]
        self.round = max(self.round, round_)
        for p in body["placements"]:
            key = (p["job_id"], p["instance"], p["run"])
            if (self.foreign.placed(key, round_, body["at"], self.clock)
                    if self._foreign(key[0]) else
                    self.book.placed(key, round_, self.clock, int(p.get("config_version", 1)))):
                host = p["host"]
                self.hosts.hold(key, Hold(host, self._resources_of(p["resources"]),
                                          tuple(p["ports"].values()), self._revocable(key),
                                          self.hosts.generation(host)))
                self.reasons.pop(key, None)

    def _placement_rejected(self, body: dict[str, Any]) -> None:
        for r in body["rejections"]:
            key = (r["job_id"], r["instance"], r["run"])
            self.round = max(self.round, r["round"])
            if (self.foreign.rejected(key, r["round"], body["at"], self.clock)
                    if self._foreign(key[0]) else
                    self.book.rejected(key, r["round"], self.clock)):
                self.hosts.release(key)
            if key in self.book.queue:
                self._dirty = True

    def _launch_requested(self, body: dict[str, Any]) -> None:
        host, at = body["host"], body["at"]
        for launch in body["launches"]:
            key = (launch["job_id"], launch["instance"], launch["run"])
            round_ = launch.get("round", -1)
            self.round = max(self.round, round_)
            placed = self.hosts.holds.get(key)
            if (self.foreign.launched(key, at, self.clock) if self._foreign(key[0]) else
                    self.book.launched(key, round_, self.clock,
                                       int(launch.get("config_version", 1)))):
                base = placed.base if placed is not None and placed.host == host else 0
                self.hosts.hold(key, Hold(host, self._resources_of(launch["resources"]),
                                          tuple(launch["ports"].values()),
                                          self._revocable(key), base, at))
                self.reasons.pop(key, None)
                self._requests.forget_run(key[0], key[1])

    def _task_state_changed(self, body: dict[str, Any]) -> None:
        job_id, at = body["job_id"], body["at"]
        for ch in body["changes"]:
            key = (job_id, ch["instance"], ch["run"])
            state = task_state(ch["state"])
            if state in LEAVES_PLACEMENT:
                self.book.end(key)
                self._forget_run(key)
            elif state is TaskState.PENDING and ch["previous_state"] in QUEUED:
                self.book.give_back(key, at, self.clock)  # placement timeout
            elif STAGE[state] >= _ON_HOST_STAGE:
                self.book.on_host(key, self.clock)
            else:  # nothing to place until it is admitted, but its earlier runs ended
                self.book.seen(key)

    def _offer_received(self, body: dict[str, Any]) -> None:
        at = body["at"]
        for offer in body["offers"]:
            self.hosts.offer(offer, at)
        self._dirty = True

    def _forget_run(self, key: RunKey) -> None:
        self.hosts.release(key)
        self.reasons.pop(key, None)
        self._requests.forget_run(key[0], key[1])

    def _revocable(self, key: RunKey) -> bool:
        """Whether the run uses revocable resources (by its version's spec; JobCreated's
        while that version is not known)."""
        run = self.book.runs.get(key)
        version = 1 if run is None or run.config_version is None else run.config_version
        spec = self._spec_of(key[0], version)
        if spec is None:
            spec, version = self.jobs.get(key[0]), 1
        return spec is not None and self._requests.revocable(spec, key[1], version)

    def _resources_of(self, values: dict[str, float]) -> Resources:
        """`Resources.from_mapping`, memoised: a few shapes recur in every event."""
        key = tuple(values.items())
        res = self._resources.get(key)
        if res is None:
            if len(self._resources) > 10_000:
                self._resources.clear()
            res = self._resources[key] = Resources.from_mapping(values)
        return res

    # ---- decide ---------------------------------------------------------------------
    def tick_wanted(self) -> bool:
        """Runs joined the queue since the last round: placing them should not wait for
        the next timer tick (the shell ticks soon; `peloton.bus.driver`)."""
        return self.book.arrivals != self._arrivals_seen

    def next_round(self, now_ms: int) -> list[Event]:
        self.clock = max(self.clock, now_ms)
        self._arrivals_seen = self.book.arrivals
        for key in self.foreign.expire(self.clock):
            self.hosts.release(key)
        if self.clock >= self._next_sweep:
            self._sweep()
        if self.hosts.freed:  # runs of jobs that left, or expired foreign runs, held room
            self.hosts.freed = False
            self._dirty = True
        if not self._dirty or not self.book.queue:
            return []
        self._dirty = False
        known: list[tuple[RunKey, JobSpec]] = []
        runs = self.book.runs
        for key in self._in_order():
            spec = self._spec_of(key[0], runs[key].config_version)
            if spec is None:  # its JobCreated, JobSpecChanged or admission not read yet
                self._waiting.add(key[0])
            elif self.share is not None and not self.share(key[0]):
                continue  # another engine's share
            elif len(known) < _MAX_ROUND:
                known.append((key, spec))
        requests = [self._requests.get(spec, k[1], k[2], self._gang_gone(k),
                                       runs[k].pinned_host, runs[k].config_version or 1)
                    for k, spec in known]
        by_task = {r.request.task_id: (k, r)
                   for r, (k, _) in zip(requests, known, strict=True)}
        held, unplaced = self._place_held(requests, known)
        self._place_pinned(requests, known, held, unplaced)
        result = place(self.hosts.table(),
                       [r.request for r in requests if r.request.task_id not in unplaced
                        and r.request.task_id not in held])
        unplaced.update(result.unplaced)
        self.round = max(self.round + 1, now_ms)
        events: list[Event] = []
        placements = []
        for p in [*held.values(), *result.placements]:
            key, req = by_task[p.task_id]
            placements.append({"job_id": key[0], "instance": key[1], "run": key[2],
                               "host": p.host,
                               "incarnation": self.hosts.offers[p.host].body["incarnation"],
                               "resources": req.spec_resources, "ports": dict(p.ports),
                               "config_version": req.version})
        for part in by_job_shard(placements, self.shard_of_job):
            ev = Event("PlacementMade", part[0]["job_id"],
                       {"at": now_ms, "round": self.round, "placements": part})
            self.fold(ev.type, ev.body)
            events.append(ev)
        failed = []
        for tid, reason in sorted(unplaced.items()):
            key, req = by_task[tid]
            if req.pinned_host is not None:
                reason = pinned_reason(req.pinned_host, self.hosts.offers, reason)
            if self.reasons.get(key) != reason:
                self.reasons[key] = reason
                failed.append({"job_id": key[0], "instance": key[1], "run": key[2],
                               "reason": reason})
        events.extend(Event("PlacementFailed", part[0]["job_id"],
                            {"at": now_ms, "round": self.round, "tasks": part})
                      for part in by_job_shard(failed, self.shard_of_job))
        return events

    def _place_held(self, requests: list[Request], known: list[tuple[RunKey, JobSpec]],
                    ) -> tuple[dict[str, Placement], dict[str, str]]:
        """Place the pinned runs whose host holds room for their task, each alone on its
        host's `held_view`, in round order (see the module doc). Returns the placements
        and the reasons of those not placed, by task id; each placement already holds its
        room in the views, so the rest of the round cannot take it."""
        placed: dict[str, Placement] = {}
        unplaced: dict[str, str] = {}
        for req, (key, _) in zip(requests, known, strict=True):
            host = req.pinned_host
            if host is None or req.request.gang_size > 1:
                continue
            view = self.hosts.held_view(host, key[:2])
            if view is None:
                continue
            result = place([view], [req.request])
            if not result.placements:
                unplaced.update(result.unplaced)
                continue
            (p,) = result.placements
            placed[p.task_id] = p
            self.hosts.hold(key, Hold(host, self._resources_of(req.spec_resources),
                                      tuple(p.ports.values()), self._revocable(key),
                                      self.hosts.generation(host)))
        return placed, unplaced

    def _place_pinned(self, requests: list[Request], known: list[tuple[RunKey, JobSpec]],
                      placed: dict[str, Placement], unplaced: dict[str, str]) -> None:
        """Then the other pinned runs (daemon instances, stateful runs without a hold),
        in one pass before the rest of the round: such a run has one host it may use, so
        it goes before work that could go anywhere takes that room. Adds to `placed` and
        `unplaced`; each placement holds its room in the views, as `_place_held`'s do."""
        chosen = [(req, key) for req, (key, _) in zip(requests, known, strict=True)
                  if req.pinned_host is not None and req.request.gang_size <= 1
                  and req.request.task_id not in placed
                  and req.request.task_id not in unplaced]
        if not chosen:
            return
        result = place(self.hosts.table(), [req.request for req, _ in chosen])
        unplaced.update(result.unplaced)
        keys = {req.request.task_id: (req, key) for req, key in chosen}
        for p in result.placements:
            req, key = keys[p.task_id]
            placed[p.task_id] = p
            self.hosts.hold(key, Hold(p.host, self._resources_of(req.spec_resources),
                                      tuple(p.ports.values()), self._revocable(key),
                                      self.hosts.generation(p.host)))

    def _gang_gone(self, key: RunKey) -> bool:
        """True when the run is a gang member (spec.gang_id) whose gang already went
        ahead: a mate was placed, reached its host or ended. The gang was placed together
        and hostmgr refused this member alone, so it is placed alone (as a retried member
        is); waiting for mates that will never queue again would wait forever."""
        spec = self.jobs[key[0]]
        if spec.gang_id(key[1], key[2]) is None:
            return False
        for instance in range(spec.gang_size):
            mate = (key[0], instance, key[2])
            if instance == key[1]:
                continue
            if self.book.is_ended(mate):
                return True
            run = self.book.runs.get(mate)
            if run is not None and run.where is not Where.WAITING:
                return True
        return False

    def _in_order(self) -> list[RunKey]:
        """Queued runs, higher job priority first, then by arrival. The queue's dict order
        is its arrival order (runs join it with a rising counter), so a stable sort by
        priority alone suffices, and none at all when every job has the same one."""
        keys = list(self.book.queue)
        ranks = list(map(self._rank.get, map(_JOB, keys), repeat(0)))
        if ranks and min(ranks) != max(ranks):
            keys = [keys[i] for i in sorted(range(len(keys)), key=ranks.__getitem__)]
        return keys

    # ---- bounded state --------------------------------------------------------------
    def _sweep(self) -> None:
        """Finished jobs leave `retention_ms` after they finished; runs of jobs whose spec
        never arrived within `retention_ms` are dropped (see the module doc)."""
        self._next_sweep = self.clock + max(1, self.retention_ms // 10)
        horizon = self.clock - self.retention_ms
        gone = {job for job, at in self.finished.items() if at <= horizon}
        by_job: dict[str, list[RunKey]] = {}
        orphans: list[RunKey] = []
        for key, run in self.book.runs.items():
            if key[0] in gone:
                by_job.setdefault(key[0], []).append(key)
            elif key[0] not in self.jobs and run.since <= horizon:
                orphans.append(key)
        for job in gone:
            keys = by_job.get(job, [])
            for key in keys:
                self._forget_run(key)
            self.book.forget_job(job, keys)
            self._requests.forget_job(job)
            self.jobs.pop(job, None)
            self.versions.pop(job, None)
            self._rank.pop(job, None)
            self.finished.pop(job, None)
            self._waiting.discard(job)
        if orphans:
            self.orphans_dropped += len(orphans)
            for key in orphans:
                self._forget_run(key)
            self.book.forget_runs(orphans)
            self._waiting.difference_update(
                {k[0] for k in orphans} - {k[0] for k in self.book.runs})

    # ---- snapshot -------------------------------------------------------------------
    def snapshot(self) -> dict[str, Any]:
        return {
            "retention_ms": self.retention_ms, "round": self.round, "clock": self.clock,
            "next_sweep": self._next_sweep, "dirty": self._dirty,
            "orphans_dropped": self.orphans_dropped,
            "jobs": [spec.to_body() for spec in self.jobs.values()],
            "versions": {job: [[v, spec.to_body()] for v, spec in sorted(per.items())]
                         for job, per in self.versions.items() if per},
            "finished": dict(self.finished), "waiting": sorted(self._waiting),
            "reasons": [[*key, reason] for key, reason in self.reasons.items()],
            "book": self.book.to_data(), "hosts": self.hosts.to_data(),
            "foreign": self.foreign.to_data(),
        }

    @classmethod
    def from_snapshot(cls, state: dict[str, Any]) -> PlacementBoard:
        """A board with the snapshot's state; KeyError/TypeError/ValueError if unreadable
        (every part is checked here, so a board that restores also runs)."""
        state = as_dict(state, "snapshot")
        board = cls(int(state["retention_ms"]))
        board.round, board.clock = int(state["round"]), int(state["clock"])
        board._next_sweep, board._dirty = int(state["next_sweep"]), bool(state["dirty"])
        board.orphans_dropped = int(state["orphans_dropped"])
        for body in as_list(state["jobs"], "jobs"):
            try:
                spec = JobSpec.from_body(as_dict(body, "job"))
            except AttributeError as exc:  # a part of the body has the wrong shape
                raise TypeError(f"placement snapshot: unreadable job: {exc}") from exc
            board.jobs[spec.job_id] = spec
            board._rank[spec.job_id] = -spec.priority
            board._requests.check(spec)
        for job, per in as_dict(state.get("versions", {}), "versions").items():
            if job not in board.jobs:
                raise ValueError(f"placement snapshot: versions of an unknown job {job}")
            for row in as_list(per, "a job's versions"):
                version, body = as_row(row, 2, "a version")
                version = int(version)
                if version <= 1:
                    raise ValueError(f"placement snapshot: job {job} version {version}")
                try:
                    spec = JobSpec.from_body(as_dict(body, "job"))
                except AttributeError as exc:
                    raise TypeError(f"placement snapshot: unreadable job: {exc}") from exc
                board.versions.setdefault(str(job), {})[version] = spec
                board._requests.check(spec, version)
        board.finished = {str(j): int(at) for j, at in as_dict(state["finished"],
                                                                "finished").items()}
        board._waiting = {str(j) for j in as_list(state["waiting"], "waiting")}
        board.reasons = {(str(j), int(i), int(r)): str(reason)
                         for j, i, r, reason in as_list(state["reasons"], "reasons")}
        board.book = RunBook.from_data(as_dict(state["book"], "book"))
        board.hosts = HostViews.from_data(as_dict(state["hosts"], "hosts"))
        board.foreign = ForeignRuns.from_data(state.get("foreign", []))  # older: none
        if not board.hosts.holds.keys() <= board.book.runs.keys() | board.foreign.runs.keys():
            raise ValueError("placement snapshot: a hold of a run the book does not have")
        board.hosts.table()
        return board


#: the facts of job-events, each about one job (another engine's are not folded)
_JOB_FACTS = frozenset({"JobCreated", "JobSpecChanged", "JobStateChanged", "TaskStateChanged"})

_FOLDS = {
    "JobCreated": PlacementBoard._job_created,
    "JobSpecChanged": PlacementBoard._job_spec_changed,
    "JobStateChanged": PlacementBoard._job_state_changed,
    "TasksAdmitted": PlacementBoard._tasks_admitted,
    "PlacementMade": PlacementBoard._placement_made,
    "PlacementRejected": PlacementBoard._placement_rejected,
    "TaskLaunchRequested": PlacementBoard._launch_requested,
    "TaskStateChanged": PlacementBoard._task_state_changed,
    "OfferReceived": PlacementBoard._offer_received,
}
