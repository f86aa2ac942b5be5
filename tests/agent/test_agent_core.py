"""The agent core (simulated runner, simulated time): bounded state, idempotent launches,
statuses never lost when a report does not reach the log.

`Host` drives one `AgentCore` as the shell does: each call runs inside an event loop whose
clock is simulated time, what it returns counts as published unless the test discards it
(`discard_unpublished`, as the shell does when publishing failed).
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from peloton.agent.app import AgentConfig, AgentCore
from peloton.agent.simrunner import SimulatedRunner
from peloton.model.event import Event
from peloton.model.ids import run_id
from peloton.model.resources import Resources
from peloton.runner.footprint import footprint
from peloton.runner.vclock import VirtualClockLoop, settle

T0 = 1_700_000_000_000
HOST = "host-1"
INCARNATION = "host-1-a"
TICK_MS = 50


class Host:
    def __init__(self, retention_s: float = 1.0, heartbeat_s: float = 1.0) -> None:
        self.now = T0
        self.loop = VirtualClockLoop(T0)
        self.core = AgentCore(AgentConfig(
            host=HOST, incarnation=INCARNATION, capacity=Resources(64.0, 65536.0, 1e6, 0.0),
            simulated=True, retention_s=retention_s, heartbeat_s=heartbeat_s))
        assert isinstance(self.core.runner, SimulatedRunner)
        self.runner = self.core.runner  # the simulated runner, typed as such
        self.published: list[Event] = []
        self.call(lambda c: c.after_replay(self.now))

    def call(self, fn: Callable[[AgentCore], list[Event]], publish: bool = True) -> list[Event]:
        async def go() -> list[Event]:
            out = fn(self.core)
            await settle()
            return out

        out = self.loop.run_until_complete(go())
        if publish:
            self.published.extend(out)
        else:
            self.core.discard_unpublished()
        return out

    def launch(self, runs: list[tuple[str, int, int]], at: int | None = None,
               command: str = "sleep 0.2", incarnation: str = INCARNATION) -> dict[str, Any]:
        body = self.launch_body(runs, at, command, incarnation)
        self.deliver("TaskLaunchRequested", body)
        return body

    def launch_body(self, runs: list[tuple[str, int, int]], at: int | None = None,
                    command: str = "sleep 0.2", incarnation: str = INCARNATION,
                    resources: dict[str, float] | None = None) -> dict[str, Any]:
        extra = {} if resources is None else {"resources": resources}
        return {"host": HOST, "incarnation": incarnation, "at": self.now if at is None else at,
                "launches": [{"job_id": j, "instance": i, "run": r, "command": command,
                              "env": {}, **extra} for j, i, r in runs]}

    def kill(self, runs: list[tuple[str, int, int]], at: int | None = None) -> dict[str, Any]:
        body = {"host": HOST, "at": self.now if at is None else at,
                "kills": [{"job_id": j, "instance": i, "run": r, "grace_period_s": 1.0}
                          for j, i, r in runs]}
        self.deliver("TaskKillRequested", body)
        return body

    def deliver(self, etype: str, body: dict[str, Any]) -> None:
        self.call(lambda c: c.handle(etype, body, self.now))

    def advance(self, ms: int, publish: bool = True) -> None:
        """Let `ms` of simulated time pass, ticking every TICK_MS."""
        end = self.now + ms
        while self.now < end:
            self.now += TICK_MS
            self.loop.set_time_ms(self.now)
            self.call(lambda c: c.tick(self.now), publish)

    def statuses(self) -> list[tuple[str, str]]:
        return [(run_id(s["job_id"], s["instance"], s["run"]), s["state"])
                for ev in self.published if ev.type == "TaskStatusReported"
                for s in ev.body["statuses"]]

    def starts(self) -> Counter[str]:
        return Counter(rid for rid, state in self.statuses() if state == "STARTING")

    def sizes(self) -> int:
        return footprint(self.core)

    def close(self) -> None:
        self.loop.run_until_complete(self.core.runner.close())
        self.loop.close()


def test_many_waves_of_runs_leave_the_agent_flat() -> None:
    host = Host(retention_s=1.0)
    sizes = []
    for wave in range(30):
        host.launch([(f"w{wave}", i, 1) for i in range(40)])
        host.advance(600)
        sizes.append((host.sizes(), len(host.core.book), len(host.runner._runs)))
    states = Counter(state for _, state in host.statuses())
    assert states["SUCCEEDED"] == 30 * 40 and host.starts().most_common(1)[0][1] == 1
    assert sizes[-1] == sizes[5], sizes  # flat: the same after 5 waves as after 30
    assert max(s[1] for s in sizes) <= 3 * 40  # at most the waves within one window
    host.close()


def test_a_redelivered_launch_of_an_ended_and_forgotten_run_is_not_started() -> None:
    host = Host(retention_s=1.0)
    body = host.launch([("job", 0, 1)])
    host.advance(500)
    assert host.statuses() == [("job-0-1", "STARTING"), ("job-0-1", "RUNNING"),
                               ("job-0-1", "SUCCEEDED")]
    host.deliver("TaskLaunchRequested", body)  # redelivered within the window
    host.advance(3_000)
    assert "job-0-1" not in host.core.book and host.runner._runs == {}  # forgotten
    host.deliver("TaskLaunchRequested", body)  # redelivered after it left
    host.advance(500)
    assert host.starts() == {"job-0-1": 1} and host.core.runner.running() == []
    host.launch([("job", 0, 2)])  # the next run of the task is a new request: it starts
    host.advance(500)
    assert host.starts() == {"job-0-1": 1, "job-0-2": 1}
    host.close()


def test_a_launch_for_another_incarnation_is_not_started() -> None:
    host = Host()
    host.launch([("job", 0, 1)], incarnation="host-1-old")
    host.advance(500)
    assert host.statuses() == [] and len(host.core.book) == 0
    host.close()


def test_a_kill_before_the_launch_is_reported_once_and_the_launch_not_started() -> None:
    host = Host(retention_s=1.0)
    kill = host.kill([("job", 0, 1)])
    host.advance(100)
    launch = host.launch([("job", 0, 1)])
    host.deliver("TaskKillRequested", kill)
    host.advance(3_000)
    host.deliver("TaskLaunchRequested", launch)
    host.deliver("TaskKillRequested", kill)
    host.advance(500)
    assert host.statuses() == [("job-0-1", "KILLED")]
    assert len(host.core.book) == 0
    host.close()


def test_statuses_whose_report_did_not_reach_the_log_are_sent_again() -> None:
    host = Host(retention_s=1.0)
    host.launch([("job", 0, 1)])
    host.advance(500, publish=False)  # every report fails: nothing is lost, nothing leaves
    assert host.statuses() == []
    assert "job-0-1" in host.core.book
    host.advance(3_000, publish=False)
    assert "job-0-1" in host.core.book  # its end was never reported: it stays
    host.advance(TICK_MS)
    assert host.statuses() == [("job-0-1", "STARTING"), ("job-0-1", "RUNNING"),
                               ("job-0-1", "SUCCEEDED")]
    host.advance(2_000)
    assert "job-0-1" not in host.core.book
    host.close()


def test_a_registration_that_did_not_reach_the_log_is_sent_again() -> None:
    host = Host()
    assert [e.type for e in host.published] == ["HostRegistered"]
    host.published.clear()
    host.call(lambda c: c.after_replay(host.now), publish=False)
    host.advance(TICK_MS)
    assert [e.type for e in host.published] == ["HostRegistered", "HostStatusReported"]
    host.advance(TICK_MS)
    assert [e.type for e in host.published].count("HostRegistered") == 1
    host.close()


# ------------------------------------------------------------------------------ property

STEPS = st.lists(
    st.tuples(
        st.sampled_from(["launch", "launch", "kill", "redeliver", "redeliver", "wait",
                         "wait", "fail_publish"]),
        st.integers(0, 3),
        st.sampled_from([TICK_MS, 300, 2_500]),
    ),
    min_size=5,
    max_size=40,
)


@settings(max_examples=40, deadline=None)
@given(STEPS)
def test_no_run_is_started_twice_under_redelivery_kills_and_failed_reports(
        steps: list[tuple[str, int, int]]) -> None:
    """Each run is launched by one request and killed by any number; any request may be
    delivered again at any later time; some ticks' reports fail to publish."""
    host = Host(retention_s=1.0)
    records: list[tuple[str, dict[str, Any]]] = []
    launched: set[int] = set()
    try:
        for op, n, ms in steps:
            if op == "launch" and n not in launched:
                launched.add(n)
                records.append(("TaskLaunchRequested", host.launch([("job", n, 1)])))
            elif op == "kill":
                records.append(("TaskKillRequested", host.kill([("job", n, 1)])))
            elif op == "redeliver" and records:
                host.deliver(*records[n % len(records)])
            elif op == "wait":
                host.advance(ms)
            elif op == "fail_publish":
                host.advance(TICK_MS, publish=False)
            assert max(host.starts().values(), default=0) <= 1, host.statuses()
        host.advance(3_000)
        assert max(host.starts().values(), default=0) <= 1, host.statuses()
        ends = Counter(rid for rid, s in host.statuses() if s in ("SUCCEEDED", "KILLED"))
        assert set(host.starts()) <= set(ends)  # every run that started was reported ended
        assert host.core.runner.running() == [] and len(host.core.book) == 0
    finally:
        host.close()


# ------------------------------------------------------------- on the in-memory cluster

def test_agents_stay_flat_over_job_waves_on_the_in_memory_cluster() -> None:
    """The real services and simulated agents (retention 1 s), records redelivered at
    random: every job succeeds, no task runs twice at once, each agent's size is the same
    after the last wave as after the second."""
    from peloton.runner import SERVICES, MemoryRunner, batch_job

    runner = MemoryRunner(seed=3, rate_per_s=2_000, redeliver=0.02)
    for name, factory in SERVICES.items():
        runner.add_service(name, factory)
    for i in range(1, 4):
        runner.add_agent(f"host-{i}", retention_s=1.0)
    agents = [f"agent-host-{i}" for i in range(1, 4)]
    sizes: list[list[int]] = []
    try:
        for wave in range(6):
            runner.submit([batch_job(f"w{wave}-{j}", 4, duration_s=0.2) for j in range(10)])
            assert runner.run_until(runner.watch.all_terminal, max_ms=30_000), \
                runner.watch.states()
            runner.run_for(2_500)  # past the agents' retention window
            sizes.append([footprint(runner.core(a)) for a in agents])
            assert all(len(runner.core(a).book) == 0 for a in agents)
        assert runner.watch.states() == {"SUCCEEDED": 60}
        assert runner.watch.violations == []
        assert sizes[-1] == sizes[1], sizes
    finally:
        runner.close()


def test_a_launch_the_runner_refuses_is_reported_failed_and_leaves_in_time() -> None:
    host = Host(retention_s=1.0)
    host.launch([("bad/job", 0, 1)])  # not a safe sandbox name: the runner refuses it
    host.advance(TICK_MS)
    assert host.statuses() == [("bad/job-0-1", "FAILED")]
    host.advance(1_500)
    assert len(host.core.book) == 0
    host.close()


def test_a_simulated_launch_starts_within_the_handle_without_a_task_per_launch() -> None:
    """SimulatedRunner.launch_now: a fleet of thousands of hosts launches hundreds of runs
    a second, and a task for each was 7-18% of a fleet process's samples."""
    host = Host()
    core = host.core
    body = host.launch_body([("j", i, 1) for i in range(3)])

    async def handle_without_yielding() -> tuple[int, set[str]]:
        before = len(asyncio.all_tasks())
        core.handle("TaskLaunchRequested", body, host.now)
        return len(asyncio.all_tasks()) - before, set(core.runner.running())

    new_tasks, running = host.loop.run_until_complete(handle_without_yielding())
    assert new_tasks == 0
    assert running == {run_id("j", i, 1) for i in range(3)}
    host.advance(TICK_MS)
    assert sorted(host.statuses()) == sorted(
        (run_id("j", i, 1), s) for i in range(3) for s in ("STARTING", "RUNNING"))
    host.close()


def test_a_launch_with_unreadable_resources_is_refused_whole_by_a_simulated_agent() -> None:
    """The simulated runner ignores resources, but the launch is read as every runner reads
    it: an unknown resource kind is an error (the shell dead-letters the record), not a
    run started."""
    host = Host()
    body = host.launch_body([("j", 0, 1)], resources={"cpu": 1.0, "qubits": 2.0})
    with pytest.raises(ValueError, match="qubits"):
        host.deliver("TaskLaunchRequested", body)
    assert host.core.runner.running() == []
    host.close()


def ask(host: Host, runs: list[tuple[str, int, int]]) -> None:
    """The job manager's question about runs of this host (reconciliation)."""
    host.deliver("TaskReconcileRequested", {"host": HOST, "at": host.now, "runs": [
        {"job_id": j, "instance": i, "run": r} for j, i, r in runs]})


def test_a_reconciliation_is_answered_per_run_with_what_the_agent_knows() -> None:
    host = Host(retention_s=5.0)
    host.launch([("done", 0, 1)], command="sleep 0.1")
    host.launch([("long", 0, 1)], command="sleep 60")
    host.advance(500)
    host.published.clear()
    ask(host, [("done", 0, 1), ("long", 0, 1), ("never", 0, 1)])
    host.advance(TICK_MS)
    answers = {(s["job_id"], s["state"]): s for ev in host.published
               if ev.type == "TaskStatusReported" for s in ev.body["statuses"]}
    assert set(answers) == {("done", "SUCCEEDED"), ("long", "RUNNING"), ("never", "LOST")}
    assert answers[("done", "SUCCEEDED")]["exit_code"] == 0  # its end, reported again
    assert "reconciliation" in answers[("done", "SUCCEEDED")]["message"]
    assert "does not know this run" in answers[("never", "LOST")]["message"]
    # a run launched and not started yet gets no answer: its own statuses are on the way
    host.published.clear()
    host.core.book.admit_launch("soon-0-1", host.now)
    ask(host, [("soon", 0, 1)])
    host.advance(TICK_MS)
    assert host.statuses() == []
    host.close()


def test_an_end_is_known_for_a_reconciliation_until_the_run_leaves_the_book() -> None:
    host = Host(retention_s=1.0)
    host.launch([("job", 0, 1)], command="sleep 0.1")
    host.advance(3_000)  # ended, reported, and forgotten after its retention
    assert "job-0-1" not in host.core.book and host.core._ends == {}
    host.published.clear()
    ask(host, [("job", 0, 1)])
    host.advance(TICK_MS)
    assert host.statuses() == [("job-0-1", "LOST")]
    host.close()


def test_a_run_answered_lost_is_not_started_by_a_launch_read_after_the_question() -> None:
    host = Host(retention_s=1.0)
    ask(host, [("late", 0, 1)])  # the question overtook the launch (another topic)
    host.advance(TICK_MS)
    assert host.statuses() == [("late-0-1", "LOST")]
    host.launch([("late", 0, 1)], command="sleep 0.1")
    host.advance(500)
    assert host.starts() == {}  # the job manager runs it again elsewhere
    host.advance(3_000)  # the tombstone leaves after its retention, as a kill's does
    assert "late-0-1" not in host.core.book and host.core._ends == {}
    host.close()
