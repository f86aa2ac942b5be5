"""Where the first report of a run's end was lost, for the ends reconciliation brought back.

The job manager asks an agent about a run it has had no news of for a minute
(`jobmgr.domain.reconciliation`); the agent answers with the run's end again ("(reported
again: reconciliation)"), and the follower counts such ends
(`JobFollower.recovered_runs`). Each one means the agent's first report of that end was
lost somewhere. For those runs, task-status-reported and the job manager's inbox
(jobmgr-inbox, written only when the job manager is partitioned) are read again from
their start, and each run gets the last hop its first end report reached (`STEPS`):

- `never reported by its agent`: task-status-reported holds no end of the run but the
  answer to the question (the agent's side: its runner, its book, its publisher);
- `reported, not routed to the job manager`: an agent's report of the end is on
  task-status-reported, and no part of it is in jobmgr-inbox (the job manager's router,
  which split the statuses until session 35);
- `routed, not recorded` (`reported, not recorded` with one job manager, and with a
  partitioned one since session 35, whose shards read the statuses whole): the report
  reached the job manager's input and the job manager did not record it (its consumer
  or its core).

The samples name the records (topic, partition, offset) so a lost range can be looked up,
and `inbox_offsets` gives, per inbox partition, the first and last offset of the reports
routed and not recorded: one short range points at a batch the consumer passed over.
`committed_past` says, per step, how many of the lost reports lie below the offset the job
manager's consumer group (`peloton-jobmgr`, router and shards alike) has committed on
their topic: those were taken and counted as done without effect (lost inside the
service: its intake, its driver or its core), the others were never taken (a consumer
that stopped or fell behind). A partitioned job manager's shards commit nothing on
task-status-reported (they read it whole, their positions in their snapshots), so
there it counts none.
"""

from __future__ import annotations

from collections import Counter
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Any

from peloton.bus.codec import default_codec
from peloton.minicluster.load import committed_offsets, read_to_end
from peloton.model.taskstate import TERMINAL

__all__ = ["STEPS", "EndTrail", "EndTrails", "step_of", "read_end_trails",
           "end_trail_summary"]

STEPS = ("never reported by its agent", "reported, not routed to the job manager",
         "routed, not recorded", "reported, not recorded")
_TOPICS = ("task-status-reported", "jobmgr-inbox")
_ENDS = frozenset(str(s) for s in TERMINAL)
_ANSWER = "reconciliation)"  # the agent's answer to the question ends its message so
_SAMPLES = 5
GROUP = "peloton-jobmgr"

Run = tuple[str, int, int]
Where = tuple[int, int, int]  # (partition, offset, the report's `at`)


@dataclass
class EndTrail:
    """The end reports of one run: on task-status-reported (the agent's, not its answer
    to reconciliation), in jobmgr-inbox, and the answers."""

    reported: list[Where] = field(default_factory=list)
    routed: list[Where] = field(default_factory=list)
    answered: list[Where] = field(default_factory=list)


@dataclass
class EndTrails:
    """The trails of the runs asked about, whether the job manager's inbox held any part
    of a status report (its router split them), and its group's committed offsets of the
    two topics."""

    trails: dict[Run, EndTrail]
    routing: bool
    committed: dict[tuple[str, int], int]


def step_of(trail: EndTrail | None, routing: bool) -> str:
    """The last hop (`STEPS`) the run's first end report reached; `routing`: the job
    manager's router split the statuses (its inbox holds parts of them)."""
    if trail is None or not trail.reported:
        return STEPS[0]
    if not routing:
        return STEPS[3]
    return STEPS[2] if trail.routed else STEPS[1]


async def read_end_trails(bootstrap: str, runs: set[Run]) -> EndTrails:
    """The end trails of `runs` (see `EndTrails`)."""
    codec = default_codec()
    trails: dict[Run, EndTrail] = {}
    routing = False
    partitions: set[tuple[str, int]] = set()
    async with aclosing(read_to_end(bootstrap, _TOPICS)) as records:
        async for rec in records:
            inbox = rec.topic == "jobmgr-inbox"
            partitions.add((rec.topic, rec.partition))
            for etype, body in codec.decode_each(rec.value):
                if etype != "TaskStatusReported":
                    continue
                routing = routing or inbox  # the router split statuses (before session 35)
                for st in body["statuses"]:
                    key = (st["job_id"], st["instance"], st["run"])
                    if key not in runs or st["state"] not in _ENDS:
                        continue
                    trail = trails.setdefault(key, EndTrail())
                    where = (rec.partition, rec.offset, int(body["at"]))
                    if (st.get("message") or "").endswith(_ANSWER):
                        if not inbox:
                            trail.answered.append(where)
                    elif inbox:
                        trail.routed.append(where)
                    else:
                        trail.reported.append(where)
    return EndTrails(trails, routing, await committed_offsets(bootstrap, GROUP, partitions))


def end_trail_summary(found: EndTrails, runs: set[Run]) -> dict[str, Any]:
    """Counts per step, how many of each step's lost reports the group committed past,
    the inbox offsets of the reports routed and not recorded, and a few runs of each step
    with their records."""
    steps = {key: step_of(found.trails.get(key), found.routing) for key in runs}
    samples: dict[str, list[str]] = {}
    inbox: dict[int, list[int]] = {}
    past: Counter[str] = Counter()
    for key in sorted(runs):
        tr = found.trails.get(key) or EndTrail()
        step = steps[key]
        lost = (("jobmgr-inbox", tr.routed) if step == STEPS[2]
                else ("task-status-reported", tr.reported))
        if any(off < found.committed.get((lost[0], p), 0) for p, off, _at in lost[1]):
            past[step] += 1
        if step == STEPS[2]:
            for p, off, _at in tr.routed:
                inbox.setdefault(p, []).append(off)
        if len(samples.setdefault(step, [])) < _SAMPLES:
            samples[step].append(
                f"{key[0]}/{key[1]} run {key[2]}: reported {_records(tr.reported)}; "
                f"routed {_records(tr.routed)}; answered {_records(tr.answered)}")
    counts = Counter(steps.values())
    return {"by_step": {s: counts[s] for s in STEPS if counts[s]},
            "committed_past": {s: past[s] for s in STEPS if counts[s] and s != STEPS[0]},
            "inbox_offsets": {f"p{p}": f"{min(offs)}-{max(offs)} ({len(offs)} reports)"
                              for p, offs in sorted(inbox.items())},
            "samples": samples}


def _records(where: list[Where]) -> str:
    return ", ".join(f"p{p}@{off} at {at}" for p, off, at in where) or "none"
