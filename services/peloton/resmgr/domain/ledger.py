"""What the resource manager knows about jobs, runs and capacity, folded from facts (pure).

Contract of `fold(type, body)`: it applies JobCreated, JobSpecChanged, JobStateChanged,
TaskStateChanged (job-events), TasksAdmitted and AdmissionDeferred (tasks-admitted), TasksPreempted
(respool-events) and OfferReceived/HostLost (offer-received). All or nothing: the body is
read whole first, so a fact that cannot be read raises KeyError/TypeError/ValueError and
changes nothing. It is idempotent and does not care about the order *across* topics
(Kafka orders a partition, not the cluster):
- A fact about an older run than the task's current one is stale and ignored; a fact
  about a newer run proves the older runs ended, so the task moves to the newer run.
- TasksAdmitted or AdmissionDeferred of a run prove the run was PENDING: folded before
  the TaskStateChanged that made it PENDING, they are applied as that stage.
- A run *holds* allocation while its state is in `HOLDING`, or while it is PENDING with an
  admission the job manager has not used up. The job manager may move a run that stayed
  READY past a placement timeout back to PENDING (a *requeue*, `not_before_ms` on the
  change); the resource manager then admits the same run again. So a run counts the
  admissions folded (by their `at`, so a redelivery is not counted twice) and the requeues
  (each uses up one admission): it is admitted while admissions > requeues. A
  TasksAdmitted folded after the requeue that used it up is therefore not counted again,
  whatever the order of the two topics. (A second decision about the same PENDING stage,
  e.g. re-decided after its fact was late, counts as an admission the job manager never
  uses; the resource manager stops trusting an admission that was not used within its
  `unused_admission_ms`, see cycle.py.)
- TasksPreempted marks the run (`preempted_at`, the latest) until the run ends or is
  requeued; AdmissionDeferred records the latest reason said about the run. A preemption
  or reason decided before the run's last requeue (`at` not after the requeue's `at`) is
  about the stage the requeue ended: folded after the requeue it is stale, folded before
  it the requeue clears it; one decided after the requeue survives it in either order.
- Facts about a job whose JobCreated has not been folded yet are held (`orphans`) and
  applied when it arrives; held facts expire after `retention_ms` of event time.
- Demand is every PENDING run without an admission; allocation every run that holds.
- A run may be *pinned* to one host (`pinned_host`, TaskStateChanged v3: set on the PENDING
  change that starts the run, in force for the whole run). The entry keeps the first pin
  said about its run (a PENDING change or a TasksAdmitted v2 of the run, whichever is
  folded first; later facts of the run carry none or the same); a newer run starts
  unpinned. The pin changes nothing here: the cycle carries it into TasksAdmitted.
- Config versions (rolling updates): JobCreated is version 1 of a job's spec, each
  JobSpecChanged names a later one; the job keeps every version (`JobInfo.updates`; a
  JobSpecChanged of a job not folded yet is held like any fact of it, one of a forgotten
  job is ignored, a repeated one changes nothing). Every run runs one version
  (`config_version`, TaskStateChanged v3, said on every change of the run, and TasksAdmitted
  v2): the entry keeps the first version said about its run, and its resources and its
  revocable and controller flags come from that version's task spec. Job-level fields
  (pool, priority, preemptible, FIFO order, gang size) stay those of JobCreated. A run no
  fact has said the version of yet (made by an AdmissionDeferred or TasksPreempted read
  first) counts with version 1's task spec and is not admitted until its version is said
  (the cycle skips it). A run whose version was said but not folded yet (JobSpecChanged
  and TaskStateChanged share the job-events partition, so only out-of-order data does
  this) is not held: it counts with the newest version folded, and is counted again with
  its own when that JobSpecChanged arrives. No version is ever dropped while the job
  lives: a not yet updated instance may start a new run of an old version.

Bounded state (`retention_ms`, event time: the largest `at` folded): a run leaves the
ledger when it ends (a terminal TaskStateChanged, or a newer run); per job only the last
ended run number of each instance is kept (to recognise stale facts). A job leaves the
ledger when its JobStateChanged reaches a terminal job state; its id is kept as a
tombstone for `retention_ms`, so late or redelivered facts of the job (TasksAdmitted read
after the end, a repeated JobCreated) do not resurrect it. A fact of a forgotten job that
arrives more than `retention_ms` after its end is held as an orphan and expires after
`retention_ms` again; it cannot resurrect the job unless its JobCreated is redelivered too.
So memory is O(live jobs and their instances + jobs ended within the window).

Indexes maintained on fold: `pending` (demand) and `holding` (allocation), by task key;
`active()` iterates them, never every task ever seen; `unused` (admitted, not READY yet)
and `preempted` (runs with a `preempted_at`) are the runs whose standing the resource
manager may see differently from the ledger (admissions it stops trusting, provisional
decisions, runs being taken back). `touched`: the runs of `watched` (the resource
manager's provisional admissions, provisionaltally.py) filed in another usage class since
it last looked (the ledger only adds to it; the watcher empties it).

Usage totals maintained on fold (`sums`), so a tick costs O(pools + changed runs), not
O(active runs): per class (PENDING = in `pending`, HELD = in `holding` but not `unused`,
ADMITTED = in `unused`: the resource manager counts them as held while it trusts their
admission) and per `Bucket` (the job's pool as named in its spec, revocable,
preemptible, controller), the number of runs and their resources in integer micro-units
(each run's resources rounded to 1e-6 once, `micro`). Integer sums are exact, so any
order of folds gives the same totals (and the same as a recomputation from scratch);
`filed` says in which class each run is counted. They are rebuilt by `restore` (not part
of the snapshot), as is `admission_ages` (the runs of `unused` by their latest
admission, so the resource manager finds the admissions it stopped trusting without
visiting the others: admissionages.py).

Orders come from event times, not from the order records were folded in (a job's FIFO
`seq` is JobCreated's `at`; `started_seq` is the `at` of the change that started the run).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from peloton.model.quickinit import quick_init
from peloton.model.resources import Resources
from peloton.model.spec import JobSpec
from peloton.model.taskstate import (
    HOLDING,
    ON_HOST,
    TERMINAL,
    TERMINAL_JOB,
    TaskState,
    task_state,
)
from peloton.resmgr.domain.admissionages import AdmissionAges

__all__ = ["Ledger", "TaskEntry", "JobInfo", "DEFAULT_RETENTION_MS", "TaskKey", "Bucket",
           "Cell", "PENDING", "HELD", "ADMITTED", "MICRO", "micro", "bucket", "count"]

S = TaskState
TaskKey = tuple[str, int]
#: States whose first change marks when a run started (for "most recently started").
_STARTED = ON_HOST - {S.KILLING, S.PREEMPTING}
_UNSTARTED = frozenset({S.INITIALIZED, S.PENDING})
DEFAULT_RETENTION_MS = 600_000
_SWEEP_MS = 1_000
_RUN_FACTS = ("TasksAdmitted", "TasksPreempted", "AdmissionDeferred")
#: fields of a task row in a snapshot (12 before runs kept their pin, 13 before they kept
#: their config version)
_TASK_FIELDS = 14
#: Usage classes of `Ledger.sums` (see the module doc).
PENDING, HELD, ADMITTED = 0, 1, 2
#: Integer units per resource unit in the usage totals.
MICRO = 1_000_000
#: (pool as named in the job's spec, revocable, preemptible, controller)
Bucket = tuple[str, bool, bool, bool]
#: [runs, cpu, memory, disk, gpu], resources in micro-units
Cell = list[int]


@lru_cache(maxsize=4096)
def micro(r: Resources) -> tuple[int, int, int, int]:
    """A run's resources in integer micro-units (rounded once; memoized: most runs of a
    cluster ask for one of a few sizes)."""
    return (round(r.cpu * MICRO), round(r.memory * MICRO), round(r.disk * MICRO),
            round(r.gpu * MICRO))


@dataclass(frozen=True, slots=True)
class JobInfo:
    """A job as the resource manager needs it: its spec, decoded once from JobCreated
    (version 1), and the later versions of its spec (JobSpecChanged, by version)."""

    spec: JobSpec
    updates: dict[int, JobSpec] = field(default_factory=dict)  # version (>= 2) -> spec

    def spec_of(self, version: int | None) -> JobSpec:
        """The spec of a config version: version 1 (and None, not said) is JobCreated's;
        a version not folded yet falls back to the newest folded (see the module doc)."""
        if version is None or version == 1:
            return self.spec
        found = self.updates.get(version)
        if found is not None:
            return found
        return self.updates[max(self.updates)] if self.updates else self.spec

    @property
    def job_id(self) -> str:
        return self.spec.job_id

    @property
    def pool(self) -> str:
        return self.spec.respool

    @property
    def priority(self) -> int:
        return self.spec.priority

    @property
    def preemptible(self) -> bool:
        return self.spec.preemptible

    @property
    def victim(self) -> bool:
        """Whether preemption may choose this job's runs: a preemptible job, but a
        STATEFUL one only when its SLA names how many instances may be down
        (`sla.maximumUnavailableInstances`): its data stays on its host, so it is not
        moved for another pool's sake unless its owner said how much it can take.
        Admission still counts it as preemptible work."""
        return self.spec.preemptible and not (
            self.spec.type == "STATEFUL" and self.spec.get("max_unavailable") is None)

    @property
    def revocable(self) -> bool:
        return self.spec.revocable

    @property
    def seq(self) -> int:
        """FIFO order among jobs of one priority: JobCreated's event time."""
        return self.spec.at

    def resources(self, instance: int, version: int | None = 1) -> Resources:
        return self.spec_of(version).task(instance).resources

    def task_revocable(self, instance: int, version: int | None = 1) -> bool:
        """Revocable job, or a revocable task of a job (TaskSpec `revocable`)."""
        spec = self.spec_of(version)
        return spec.revocable or spec.task(instance).revocable

    def task_controller(self, instance: int, version: int | None = 1) -> bool:
        return self.spec_of(version).task(instance).controller


@dataclass(slots=True)
class TaskEntry:
    """The current run of one task (ended runs are not kept)."""

    job: JobInfo
    instance: int
    resources: Resources
    run: int = 1
    state: TaskState = S.INITIALIZED
    admissions: set[int] = field(default_factory=set)  # `at` of each TasksAdmitted
    requeues: int = 0  # admissions used up by requeues (see the module doc)
    started_seq: int = 0
    preempted_at: int | None = None
    requeued_at: int = -1  # `at` of the last requeue (older run facts are stale)
    not_before: int | None = None  # the job manager's backoff (not_before_ms)
    reason: str | None = None  # the latest AdmissionDeferred reason of this run's stage
    reason_at: int = -1  # its `at`
    revocable: bool = False
    controller: bool = False
    pinned_host: str | None = None  # the only host the run may be placed on
    config_version: int | None = None  # the job config version it runs (None: not said)

    @property
    def task_id(self) -> str:
        return f"{self.job.job_id}-{self.instance}"

    @property
    def key(self) -> TaskKey:
        return (self.job.job_id, self.instance)

    @property
    def admitted(self) -> bool:
        """Admitted and not yet READY (an admission the job manager has not used up)."""
        return self.state in _UNSTARTED and len(self.admissions) > self.requeues

    @property
    def holding(self) -> bool:
        return self.state in HOLDING or self.admitted

    @property
    def pending(self) -> bool:
        return self.state == S.PENDING and not self.admitted


def bucket(entry: TaskEntry) -> Bucket:
    return (entry.job.pool, entry.revocable, entry.job.preemptible, entry.controller)


def count(cells: dict[Any, Cell], key: Any, vec: tuple[int, int, int, int], n: int) -> None:
    """Add `n` runs of resources `vec` (micro-units) to `cells[key]` (a negative `n` takes
    them out; a cell left with no run is deleted)."""
    cell = cells.get(key)
    if cell is None:
        cell = cells[key] = [0, 0, 0, 0, 0]
    cell[0] += n
    if cell[0] == 0:
        del cells[key]
        return
    for i in range(4):
        cell[i + 1] += n * vec[i]


class Ledger:
    def __init__(self, retention_ms: int = DEFAULT_RETENTION_MS) -> None:
        self.retention_ms = retention_ms
        self.jobs: dict[str, JobInfo] = {}
        self.tasks: dict[TaskKey, TaskEntry] = {}  # live runs only
        self.ended: dict[str, dict[int, int]] = {}  # job -> instance -> last ended run
        self.live: dict[str, set[int]] = {}  # job -> instances with a live run
        self.pending: dict[TaskKey, TaskEntry] = {}
        self.holding: dict[TaskKey, TaskEntry] = {}
        self.unused: dict[TaskKey, TaskEntry] = {}  # admitted, not READY yet (in holding)
        # `unused` by latest admission
        self.admission_ages: AdmissionAges[TaskKey] = AdmissionAges()
        self.preempted: dict[TaskKey, TaskEntry] = {}  # live runs with a preempted_at
        self.sums: tuple[dict[Bucket, Cell], ...] = ({}, {}, {})  # by class
        self.filed: dict[TaskKey, int] = {}  # the class each run is counted in
        # runs a caller wants to hear of, and those of them filed in another class since
        # it last looked (the resource manager's provisional admissions: provisionaltally.py)
        self.watched: dict[TaskKey, int] = {}
        self.touched: set[TaskKey] = set()
        self.forgotten: dict[str, int] = {}  # finished job -> when (event time)
        self.orphans: dict[str, tuple[int, list[tuple[str, dict[str, Any]]]]] = {}
        self.hosts: dict[str, tuple[bool, Resources]] = {}
        self.version = 0  # bumps on every change that may alter demand or capacity
        self.arrivals = 0  # bumps whenever a run begins to wait (enters `pending`)
        self.hosts_version = 0  # bumps on every change of capacity
        self._capacity: tuple[int, Resources] | None = None  # (hosts_version, capacity)
        # host -> [incarnation offered last, newest incarnation lost]: a HostLost read
        # after an offer of the host's next incarnation, or an offer of a lost
        # incarnation made before its HostLost and read after it (two partitions),
        # changes nothing. An offer of the lost incarnation made after the HostLost
        # (`lost_at`, event time) is the host answering again: the host manager offers a
        # host it declared lost when its heartbeats resume (a stall, not a crash).
        self.incarnations: dict[str, list[str]] = {}
        self.lost_at: dict[str, int] = {}
        self.clock = 0  # the largest event time folded
        self.swept_at = 0

    # ---- fold -----------------------------------------------------------------------
    def fold(self, etype: str, body: dict[str, Any]) -> None:
        """Apply one fact. All or nothing: the body is read whole first, so a fact that
        cannot be read raises KeyError/TypeError/ValueError and changes nothing."""
        if etype == "JobCreated":
            spec = JobSpec.from_body(body)
            self._tick_clock(spec.at)
            self._job_created(spec, body)
        elif etype == "JobSpecChanged":
            version, spec = int(body["version"]), JobSpec.from_body(body)
            self._tick_clock(spec.at)
            job = self._job_or_hold(spec.job_id, etype, body)
            if job is not None and version > 1 and version not in job.updates:
                job.updates[version] = spec
                self._respec(job)
        elif etype == "JobStateChanged":
            job_id, at = str(body["job_id"]), int(body["at"])
            terminal = str(body["state"]) in TERMINAL_JOB  # other states do not matter
            self._tick_clock(at)
            if terminal:
                self._forget(job_id, at)
        elif etype == "TaskStateChanged":
            job_id, at = str(body["job_id"]), int(body["at"])
            changes = [_Change.read(ch) for ch in body["changes"]]
            self._tick_clock(at)
            job = self._job_or_hold(job_id, etype, body)
            if job is not None:
                for ch in changes:
                    self._change(job, ch, at)
        elif etype in _RUN_FACTS:
            at = int(body["at"])
            facts = [_RunFact.read(etype, t) for t in body["tasks"]]
            self._tick_clock(at)
            for fact, t in zip(facts, body["tasks"], strict=True):
                job = self._job_or_hold(fact.job_id, etype, {**body, "tasks": [t]})
                if job is not None:
                    self._run_fact(etype, job, fact, at)
        elif etype == "OfferReceived":
            at = int(body["at"])
            offers = [(str(o["host"]), str(o.get("incarnation", "")),
                       (bool(o["available"]), Resources.from_mapping(o["capacity"])))
                      for o in body["offers"]]
            self._tick_clock(at)
            for host, incarnation, entry in offers:
                known = self.incarnations.setdefault(host, ["", ""])
                if (incarnation and incarnation == known[1]
                        and at <= self.lost_at.get(host, 0)):
                    continue  # an offer of an incarnation already lost, made before
                known[0] = incarnation
                if self.hosts.get(host) != entry:
                    self.hosts[host] = entry
                    self.version += 1
                    self.hosts_version += 1
        elif etype == "HostLost":
            host, at = str(body["host"]), int(body["at"])
            self._tick_clock(at)
            known = self.incarnations.setdefault(host, ["", ""])
            lost = str(body.get("incarnation", ""))
            known[1] = lost
            self.lost_at[host] = max(at, self.lost_at.get(host, 0))
            old = self.hosts.get(host)
            if known[0] and lost and known[0] != lost:
                pass  # the host already offers its next incarnation
            elif old is not None and old[0]:
                self.hosts[host] = (False, old[1])
                self.version += 1
                self.hosts_version += 1

    def _tick_clock(self, at: int) -> None:
        if at > self.clock:
            self.clock = at
            if at - self.swept_at >= _SWEEP_MS:
                self._sweep()

    def _job_or_hold(self, job_id: str, etype: str, body: dict[str, Any]) -> JobInfo | None:
        """The job, or None: the fact is stale (job forgotten) or held until JobCreated."""
        job = self.jobs.get(job_id)
        if job is None and job_id not in self.forgotten:
            first, held = self.orphans.setdefault(job_id, (self.clock, []))
            held.append((etype, body))
        return job

    def _job_created(self, spec: JobSpec, body: dict[str, Any]) -> None:
        job_id = spec.job_id
        if job_id in self.jobs or job_id in self.forgotten:
            return
        self.jobs[job_id] = JobInfo(spec)
        self.ended[job_id] = {}
        self.live[job_id] = set()
        _, held = self.orphans.pop(job_id, (0, []))
        for etype, fact in held:
            self.fold(etype, fact)

    def _forget(self, job_id: str, at: int) -> None:
        self.orphans.pop(job_id, None)
        if job_id in self.forgotten:
            return
        self.forgotten[job_id] = at
        self.jobs.pop(job_id, None)
        self.ended.pop(job_id, None)
        for instance in self.live.pop(job_id, set()):
            self._drop(self.tasks.pop((job_id, instance)))

    def _respec(self, job: JobInfo) -> None:
        """A version of the job's spec arrived: runs counted with a fallback spec are
        counted with their own now."""
        for instance in sorted(self.live[job.job_id]):
            self._resolve(self.tasks[(job.job_id, instance)])

    def _resolve(self, entry: TaskEntry) -> None:
        """Take the run's resources and flags from its version's task spec."""
        job, i, v = entry.job, entry.instance, entry.config_version
        now = (job.resources(i, v), job.task_revocable(i, v), job.task_controller(i, v))
        if now == (entry.resources, entry.revocable, entry.controller):
            return
        self._file(entry, None)  # counted again by `_index`, with the new figures
        entry.resources, entry.revocable, entry.controller = now
        self.version += 1
        self._index(entry)

    def _say_version(self, entry: TaskEntry, version: int | None) -> None:
        """A fact of the run said its config version: the first one said is kept."""
        if entry.config_version is None and version is not None:
            entry.config_version = version
            self.version += 1
            self._resolve(entry)

    def _entry(self, job: JobInfo, instance: int, run: int) -> TaskEntry | None:
        """The entry of this run (moving the task to it if newer), None when stale."""
        ended = self.ended[job.job_id]
        if run <= ended.get(instance, 0):
            return None
        key = (job.job_id, instance)
        entry = self.tasks.get(key)
        if entry is not None and run < entry.run:
            return None
        if entry is None or run > entry.run:
            if entry is not None:  # a newer run proves the older one ended
                self._drop(entry)
                ended[instance] = run - 1
            entry = TaskEntry(job, instance, job.resources(instance, None), run,
                              revocable=job.task_revocable(instance, None),
                              controller=job.task_controller(instance, None))
            self.tasks[key] = entry
            self.live[job.job_id].add(instance)
        return entry

    def _change(self, job: JobInfo, ch: _Change, at: int) -> None:
        state = ch.state
        entry = self._entry(job, ch.instance, ch.run)
        if entry is None:
            return
        if state not in TERMINAL:
            self._say_version(entry, ch.config_version)
        if state in TERMINAL:
            self.tasks.pop(entry.key)
            self.live[job.job_id].discard(entry.instance)
            self._drop(entry)
            self.ended[job.job_id][entry.instance] = entry.run
            self.version += 1
            return
        if state in _STARTED and not entry.started_seq:
            entry.started_seq = at  # no index, sum or version counts it
        if state in HOLDING and entry.state in HOLDING and entry.not_before is None:
            # a held stage to another (5 of a run's 7 changes): held before and after,
            # never admitted-unused (HOLDING and _UNSTARTED are apart), so every index
            # and sum `_index` keeps already says so; only the state moves
            if state is not entry.state:
                entry.state = state
                self.version += 1
            return
        old = (entry.state, entry.not_before, entry.holding, entry.pending,
               entry.preempted_at)
        if state == S.PENDING:
            if entry.state != S.PENDING and ch.previous in HOLDING:
                # a requeue uses up one admission (the one that made the run READY); a
                # preemption or reason decided before it was about the stage that ended
                entry.requeues += 1
                entry.requeued_at = max(entry.requeued_at, at)
                if entry.preempted_at is not None and entry.preempted_at <= at:
                    entry.preempted_at = None
                if entry.reason_at <= at:
                    entry.reason, entry.reason_at = None, -1
            entry.not_before = ch.not_before
            if entry.pinned_host is None:
                entry.pinned_host = ch.pinned_host
        else:
            entry.not_before = None
        entry.state = state
        if (entry.state, entry.not_before, entry.holding, entry.pending,
                entry.preempted_at) != old:
            self.version += 1
        self._index(entry)

    def _run_fact(self, etype: str, job: JobInfo, t: _RunFact, at: int) -> None:
        entry = self._entry(job, t.instance, t.run)
        if entry is None:
            return
        if entry.state == S.INITIALIZED:  # the fact proves the run was PENDING
            entry.state = S.PENDING
            self.version += 1
        if etype == "TasksAdmitted":
            self._say_version(entry, t.config_version)
            if entry.pinned_host is None:
                entry.pinned_host = t.pinned_host
            if at not in entry.admissions:
                entry.admissions.add(at)
                self.version += 1
        elif at <= entry.requeued_at:
            pass  # decided about the stage a requeue ended: stale
        elif etype == "TasksPreempted":  # the latest, so a stale one is recognised
            if entry.preempted_at is None or at > entry.preempted_at:
                entry.preempted_at = at
                self.version += 1
        elif at >= entry.reason_at:  # AdmissionDeferred: the latest reason said, so it
            entry.reason, entry.reason_at = t.reason, at  # is not said again
        self._index(entry)

    def _index(self, entry: TaskEntry) -> None:
        key = entry.key
        if entry.pending:
            if key not in self.pending:
                self.arrivals += 1
            self.pending[key] = entry
        else:
            self.pending.pop(key, None)
        if entry.holding:
            self.holding[key] = entry
        else:
            self.holding.pop(key, None)
        if entry.admitted:
            self.unused[key] = entry
            self.admission_ages.note(key, max(entry.admissions))
        else:
            self.unused.pop(key, None)
            self.admission_ages.note(key, None)
        if entry.preempted_at is not None:
            self.preempted[key] = entry
        else:
            self.preempted.pop(key, None)
        cls = (PENDING if key in self.pending else ADMITTED if key in self.unused
               else HELD if key in self.holding else None)
        self._file(entry, cls)

    def _file(self, entry: TaskEntry, cls: int | None) -> None:
        """Count the run in usage class `cls` (None: in none), moving it if need be."""
        key = entry.key
        old = self.filed.get(key)
        if old == cls:
            return
        if key in self.watched:
            self.touched.add(key)
        vec = micro(entry.resources)
        b = bucket(entry)
        if old is not None:
            del self.filed[key]
            count(self.sums[old], b, vec, -1)
        if cls is not None:
            self.filed[key] = cls
            count(self.sums[cls], b, vec, 1)

    def lapsed(self, cutoff: int) -> list[TaskEntry]:
        """The runs of `unused` whose latest admission is at or before `cutoff` (event
        time), in key order: O(those), not O(unused)."""
        return [self.unused[key] for key in self.admission_ages.lapsed(cutoff)]

    def _drop(self, entry: TaskEntry) -> None:
        self.pending.pop(entry.key, None)
        self.holding.pop(entry.key, None)
        self.unused.pop(entry.key, None)
        self.admission_ages.note(entry.key, None)
        self.preempted.pop(entry.key, None)
        self._file(entry, None)
        self.version += 1

    def _sweep(self) -> None:
        """Expire tombstones and held facts older than the retention window."""
        self.swept_at = self.clock
        horizon = self.clock - self.retention_ms
        for job_id, at in list(self.forgotten.items()):
            if at >= horizon:
                break  # roughly in time order: the rest goes at a later sweep
            del self.forgotten[job_id]
        for job_id, (first, _) in list(self.orphans.items()):
            if first < horizon:
                del self.orphans[job_id]

    # ---- queries --------------------------------------------------------------------
    def capacity(self) -> Resources:
        """The available hosts' capacity in all (summed once per `hosts_version`: every
        change of `hosts` bumps it; 10,000 hosts took a sixth of a busy tick)."""
        known = self._capacity
        if known is not None and known[0] == self.hosts_version:
            return known[1]
        total = Resources()
        for available, cap in self.hosts.values():
            if available:
                total = total + cap
        self._capacity = (self.hosts_version, total)
        return total

    def active(self) -> Iterator[TaskEntry]:
        """Runs that are pending or hold allocation, in a stable (task key) order."""
        for key in sorted(self.pending.keys() | self.holding.keys()):
            yield self.pending.get(key) or self.holding[key]

    def entry(self, job_id: str, instance: int) -> TaskEntry | None:
        return self.tasks.get((job_id, instance))

    def size(self) -> dict[str, int]:
        """How much the ledger holds (for the bounded-state tests and metrics)."""
        return {"jobs": len(self.jobs), "tasks": len(self.tasks),
                "ended": sum(len(e) for e in self.ended.values()),
                "forgotten": len(self.forgotten),
                "orphans": sum(len(h) for _, h in self.orphans.values()),
                "hosts": len(self.hosts)}

    # ---- snapshot -------------------------------------------------------------------
    def snapshot(self) -> dict[str, Any]:
        """The ledger as plain JSON-able data (see `restore`)."""
        return {
            "retention_ms": self.retention_ms,
            "jobs": [self.jobs[j].spec.to_body() for j in sorted(self.jobs)],
            "job_versions": {j: [[v, s.to_body()] for v, s in sorted(job.updates.items())]
                             for j, job in sorted(self.jobs.items()) if job.updates},
            "task_fields": _TASK_FIELDS,
            "tasks": [[e.job.job_id, e.instance, e.run, e.state.value, sorted(e.admissions),
                       e.requeues, e.started_seq, e.preempted_at, e.not_before, e.reason,
                       e.requeued_at, e.reason_at, e.pinned_host, e.config_version]
                      for _, e in sorted(self.tasks.items())],
            "ended": {j: {str(i): r for i, r in sorted(e.items())}
                      for j, e in sorted(self.ended.items())},
            "forgotten": [[j, at] for j, at in self.forgotten.items()],
            "orphans": [[j, first, [[t, b] for t, b in held]]
                        for j, (first, held) in self.orphans.items()],
            "hosts": [[h, a, c.as_dict()] for h, (a, c) in sorted(self.hosts.items())],
            "incarnations": {h: list(v) for h, v in sorted(self.incarnations.items())},
            "lost_at": dict(sorted(self.lost_at.items())),
            "version": self.version, "hosts_version": self.hosts_version,
            "clock": self.clock, "swept_at": self.swept_at,
        }

    @classmethod
    def restore(cls, data: dict[str, Any]) -> Ledger:
        """A ledger from `snapshot()` data; KeyError/TypeError/ValueError on bad data.

        A snapshot written before runs kept their pin has no `task_fields` (its rows have
        12 fields): its runs restore unpinned; one written before runs kept their config
        version (13 fields, no `job_versions`): its runs and jobs restore as version 1."""
        ledger = cls(int(data["retention_ms"]))
        fields = int(data.get("task_fields", 12))
        if fields not in (12, 13, _TASK_FIELDS):
            raise ValueError(f"ledger snapshot: task rows of {fields} fields")
        for body in data["jobs"]:
            job = JobInfo(JobSpec.from_body(body))
            ledger.jobs[job.job_id] = job
            ledger.ended[job.job_id] = {int(i): int(r)
                                        for i, r in data["ended"][job.job_id].items()}
            ledger.live[job.job_id] = set()
        for job_id, versions in dict(data.get("job_versions", {})).items():
            job = ledger.jobs[job_id]
            for version, body in versions:
                if int(version) < 2:
                    raise ValueError(f"ledger snapshot: job {job_id} version {version}")
                job.updates[int(version)] = JobSpec.from_body(body)
        for row in data["tasks"]:
            if len(row) != fields:
                raise ValueError(f"ledger snapshot: a task row of {len(row)} fields, "
                                 f"expected {fields}")
            (job_id, instance, run, state, admissions, requeues, started, preempted,
             not_before, reason, requeued, reason_at, pinned, version) = (
                [*row, None, 1] if fields == 12 else
                [*row, 1] if fields == 13 else row)
            job = ledger.jobs[job_id]
            instance, version = int(instance), _opt_int(version)
            entry = TaskEntry(job, instance, job.resources(instance, version), int(run),
                              task_state(state), {int(a) for a in admissions}, int(requeues),
                              int(started), _opt_int(preempted), int(requeued),
                              _opt_int(not_before), None if reason is None else str(reason),
                              int(reason_at), job.task_revocable(instance, version),
                              job.task_controller(instance, version), _opt_str(pinned),
                              version)
            ledger.tasks[entry.key] = entry
            ledger.live[job_id].add(entry.instance)
            ledger._index(entry)
        ledger.forgotten = {str(j): int(at) for j, at in data["forgotten"]}
        ledger.orphans = {str(j): (int(first), [(str(t), dict(b)) for t, b in held])
                          for j, first, held in data["orphans"]}
        ledger.hosts = {str(h): (bool(a), Resources.from_mapping(c))
                        for h, a, c in data["hosts"]}
        ledger.version = int(data["version"])
        ledger.hosts_version = int(data["hosts_version"])
        ledger.incarnations = {str(h): [str(v[0]), str(v[1])]
                               for h, v in dict(data.get("incarnations", {})).items()}
        ledger.lost_at = {str(h): int(t) for h, t in dict(data.get("lost_at", {})).items()}
        ledger.clock = int(data["clock"])
        ledger.swept_at = int(data["swept_at"])
        return ledger


@quick_init
@dataclass(frozen=True, slots=True)
class _Change:
    """One TaskTransition, read whole before anything is applied."""

    instance: int
    run: int
    state: TaskState
    previous: str
    not_before: int | None
    pinned_host: str | None  # TaskStateChanged v3; None in older records
    config_version: int  # TaskStateChanged v3; 1 in older records

    @classmethod
    def read(cls, ch: dict[str, Any]) -> _Change:
        return cls(int(ch["instance"]), int(ch["run"]), task_state(ch["state"]),
                   str(ch.get("previous_state", "")), _opt_int(ch.get("not_before_ms")),
                   _opt_str(ch.get("pinned_host")), _version(ch))


@quick_init
@dataclass(frozen=True, slots=True)
class _RunFact:
    """One task of TasksAdmitted / TasksPreempted / AdmissionDeferred."""

    job_id: str
    instance: int
    run: int
    reason: str | None
    pinned_host: str | None  # TasksAdmitted v2; None otherwise
    config_version: int | None  # TasksAdmitted (1 in v1 records); None otherwise

    @classmethod
    def read(cls, etype: str, t: dict[str, Any]) -> _RunFact:
        reason = str(t["reason"]) if etype == "AdmissionDeferred" else None
        admitted = etype == "TasksAdmitted"
        pinned = _opt_str(t.get("pinned_host")) if admitted else None
        version = _version(t) if admitted else None
        return cls(str(t["job_id"]), int(t["instance"]), int(t["run"]), reason, pinned,
                   version)


def _version(record: dict[str, Any]) -> int:
    """A record's `config_version` (1 when absent: records older than rolling updates)."""
    version = int(record.get("config_version", 1))
    if version < 1:
        raise ValueError(f"config_version {version} < 1")
    return version


def _opt_int(value: Any) -> int | None:
    return None if value is None else int(value)


def _opt_str(value: Any) -> str | None:
    """None, or a non-empty string (an empty pin is no pin)."""
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise TypeError(f"expected a string or null, got {type(value).__name__}")
    return value
