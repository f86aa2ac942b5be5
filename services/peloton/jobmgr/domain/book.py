"""The job manager's aggregate: jobs and their tasks, folded from facts (pure).

Contract:
- `apply(type, body)` folds one fact (the job manager's own events, plus the public facts
  JobSubmitted / JobKillRequested and the resource manager's EntitlementUpdated) into the
  book. It never decides anything, so replaying the same records rebuilds the same book;
  applying a record twice is harmless (transitions are absolute and duplicates are no-ops).
- `handle(type, body, now_ms)` is for live input: it applies the fact, decides what follows
  and returns the resulting events, which it has already applied. The shell publishes them.
  Facts from other services are judged by `folding`: order across topics does not matter.
- `reconcile(now_ms)` re-derives decisions that a crash between "fact read" and "events
  published" may have lost (undecided submissions, kills not yet carried out). It returns
  nothing when the book is consistent, so it is safe to run at any time.
- `tick(now_ms)` = reconcile, then the timeouts (`timeouts`), then retention: terminal jobs
  and rejected submissions older than `retention_ms` of event time leave the book
  (`retention`); their ids stay known, so resubmitting one is still a no-op. Last, the
  agents are asked about runs on their hosts with no news (`reconciliation`).
Deterministic: no clock (now_ms is passed in), no randomness, sorted iteration.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from peloton.jobmgr.domain import handover, kills, starts, updates
from peloton.jobmgr.domain.daemonroom import make_room
from peloton.jobmgr.domain.daemons import is_daemon, place_daemons
from peloton.jobmgr.domain.drains import drain_hosts
from peloton.jobmgr.domain.folding import (
    HeldRejections,
    RejectionVerdict,
    judge_rejection,
    moves_forward,
    placement_implied,
    supersedes,
)
from peloton.jobmgr.domain.hosts import HostTable
from peloton.jobmgr.domain.reconciliation import Reconciler
from peloton.jobmgr.domain.records import Batch, JobRecord, Pending, TaskRecord, change
from peloton.jobmgr.domain.restarts import IN_PLACE, OWN_EXITS, restart_run
from peloton.jobmgr.domain.retention import DEFAULT_RETENTION_MS, ForgottenIds
from peloton.jobmgr.domain.retries import (
    PREEMPTED,
    SYSTEM_RETRIES,
    preempted_reason,
    requeued,
    retry_run,
    should_retry,
)
from peloton.jobmgr.domain.states import derive_job_state
from peloton.jobmgr.domain.timeouts import WATCHED, Timeouts, expiry
from peloton.jobmgr.domain.validation import validate_submission
from peloton.model.event import Event
from peloton.model.ids import parse_run_id
from peloton.model.spec import JobSpec
from peloton.model.taskstate import (
    AGENT_STATES,
    ON_HOST,
    STAGE,
    TERMINAL,
    TERMINAL_JOB,
    JobState,
    TaskState,
    task_state,
)

__all__ = ["JobBook", "JobRecord", "TaskRecord", "SYSTEM_RETRIES", "PREEMPTED"]

S = TaskState
Ref = dict[str, Any]


class JobBook:
    def __init__(self, retention_ms: int = DEFAULT_RETENTION_MS,
                 timeouts: Timeouts | None = None) -> None:
        self.retention_ms = retention_ms
        self.timeouts = timeouts or Timeouts()
        self.jobs: dict[str, JobRecord] = {}
        self.rejected: dict[str, list[str]] = {}
        self.rejected_at: dict[str, int] = {}
        self.submitted: dict[str, dict[str, Any]] = {}  # seen, not yet decided
        self.kill_intents: dict[str, set[int] | None] = {}  # None = whole job
        self.intent_at: dict[str, int] = {}
        self.pools: set[str] | None = None
        self.leaf_pools: set[str] | None = None
        self.forgotten = ForgottenIds()  # ids of jobs that left the book
        self.held = HeldRejections()  # input facts read early (not in the log)
        # derived indexes, rebuilt by the fold (and by a snapshot's restore)
        self.watched: dict[tuple[str, int], None] = {}  # READY / PREEMPTING runs
        self.ended: dict[str, int] = {}  # terminal job -> event time it ended
        self.controller_ended: set[str] = set()  # jobs whose controller task ended
        self.now_ms = 0  # the time of the decision being made (set by handle/tick)
        self.hosts = HostTable()  # the host manager's view of hosts (daemons, drains)
        self.on_host: dict[str, dict[tuple[str, int], None]] = {}  # host -> runs there
        self.outgoing: dict[str, dict[tuple[str, int], None]] = {}  # host -> (handover)
        self.daemon_jobs: set[str] = set()
        self.drain_reasons: dict[str, str] = {}  # draining host -> why not drained yet
        self.updates: dict[str, updates.UpdateRecord] = {}  # job -> its newest update
        self.update_inbox: dict[str, list[tuple[str, dict[str, Any]]]] = {}  # undecided
        self.answered_at: dict[str, int] = {}  # job -> newest update request answered
        self.start_at: dict[str, int] = {}  # job -> newest JobStartRequested (see starts)
        # instances a start spared from a whole-job kill of a job not created yet
        self.kill_spared: dict[str, set[int]] = {}
        # which runs were asked about when (soft state: `reconciliation`)
        self.reconciler = Reconciler(self.timeouts.reconcile_ms,
                                     self.timeouts.reconcile_every_ms)

    def known(self, job_id: str) -> bool:
        return job_id in self.jobs or job_id in self.rejected or job_id in self.forgotten

    # ---- fold -----------------------------------------------------------------------
    def apply(self, etype: str, body: dict[str, Any]) -> None:
        job_id = body.get("job_id", "")
        if etype == "JobSubmitted":
            if not self.known(job_id):
                self.submitted.setdefault(job_id, body)
        elif etype == "JobCreated":
            self.submitted.pop(job_id, None)
            if job_id not in self.jobs and job_id not in self.forgotten:
                spec = JobSpec.from_body(body)
                tasks = [TaskRecord(i, since=spec.at) for i in range(spec.instance_count)]
                job = JobRecord(job_id, spec, tasks)
                job.counts[S.INITIALIZED] = len(tasks)
                self.jobs[job_id] = job
                if is_daemon(job):
                    self.daemon_jobs.add(job_id)
                if job_id in self.kill_intents:  # folded first on replay: honour it
                    intent = self.kill_intents[job_id]
                    spared = self.kill_spared.pop(job_id, set())
                    if intent is None and spared:  # a start spared these (see starts)
                        intent = set(range(len(tasks))) - spared
                        self.kill_intents[job_id] = intent
                    self._apply_kill_intent(job_id, [] if intent is None else sorted(intent),
                                            self.intent_at.get(job_id, 0))
        elif etype == "JobRejected":
            self.submitted.pop(job_id, None)
            if job_id not in self.forgotten:
                self.rejected[job_id] = list(body["reasons"])
                self.rejected_at[job_id] = int(body["at"])
        elif etype == "JobKillRequested":
            if job_id not in self.forgotten:
                self._apply_kill_intent(job_id, body["instances"], int(body.get("at", 0)))
        elif etype == "JobStartRequested":
            starts.apply_start(self, body)
        elif etype == "TaskStateChanged":
            self._apply_changes(job_id, body["changes"], int(body["at"]))
        elif etype in ("JobUpdateRequested", "UpdateCommandRequested"):
            if int(body["at"]) > self.answered_at.get(job_id, -1) and job_id not in self.forgotten:
                inbox = self.update_inbox.setdefault(job_id, [])
                if (etype, body) not in inbox:
                    inbox.append((etype, body))
        elif etype in ("UpdateStateChanged", "JobUpdateRejected"):
            if etype == "UpdateStateChanged":
                self.updates[job_id] = updates.UpdateRecord.from_event(body)
            if body["request_at"]:
                at = self.answered_at[job_id] = max(body["request_at"],
                                                    self.answered_at.get(job_id, -1))
                left = [(t, b) for t, b in self.update_inbox.get(job_id, ()) if b["at"] > at]
                if left:
                    self.update_inbox[job_id] = left
                else:
                    self.update_inbox.pop(job_id, None)
        elif etype == "JobSpecChanged":
            known = self.jobs.get(job_id)
            if known is not None and body["version"] not in known.versions:
                spec = JobSpec.from_body(body)
                known.versions[body["version"]] = spec
                if body["version"] == max(known.versions):
                    known.spec = spec
        elif etype == "HostStateChanged":
            self._host_changed(body)
        elif etype == "HostDrainProgressed":
            self.drain_reasons[body["host"]] = body["reason"]
        elif etype == "TaskHealthChanged":
            self._apply_health(job_id, body["changes"], int(body["at"]))
        elif etype == "JobStateChanged":
            known = self.jobs.get(job_id)
            if known is not None:
                known.state = JobState(body["state"])
                if known.state in TERMINAL_JOB and known.ended_at is None:
                    known.ended_at = self.ended[job_id] = int(body["at"])
                elif known.state not in TERMINAL_JOB:  # started again (see starts)
                    known.ended_at = None
                    self.ended.pop(job_id, None)
        elif etype == "EntitlementUpdated":
            self.pools = {p["pool"] for p in body["pools"]}
            parents = {p["parent"] for p in body["pools"] if p["parent"]}
            self.leaf_pools = self.pools - parents

    def _kill_covers(self, job_id: str, instance: int) -> bool:
        """Whether a standing kill intent names the instance (the fold has seen every
        kill and start of the job up to here, in their order: one partition)."""
        if job_id not in self.kill_intents:
            return False
        intent = self.kill_intents[job_id]
        return intent is None or instance in intent

    def _host_changed(self, body: dict[str, Any]) -> bool:
        """Fold a HostStateChanged; a host no longer DRAINING has no drain to account for."""
        changed = self.hosts.apply(body)
        view = self.hosts.views.get(body["host"])
        if view is None or view.state.value != "DRAINING":
            self.drain_reasons.pop(body["host"], None)
        return changed

    def _apply_kill_intent(self, job_id: str, instances: list[int], at: int) -> None:
        if not instances:
            self.kill_intents[job_id] = None
            self.kill_spared.pop(job_id, None)
        else:
            current = self.kill_intents.get(job_id, set())
            if current is not None:
                self.kill_intents[job_id] = current | set(instances)
            elif job_id in self.kill_spared:  # killed again after a start spared them
                self.kill_spared[job_id] -= set(instances)
        self.intent_at[job_id] = max(at, self.intent_at.get(job_id, at))
        job = self.jobs.get(job_id)
        if job is not None:
            if not instances:
                job.kill_requested = True
            for i in (range(len(job.tasks)) if not instances else instances):
                if 0 <= i < len(job.tasks):
                    job.tasks[i].kill_requested = True

    def _apply_changes(self, job_id: str, changes: Iterable[dict[str, Any]], at: int) -> None:
        job = self.jobs.get(job_id)
        if job is None:
            return
        for ch in changes:
            while job.long_running and ch["instance"] >= len(job.tasks):  # a new instance
                job.tasks.append(TaskRecord(len(job.tasks), since=at))
                job.counts[S.INITIALIZED] += 1
            task = job.tasks[ch["instance"]]
            if handover.fold(self, job, task, ch):
                continue  # a change of the run a drain replaces
            if ch["run"] < task.run:
                continue
            new_run = ch["run"] > task.run
            new_state = task_state(ch["state"])
            version = int(ch.get("config_version", 1))
            if (ch["run"] > task.run and ch["reason"].startswith(starts.STARTED)
                    and not self._kill_covers(job_id, task.instance)):
                task.kill_requested = False  # started again, and no kill of it stands
            if ch["run"] > task.run:
                task.placement_attempts = 0
                task.placed_round = -1
                task.health = ""
                if version != task.config_version:
                    task.version_failures = 0
                self.held.run_changed(job_id, task.instance, ch["run"])
            elif task.state == S.READY == S(ch["previous_state"]) and new_state == S.PENDING:
                task.placement_attempts += 1  # a placement timeout of this run
            if new_state == S.KILLED and not (S(ch["previous_state"]) in ON_HOST or ch["host"]):
                task.unreached_run = ch["run"]  # no agent was told; a late launch is killed
            task.config_version = version
            job.counts[task.state] -= 1
            job.counts[new_state] += 1
            if STAGE[new_state] > STAGE[S.PLACED]:
                self.held.drop_task(job_id, task.instance)
            key = (job_id, task.instance)
            if task.host is not None:
                self.on_host.get(task.host, {}).pop(key, None)
            if new_state in ON_HOST and ch["host"]:
                self.on_host.setdefault(ch["host"], {})[key] = None
            task.run = ch["run"]
            task.state = new_state
            task.host = ch["host"]
            task.failures = ch["failures"]
            task.reason = ch["reason"]
            task.exit_code = ch["exit_code"]
            task.since = at
            task.round = ch.get("round", -1)
            task.placed_round = max(task.placed_round, task.round)
            task.not_before_ms = ch.get("not_before_ms")
            if new_state == S.PENDING:  # a run's pin comes with its PENDING change
                task.pinned_host = ch.get("pinned_host")
                if new_run:
                    task.in_place = ch["reason"].startswith(IN_PLACE)
            if job.long_running:
                self._long_running_fold(job, task, new_state, at)
            if new_state == S.KILLING or (new_state == S.KILLED
                                          and not ch["reason"].startswith(PREEMPTED)):
                task.kill_requested = True  # a kill, not the end of a preemption
            if new_state in WATCHED:
                self.watched[(job_id, task.instance)] = None
            else:
                self.watched.pop((job_id, task.instance), None)
        if (job.has_controller and job.tasks[0].state in TERMINAL
                and job_id not in self.controller_ended):
            self.controller_ended.add(job_id)  # the job ends with it: the rest is killed
            for task in job.tasks[1:]:
                task.kill_requested = True

    def _long_running_fold(self, job: JobRecord, task: TaskRecord, state: TaskState,
                           at: int) -> None:
        """A long-running run's change: where its volume lives, its restart streak."""
        if job.stateful and task.volume_host is None and task.host and state in ON_HOST:
            task.volume_host = task.host
        if state == S.RUNNING and not job.health_checked(task):
            task.backoff = task.backoff.became_healthy(at)  # no check: healthy once running
        elif state in OWN_EXITS:
            task.backoff = task.backoff.exited(at)
            task.version_failures += 1

    def _apply_health(self, job_id: str, changes: Iterable[dict[str, Any]], at: int) -> None:
        job = self.jobs.get(job_id)
        if job is None:
            return
        for ch in changes:
            if not 0 <= ch["instance"] < len(job.tasks):
                continue
            task = job.tasks[ch["instance"]]
            if ch["run"] != task.run:
                continue
            task.health = ch["health"]
            if ch["health"] == "HEALTHY":
                task.backoff = task.backoff.became_healthy(at)

    # ---- decide ---------------------------------------------------------------------
    def handle(self, etype: str, body: dict[str, Any], now_ms: int) -> list[Event]:
        """Apply a live input fact, decide, apply and return the events that follow."""
        self.now_ms = now_ms
        if etype == "HostStateChanged":
            if not self._host_changed(body):
                return []
            batch = Batch()
            place_daemons(self, batch)
            progress = drain_hosts(self, batch, now_ms)
            return self._commit(batch, now_ms) + self._drained(progress)
        if etype == "HostMaintenanceRejected":
            return []
        if etype in ("JobUpdateRequested", "UpdateCommandRequested"):
            self.apply(etype, body)
            return self._decide_updates(body["job_id"], now_ms)
        if etype == "JobStartRequested":
            self.apply(etype, body)
            return self._start(body["job_id"], now_ms, body.get("requested_by", ""))
        if etype in ("JobSubmitted", "JobKillRequested", "EntitlementUpdated"):
            self.apply(etype, body)
            if etype == "JobSubmitted" and body["job_id"] in self.submitted:
                return self._decide_submission(self.submitted[body["job_id"]], now_ms)
            if etype == "JobKillRequested":
                return self._kill_job(body["job_id"], now_ms)
            return []
        if etype == "TasksPreempted":
            return self.preempt(body["tasks"], now_ms)
        batch = Batch()
        if etype == "TasksAdmitted":
            for t in body["tasks"]:
                self._admitted(batch, t, int(body["at"]))
        elif etype == "PlacementMade":
            for p in body["placements"]:
                if not self.held.take(p["job_id"], p["instance"], p["run"], body["round"],
                                      p["host"]):  # else: rejected before it was read
                    self._placed(batch, p, body["round"])
        elif etype == "PlacementFailed":
            for t in body["tasks"]:
                self._note_reason(t, t["reason"])
        elif etype == "PlacementRejected":
            for r in body["rejections"]:
                self._reject(batch, r)
        elif etype == "TaskLaunchRequested":
            for launch in body["launches"]:
                self._fact(batch, launch, S.LAUNCHING, "launch requested", host=body["host"])
        elif etype == "TaskStatusReported":
            for st in body["statuses"]:
                if st["state"] in AGENT_STATES:
                    self._fact(batch, st, task_state(st["state"]), st["message"], host=body["host"],
                               exit_code=st["exit_code"])
                if st.get("health"):
                    self._health(batch, st)
        elif etype == "HostLost":
            self._lose_host(batch, body)
        return self._commit(batch, now_ms)

    def _health(self, batch: Batch, st: Ref) -> None:
        """An agent's health report of a run that runs now (a report of an older run, or
        of a run that has ended, is stale); only a change is recorded."""
        found = self._task(st)
        if found is None:
            return
        job, task = found
        cur = batch.pending(job.job_id, task)
        if cur.run == st["run"] == task.run and cur.state == S.RUNNING:
            known = batch.health_of(job.job_id, task.instance, task.health)
            if st["health"] != known:
                batch.health_changed(job.job_id, task.instance, st["run"], st["health"],
                                     st.get("message", ""))

    def _task(self, ref: Ref) -> tuple[JobRecord, TaskRecord] | None:
        job = self.jobs.get(ref["job_id"])
        if job is None or not 0 <= ref["instance"] < len(job.tasks):
            return None
        return job, job.tasks[ref["instance"]]

    def _note_reason(self, ref: Ref, reason: str) -> None:
        found = self._task(ref)
        if found is not None:
            task = found[1]
            if task.run == ref["run"] and task.state in (S.READY, S.PENDING):
                task.reason = reason

    def _fact(self, batch: Batch, ref: Ref, target: TaskState, reason: str,
              host: str | None = None, exit_code: int | None = None, round_: int = -1) -> None:
        """A fact from another service that `ref`'s run reached `target` (see folding)."""
        found = self._task(ref)
        if found is None:
            return
        job, task = found
        if handover.ended(job, task, batch, ref["run"], target, reason, exit_code):
            return  # the end of the run a drain replaced
        cur = batch.pending(job.job_id, task)
        if (host and ref["run"] == task.unreached_run and target in ON_HOST
                and (cur.run != ref["run"] or cur.state in TERMINAL)):
            # the run ended here before its launch was seen: make sure it does not run on
            batch.kill(host, job.job_id, task.instance, ref["run"], 0.0,
                       "run ended before its launch was seen")
        if target == S.KILLED and cur.state == S.PREEMPTING:
            reason = preempted_reason(task.reason)
        elif target == S.KILLED and not task.kill_requested and cur.state != S.KILLING:
            target, reason = S.FAILED, reason or "killed outside the scheduler"
        if moves_forward(cur, ref["run"], target):
            if placement_implied(cur, ref["run"], target, host):
                self.emit(batch, job, task, S.PLACED, cur,
                          f"placed (its placement read after {target.value})", host, None)
                cur = batch.pending(job.job_id, task)
            self.emit(batch, job, task, target, cur, reason, host, exit_code, round_=round_)

    def _admitted(self, batch: Batch, ref: Ref, at: int) -> None:
        """TasksAdmitted of one run. After a placement timeout gave the run's allocation
        back, only an admission made after the give-back counts (the resource manager
        admits the run again once its backoff has passed); an older one read late, or
        redelivered, is stale. Event times of two services are compared, as placement
        does (`placement.domain.runbook`): ties go to the admission."""
        found = self._task(ref)
        if found is None:
            return
        job, task = found
        cur = batch.pending(job.job_id, task)
        if (cur.state == S.PENDING and cur.run == task.run == ref["run"]
                and task.placement_attempts > 0 and at < task.since):
            return
        self._fact(batch, ref, S.READY, "admitted")

    def _placed(self, batch: Batch, p: Ref, round_: int) -> None:
        """PlacementMade of one run: a round no newer than one already seen is stale; a
        newer round replaces the placement the run holds (PLACED -> READY -> PLACED, both
        legal moves); else the usual forward fact."""
        found = self._task(p)
        if found is None:
            return
        job, task = found
        cur = batch.pending(job.job_id, task)
        if p["run"] == cur.run and round_ <= cur.placed_round:
            return  # a placement of this run was already made in this round or a later one
        if supersedes(cur, p["run"], round_):
            self.emit(batch, job, task, S.READY, cur,
                      f"placement of round {cur.round} superseded by round {round_}",
                      None, None)
        self._fact(batch, p, S.PLACED, "placed", host=p["host"], round_=round_)

    def _reject(self, batch: Batch, r: Ref) -> None:
        found = self._task(r)
        if found is None:
            return
        job, task = found
        cur = batch.pending(job.job_id, task)
        verdict = judge_rejection(cur, r["run"], r["host"], r.get("round", -1))
        if verdict == RejectionVerdict.APPLY:
            self.emit(batch, job, task, S.READY, cur, f"placement rejected: {r['reason']}",
                      None, None)
        elif verdict == RejectionVerdict.HOLD:
            self.held.hold(job.job_id, task.instance, r["run"], r.get("round", -1), r["host"])

    def emit(self, batch: Batch, job: JobRecord, task: TaskRecord, target: TaskState,
             cur: Pending, reason: str, host: str | None, exit_code: int | None, *,
             round_: int = -1, not_before_ms: int | None = None) -> None:
        """Decide one change of `task`'s current run, and the run that follows it."""
        if target in (S.PENDING, S.READY):
            host = None
        elif host is None:
            host = cur.host
        failures = cur.failures + (1 if target in (S.FAILED, S.LOST) else 0)
        batch.add(job.job_id, change(
            task.instance, cur.run, target, cur.state, reason, host, exit_code, failures,
            not_before_ms=not_before_ms, round_=round_ if target == S.PLACED else -1,
            pinned_host=task.pinned_host if target == S.PENDING else None))
        if job.long_running:
            if target in TERMINAL and not (task.kill_requested or job.kill_requested):
                batch.add(job.job_id, restart_run(
                    job, task, cur.run, target, reason, failures, self.now_ms,
                    self.timeouts.restart_base_ms, host))
        elif target in (S.FAILED, S.LOST) and should_retry(job, task, target, failures):
            batch.add(job.job_id, retry_run(task.instance, cur.run, target, reason, failures))
        elif (target == S.KILLED and cur.state == S.PREEMPTING
              and not (task.kill_requested or job.kill_requested)):
            batch.add(job.job_id, requeued(task.instance, cur.run, reason, failures))

    def _lose_host(self, batch: Batch, body: dict[str, Any]) -> None:
        """The runs the host manager had launched on the lost incarnation (listed in the
        fact, so no scan of the book) are lost; a listed run the job manager has not seen
        reach the host yet is lost all the same (a later stage). Runs only PLACED there and
        not listed are left alone (the host manager rejects them back).

        Each lost run is also killed on its host: a host declared lost may only have been
        slow (a stalled agent, an overloaded host manager); when it answers again its agent
        reads the kills and stops the runs whose replacements now run elsewhere (a launch
        it reads after the kill is not started), as Mesos shuts down the tasks of a
        returning agent. If the host is really gone the kills reach no one."""
        host, reason = body["host"], body["reason"]
        for rid in sorted(set(body["runs"])):
            try:
                job_id, instance, run = parse_run_id(rid)
            except ValueError:
                continue
            found = self._task({"job_id": job_id, "instance": instance})
            if found is None:
                continue
            job, task = found
            if handover.ended(job, task, batch, run, S.LOST, f"host {host} lost: {reason}",
                              None):
                continue
            cur = batch.pending(job_id, task)
            target = S.KILLED if cur.state == S.KILLING else S.LOST
            if cur.run == run and cur.state not in TERMINAL:
                self.emit(batch, job, task, target, cur, f"host {host} lost: {reason}",
                          cur.host or host, None)
                batch.kill(host, job_id, instance, run, 0.0,
                           f"run {run} was declared lost with its host {host} ({reason}) "
                           f"and replaced: it must not run on")

    def preempt(self, victims: Iterable[Ref], now_ms: int) -> list[Event]:
        """Take back the named runs (see `kills.preempt`)."""
        self.now_ms = now_ms
        batch = Batch()
        kills.preempt(self, batch, victims)
        return self._commit(batch, now_ms)

    def _decide_updates(self, job_id: str, now_ms: int) -> list[Event]:
        """Answer the job's undecided update requests and commands, in order."""
        events: list[Event] = []
        for etype, body in list(self.update_inbox.get(job_id, ())):
            decide = updates.request if etype == "JobUpdateRequested" else updates.command
            for ev in decide(self, body, now_ms):
                if ev.type in ("JobUpdateRejected", "UpdateStateChanged", "JobSpecChanged"):
                    self.apply(ev.type, ev.body)  # idempotent for those already applied
                events.append(ev)
            if job_id in self.update_inbox and (etype, body) in self.update_inbox[job_id]:
                self.update_inbox[job_id].remove((etype, body))  # answered by a no-op
        return events

    def _start(self, job_id: str, now_ms: int, requested_by: str = "") -> list[Event]:
        job = self.jobs.get(job_id)
        if not starts.startable(job) or job_id in self.ended:
            return []
        assert job is not None
        batch = Batch()
        starts.carry_out(self, job, batch, requested_by)
        if job.spec.type == "DAEMON":
            place_daemons(self, batch, [job_id])
        if not batch.changes:  # a start changes the job's state even if no task moved
            return self._job_state_events(job, now_ms) + self._commit(batch, now_ms)
        return self._commit(batch, now_ms)

    def roll_now(self, job_id: str, now_ms: int) -> list[Event]:
        """One step of the job's update and the task changes it decides."""
        batch = Batch()
        events = updates.roll(self, job_id, batch, now_ms)
        return events + self._commit(batch, now_ms)

    def reconcile(self, now_ms: int) -> list[Event]:
        """Decide what the book shows as undecided (see the module contract)."""
        self.now_ms = now_ms
        events: list[Event] = []
        for job_id in sorted(self.update_inbox):
            events.extend(self._decide_updates(job_id, now_ms))
        for job_id in sorted(self.start_at):
            if job_id in self.jobs:
                events.extend(self._start(job_id, now_ms))
        for job_id in sorted(self.submitted):
            events.extend(self._decide_submission(self.submitted[job_id], now_ms))
        batch = Batch()
        for job_id in sorted(self.kill_intents):
            job = self.jobs.get(job_id)
            if job is not None and job_id not in self.ended:  # an ended job has no kill left
                intent = self.kill_intents[job_id]
                kills.carry_out(self, job, None if intent is None else sorted(intent), batch)
        kills.controllers(self, sorted(self.controller_ended), batch)
        decided = set(batch.changes)
        events.extend(self._commit(batch, now_ms))
        for job_id in sorted(set(self.kill_intents) - decided):
            if job_id in self.jobs:  # a kill changes the job's state even if no task moved
                events.extend(self._job_state_events(self.jobs[job_id], now_ms))
        return events

    def tick(self, now_ms: int) -> list[Event]:
        """The periodic decisions: reconcile, timeouts, then retention."""
        self.now_ms = now_ms
        events = self.reconcile(now_ms)
        batch = Batch()
        for key in sorted(self.watched):
            job = self.jobs[key[0]]
            task = job.tasks[key[1]]
            decided = expiry(task, now_ms, self.timeouts)
            if decided is not None and not task.kill_requested:
                self.emit(batch, job, task, decided.target, batch.pending(job.job_id, task),
                          decided.reason, None, None, not_before_ms=decided.not_before_ms)
        for job_id in sorted(j for j, rec in self.updates.items() if rec.live):
            events.extend(updates.roll(self, job_id, batch, now_ms))
        place_daemons(self, batch)
        make_room(self, batch)
        progress = drain_hosts(self, batch, now_ms)
        events.extend(self._commit(batch, now_ms))
        events.extend(self._drained(progress))
        self.forget(now_ms)
        events.extend(self.reconciler.due(self, now_ms))
        return events

    def forget(self, now_ms: int) -> None:
        """Terminal jobs and rejections older than the retention window leave the book."""
        horizon = now_ms - self.retention_ms
        for job_id in [j for j, at in self.ended.items() if at <= horizon]:
            job = self.jobs.pop(job_id)
            del self.ended[job_id]
            for key in [(job_id, i) for i in range(len(job.tasks))]:
                self.watched.pop(key, None)
            for task in job.tasks:
                if task.host is not None:
                    self.on_host.get(task.host, {}).pop((job_id, task.instance), None)
                if task.outgoing is not None:
                    self.outgoing.get(task.outgoing.host, {}).pop((job_id, task.instance),
                                                                  None)
            self.daemon_jobs.discard(job_id)
            self.updates.pop(job_id, None)
            self.start_at.pop(job_id, None)
            self.update_inbox.pop(job_id, None)
            self.answered_at.pop(job_id, None)
            self.held.drop_job(job_id, len(job.tasks))
            self.controller_ended.discard(job_id)
            self.kill_intents.pop(job_id, None)
            self.kill_spared.pop(job_id, None)
            self.intent_at.pop(job_id, None)
            self.forgotten.add(job_id)
        for job_id in [j for j, at in self.rejected_at.items() if at <= horizon]:
            del self.rejected[job_id], self.rejected_at[job_id]
            self.forgotten.add(job_id)
        for job_id in [j for j, at in self.intent_at.items() if at <= horizon
                       and j not in self.jobs and j not in self.submitted]:
            del self.intent_at[job_id]  # a kill of a job never submitted in the window
            self.kill_intents.pop(job_id, None)

    def _decide_submission(self, sub: dict[str, Any], now_ms: int) -> list[Event]:
        created, problems = validate_submission(sub, self.pools, self.leaf_pools, now_ms)
        if created is None:
            ev = Event("JobRejected", sub["job_id"], {"job_id": sub["job_id"], "at": now_ms,
                                                       "name": sub["name"], "reasons": problems})
            self.apply(ev.type, ev.body)
            return [ev]
        ev = Event("JobCreated", sub["job_id"], created)
        self.apply(ev.type, ev.body)
        job = self.jobs[sub["job_id"]]
        batch = Batch()
        for t in job.tasks:
            batch.add(job.job_id, change(t.instance, 1, S.PENDING, S.INITIALIZED, "created",
                                         None, None, 0))
        if is_daemon(job):
            place_daemons(self, batch, [job.job_id])
        return [ev, *self._commit(batch, now_ms), *self._kill_job(job.job_id, now_ms)]

    def _kill_job(self, job_id: str, now_ms: int) -> list[Event]:
        job = self.jobs.get(job_id)
        if job is None or job_id not in self.kill_intents:
            return []
        batch = Batch()
        intent = self.kill_intents[job_id]
        kills.carry_out(self, job, None if intent is None else sorted(intent), batch)
        if not batch.changes:  # a kill changes the job's state even if no task moved
            return self._job_state_events(job, now_ms) + self._commit(batch, now_ms)
        return self._commit(batch, now_ms)

    def _commit(self, batch: Batch, now_ms: int) -> list[Event]:
        """Apply the batch's changes as TaskStateChanged events (one per job), follow with
        job state changes, carry out what a controller's end decides, then the kills."""
        events: list[Event] = []
        health = batch.health
        while batch.changes:
            for job_id in sorted(batch.changes):
                changes = batch.changes[job_id]
                self._versions(self.jobs[job_id], changes)
                ev = Event("TaskStateChanged", job_id, {"job_id": job_id, "at": now_ms,
                                                         "changes": changes})
                self.apply(ev.type, ev.body)
                events.append(ev)
                events.extend(self._job_state_events(self.jobs[job_id], now_ms))
            follow = Batch()
            kills.controllers(self, sorted(set(batch.changes) & self.controller_ended), follow)
            for host, items in batch.kills.items():
                for item in items:
                    follow.kills.setdefault(host, []).append(item)
            batch = follow
        for job_id in sorted(health):
            ev = Event("TaskHealthChanged", job_id, {"job_id": job_id, "at": now_ms,
                                                      "changes": health[job_id]})
            self.apply(ev.type, ev.body)
            events.append(ev)
        for host in sorted(batch.kills):
            events.append(Event("TaskKillRequested", host,
                                {"host": host, "at": now_ms, "kills": batch.kills[host]}))
        return events

    def _versions(self, job: JobRecord, changes: list[dict[str, Any]]) -> None:
        """Each change names its run's config version: the current run's, or the goal
        version for a new run (see `updates.goal_version`)."""
        for ch in changes:
            if "config_version" in ch:
                continue
            i = ch["instance"]
            if i >= len(job.tasks):
                ch["config_version"] = max(job.versions)  # a new daemon instance
            elif ch["run"] <= job.tasks[i].run:
                ch["config_version"] = job.tasks[i].config_version
            else:
                ch["config_version"] = updates.goal_version(self, job, job.tasks[i])

    def _drained(self, progress: list[dict[str, Any]]) -> list[Event]:
        events = [Event("HostDrainProgressed", p["host"], p) for p in progress]
        for ev in events:
            self.apply(ev.type, ev.body)
        return events

    def _job_state_events(self, job: JobRecord, now_ms: int) -> list[Event]:
        new_state = derive_job_state(job.counts, len(job.tasks), job.kill_requested,
                                     job.controller_state(), long_running=job.long_running,
                                     stopped=starts.all_stopped(job))
        if new_state == job.state:
            return []
        ev = Event("JobStateChanged", job.job_id, {
            "job_id": job.job_id, "at": now_ms, "state": new_state.value,
            "previous_state": job.state.value,
            "task_counts": {s.value: n for s, n in sorted(job.counts.items()) if n}})
        self.apply(ev.type, ev.body)
        return [ev]
