"""Where a stuck run that was never launched stopped: its scheduling trail read again.

For the runs `stuckreport` files as `not launched`, the records that carry a run from
admission to launch are read again from their topics' start: TasksAdmitted
(tasks-admitted), PlacementMade (placement-made, which every host manager reads itself: a
partitioned one's shards read it whole and keep their hosts' placements; and its parts on
hostmgr-inbox, which the host manager's router wrote before session 32), PlacementRejected
(placement-rejected) and TaskLaunchRequested (task-launch-requested). Each run gets the
step it reached last (`STEPS`), so a wave that hangs before launch says which service held
its runs:

- `not admitted`: no TasksAdmitted names it (the resource manager);
- `admitted, not placed`: no PlacementMade (placement);
- `placed, host manager silent`: the host manager neither launched nor rejected its
  newest placement (the host manager's validation);
- `rejected, not placed again`: its newest placement was rejected and none followed;
- `launch requested`: the host manager launched it, and the job manager never recorded
  the launch (the job manager's side).

For `placed, host manager silent`, `committed_past` counts the runs whose newest
placement record lies below the offset the host manager's consumer group
(`peloton-hostmgr`) has committed on its topic: those it took and counted as done without
acting on them; the others it never took. Only one host manager commits placement-made;
a partitioned one's shards read it outside the group (their snapshots hold what they
folded), so only an old inbox part can count for it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Any

from peloton.bus.codec import default_codec
from peloton.minicluster.load import committed_offsets, read_to_end

__all__ = ["STEPS", "Trail", "read_trails", "step_of", "trail_summary"]

STEPS = ("not admitted", "admitted, not placed", "placed, host manager silent",
         "rejected, not placed again", "launch requested")
_TOPICS = ("tasks-admitted", "placement-made", "hostmgr-inbox", "placement-rejected",
           "task-launch-requested")
_SAMPLES = 5
GROUP = "peloton-hostmgr"

Run = tuple[str, int, int]


@dataclass
class Trail:
    """What the scheduling topics hold of one run: (round, host, partition) of each
    placement, the rejected rounds, launches."""

    admitted: int = 0
    placed: list[tuple[int, str, int]] = field(default_factory=list)
    #: round -> (topic, partition, offset) of its PlacementMade records: on
    #: placement-made, and an old router's part on hostmgr-inbox
    records: dict[int, list[tuple[str, int, int]]] = field(default_factory=dict)
    rejected: set[int] = field(default_factory=set)
    launched: int = 0


def step_of(trail: Trail | None) -> str:
    """The last step (`STEPS`) a run reached."""
    if trail is None or not (trail.admitted or trail.placed or trail.launched):
        return STEPS[0]
    if trail.launched:
        return STEPS[4]
    if not trail.placed:
        return STEPS[1]
    newest = max(r for r, _h, _p in trail.placed)
    return STEPS[3] if newest in trail.rejected else STEPS[2]


async def read_trails(bootstrap: str, runs: set[Run],
                      ) -> tuple[dict[Run, Trail], dict[tuple[str, int], int]]:
    """The trails of `runs` and the host manager's group's committed offsets of the
    placement topics."""
    codec = default_codec()
    trails: dict[Run, Trail] = {}

    def trail(job: str, inst: int, run: int) -> Trail | None:
        key = (job, inst, run)
        return trails.setdefault(key, Trail()) if key in runs else None

    async with aclosing(read_to_end(bootstrap, _TOPICS)) as records:
        async for rec in records:
            for etype, body in codec.decode_each(rec.value):
                _fold(rec.topic, rec.partition, etype, body, trail, rec.offset)
    placements = {(t, p) for tr in trails.values() for recs in tr.records.values()
                  for t, p, _o in recs}
    return trails, await committed_offsets(bootstrap, GROUP, placements)


def _fold(topic: str, partition: int, etype: str, body: dict[str, Any],
          trail: Callable[[str, int, int], Trail | None], offset: int = -1) -> None:
    if etype == "TasksAdmitted":
        for t in body["tasks"]:
            if (tr := trail(t["job_id"], t["instance"], t["run"])) is not None:
                tr.admitted += 1
    elif etype == "PlacementMade":
        for p in body["placements"]:
            if (tr := trail(p["job_id"], p["instance"], p["run"])) is not None:
                tr.records.setdefault(body["round"], []).append((topic, partition, offset))
                if topic == "placement-made":
                    tr.placed.append((body["round"], p["host"], partition))
    elif etype == "PlacementRejected" and topic == "placement-rejected":
        for r in body["rejections"]:
            if (tr := trail(r["job_id"], r["instance"], r["run"])) is not None:
                tr.rejected.add(r.get("round", -1))
    elif etype == "TaskLaunchRequested":
        for launch in body["launches"]:
            if (tr := trail(launch["job_id"], launch["instance"], launch["run"])) is not None:
                tr.launched += 1


def trail_summary(trails: dict[Run, Trail], runs: set[Run],
                  committed: dict[tuple[str, int], int] | None = None) -> dict[str, Any]:
    """Counts per step, how many of the host manager's silent step's runs its group
    committed past (module doc), and a few runs of each, with their placements."""
    steps = {key: step_of(trails.get(key)) for key in runs}
    samples: dict[str, list[str]] = {}
    past: Counter[str] = Counter()
    for key in sorted(runs):
        step = steps[key]
        tr = trails.get(key) or Trail()
        if step == STEPS[2] and _committed_past(tr, committed or {}):
            past[step] += 1
        if len(samples.setdefault(step, [])) < _SAMPLES:
            placed = ", ".join(f"round {r} on {h} (placement-made p{p})"
                               for r, h, p in tr.placed) or "never placed"
            samples[step].append(f"{key[0]}/{key[1]} run {key[2]}: admitted "
                                 f"{tr.admitted}x; {placed}; rejected {sorted(tr.rejected)}")
    counts = Counter(steps.values())
    return {"by_step": {s: counts[s] for s in STEPS if counts[s]},
            "committed_past": {STEPS[2]: past[STEPS[2]]} if counts[STEPS[2]] else {},
            "samples": samples}


def _committed_past(tr: Trail, committed: dict[tuple[str, int], int]) -> bool:
    """Whether the host manager's group committed past a record of the newest placement
    (on placement-made, or an old router's part on its inbox)."""
    newest = max(r for r, _h, _p in tr.placed)
    return any(off < committed.get((t, p), 0) for t, p, off in tr.records.get(newest, []))
