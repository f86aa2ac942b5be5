"""The host manager's core: hosts, their free resources, placement validation (pure).

Contract:
- `fold(type, body, received_ms=None)` applies any fact on the host manager's topics
  (agents' registrations, heartbeats and task statuses; placements; its own launch
  requests, rejections, losses and offers; the job manager's job events). Folding is
  idempotent, and it does not care about order across topics: Kafka orders a partition,
  not the cluster, so facts about one run or host arrive in any cross-topic order.
  An early fact is held until what it needs arrives, never dropped:
  * a placement whose JobCreated, host or host incarnation is not known yet waits (at
    most `hold_ms` from when it was read), then is launched, or rejected with the reason;
    so does one whose config version's spec (its JobSpecChanged) is not known yet;
  * a launch (our own TaskLaunchRequested) or a HostLost for a host incarnation whose
    HostRegistered was not read yet is applied when it registers;
  * a run's end (agent status or job event) read before its launch or placement makes
    that launch hold nothing and that placement moot (no launch, no rejection: everyone
    else learned of the end from the same facts); placements of earlier runs of the task
    are moot too. Resources are released only by the run's own end or its host's loss,
    never by a later run's end (an earlier run may be a stray launch still running). A
    job event ending a run the job manager never saw launched (from a state before
    LAUNCHING: a kill of a queued or placed run) withdraws its placement but does not
    end our launch of it, if there is one: the agent runs that launch until it reports
    its end (or the host is lost), so it keeps holding its room (`_withdrawn`);
  * a HostLost read after a launch decided later (the host came back meanwhile) does not
    take that launch's allocation: a loss covers the launches decided at or before it.
  So any interleaving of per-topic-ordered facts gives the same host allocations.
- `tick(now_ms)` decides: hosts silent for longer than `heartbeat_timeout_ms` and replaced
  incarnations become HostLost; placements waiting for validation become
  TaskLaunchRequested (one batch per host) or PlacementRejected (stale: the host is gone,
  a new incarnation, or the resources or ports were taken meanwhile; never double-booked);
  host maintenance moves on (maintenance.py: drained hosts, presence announcements,
  HostStateChanged); hosts whose free resources changed are offered again (OfferReceived).
  The state change of a tick is exactly the fold of the events it returns (plus `prune`).
- Maintenance (maintenance.py): a host not UP is offered as unavailable and placements
  onto it are rejected.
- Heartbeats (HostStatusReported) count only when read live (`received_ms` given): the
  fold of a replayed heartbeat does nothing (the shell skips them unread on replay, see
  service.py), because liveness after a restart starts fresh: `after_restart(now_ms)`
  gives every host a new silence window from `now_ms`, and no host is declared lost for
  silence before `now_ms + restart_grace_ms` (the shell's consumers need seconds to join
  their group and read the first live heartbeats). A heartbeat of a host declared lost
  brings it back (a stall, not a crash).
- Slack: an offer's `slack` is what revocable tasks may use on the host. Peloton's slack
  is what non-revocable tasks were allocated but do not use, measured by the agents; our
  agents report no usage (a heartbeat lists run ids only), so the host manager cannot
  overcommit safely and offers as slack the resources allocated to no run (revocable or
  not): `slack == free`, the same figures, from one allocation. Revocable and
  non-revocable placements are validated against that one allocation, so a host is never
  double-booked; in a batch, non-revocable placements are validated first, so where both
  want the same room the non-revocable one gets it (taking room back from revocable runs
  that already hold it is the resource manager's preemption, not the host manager's).
  A reader of an offer must therefore treat `free` and `slack` as ONE pool: a run placed
  or launched (revocable or not) and not yet counted by an offer takes room from both.
- Holds (Mesos' reservations with a persistent volume): when a run whose launch carried a
  `volume` (a stateful instance) ends on its host while its task may run again, the room
  it held stays held there for its (job, instance) (`HostRecord.holds`, one hold per task):
  offers leave it out of `free` and `slack` and list it in `holds`, and only a placement
  of a later run of that task may use it (validation adds it back for that run). A hold
  is made only by the end of a run this book counted on the host (a run released by its
  host's loss holds nothing), and ends when a later run of the task is launched (its
  allocation takes over) or ends, when the task is killed for good (a KILLING change, or
  a KILLED one that does not end a preemption: neither from PREEMPTING nor with a reason
  starting "PREEMPTED"), when its job ends, when its host incarnation is lost at or after
  the held run's launch (or replaced), or when retention forgets its job. Each of these is
  kept as a per-task fact (`JobRecord.void`: the highest run whose room may not be held;
  the job's `terminal`), so any order of the same facts leaves the same holds; a run's
  launch read after its end makes the hold then, as the end would have.
- TaskStateChanged acts through its ends and kills only (`ACTED_ON`): a change to any
  other state changes nothing (not even the job's record), so the shell skips a record of
  such changes only, undecoded (`acts_on`, told from the bytes: most of job-events).
- Bounded state (`prune`, run from tick every retention_ms / 10 of event time): a job's
  record (spec, ended runs, decided rounds) leaves once the job is terminal (or its
  JobCreated was never seen), no run of it holds resources or waits for a decision, and no
  fact about it arrived for `retention_ms`. Per live job it keeps one ended run and at
  most one decided round per task. Early facts for an incarnation that never registered
  leave after `retention_ms`; `orphaned` and `offered` have one entry per host at most;
  hosts themselves stay (the cluster's size bounds them). A host's runs are released by
  their end (agent status or job event) or by the loss of the host, never by retention:
  a terminal job whose runs still hold resources stays.
- Many hosts silent at once (silence.py): when more than half of the available hosts
  (10 or more) are silent past the timeout, the likelier cause is the host manager reading
  late, not the hosts: only hosts silent for the guard's `factor` timeouts (6) are then
  declared lost (the reason says so); `silence_held` tells the shell, which logs it. The
  same holds for each zone of hosts (`zone_of`; the service: the partition of
  host-registered a host's heartbeats go to) when more than half of its hosts are silent:
  a partition read late silences a quarter of a cluster at once (`silence_zones`).
  When a hold ends, the silence of the hosts it excused (silent past the timeout then)
  counts from its end (`silence_released`): a host manager catching up reads some
  partitions' heartbeats last, and the hosts of those are as alive as the rest.
- Scale (10,000 hosts): an idle tick visits no host. Derived, never snapshotted:
  `_silence_check_at` (no scan can decide a loss or a change of mass silence before it:
  heartbeats only move it later, except during a mass silence, when a heartbeat may end
  it; a registration, a host back, a loss, a restore or a restart reset it),
  `presence_dirty` (hosts whose presence or labels may differ from what maintenance
  announced: registrations, losses, returns, HostStateChanged folds, restores,
  restarts; maintenance.tick visits only those), `to_offer` (hosts whose offer may be out
  of date: registrations, generation bumps, maintenance state changes, restores, restarts;
  `_offers` visits only those) and the sorted host names (hosts are never removed). Each
  gives exactly the decisions of a full scan.
Time comes in as now_ms / received_ms; event times (`at`) come from the events themselves.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from peloton.hostmgr.domain import maintenance
from peloton.hostmgr.domain.launch import is_revocable, launch_record
from peloton.hostmgr.domain.records import (
    PAST_INCARNATIONS,
    Early,
    HostRecord,
    JobRecord,
    Pending,
    RoomHold,
    RunAlloc,
    RunKey,
    TaskKey,
)
from peloton.hostmgr.domain.silence import SilenceGuard, Verdict, ZoneOf
from peloton.model.event import Event
from peloton.model.ids import run_id
from peloton.model.resources import Resources
from peloton.model.spec import JobSpec
from peloton.model.taskstate import TERMINAL, TERMINAL_JOB, TaskState, stage

__all__ = ["HostBook"]

Body = dict[str, Any]

_WITHDRAWN = 2**62
"""The round recorded as decided for a run withdrawn by the job manager: newer than any
placement round, so no placement of the run is decided after."""
_LAUNCHING = stage(TaskState.LAUNCHING)


def _before_launch(previous: Any) -> bool:
    """Whether a run ending from state `previous` was never seen launched by the job
    manager (an unknown state counts as seen: the old rule, release)."""
    try:
        return stage(previous) < _LAUNCHING
    except (KeyError, ValueError):
        return False


_PREEMPTED = "PREEMPTED"  # how the job manager's reason of a preempted run starts


#: The TaskStateChanged states the fold acts on: ends, and kills (`_killed_for_good`).
ACTED_ON: frozenset[str] = frozenset(TERMINAL | {TaskState.KILLING})
_ACTED_ON_BYTES = tuple(sorted(state.encode() for state in ACTED_ON))


def acts_on(event_type: str, value: bytes) -> bool:
    """Whether the fold may act on a record, told from its encoded bytes without decoding
    it: False for a PlacementFailed (placement-made's other type: the fold has nothing to
    do with it) and for a TaskStateChanged that names none of the `ACTED_ON` states (Avro
    writes a string as its UTF-8 bytes, so a state a change holds is in the record's
    bytes; such a name elsewhere, in a reason, only gets the record decoded)."""
    if event_type == "PlacementFailed":
        return False
    return event_type != "TaskStateChanged" or any(s in value for s in _ACTED_ON_BYTES)


#: what a refusal's reason says (`HostBook._problem`, `maintenance.blocked_reason`), as a
#: bounded class for metrics: the first class whose words the reason holds
REFUSAL_CLASSES = (("no longer fits", "no longer fits"), ("ports ", "ports taken"),
                   ("for maintenance", "maintenance"), ("restarted", "host restarted"),
                   ("never registered", "incarnation unknown"), ("is lost", "host lost"),
                   ("unknown host", "unknown host"), ("unknown job", "unknown job"),
                   ("unknown config version", "unknown config version"))


def refusal_class(reason: str) -> str:
    """The class of a placement refusal's reason (`REFUSAL_CLASSES`; "other")."""
    return next((cls for words, cls in REFUSAL_CLASSES if words in reason), "other")


def _killed_for_good(ch: Body) -> bool:
    """Whether a TaskStateChanged change kills its task for good (a kill requested of the
    job manager, not the end of a preemption, after which the task runs again)."""
    if ch["state"] == TaskState.KILLING:
        return True
    return (ch["state"] == TaskState.KILLED and ch.get("previous_state") != TaskState.PREEMPTING
            and not str(ch.get("reason") or "").startswith(_PREEMPTED))


_SCAN_GAP = 64
"""A run's end visits the runs it ends one by one up to this many; beyond, it looks at the
waiting placements instead (a bogus run number must not stall the fold)."""


class HostBook:
    def __init__(self, heartbeat_timeout_ms: int = 5000, retention_ms: int = 600_000,
                 hold_ms: int = 10_000, restart_grace_ms: int = 10_000,
                 silence_guard: SilenceGuard | None = None,
                 stall_after_ms: int | None = None, zone_of: ZoneOf = None) -> None:
        self.heartbeat_timeout_ms = heartbeat_timeout_ms
        #: the zone of a host for the mass-silence guard (silence.py; the service: the
        #: partition of host-registered its heartbeats go to), None: the cluster only
        self.zone_of = zone_of
        #: a gap between two ticks longer than this is a stall of this host manager
        #: (`_stall`; None: never, for a caller that ticks sparsely on purpose, as tests do)
        self.stall_after_ms = stall_after_ms
        self.silence_guard = silence_guard or SilenceGuard()
        self.retention_ms = retention_ms
        self.hold_ms = hold_ms
        self.restart_grace_ms = restart_grace_ms
        self.hosts: dict[str, HostRecord] = {}
        self.jobs: dict[str, JobRecord] = {}
        # placements awaiting a decision (the latest round per run)
        self.pending: dict[RunKey, Pending] = {}
        self.placed = self._placed_seen = 0  # placements put in `pending`; at the last tick
        self.early: dict[tuple[str, str], Early] = {}  # (host, incarnation) not registered yet
        self.orphaned: dict[tuple[str, str], list[str]] = {}  # (host, old incarnation) -> runs
        self.offered: dict[str, int] = {}  # host -> generation last offered
        self.next_prune = 0
        self.grace_until = 0  # no host is lost for silence before (set by after_restart)
        #: what held at the last scan (the cluster, or these zones; None: nothing) and
        #: when each hold ended (zone, None: the cluster-wide one): for one timeout the
        #: silence of the hosts it excused counts from then (`_losses`). Not snapshotted:
        #: a restart gives every host a fresh window anyway.
        self.silence_hold: tuple[bool, frozenset[int]] = (False, frozenset())
        self.silence_released: dict[int | None, int] = {}
        self.maint = maintenance.Maintenance()  # maintenance states (maintenance.py)
        self.derived_reset()

    def derived_reset(self) -> None:
        """Forget the derived caches (see Scale in the module doc): the next tick scans."""
        self._silence_check_at = 0
        #: (silent, available) when the last scan found a mass silence (silence.py), else
        #: None; while it holds, a heartbeat read makes the next tick scan again
        self.silence_held: tuple[int, int] | None = None
        #: the zones that hold when the mass silence is of some zones only (silence.py)
        self.silence_zones: tuple[int, ...] = ()
        self.presence_dirty: set[str] = set(self.hosts)
        #: when the last tick ran (None: none since the start or a restore) and, if the
        #: tick before it was longer ago than `stall_after_ms` (a stall), how long ago
        self.last_tick_ms: int | None = None
        self.stalled_ms: int | None = None
        #: hosts whose offer may be out of date (generation or `offered` changed)
        self.to_offer: set[str] = set(self.hosts)
        self._names: list[str] = []
        self._names_of: dict[str, HostRecord] | None = None

    def _bump(self, host: HostRecord) -> None:
        """The host changed in a way its offer shows: offer it again."""
        host.generation += 1
        self.to_offer.add(host.name)

    def sorted_names(self) -> list[str]:
        """The host names in order (cached: hosts are added, never removed)."""
        if self._names_of is not self.hosts or len(self._names) != len(self.hosts):
            self._names, self._names_of = sorted(self.hosts), self.hosts
        return self._names

    # ---- fold -----------------------------------------------------------------------
    def fold(self, etype: str, body: Body, received_ms: int | None = None) -> None:
        """Apply a fact. `received_ms` is when this host manager read it live (None on
        replay): liveness counts from it, and a held placement waits from it."""
        if etype == "HostStatusReported":
            if received_ms is not None:
                self._heartbeat(body, received_ms)
            return
        handler = _FOLDS.get(etype)
        if handler is not None:
            handler(self, body, received_ms)

    def _job(self, job_id: str, at: int) -> JobRecord:
        job = self.jobs.get(job_id)
        if job is None:
            job = self.jobs[job_id] = JobRecord(last_at=at)
        elif at > job.last_at:
            job.last_at = at
        return job

    def _host_registered(self, body: Body, received_ms: int | None) -> None:
        name, incarnation = body["host"], body["incarnation"]
        old = self.hosts.get(name)
        if old is not None and (old.incarnation == incarnation or incarnation in old.past):
            if received_ms is not None and old.incarnation == incarnation:
                old.last_seen_ms = max(old.last_seen_ms, received_ms)
            return
        generation = 1
        past: tuple[str, ...] = ()
        if old is not None:
            if old.available and old.runs:
                self.orphaned[(name, old.incarnation)] = sorted(run_id(*k) for k in old.runs)
            for key in old.runs:
                self._forget_on_host(key)
            for task in list(old.holds):
                self._unhold(old, task)
            generation = old.generation + 1
            past = (*old.past, old.incarnation)[-PAST_INCARNATIONS:]
        host = self.hosts[name] = HostRecord(
            name, incarnation, Resources.from_mapping(body["capacity"]), dict(body["labels"]),
            body["log_url"], body["port_range_begin"], body["port_range_end"],
            received_ms if received_ms is not None else body["at"],
            generation=generation, past=past)
        self.presence_dirty.add(name)
        self.to_offer.add(name)
        self._silence_check_at = 0
        early = self.early.pop((name, incarnation), None)
        if early is not None:
            for key, alloc in sorted(early.launches.items()):
                self._launch_fact(name, incarnation, key, alloc)
            if early.lost_at >= 0:
                self._lose(host, early.lost_at)

    def _heartbeat(self, body: Body, received_ms: int) -> None:
        host = self.hosts.get(body["host"])
        if host is None or host.incarnation != body["incarnation"]:
            return
        host.last_seen_ms = max(host.last_seen_ms, received_ms)
        if self.silence_held is not None:  # fewer silent hosts may lift the guard
            self._silence_check_at = 0
        if not host.available and received_ms > host.lost_at:
            # Declared lost but alive after all (a stall, not a crash): offer it again.
            # Its runs were already declared lost and rescheduled; late reports of them
            # are stale runs to the job manager.
            host.available = True
            self._bump(host)
            self.presence_dirty.add(host.name)
            self._silence_check_at = 0

    def _statuses(self, body: Body, _: int | None) -> None:
        host = self.hosts.get(body["host"])
        same = host is not None and host.incarnation == body["incarnation"]
        for st in body["statuses"]:
            if st["state"] in TERMINAL:
                key = (st["job_id"], st["instance"], st["run"])
                self._ended(key, body["at"])
                if same:
                    assert host is not None
                    self._hold(host, key, self._release(host, key))

    def _task_states(self, body: Body, _: int | None) -> None:
        """Only ends and kills matter here (`ACTED_ON`): a change to any other state changes
        nothing, so a record of such changes only may go unread (`acts_on`)."""
        job: JobRecord | None = None  # looked up once, at the first change acted on
        for ch in body["changes"]:
            if ch["state"] not in ACTED_ON:
                continue
            if job is None:
                job = self._job(body["job_id"], body["at"])
            key = (body["job_id"], ch["instance"], ch["run"])
            if _killed_for_good(ch):
                self._void(key[0], key[1], key[2])
            if ch["state"] in TERMINAL:
                if _before_launch(ch.get("previous_state")):
                    self._withdrawn(key, body["at"])
                    continue
                self._ended(key, body["at"])
                where = job.on_host.get(key[1:])
                if where is not None:
                    host = self.hosts[where]
                    self._hold(host, key, self._release(host, key))

    def _withdrawn(self, key: RunKey, at: int) -> None:
        """The job manager ended run `key` before it saw it launched (a kill of a queued
        or placed run). No placement of it may launch any more; but a launch of ours it
        had not read yet reaches the agent, which runs it until it reports the run's end
        (or the host is lost): such a launch keeps holding its room until then."""
        job = self._job(key[0], at)
        if job.has_ended(key[1], key[2]):
            return
        self.pending.pop(key, None)
        decided = job.decided.get(key[1])
        if decided is None or decided < (key[2], _WITHDRAWN):
            job.decided[key[1]] = (key[2], _WITHDRAWN)

    def _job_state(self, body: Body, _: int | None) -> None:
        job = self._job(body["job_id"], body["at"])
        if body["state"] in TERMINAL_JOB:
            job.terminal = True
            for instance in sorted(job.held):
                self._unhold(self.hosts[job.held[instance]], (body["job_id"], instance))

    def _job_created(self, body: Body, _: int | None) -> None:
        job = self._job(body["job_id"], body["at"])
        if job.spec is None:
            job.spec = JobSpec.from_body(body)

    def _job_spec_changed(self, body: Body, _: int | None) -> None:
        """A later config version of a job's spec (rolling updates): placements of runs of
        that version launch its task spec. Kept in the job's record (one made for it if
        need be: an unknown job's record leaves with `prune`, as any spec-less one)."""
        version = int(body["version"])
        if version <= 1:
            return
        job = self._job(body["job_id"], body["at"])
        if version not in job.versions:
            job.versions[version] = JobSpec.from_body(body)

    def _ended(self, key: RunKey, at: int) -> None:
        """Run `key` (and so every earlier run of its task) has ended: no placement of
        them waits. What run `key` holds is released by the caller, who knows where it
        ran; earlier runs still held are left to their own end or their host's loss."""
        job = self._job(key[0], at)
        instance, run = key[1], key[2]
        self._void(key[0], instance, run - 1)  # a later run's end: no earlier run's room
        before = job.ended.get(instance, 0)
        if before >= run:
            return
        job.ended[instance] = run
        decided = job.decided.get(instance)
        if decided is not None and decided[0] <= run:
            del job.decided[instance]
        if run - before <= _SCAN_GAP:  # amortised: each run is visited once
            moot = list(range(before + 1, run + 1))
        else:  # a gap of many runs (bad data?): look at what waits, never count it out
            moot = [k[2] for k in self.pending if k[:2] == key[:2] and before < k[2] <= run]
        for r in moot:
            self.pending.pop((key[0], instance, r), None)

    def _release(self, host: HostRecord, key: RunKey) -> RunAlloc | None:
        """Free what run `key` holds on `host`; returns it (None: it held nothing)."""
        alloc = host.runs.pop(key, None)
        if alloc is None:
            return None
        host.allocated = (host.allocated - alloc.resources).clamp_non_negative()
        host.used_ports.subtract(alloc.ports)
        for port in alloc.ports:
            if host.used_ports[port] <= 0:
                host.used_ports.pop(port, None)
        host.job_counts[key[0]] -= 1
        if host.job_counts[key[0]] <= 0:
            del host.job_counts[key[0]]
        self._bump(host)
        self._forget_on_host(key)
        return alloc

    # ---- holds (see the contract) ---------------------------------------------------
    def _hold(self, host: HostRecord, key: RunKey, alloc: RunAlloc | None) -> None:
        """Run `key`, which held `alloc` on `host`, has ended: keep its room there for its
        task if it was stateful and its task may run again."""
        if alloc is None or not alloc.volume:
            return
        job = self.jobs.get(key[0])
        if job is None or job.terminal or key[2] <= job.void.get(key[1], 0):
            return
        where = job.held.get(key[1])
        if where is not None:
            other = self.hosts[where]
            if other.holds[key[:2]].run >= key[2]:
                return
            self._unhold(other, (key[0], key[1]))
        host.holds[(key[0], key[1])] = RoomHold(key[2], alloc.resources, alloc.at)
        job.held[key[1]] = host.name
        self._bump(host)

    def _void(self, job_id: str, instance: int, run: int) -> None:
        """No room of run `run` of the task, or of an earlier one, may be held any more."""
        if run <= 0:
            return
        job = self._job(job_id, 0)
        if run > job.void.get(instance, 0):
            job.void[instance] = run
        where = job.held.get(instance)
        if where is not None and self.hosts[where].holds[(job_id, instance)].run <= run:
            self._unhold(self.hosts[where], (job_id, instance))

    def _unhold(self, host: HostRecord, task: TaskKey) -> None:
        if host.holds.pop(task, None) is None:
            return
        self._bump(host)
        job = self.jobs.get(task[0])
        if job is not None and job.held.get(task[1]) == host.name:
            del job.held[task[1]]

    def _forget_on_host(self, key: RunKey) -> None:
        job = self.jobs.get(key[0])
        if job is not None:
            job.on_host.pop(key[1:], None)

    def _allocate(self, host: HostRecord, key: RunKey, alloc: RunAlloc) -> None:
        host.runs[key] = alloc
        host.allocated = host.allocated + alloc.resources
        host.used_ports.update(alloc.ports)
        host.job_counts[key[0]] += 1
        self._bump(host)
        self._job(key[0], alloc.at).on_host[key[1:]] = host.name

    def _placement_made(self, body: Body, received_ms: int | None) -> None:
        round_ = body["round"]
        since = received_ms if received_ms is not None else body["at"]
        for p in body["placements"]:
            key = (p["job_id"], p["instance"], p["run"])
            job = self._job(key[0], body["at"])
            if job.has_ended(key[1], key[2]) or key[1:] in job.on_host:
                continue
            decided = job.decided.get(key[1])
            if decided is not None and decided >= (key[2], round_):
                continue  # decided already, or a newer run of the task was
            current = self.pending.get(key)
            if current is None or current.round < round_:
                self.pending[key] = Pending(
                    p["host"], p["incarnation"], Resources.from_mapping(p["resources"]),
                    tuple(sorted(p["ports"].items())), round_, since,
                    int(p.get("config_version", 1)))
                self.placed += 1

    def _decided(self, key: RunKey, round_: int, at: int) -> None:
        job = self._job(key[0], at)
        current = self.pending.get(key)
        if current is not None and current.round <= round_:
            del self.pending[key]
        if job.has_ended(key[1], key[2]):
            return
        decided = job.decided.get(key[1])
        if decided is None or decided < (key[2], round_):
            job.decided[key[1]] = (key[2], round_)

    def _launch_requested(self, body: Body, _: int | None) -> None:
        at = body["at"]
        for launch in body["launches"]:
            key = (launch["job_id"], launch["instance"], launch["run"])
            self._decided(key, launch["round"], at)
            alloc = RunAlloc(Resources.from_mapping(launch["resources"]),
                             tuple(sorted(launch["ports"].values())), at,
                             bool(launch.get("volume")))
            self._launch_fact(body["host"], body["incarnation"], key, alloc)

    def _launch_fact(self, name: str, incarnation: str, key: RunKey, alloc: RunAlloc) -> None:
        """Run `key` was launched on (name, incarnation): it holds `alloc` there unless it
        has ended or the host incarnation was lost after (or is gone)."""
        job = self._job(key[0], alloc.at)
        self._void(key[0], key[1], key[2] - 1)  # its allocation takes over earlier holds
        ended = job.has_ended(key[1], key[2])
        if ended and not alloc.volume:
            return
        host = self.hosts.get(name)
        if host is None or host.incarnation != incarnation:
            if host is None or incarnation not in host.past:  # not registered yet: hold
                early = self.early.setdefault((name, incarnation), Early(alloc.at))
                early.launches[key] = alloc
            return
        if alloc.at <= host.lost_at or key[1:] in job.on_host:
            return
        if ended:  # its end was read first: it ends here, as if read after
            self._hold(host, key, alloc)
            return
        self._allocate(host, key, alloc)

    def _rejected(self, body: Body, _: int | None) -> None:
        for r in body["rejections"]:
            self._decided((r["job_id"], r["instance"], r["run"]), r["round"], body["at"])

    def _host_lost(self, body: Body, _: int | None) -> None:
        name, incarnation, at = body["host"], body["incarnation"], body["at"]
        self.orphaned.pop((name, incarnation), None)
        host = self.hosts.get(name)
        if host is not None and host.incarnation == incarnation:
            self._lose(host, at)
        elif host is None or incarnation not in host.past:  # not registered yet: hold
            early = self.early.setdefault((name, incarnation), Early(at))
            early.lost_at = max(early.lost_at, at)

    def _lose(self, host: HostRecord, at: int) -> None:
        if at <= host.lost_at:
            return
        host.lost_at = at
        host.available = False
        self.presence_dirty.add(host.name)
        for key in [k for k, alloc in host.runs.items() if alloc.at <= at]:
            self._release(host, key)
        for task in [t for t, held in sorted(host.holds.items()) if held.at <= at]:
            self._unhold(host, task)
        self._bump(host)

    def _offer_received(self, body: Body, _: int | None) -> None:
        for offer in body["offers"]:
            host = self.hosts.get(offer["host"])
            if host is not None and host.incarnation == offer["incarnation"]:
                self.offered[host.name] = max(self.offered.get(host.name, -1),
                                              offer["generation"])

    # ---- decide ---------------------------------------------------------------------
    def tick_wanted(self) -> bool:
        """Placements came since the last tick: launching them should not wait for the
        next timer tick (the shell ticks soon; `peloton.bus.driver`)."""
        return self.placed != self._placed_seen

    def tick(self, now_ms: int) -> list[Event]:
        self._placed_seen = self.placed
        self._stall(now_ms)
        events: list[Event] = []
        for decide in (self._losses, self._maintenance, self._validate, self._offers):
            decided = decide(now_ms)
            for ev in decided:
                self.fold(ev.type, ev.body)
            events += decided
        self.prune(now_ms)
        return events

    def _stall(self, now_ms: int) -> None:
        """No tick for longer than `stall_after_ms` (the service: the heartbeat
        timeout): this host manager was not looking (its process paused or starved, a VM
        frozen), so the silence it now sees is its own, and the heartbeats sent
        meanwhile wait unread in the log (a tick may come before the intake reads them).
        No host is declared lost for silence before one timeout from now: the hosts get
        a full timeout to be heard, as after a restart. The mass-silence guard
        (silence.py) covers an intake that falls behind while the ticks go on; this
        covers a stall of the whole process, for any number of hosts and however long it
        lasted."""
        last, self.last_tick_ms = self.last_tick_ms, now_ms
        after, self.stalled_ms = self.stall_after_ms, None
        if last is not None and after is not None and now_ms - last > after:
            self.stalled_ms = now_ms - last
            self.grace_until = max(self.grace_until, now_ms + self.heartbeat_timeout_ms)

    def _losses(self, now_ms: int) -> list[Event]:
        events = []
        for (name, incarnation), runs in sorted(self.orphaned.items()):
            events.append(Event("HostLost", name, {
                "host": name, "incarnation": incarnation, "at": now_ms,
                "reason": "agent restarted (new incarnation)", "runs": runs}))
        if now_ms < self.grace_until or now_ms < self._silence_check_at:
            return events  # no host can be silent for too long yet (module doc: Scale)
        timeout = self.heartbeat_timeout_ms
        available = [self.hosts[name] for name in self.sorted_names()
                     if self.hosts[name].available]
        zone_of = self.zone_of
        zones = [None if zone_of is None else zone_of(h.name) for h in available]
        verdict = self.silence_guard.verdict(
            timeout, [(z, now_ms - h.last_seen_ms) for z, h in zip(zones, available, strict=True)])
        self._released(verdict, now_ms)
        released = self.silence_released
        check_at: int | None = None
        lost = False
        for zone, host in zip(zones, available, strict=True):
            # a host silent past the timeout when a hold ended was excused by it: its
            # silence counts from the end (its heartbeats may be still unread: a host
            # manager catching up reads some partitions last)
            seen = host.last_seen_ms
            for end in (released.get(None), released.get(zone)):
                if end is not None and now_ms - end <= timeout and seen + timeout < end:
                    seen = end
            quiet = now_ms - seen
            limit = verdict.limit_of(zone)
            if quiet > limit:
                lost = True
                silent = (now_ms - host.last_seen_ms) / 1000
                reason = f"no heartbeat for {silent:.1f}s" + verdict.why(zone)
                events.append(Event("HostLost", host.name, {
                    "host": host.name, "incarnation": host.incarnation, "at": now_ms,
                    "reason": reason, "runs": sorted(run_id(*k) for k in host.runs)}))
            else:  # the earliest time a scan could decide otherwise (an earlier one: same)
                due = seen + (limit if quiet > timeout else timeout) + 1
                check_at = due if check_at is None else min(check_at, due)
        if lost:
            check_at = 0  # hosts were lost: fewer available ones may lift a mass silence
        self._silence_check_at = check_at if check_at is not None else 2**62
        return events

    def _released(self, verdict: Verdict, now_ms: int) -> None:
        """Take the scan's verdict: a hold that ended (the cluster's, or a zone's while
        the cluster's does not hold) starts a window of one timeout in which the silence
        of the hosts it excused (silent past the timeout at its end) counts from its end,
        so the hosts whose heartbeats the host manager reads last as it catches up are not
        lost for the lag the guard excused."""
        self.silence_held, self.silence_zones = verdict.held, tuple(verdict.zones)
        was_cluster, was_zones = self.silence_hold
        now_cluster = verdict.held is not None and not verdict.zones
        self.silence_hold = (now_cluster, frozenset(verdict.zones))
        released = self.silence_released
        for zone in [z for z, at in released.items()  # memory only: _losses checks ages
                     if now_ms - at > self.heartbeat_timeout_ms]:
            del released[zone]
        if was_cluster and not now_cluster:
            released[None] = now_ms
        if not now_cluster:
            for zone in was_zones - set(verdict.zones):
                released[zone] = now_ms

    def _maintenance(self, now_ms: int) -> list[Event]:
        return maintenance.tick(self, now_ms)  # folded as decided (again: idempotent)

    def _revocable(self, key: RunKey) -> bool:
        """Whether the waiting placement `key` is of a revocable run (by its version's
        spec; False while that spec is not known)."""
        job, p = self.jobs.get(key[0]), self.pending.get(key)
        spec = None if job is None or p is None else job.spec_of(p.config_version)
        return spec is not None and is_revocable(spec, key[1])

    def _validate(self, now_ms: int) -> list[Event]:
        launches: dict[str, list[Body]] = {}
        rejections: list[Body] = []
        taken: dict[str, tuple[Resources, set[int]]] = {}  # decided in this batch, per host
        for key in sorted(self.pending, key=lambda k: (self._revocable(k), k)):
            p = self.pending[key]
            reason, may_wait = self._problem(key, p, taken)
            if reason is None:
                spec = self.jobs[key[0]].spec_of(p.config_version)
                assert spec is not None
                launches.setdefault(p.host, []).append(launch_record(spec, key, p))
                res, ports = taken.get(p.host, (Resources(), set()))
                # the room of its own hold was never in `free`: only the rest is taken
                used = p.resources - self._own_hold(self.hosts[p.host], key)
                taken[p.host] = (res + used, ports | {x for _, x in p.ports})
            elif not may_wait or now_ms - p.since > self.hold_ms:
                rejections.append({"job_id": key[0], "instance": key[1], "run": key[2],
                                   "host": p.host, "reason": reason, "round": p.round})
        events = [Event("TaskLaunchRequested", name, {
            "host": name, "incarnation": self.hosts[name].incarnation, "at": now_ms,
            "launches": launches[name]}) for name in sorted(launches)]
        if rejections:
            events.append(Event("PlacementRejected", "rejected",
                                {"at": now_ms, "rejections": rejections}))
        return events

    def _problem(self, key: RunKey, p: Pending,
                 taken: dict[str, tuple[Resources, set[int]]]) -> tuple[str | None, bool]:
        """Why placement `p` cannot launch now (None: it can), and whether the reason may
        go away by itself (a fact not read yet), so the placement may wait for it."""
        host = self.hosts.get(p.host)
        if host is None:
            return f"unknown host {p.host}", True
        if host.incarnation != p.incarnation:
            if p.incarnation in host.past:
                return f"host {host.name} restarted (incarnation changed)", False
            return f"host {host.name}: incarnation {p.incarnation} never registered", True
        if not host.available:
            return f"host {host.name} is lost", False
        if (blocked := maintenance.blocked_reason(self, host.name)) is not None:
            return blocked, False
        job = self.jobs.get(key[0])
        if job is None or job.spec is None:
            return f"unknown job {key[0]} (no JobCreated read)", True
        if job.spec_of(p.config_version) is None:
            return (f"unknown config version {p.config_version} of job {key[0]} "
                    "(no JobSpecChanged read)"), True
        res, ports_taken = taken.get(host.name, (Resources(), set()))
        free = (host.free + self._own_hold(host, key) - res).clamp_non_negative()
        if not p.resources.fits_in(free):
            short = ", ".join(f"{k} {p.resources.get(k):g}>{free.get(k):g}"
                              for k in p.resources.exceeding(free))
            return f"host {host.name} no longer fits: {short}", False
        ports = {x for _, x in p.ports}
        if (any(x in host.used_ports for x in ports) or ports & ports_taken
                or any(not host.port_begin <= x <= host.port_end for x in ports)):
            return f"host {host.name}: ports {sorted(ports)} taken or out of range", False
        return None, False

    @staticmethod
    def _own_hold(host: HostRecord, key: RunKey) -> Resources:
        """The room `host` holds for run `key`'s task from an earlier run (none: zero)."""
        held = host.holds.get(key[:2])
        return held.resources if held is not None and held.run < key[2] else Resources()

    def _offers(self, now_ms: int) -> list[Event]:
        offers = []
        names, self.to_offer = sorted(self.to_offer), set()
        for name in names:
            host = self.hosts.get(name)
            if host is None or self.offered.get(name) == host.generation:
                continue
            free = host.free
            offers.append({
                "host": name, "incarnation": host.incarnation,
                "capacity": host.capacity.as_dict(), "free": free.as_dict(),
                "labels": host.labels, "generation": host.generation,
                "available": host.available and maintenance.blocked_reason(self, name) is None,
                "port_range_begin": host.port_begin,
                "port_range_end": host.port_end, "used_ports": sorted(host.used_ports),
                "task_label_counts": {f"peloton.job_id={j}": n
                                      for j, n in sorted(host.job_counts.items())},
                "slack": host.slack.as_dict(),
                "holds": [{"job_id": j, "instance": i, "resources": h.resources.as_dict()}
                          for (j, i), h in sorted(host.holds.items())]})
        if not offers:
            return []
        return [Event("OfferReceived", "offers", {"at": now_ms, "offers": offers})]

    # ---- retention ------------------------------------------------------------------
    def prune(self, now_ms: int) -> None:
        """Forget what no fact can need any more (see the module contract). Runs at most
        once per retention_ms / 10; cost O(jobs + early facts)."""
        if now_ms < self.next_prune:
            return
        self.next_prune = now_ms + max(1, self.retention_ms // 10)
        horizon = now_ms - self.retention_ms
        waiting = {key[0] for key in self.pending}
        for job_id in [j for j, job in self.jobs.items()
                       if (job.terminal or job.spec is None) and not job.on_host
                       and job.last_at < horizon and j not in waiting]:
            job = self.jobs[job_id]
            for instance in sorted(job.held):
                self._unhold(self.hosts[job.held[instance]], (job_id, instance))
            del self.jobs[job_id]
        for where in [w for w, early in self.early.items() if early.first_at < horizon]:
            del self.early[where]

    def after_restart(self, now_ms: int) -> None:
        """After a replay or a restore: liveness starts afresh (old heartbeats say
        nothing about now, and none was replayed): every host's silence counts from
        `now_ms`, none is declared lost for silence before `now_ms + restart_grace_ms`,
        and every host is offered again."""
        for host in self.hosts.values():
            host.last_seen_ms = max(host.last_seen_ms, now_ms)
        self.derived_reset()
        self.grace_until = max(self.grace_until, now_ms + self.restart_grace_ms)
        self.offered.clear()


_Fold = Callable[[HostBook, Body, int | None], None]
_FOLDS: dict[str, _Fold] = {
    "HostRegistered": HostBook._host_registered,
    "TaskStatusReported": HostBook._statuses,
    "TaskStateChanged": HostBook._task_states,
    "JobStateChanged": HostBook._job_state,
    "PlacementMade": HostBook._placement_made,
    "TaskLaunchRequested": HostBook._launch_requested,
    "PlacementRejected": HostBook._rejected,
    "HostLost": HostBook._host_lost,
    "OfferReceived": HostBook._offer_received,
    "JobCreated": HostBook._job_created,
    "JobSpecChanged": HostBook._job_spec_changed,
    "HostMaintenanceRequested": maintenance.fold_request,
    "HostStateChanged": maintenance.fold_state_changed,
    "HostMaintenanceRejected": maintenance.fold_rejected,
}
