"""Task runners: real processes for ProcessRunner, the timer heap for SimulatedRunner.

Process checks look at /proc: a pid counts as alive unless it is gone or a zombie (an
orphan's zombie may linger until init reaps it).
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import textwrap
import time
from collections.abc import AsyncIterator, Callable, Mapping
from pathlib import Path

import pytest

from peloton.agent.errors import InvalidTransitionError
from peloton.agent.runner import (
    InvalidRunIdError,
    ProcessRunner,
    RunnerClosedError,
    RunState,
    SimulatedRunner,
    TaskRunner,
    TaskStatus,
    UnknownRunError,
    sim_duration,
)
from peloton.agent.status import TERMINAL_STATES, TRANSITIONS, advance

SERVICES = Path(__file__).resolve().parents[2] / "services"


# ------------------------------------------------------------------------- helpers


class Recorder:
    """on_status callback that remembers every report and wakes waiters on terminal ones."""

    def __init__(self) -> None:
        self.reports: list[TaskStatus] = []
        self._final: dict[str, asyncio.Event] = {}

    def __call__(self, status: TaskStatus) -> None:
        self.reports.append(status)
        if status.state in TERMINAL_STATES:
            self._event(status.run_id).set()

    def _event(self, run_id: str) -> asyncio.Event:
        return self._final.setdefault(run_id, asyncio.Event())

    def of(self, run_id: str) -> list[TaskStatus]:
        return [s for s in self.reports if s.run_id == run_id]

    def states(self, run_id: str) -> list[RunState]:
        return [s.state for s in self.of(run_id)]

    async def final(self, run_id: str, timeout: float = 10.0) -> TaskStatus:
        await asyncio.wait_for(self._event(run_id).wait(), timeout)
        return self.of(run_id)[-1]


def _stat(pid: int) -> tuple[str, int] | None:
    """(state, pgrp) of a live pid from /proc, None if gone."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    fields = raw[raw.rindex(")") + 2 :].split()
    return fields[0], int(fields[2])


def alive(pid: int) -> bool:
    st = _stat(pid)
    return st is not None and st[0] not in ("Z", "X")


def group_members(pgid: int) -> list[int]:
    """Non-zombie processes whose process group is pgid."""
    members = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            st = _stat(int(entry))
            if st is not None and st[1] == pgid and st[0] not in ("Z", "X"):
                members.append(int(entry))
    return sorted(members)


async def eventually(pred: Callable[[], bool], timeout: float = 3.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        await asyncio.sleep(0.02)
    return pred()


async def wait_for_file(path: Path, text: str = "", timeout: float = 5.0) -> str:
    ok = await eventually(lambda: path.exists() and text in path.read_text(), timeout)
    assert ok, f"{path} never contained {text!r}"
    return path.read_text()


@pytest.fixture
def rec() -> Recorder:
    return Recorder()


@pytest.fixture
async def runner(tmp_path: Path, rec: Recorder) -> AsyncIterator[ProcessRunner]:
    r = ProcessRunner(tmp_path / "sandboxes", on_status=rec)
    yield r
    await r.close(grace_s=0.5)


def as_task_runner(r: TaskRunner) -> TaskRunner:
    """Type-level check (mypy) that both runners satisfy the protocol."""
    return r


# ------------------------------------------------------------------ state table


def test_every_undefined_state_change_is_rejected():
    for current in [None, *RunState]:
        for new in RunState:
            if (current, new) in TRANSITIONS:
                assert advance(current, new) is new
            else:
                with pytest.raises(InvalidTransitionError):
                    advance(current, new)
    assert all(current not in TERMINAL_STATES for current, _ in TRANSITIONS)


# ------------------------------------------------------------------ process runner


async def test_command_succeeds_and_output_is_captured(runner: ProcessRunner, rec: Recorder):
    as_task_runner(runner)
    await runner.launch("ok-1", 'echo "hello $GREETING"; echo oops >&2; pwd', {"GREETING": "w"})
    final = await rec.final("ok-1")
    sandbox = runner.sandboxes.path_for("ok-1")
    assert rec.states("ok-1") == [RunState.STARTING, RunState.RUNNING, RunState.SUCCEEDED]
    assert final == TaskStatus("ok-1", RunState.SUCCEEDED, 0, "exit code 0", str(sandbox))
    assert runner.read_log("ok-1", "stdout", None) == f"hello w\n{sandbox}\n".encode()
    assert runner.read_log("ok-1", "stderr") == b"oops\n"
    assert runner.read_log("ok-1", "stdout", 0) == b""
    assert runner.read_log("ok-1", "stdout", 2)[-1:] == b"\n"
    assert runner.running() == []


async def test_task_environment_is_only_what_was_given(runner: ProcessRunner, rec: Recorder):
    os.environ["PELOTON_TEST_SECRET"] = "leak"
    try:
        await runner.launch("env-1", "env", {"A": "1"})
        await rec.final("env-1")
    finally:
        del os.environ["PELOTON_TEST_SECRET"]
    env = dict(
        line.split("=", 1) for line in runner.read_log("env-1", "stdout").decode().splitlines()
    )
    assert env["A"] == "1" and env["PELOTON_RUN_ID"] == "env-1"
    assert env["PELOTON_SANDBOX"] == str(runner.sandboxes.path_for("env-1"))
    assert "PELOTON_TEST_SECRET" not in env


async def test_nonzero_exit_is_failed_with_the_code(runner: ProcessRunner, rec: Recorder):
    await runner.launch("bad-1", "echo before; exit 3", {})
    final = await rec.final("bad-1")
    assert (final.state, final.exit_code, final.message) == (RunState.FAILED, 3, "exit code 3")
    assert runner.read_log("bad-1", "stdout") == b"before\n"


async def test_death_by_signal_is_failed_without_exit_code(runner: ProcessRunner, rec: Recorder):
    await runner.launch("sig-1", "kill -9 $$", {})
    final = await rec.final("sig-1")
    assert (final.state, final.exit_code) == (RunState.FAILED, None)
    assert "killed by signal 9" in final.message


async def test_spawn_error_is_a_lone_failed(runner: ProcessRunner, rec: Recorder):
    await runner.launch("spawn-1", "true", {"BAD": "nul\0byte"})
    final = await rec.final("spawn-1")
    assert rec.states("spawn-1") == [RunState.FAILED]
    assert final.exit_code is None and final.message.startswith("spawn failed")


async def test_kill_of_a_task_that_traps_term_is_killed_within_grace(
    runner: ProcessRunner, rec: Recorder
):
    cmd = "trap 'echo bye; exit 0' TERM; echo ready; while :; do sleep 0.05; done"
    await runner.launch("trap-1", cmd, {})
    await wait_for_file(runner.sandboxes.path_for("trap-1") / "stdout", "ready")
    t0 = time.monotonic()
    await runner.kill("trap-1", grace_s=5.0)
    elapsed = time.monotonic() - t0
    final = rec.of("trap-1")[-1]
    assert elapsed < 2.0
    assert (final.state, final.exit_code) == (RunState.KILLED, 0)
    assert "SIGTERM" in final.message
    assert runner.read_log("trap-1", "stdout") == b"ready\nbye\n"


async def test_kill_of_a_task_that_ignores_term_sigkills_after_grace(
    runner: ProcessRunner, rec: Recorder
):
    cmd = "trap '' TERM; echo ready; while :; do sleep 0.05; done"
    await runner.launch("stub-1", cmd, {})
    await wait_for_file(runner.sandboxes.path_for("stub-1") / "stdout", "ready")
    t0 = time.monotonic()
    await runner.kill("stub-1", grace_s=0.5)
    elapsed = time.monotonic() - t0
    final = rec.of("stub-1")[-1]
    assert 0.5 <= elapsed < 3.0
    assert (final.state, final.exit_code) == (RunState.KILLED, None)
    assert "after grace" in final.message and "killed by signal 9" in final.message


async def test_kill_takes_down_the_whole_process_group(runner: ProcessRunner, rec: Recorder):
    cmd = "sleep 60 & echo $! >> bg.pid; sleep 60 & echo $! >> bg.pid; echo ready > ready; wait"
    await runner.launch("tree-1", cmd, {})
    sandbox = runner.sandboxes.path_for("tree-1")
    await wait_for_file(sandbox / "ready", "ready")
    bg = [int(p) for p in (sandbox / "bg.pid").read_text().split()]
    pgid = runner.pid_of("tree-1")
    assert pgid is not None and len(bg) == 2 and all(alive(p) for p in bg)
    assert set(bg) < set(group_members(pgid))
    await runner.kill("tree-1", grace_s=2.0)
    assert rec.of("tree-1")[-1].state is RunState.KILLED
    assert await eventually(lambda: not any(alive(p) for p in bg))
    assert await eventually(lambda: group_members(pgid) == [])


async def test_leftover_children_are_killed_when_the_main_process_exits(
    runner: ProcessRunner, rec: Recorder
):
    await runner.launch("daemon-1", "sleep 60 & echo $! > bg.pid; exit 0", {})
    final = await rec.final("daemon-1")
    bg = int((runner.sandboxes.path_for("daemon-1") / "bg.pid").read_text())
    assert final.state is RunState.SUCCEEDED
    assert await eventually(lambda: not alive(bg))


AGENT = textwrap.dedent(
    """
    import asyncio, sys
    from pathlib import Path
    from peloton.agent.runner import ProcessRunner

    async def main() -> None:
        root = Path(sys.argv[1])
        # PR_SET_PDEATHSIG alone: the task's main process is the sleep itself.
        bare = ProcessRunner(root / "bare", guard_groups=False)
        await bare.launch("exec", "exec sleep 60", {})
        # The guardian: dash forks `sleep 60` under the shell, and `&` makes a grandchild.
        guarded = ProcessRunner(root / "guarded")
        await guarded.launch("direct", "sleep 60", {})
        await guarded.launch("tree", "sleep 61 & echo $! > bg.pid; wait", {})
        bg = root / "guarded" / "tree" / "bg.pid"
        while not (bg.exists() and bg.read_text().strip()):
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.1)  # let the direct shell fork its sleep
        pids = [bare.pid_of("exec"), guarded.pid_of("direct"), guarded.pid_of("tree"),
                int(bg.read_text()), guarded._guardian.pid]
        print(*pids, flush=True)
        await asyncio.sleep(3600)

    asyncio.run(main())
    """
)


async def test_agent_death_kills_its_tasks_and_their_children(tmp_path: Path):
    agent = subprocess.Popen(
        [sys.executable, "-c", AGENT, str(tmp_path / "sb")],
        stdout=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(SERVICES)},
    )
    try:
        assert agent.stdout is not None
        line = await asyncio.wait_for(asyncio.to_thread(agent.stdout.readline), 10.0)
        exec_sleep, direct, tree, grandchild, guardian = (int(x) for x in line.split())
        groups = (exec_sleep, direct, tree)
        members = {g: group_members(g) for g in groups}
        assert members[exec_sleep] == [exec_sleep]
        assert len(members[direct]) == 2  # sh and its sleep: PDEATHSIG alone would miss it
        assert members[tree] == sorted({tree, grandchild})
        assert alive(guardian)
    finally:
        agent.kill()
        agent.wait()
    assert await eventually(lambda: all(group_members(g) == [] for g in groups), timeout=3.0)
    assert await eventually(lambda: not alive(guardian), timeout=3.0)


async def test_launch_is_idempotent(runner: ProcessRunner, rec: Recorder):
    await runner.launch("idem-1", "echo once; sleep 0.3", {})
    await runner.launch("idem-1", "echo twice", {})
    assert runner.running() == ["idem-1"]
    await rec.final("idem-1")
    await runner.launch("idem-1", "echo thrice", {})
    await asyncio.sleep(0.05)
    assert rec.states("idem-1") == [RunState.STARTING, RunState.RUNNING, RunState.SUCCEEDED]
    assert runner.read_log("idem-1", "stdout") == b"once\n"


async def test_relaunch_after_agent_restart_repeats_the_outcome_without_rerunning(
    tmp_path: Path, rec: Recorder
):
    root = tmp_path / "sb"
    first = ProcessRunner(root, on_status=rec)
    await first.launch("done-1", "echo hi", {})
    await rec.final("done-1")
    await first.close()
    (root / "lost-1").mkdir()  # launched by an agent that died before recording an exit

    rec2 = Recorder()
    second = ProcessRunner(root, on_status=rec2)
    await second.launch("done-1", "echo hi", {})
    await second.launch("lost-1", "echo hi", {})
    await second.launch("done-1", "echo hi", {})
    lost = await rec2.final("lost-1")
    recovered = rec2.of("done-1")
    assert [(s.state, s.exit_code) for s in recovered] == [(RunState.SUCCEEDED, 0)]
    assert recovered[0].message == "recovered after agent restart: exit code 0"
    assert lost.state is RunState.FAILED and lost.message.startswith("lost")
    assert second.read_log("done-1", "stdout") == b"hi\n"  # not run again
    assert second.running() == []
    await second.close()


async def test_forget_drops_a_finished_run_but_never_a_running_one(
    runner: ProcessRunner, rec: Recorder
):
    await runner.launch("fg-1", "echo once", {})
    await runner.launch("fg-2", "sleep 30", {})
    await rec.final("fg-1")
    runner.forget("fg-1")
    runner.forget("fg-2")  # running: kept
    runner.forget("fg-none")  # unknown: no-op
    assert list(runner._runs) == ["fg-2"] and runner.running() == ["fg-2"]
    assert runner.read_log("fg-1", "stdout") == b"once\n"  # the sandbox stays
    await runner.launch("fg-1", "echo twice", {})  # known by its sandbox: not run again
    await asyncio.sleep(0.05)
    assert runner.read_log("fg-1", "stdout") == b"once\n"
    assert rec.states("fg-1")[-1] is RunState.SUCCEEDED
    assert rec.of("fg-1")[-1].message.startswith("recovered")


@pytest.mark.parametrize("bad", ["", ".", "..", "../escape", "a/b", "/abs", ".hidden", "x\0y"])
async def test_run_ids_that_are_not_one_safe_path_component_are_rejected(
    runner: ProcessRunner, bad: str
):
    with pytest.raises(InvalidRunIdError):
        await runner.launch(bad, "true", {})
    with pytest.raises(ValueError):
        runner.read_log(bad, "stdout")


async def test_read_log_of_unknown_run_and_bad_stream(runner: ProcessRunner, rec: Recorder):
    with pytest.raises(UnknownRunError) as info:
        runner.read_log("nope", "stdout")
    assert isinstance(info.value, KeyError) and "nope" in str(info.value)
    await runner.launch("log-1", "true", {})
    await rec.final("log-1")
    with pytest.raises(ValueError):
        runner.read_log("log-1", "stdin", None)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        runner.read_log("log-1", "stdout", -1)


async def test_kill_of_unknown_or_finished_runs_is_a_noop(runner: ProcessRunner, rec: Recorder):
    await runner.kill("never-launched", 1.0)
    await runner.launch("fin-1", "true", {})
    await rec.final("fin-1")
    await runner.kill("fin-1", 1.0)
    await runner.kill("fin-1", 1.0)
    assert rec.states("fin-1")[-1] is RunState.SUCCEEDED and len(rec.of("fin-1")) == 3


async def test_concurrent_kills_report_killed_once(runner: ProcessRunner, rec: Recorder):
    await runner.launch("dup-1", "sleep 30", {})
    await asyncio.gather(runner.kill("dup-1", 1.0), runner.kill("dup-1", 1.0))
    assert rec.states("dup-1").count(RunState.KILLED) == 1


async def test_close_kills_everything_and_refuses_launches(tmp_path: Path):
    r = ProcessRunner(tmp_path / "sb")  # queue mode: no callback
    for i in range(3):
        await r.launch(f"c-{i}", "sleep 30", {})
    pids = [r.pid_of(f"c-{i}") for i in range(3)]
    assert r.running() == ["c-0", "c-1", "c-2"]
    await r.close(grace_s=1.0)
    assert r.running() == []
    with pytest.raises(RunnerClosedError):
        await r.launch("c-9", "true", {})
    reports = [r.statuses.get_nowait() for _ in range(r.statuses.qsize())]
    assert sorted(s.run_id for s in reports if s.state is RunState.KILLED) == ["c-0", "c-1", "c-2"]
    assert await eventually(lambda: not any(alive(p) for p in pids if p is not None))


# ---------------------------------------------------------------- simulated runner


@pytest.mark.parametrize(
    ("command", "env", "expected"),
    [
        ("sleep 2", {}, 2.0),
        ("echo a && sleep 2 && sleep 0.5", {}, 2.5),
        ("sleep 1m", {}, 60.0),
        ("sleep .25", {}, 0.25),
        ("sleep 5", {"PELOTON_SIM_DURATION": "0.3"}, 0.3),
        ("echo no-sleep-here; nosleep 4; sleep-ish 3", {}, 0.1),
        ("python train.py", {}, 0.1),
    ],
)
def test_sim_duration_rule(command: str, env: Mapping[str, str], expected: float):
    assert sim_duration(command, env) == pytest.approx(expected)


async def test_sim_reports_success_failure_and_kill():
    rec = Recorder()
    sim = SimulatedRunner(on_status=rec)
    as_task_runner(sim)
    await sim.launch("s-ok", "sleep 0.05", {})
    failing = {"PELOTON_SIM_DURATION": "0.05", "PELOTON_SIM_EXIT_CODE": "4"}
    await sim.launch("s-bad", "true", failing)
    await sim.launch("s-kill", "sleep 30", {})
    await sim.launch("s-ok", "sleep 99", {})  # idempotent
    await sim.launch("s-junk", "true", {"PELOTON_SIM_DURATION": "soon"})
    assert sim.running() == ["s-ok", "s-bad", "s-kill"]
    await sim.kill("s-kill", 5.0)
    await sim.kill("s-kill", 5.0)
    assert (await rec.final("s-ok")).state is RunState.SUCCEEDED
    bad = await rec.final("s-bad")
    assert (bad.state, bad.exit_code, bad.message) == (RunState.FAILED, 4, "exit code 4")
    assert rec.states("s-kill") == [RunState.STARTING, RunState.RUNNING, RunState.KILLED]
    assert rec.states("s-ok") == [RunState.STARTING, RunState.RUNNING, RunState.SUCCEEDED]
    assert rec.states("s-junk") == [RunState.FAILED]
    assert sim.running() == [] and sim.read_log("s-ok", "stdout") == b""
    with pytest.raises(UnknownRunError):
        sim.read_log("s-none", "stdout")
    await sim.close()


async def test_sim_forget_drops_a_finished_run_but_never_a_running_one():
    rec = Recorder()
    sim = SimulatedRunner(on_status=rec)
    await sim.launch("f-done", "sleep 0.01", {})
    await sim.launch("f-running", "sleep 30", {})
    await rec.final("f-done")
    sim.forget("f-done")
    sim.forget("f-running")
    sim.forget("f-none")
    assert list(sim._runs) == ["f-running"] and sim.running() == ["f-running"]
    with pytest.raises(UnknownRunError):
        sim.read_log("f-done", "stdout")
    await sim.close()


async def test_sim_finishes_in_deadline_then_launch_order():
    rec = Recorder()
    sim = SimulatedRunner(lambda cmd, env: float(cmd), on_status=rec)
    for run_id, duration in [("c", "0.06"), ("a", "0.02"), ("b", "0.02"), ("d", "0")]:
        await sim.launch(run_id, duration, {})
    await rec.final("c")
    done = [s.run_id for s in rec.reports if s.state is RunState.SUCCEEDED]
    assert done == ["d", "a", "b", "c"]


async def test_sim_runs_after_a_report_that_raised_still_end():
    rec = Recorder()
    failed: list[str] = []

    def on_status(status: TaskStatus) -> None:
        if status.run_id == "b" and status.state is RunState.SUCCEEDED and not failed:
            failed.append(status.run_id)
            raise RuntimeError("the agent's report callback failed")
        rec(status)

    sim = SimulatedRunner(lambda cmd, env: float(cmd), on_status=on_status)
    loop = asyncio.get_running_loop()
    errors: list[dict[str, object]] = []
    loop.set_exception_handler(lambda _loop, context: errors.append(context))
    try:
        for run_id, duration in [("a", "0.01"), ("b", "0.02"), ("c", "0.03"), ("d", "0.2")]:
            await sim.launch(run_id, duration, {})
        await rec.final("d", timeout=5.0)  # runs ending after the failed report still end
    finally:
        loop.set_exception_handler(None)
    assert failed == ["b"] and len(errors) == 1  # the failure is the loop's to log
    assert "failed" in str(errors[0]["exception"])
    done = [s.run_id for s in rec.reports if s.state is RunState.SUCCEEDED]
    assert done == ["a", "c", "d"]
    await sim.close()


async def test_sim_10000_concurrent_tasks_complete_quickly(capsys: pytest.CaptureFixture[str]):
    n = 10_000
    finished = 0
    all_done = asyncio.Event()

    def on_status(status: TaskStatus) -> None:
        nonlocal finished
        if status.state is RunState.SUCCEEDED:
            finished += 1
            if finished == n:
                all_done.set()

    sim = SimulatedRunner(on_status=on_status)
    t0 = time.perf_counter()
    for i in range(n):
        # durations spread over 0.1-0.3 s so completions interleave with the timer heap
        await sim.launch(f"sim-{i}", "true", {"PELOTON_SIM_DURATION": str(0.1 + (i % 201) / 1000)})
    launched = time.perf_counter() - t0
    assert len(sim.running()) == n
    await asyncio.wait_for(all_done.wait(), 10.0)
    total = time.perf_counter() - t0
    with capsys.disabled():
        print(
            f"\n10,000 simulated tasks: launched in {launched:.3f}s, all done in {total:.3f}s "
            f"(longest simulated duration 0.3s)"
        )
    assert sim.running() == []
    assert launched < 2.0 and total < 3.0


async def test_exit_is_detected_without_pidfd(
    tmp_path: Path, rec: Recorder, monkeypatch: pytest.MonkeyPatch
):
    def no_pidfd(pid: int, flags: int = 0) -> int:
        raise OSError("pidfd_open unavailable")

    monkeypatch.setattr(os, "pidfd_open", no_pidfd)
    r = ProcessRunner(tmp_path / "sb", on_status=rec)
    await r.launch("nopidfd-1", "exit 5", {})
    await r.launch("nopidfd-2", "sleep 30", {})
    assert (await rec.final("nopidfd-1")).exit_code == 5
    await r.kill("nopidfd-2", 1.0)
    assert rec.states("nopidfd-2")[-1] is RunState.KILLED
    await r.close()
