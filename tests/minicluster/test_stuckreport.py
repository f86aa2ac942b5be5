"""stuckreport: which side lost each stuck run, from the job manager's history and the
agents' reports."""

from __future__ import annotations

from peloton.minicluster.load import JobFollower, RunHistory
from peloton.minicluster.stuckreport import CLASSES, classify, stuck_runs, summary


def _follower(runs: dict[tuple[str, int, int], list[tuple[int, str, str | None]]],
              ended: set[str] = frozenset()) -> JobFollower:
    f = JobFollower("unused:0")
    f.want({job: 1 + max(i for (j, i, _r) in runs if j == job) for job, _i, _r in runs})
    for key, changes in runs.items():
        f.runs[key] = RunHistory(list(changes))
    for job in ended:
        f.job_state[job] = "SUCCEEDED"
    return f


def test_only_the_newest_run_of_jobs_not_terminal_counts() -> None:
    f = _follower({
        ("a", 0, 1): [(1, "LAUNCHED", "h1"), (2, "RUNNING", "h1"), (3, "FAILED", "h1")],
        ("a", 0, 2): [(4, "READY", None), (5, "LAUNCHED", "h2"), (6, "RUNNING", None)],
        ("a", 1, 1): [(1, "RUNNING", "h1"), (2, "SUCCEEDED", "h1")],
        ("b", 0, 1): [(1, "RUNNING", "h3")],
    }, ended={"b"})
    # a/0's first run ended, its second is stuck on the host it was launched to; a/1
    # ended; b is terminal as a job
    assert stuck_runs(f) == {("a", 0, 2): ("RUNNING", "h2")}


def test_each_side_is_named() -> None:
    stuck = {("j", 0, 1): ("RUNNING", "h1"), ("j", 1, 1): ("RUNNING", "h1"),
             ("j", 2, 1): ("LAUNCHED", "h2"), ("j", 3, 1): ("READY", None),
             ("j", 4, 1): ("RUNNING", "h3")}
    ended = RunHistory([(1, "RUNNING", "h1"), (2, "SUCCEEDED", "h1")])
    agents = {("j", 0, 1): ended, ("j", 4, 1): ended,
              ("j", 1, 1): RunHistory([(1, "STARTING", "h1"), (1, "RUNNING", "h1")])}
    # read again, job-events has j/4's end: the follower missed it, whatever the agent said;
    # j/0 is there only up to RUNNING
    journal = {("j", 4, 1): ended, ("j", 0, 1): RunHistory([(1, "RUNNING", "h1")])}
    classes = classify(stuck, agents, journal)
    assert classes == {("j", 4, 1): CLASSES[0], ("j", 0, 1): CLASSES[1],
                       ("j", 1, 1): CLASSES[2], ("j", 2, 1): CLASSES[3],
                       ("j", 3, 1): CLASSES[4]}
    assert classify(stuck, agents)[("j", 4, 1)] == CLASSES[1]  # not read again
    found = summary(stuck, classes, agents)
    assert found["stuck_runs"] == 5
    assert found["by_class"] == {c: 1 for c in CLASSES}
    assert found["hosts"] == 4 and found["top_hosts"] == {"h1": 2, "h2": 1, "-": 1, "h3": 1}
    assert found["samples"][CLASSES[1]] == [
        "j/0 run 1 on h1: job manager RUNNING, agent SUCCEEDED"]
    assert found["samples"][CLASSES[3]] == [
        "j/2 run 1 on h2: job manager LAUNCHED, agent nothing"]


def test_nothing_stuck_is_an_empty_summary() -> None:
    f = _follower({("a", 0, 1): [(1, "SUCCEEDED", "h1")]}, ended={"a"})
    assert stuck_runs(f) == {}
    assert summary({}, {}, {}) == {"stuck_runs": 0, "by_class": {}, "hosts": 0,
                                   "top_hosts": {}, "samples": {}}
