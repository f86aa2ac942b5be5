"""Where the tasks of a burst that did not finish got stuck: the job manager's side (the
follower's job-events history) set against the agents' side (`task-status-reported`).

For each instance of a job that is not terminal, its newest run as the job manager last
stated it; for those runs, the newest status the agents reported. Each stuck run falls in
one class (`CLASSES`), which says which side lost it:

- `ended, the follower missed it`: job-events, read again from its start, has the run's
  end: the job manager recorded it and the benchmark's follower did not see it (the
  reader's side, not the cluster's);
- `end reported, not recorded`: an agent reported the run's end and the job manager never
  recorded it (a lost or dropped report: the job manager's side);
- `running on agent, no end`: the agent reported it started but never that it ended (the
  agent's runner: its timer, or a report that never left the agent);
- `launched, agent silent`: the job manager launched it and no agent reported anything of
  it (the launch did not reach an agent, or the agent dropped it);
- `not launched`: the job manager's newest state for it is before launch (scheduling:
  the resource manager, placement, the host manager).

`diagnose` returns the counts per class, the hosts the stuck runs are on (a few hosts
holding them all points at those hosts' agent) and a few runs of each class as samples;
for runs `not launched`, also the step their scheduling trail reached
(`not_launched_trail`, `peloton.minicluster.schedtrail`).
"""

from __future__ import annotations

from collections import Counter
from contextlib import aclosing
from typing import Any

from peloton.minicluster.load import JobFollower, RunHistory, agent_runs, read_to_end
from peloton.minicluster.schedtrail import read_trails, trail_summary
from peloton.model.taskstate import ON_HOST, TERMINAL

__all__ = ["CLASSES", "stuck_runs", "classify", "summary", "diagnose", "journal_runs"]

CLASSES = ("ended, the follower missed it", "end reported, not recorded",
           "running on agent, no end", "launched, agent silent", "not launched")
_SAMPLES = 5

Run = tuple[str, int, int]


def stuck_runs(follower: JobFollower) -> dict[Run, tuple[str, str | None]]:
    """Per instance of a job not terminal, its newest run (job, instance, run) that is not
    terminal, with the job manager's last state and host for it."""
    out: dict[Run, tuple[str, str | None]] = {}
    for (job, inst), (run, hist) in follower.newest_runs().items():
        if hist.state not in TERMINAL:
            host = next((h for _at, _s, h in reversed(hist.changes) if h), None)
            out[(job, inst, run)] = (hist.state, host)
    return out


def classify(stuck: dict[Run, tuple[str, str | None]], agents: dict[Run, RunHistory],
             journal: dict[Run, RunHistory] | None = None) -> dict[Run, str]:
    """The class (`CLASSES`) of each stuck run, given what the agents reported and what
    job-events holds when read again (`journal`)."""
    launched = {str(s) for s in ON_HOST}
    out: dict[Run, str] = {}
    for key, (state, _host) in stuck.items():
        recorded = (journal or {}).get(key)
        reported = agents.get(key)
        if recorded is not None and recorded.first(TERMINAL) is not None:
            out[key] = CLASSES[0]
        elif reported is not None and reported.first(TERMINAL) is not None:
            out[key] = CLASSES[1]
        elif reported is not None and reported.changes:
            out[key] = CLASSES[2]
        elif state in launched:
            out[key] = CLASSES[3]
        else:
            out[key] = CLASSES[4]
    return out


def summary(stuck: dict[Run, tuple[str, str | None]], classes: dict[Run, str],
            agents: dict[Run, RunHistory]) -> dict[str, Any]:
    """Counts per class, the hosts holding stuck runs (most first) and samples per class."""
    hosts = Counter(host or "-" for _state, host in stuck.values())
    samples: dict[str, list[str]] = {}
    for key, cls in sorted(classes.items()):
        if len(samples.setdefault(cls, [])) < _SAMPLES:
            job, inst, run = key
            state, host = stuck[key]
            said = agents.get(key)
            agent = said.state if said is not None and said.changes else "nothing"
            samples[cls].append(f"{job}/{inst} run {run} on {host or '-'}: job manager "
                                f"{state}, agent {agent}")
    return {"stuck_runs": len(stuck),
            "by_class": {c: n for c in CLASSES if (n := sum(1 for v in classes.values()
                                                           if v == c))},
            "hosts": len(hosts), "top_hosts": dict(hosts.most_common(_SAMPLES)),
            "samples": samples}


async def diagnose(bootstrap: str, follower: JobFollower) -> dict[str, Any]:
    """Where the follower's stuck runs were lost (module docstring); reads
    task-status-reported from its start, so call it while the cluster is still up."""
    stuck = stuck_runs(follower)
    if not stuck:
        return summary({}, {}, {})
    jobs = {job for job, _i, _r in stuck}
    agents = await agent_runs(bootstrap, jobs)
    classes = classify(stuck, agents, await journal_runs(bootstrap, jobs))
    out = summary(stuck, classes, agents)
    if unlaunched := {key for key, cls in classes.items() if cls == CLASSES[4]}:
        trails, committed = await read_trails(bootstrap, unlaunched)
        out["not_launched_trail"] = trail_summary(trails, unlaunched, committed)
    return out


async def journal_runs(bootstrap: str, jobs: set[str]) -> dict[Run, RunHistory]:
    """The job manager's side read again: per run of `jobs`, its TaskStateChanged history
    in job-events, from the topic's start to its current end."""
    again = JobFollower(bootstrap)
    again.want({job: 0 for job in jobs})
    async with aclosing(read_to_end(bootstrap, ["job-events"])) as records:
        async for rec in records:
            again.fold_record(rec.value)
    return again.runs
