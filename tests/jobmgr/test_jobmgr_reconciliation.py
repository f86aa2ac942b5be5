"""The job manager asks agents about runs it has had no news of (reconciliation), so a run
whose end report was lost does not stay RUNNING for ever: the agent's answer (its end
again, RUNNING, or LOST) is an ordinary status."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from jobmgr_driver import Jobmgr, changes, job_states
from test_jobmgr_handover import draining_web, kills

from peloton.jobmgr.domain.book import JobBook
from peloton.jobmgr.domain.reconciliation import ASKED
from peloton.jobmgr.domain.timeouts import Timeouts
from peloton.model.event import Event

S = 1_000
MIN = 60 * S


def asked(events: list[Event]) -> dict[str, list[tuple[str, int, int]]]:
    """host -> the runs asked about, from a tick's events."""
    out: dict[str, list[tuple[str, int, int]]] = {}
    for e in events:
        if e.type == "TaskReconcileRequested":
            assert e.key == e.body["host"]  # routed to the host's agent
            out.setdefault(e.body["host"], []).extend(
                (r["job_id"], r["instance"], r["run"]) for r in e.body["runs"])
    return out


def running(*hosts: str) -> Jobmgr:
    """Job "j" with one RUNNING instance per host given, in order."""
    jm = Jobmgr()
    jm.submit("j", len(hosts))
    for i, host in enumerate(hosts):
        jm.to_running("j", i, host)
    return jm


def test_a_run_with_no_news_for_a_minute_is_asked_about_then_every_ten_minutes() -> None:
    jm = running("h1", "h2")
    assert asked(jm.tick(MIN - 100)) == {}  # news less than a minute old
    assert asked(jm.tick(10 * S)) == {"h1": [("j", 0, 1)], "h2": [("j", 1, 1)]}
    assert asked(jm.tick(10 * S)) == {}  # asked: not again at once
    assert asked(jm.tick(9 * MIN)) == {}
    assert asked(jm.tick(MIN)) == {"h1": [("j", 0, 1)], "h2": [("j", 1, 1)]}
    # a run that ends leaves its host: it is not asked about any more
    jm.status("h2", "j", 1, "SUCCEEDED", exit_code=0)
    assert asked(jm.tick(10 * MIN)) == {"h1": [("j", 0, 1)]}


def test_the_agent_s_end_reported_again_ends_the_job() -> None:
    jm = running("h1")
    # the agent's report of the end was lost on its way: the job manager never read it
    assert asked(jm.tick(2 * MIN)) == {"h1": [("j", 0, 1)]}
    out = jm.status("h1", "j", 0, "SUCCEEDED", exit_code=0,
                    message="exit code 0 (reported again: reconciliation)")
    assert changes(out) == [("j", 0, 1, "RUNNING", "SUCCEEDED")]
    assert job_states(out)[-1] == ("RUNNING", "SUCCEEDED")
    assert asked(jm.tick(20 * MIN)) == {}  # nothing on a host any more


def test_a_run_its_agent_does_not_know_is_lost_and_runs_again() -> None:
    jm = running("h1")
    assert asked(jm.tick(2 * MIN)) == {"h1": [("j", 0, 1)]}
    out = jm.status("h1", "j", 0, "LOST", message="the agent of h1 does not know this run")
    assert ("j", 0, 1, "RUNNING", "LOST") in changes(out)
    assert ("j", 0, 2, "INITIALIZED", "PENDING") in changes(out)  # retried, as a lost run
    assert jm.task("j", 0).run == 2 and jm.task("j", 0).host is None


def test_reconciliation_off() -> None:
    jm = Jobmgr(JobBook(timeouts=Timeouts(reconcile_ms=0)))
    jm.submit("j", 1)
    jm.to_running("j", 0, "h1")
    assert asked(jm.tick(60 * MIN)) == {}


@settings(max_examples=40, deadline=None)
@given(steps=st.lists(st.tuples(st.integers(0, 4), st.integers(1, 5 * MIN)), max_size=25),
       hosts=st.integers(1, 4))
def test_only_runs_on_a_host_with_no_news_are_asked_and_each_at_most_every_interval(
        steps: list[tuple[int, int]], hosts: int) -> None:
    limits = Timeouts()
    jm = Jobmgr()
    jm.submit("j", 5)
    for i in range(5):
        jm.to_running("j", i, f"h{i % hosts}")
    last: dict[tuple[str, int, int], int] = {}
    for instance, wait in steps:
        before = {i: (t.state, t.since, t.host) for i, t in
                  enumerate(jm.book.jobs["j"].tasks)} if "j" in jm.book.jobs else {}
        for host, runs in asked(jm.tick(wait)).items():
            for job_id, inst, run in runs:
                state, since, on = before[inst]
                task = jm.task(job_id, inst)
                assert on == host and task.run == run and state in ASKED
                assert jm.now - since >= limits.reconcile_ms
                prev = last.get((job_id, inst, run))
                assert prev is None or prev < since or jm.now - prev >= limits.reconcile_every_ms
                last[(job_id, inst, run)] = jm.now
        task = jm.book.jobs["j"].tasks[instance] if "j" in jm.book.jobs else None
        if task is not None and task.host is not None and task.state.value == "RUNNING":
            jm.status(task.host, "j", instance, "SUCCEEDED", run=task.run, exit_code=0)


# a drain's outgoing run (jobmgr/domain/handover.py): the run a replacement supersedes,
# still on its draining host until its own end


def test_a_drain_s_outgoing_run_whose_end_report_was_lost_is_asked_about_and_ends() -> None:
    j = Jobmgr()
    draining_web(j)  # web/0 run 1 serves on h0, which drains; its replacement is run 2
    j.to_running("web", 0, "h2", run=2)
    assert kills(j.tick(1_000)) == [("h0", "web", 0, 1)]  # its KILLED report gets lost
    assert ("web", 0, 1) not in asked(j.tick(40 * S)).get("h0", [])  # news of its kill
    assert asked(j.tick(40 * S))["h0"] == [("web", 0, 1)]  # a minute with no news
    out = j.status("h0", "web", 0, "KILLED", run=1,
                   message="killed (reported again: reconciliation)")
    assert changes(out) == [("web", 0, 1, "KILLING", "KILLED")]
    assert j.book.outgoing == {"h0": {}}  # the host may be DRAINED now
    assert j.task("web", 0).run == 2 and j.task("web", 0).state.value == "RUNNING"
    assert "h0" not in asked(j.tick(20 * MIN))  # nothing on h0 any more


def test_an_outgoing_run_its_agent_does_not_know_ends_lost_and_its_task_runs_on() -> None:
    j = Jobmgr()
    draining_web(j)
    j.to_running("web", 0, "h2", run=2)
    j.tick(1_000)
    assert asked(j.tick(2 * MIN))["h0"] == [("web", 0, 1)]
    out = j.status("h0", "web", 0, "LOST", run=1, message="the agent of h0 does not know it")
    assert changes(out) == [("web", 0, 1, "KILLING", "LOST")]  # no new run: run 2 serves
    assert j.task("web", 0).run == 2 and j.book.outgoing == {"h0": {}}


def test_a_serving_outgoing_run_is_asked_about_and_running_changes_nothing() -> None:
    j = Jobmgr()
    draining_web(j)  # the replacement has not run yet: run 1 serves on
    j.tick(1_000)
    assert asked(j.tick(70 * S))["h0"] == [("web", 0, 1)]
    assert changes(j.status("h0", "web", 0, "RUNNING", run=1)) == []
    assert j.book.outgoing == {"h0": {("web", 0): None}}
    assert "h0" not in asked(j.tick(5 * MIN))  # asked: not again before ten minutes
    assert asked(j.tick(6 * MIN))["h0"] == [("web", 0, 1)]
