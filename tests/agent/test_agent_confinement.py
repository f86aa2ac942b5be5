"""Confined tasks with real processes: the task user, memory limits and OOM reports,
sandbox ownership and safety, health checks as the task user, sandbox garbage collection.

What this host offers decides the limit path tested for real: cgroup v2 when
`detect_cgroup2` finds a delegable subtree (else its test is skipped and says why), the
rlimits path always (forced by configuration). The cgroup v2 file protocol is also
checked on a plain directory laid out like cgroupfs (the kernel's enforcement is not).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from agent_helpers import TASK_PYTHON

from peloton.agent.app import AgentConfig, AgentCore
from peloton.agent.cgroups import Cgroup2Tree, detect_cgroup2
from peloton.agent.confinement import Confinement, ConfinementError
from peloton.agent.domain.limits import MIB, TaskLimits
from peloton.agent.processrunner import ProcessRunner
from peloton.agent.status import TERMINAL_STATES, RunState, TaskStatus
from peloton.agent.taskuser import TaskUserError, resolve_task_user
from peloton.model.health import HealthCheck
from peloton.model.resources import Resources

SERVICES = Path(__file__).resolve().parents[2] / "services"
root_only = pytest.mark.skipif(os.geteuid() != 0, reason="switching users needs root")
ALLOC_256_MIB = f"{TASK_PYTHON} -c 'x = bytearray(256 * 2**20); print(len(x))'"


class Finals:
    def __init__(self) -> None:
        self.reports: list[TaskStatus] = []

    def __call__(self, status: TaskStatus) -> None:
        self.reports.append(status)

    async def final(self, rid: str, timeout: float = 20.0) -> TaskStatus:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            done = [s for s in self.reports if s.run_id == rid and s.state in TERMINAL_STATES]
            if done:
                return done[-1]
            await asyncio.sleep(0.02)
        raise AssertionError(f"{rid} never ended: {self.reports}")


@pytest.fixture
def finals() -> Finals:
    return Finals()


@pytest.fixture
async def rlimited(open_tmp: Path, finals: Finals) -> AsyncIterator[ProcessRunner]:
    r = ProcessRunner(open_tmp / "sb", on_status=finals,
                      confinement=Confinement.setup(None, "rlimits", "test"))
    yield r
    await r.close(grace_s=0.5)


def mem(mb: float) -> Resources:
    return Resources(cpu=0.5, memory=mb)


# ----------------------------------------------------------------------- task user


@root_only
async def test_tasks_run_as_the_task_user_and_write_their_sandbox(
        rlimited: ProcessRunner, finals: Finals) -> None:
    user = rlimited.confinement.user
    assert user.switched and user.uid != 0 and user.name in ("peloton-task", "nobody")
    await rlimited.launch("who-0-1", 'id -u; id -g; id -G; echo mine > own; cat own',
                          {}, resources=mem(64))
    final = await finals.final("who-0-1")
    assert final.state is RunState.SUCCEEDED, final
    uid, gid, groups, mine = rlimited.read_log("who-0-1", "stdout").decode().split("\n")[:4]
    assert (int(uid), int(gid)) == (user.uid, user.gid)
    assert 0 not in {int(g) for g in groups.split()}  # root's groups were dropped
    assert mine == "mine"
    assert (rlimited.sandboxes.path_for("who-0-1") / "own").stat().st_uid == user.uid


@root_only
async def test_a_task_cannot_touch_the_agents_files_in_its_sandbox(
        rlimited: ProcessRunner, finals: Finals, open_tmp: Path) -> None:
    """The sandbox is sticky: the agent's stdout/stderr stay; a symlink planted where the
    agent writes its exit record is not followed (it would write as root)."""
    precious = open_tmp / "precious"
    precious.write_text("keep")
    precious.chmod(0o644)
    await rlimited.launch("evil-0-1", f'echo before; rm -f stdout stderr; mv stdout x; '
                          f'ln -s {precious} .peloton-exit.json.tmp; '
                          f'ln -s {precious} .peloton-exit.json; echo after', {})
    final = await finals.final("evil-0-1")
    assert final.state is RunState.SUCCEEDED  # the last command's status
    assert precious.read_text() == "keep"
    assert rlimited.read_log("evil-0-1", "stdout") == b"before\nafter\n"
    assert b"Operation not permitted" in rlimited.read_log("evil-0-1", "stderr")
    record = rlimited.sandboxes.read_exit("evil-0-1")
    assert record is not None and record.state is RunState.SUCCEEDED


@root_only
async def test_a_volume_is_the_task_users(rlimited: ProcessRunner, finals: Finals) -> None:
    await rlimited.launch("db-0-1", 'echo 1 > "$PELOTON_VOLUME/n" && id -u', {},
                          volume="/data")
    assert (await finals.final("db-0-1")).state is RunState.SUCCEEDED
    volume = rlimited.volumes.path_for("db", 0)
    assert (volume / "n").read_text() == "1\n"
    assert volume.stat().st_uid == rlimited.confinement.user.uid
    assert volume.parent.stat().st_uid == 0  # only the instance's directory is given away


@root_only
async def test_a_command_health_check_runs_as_the_task_user(
        rlimited: ProcessRunner, finals: Finals) -> None:
    uid = rlimited.confinement.user.uid
    await rlimited.launch("web-0-1", "sleep 30", {})
    as_user, as_root = (
        HealthCheck.from_body({"type": "COMMAND", "commandCheck": {"command": command}})
        for command in (f'test "$(id -u)" = {uid}', 'test "$(id -u)" = 0'))
    assert (await rlimited.probe("web-0-1", as_user, 0)).passed
    assert not (await rlimited.probe("web-0-1", as_root, 0)).passed


@root_only
async def test_an_agent_refuses_a_sandbox_root_its_tasks_cannot_reach(tmp_path: Path) -> None:
    # pytest's tmp_path is under /tmp/pytest-of-root (0700)
    with pytest.raises(TaskUserError, match="not searchable"):
        AgentCore(AgentConfig(host="h", incarnation="i", capacity=Resources(1, 64),
                              sandbox_root=tmp_path))


@root_only
def test_the_first_directory_the_task_user_cannot_search_is_named(open_tmp: Path) -> None:
    user = resolve_task_user(None)
    inner = open_tmp / "a" / "b"
    inner.mkdir(parents=True)
    (open_tmp / "a").chmod(0o700)
    assert user.unreachable(inner / "sandboxes" / "host-1") == open_tmp / "a"
    (open_tmp / "a").chmod(0o711)  # search without listing is enough
    assert user.unreachable(inner / "sandboxes" / "host-1") is None
    os.chown(open_tmp / "a", user.uid, -1)
    (open_tmp / "a").chmod(0o100)  # the owner's bit counts for the owner
    assert user.unreachable(inner) is None


def test_root_is_never_a_task_user() -> None:
    if os.geteuid() == 0:
        with pytest.raises(TaskUserError, match="root"):
            resolve_task_user("root")
        with pytest.raises(TaskUserError, match="no such user"):
            resolve_task_user("no-such-user-here")


NON_ROOT_AGENT = """
import asyncio, sys
sys.path.insert(0, sys.argv[1])
from peloton.agent.confinement import Confinement
from peloton.agent.processrunner import ProcessRunner
from peloton.model.resources import Resources

async def main():
    c = Confinement.setup("someone", "rlimits", "nr")
    print(c.user.switched, c.user.uid, c.describe())
    r = ProcessRunner(sys.argv[2], confinement=c)
    await r.launch("a-0-1", "id -u; " + sys.argv[3], {}, resources=Resources(1, 64))
    while (s := await r.statuses.get()).state.value not in ("FAILED", "SUCCEEDED"):
        pass
    print(s.message)
    print(r.read_log("a-0-1", "stdout").decode().strip())
    await r.close()

asyncio.run(main())
"""


@root_only
def test_an_agent_that_is_not_root_runs_tasks_as_itself_limits_included(
        open_tmp: Path) -> None:
    """An agent process that is nobody: no switching (it says so), limits still apply."""
    # nobody imports the code from a copy it can read: a checkout under a 0700 directory
    # (`mktemp -d`) is closed to it
    code = open_tmp / "code"
    shutil.copytree(SERVICES / "peloton", code / "peloton",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    os.chown(open_tmp, 65534, 65534)
    out = subprocess.run(
        [TASK_PYTHON, "-I", "-c", NON_ROOT_AGENT, str(code), str(open_tmp / "sb"),
         ALLOC_256_MIB],
        capture_output=True, text=True, check=True, cwd="/", timeout=60,
        user=65534, group=65534, extra_groups=[])
    first, message, uid = out.stdout.strip().split("\n")
    switched, agent_uid, text = first.split(" ", 2)
    assert (switched, agent_uid, uid) == ("False", "65534", "65534")
    assert "the agent is not root, so tasks run as its own user" in text
    assert "asked for 'someone'" in text
    assert message.startswith("out of memory: exceeded 64 MiB limit (RLIMIT_DATA")


# ------------------------------------------------------------------- memory limits


async def test_rlimits_a_task_over_its_memory_fails_with_an_oom_reason(
        rlimited: ProcessRunner, finals: Finals) -> None:
    await rlimited.launch("hog-0-1", ALLOC_256_MIB, {}, resources=mem(64))
    final = await finals.final("hog-0-1")
    assert final.state is RunState.FAILED
    assert final.message == ("out of memory: exceeded 64 MiB limit (RLIMIT_DATA; the task "
                             "reported MemoryError); exit code 1")
    # the same allocation fits a larger limit, and a small one fits this limit
    await rlimited.launch("hog-0-2", ALLOC_256_MIB, {}, resources=mem(512))
    assert (await finals.final("hog-0-2")).state is RunState.SUCCEEDED
    await rlimited.launch("hog-0-3", ALLOC_256_MIB.replace("256", "8"), {},
                          resources=mem(64))
    assert (await finals.final("hog-0-3")).state is RunState.SUCCEEDED


async def test_rlimits_a_plain_failure_is_not_called_oom(
        rlimited: ProcessRunner, finals: Finals) -> None:
    await rlimited.launch("bad-0-1", "echo nope >&2; exit 3", {}, resources=mem(64))
    final = await finals.final("bad-0-1")
    assert (final.state, final.message) == (RunState.FAILED, "exit code 3")


async def test_rlimits_mode_is_reported_with_its_cpu_policy() -> None:
    c = Confinement.setup(None, "rlimits", "test")
    assert c.labels()["peloton.confinement"] == "rlimits"
    text = c.describe()
    assert "RLIMIT_DATA" in text and "cpu: not rate-limited, nice 10" in text
    assert "forced by configuration" in text


def test_auto_picks_what_the_host_offers() -> None:
    offered = detect_cgroup2("probe-auto")
    c = Confinement.setup(None, "auto", "probe-auto")
    if isinstance(offered, Cgroup2Tree):
        assert c.mechanism == "cgroup2"
    else:
        assert c.mechanism == "rlimits" and c.why == offered
        with pytest.raises(ConfinementError, match="unavailable"):
            Confinement.setup(None, "cgroup2", "probe-auto")
    with pytest.raises(ConfinementError, match="must be one of"):
        Confinement.setup(None, "containers", "x")


async def test_cgroup2_a_task_over_its_memory_is_oom_killed(
        open_tmp: Path, finals: Finals) -> None:
    offered = detect_cgroup2("test-oom")
    if not isinstance(offered, Cgroup2Tree):
        pytest.skip(f"this host offers no cgroup v2 subtree: {offered}")
    r = ProcessRunner(open_tmp / "sb", on_status=finals,
                      confinement=Confinement.setup(None, "cgroup2", "test-oom"))
    try:
        await r.launch("hog-0-1", ALLOC_256_MIB, {}, resources=mem(64))
        final = await finals.final("hog-0-1")
        assert final.state is RunState.FAILED
        assert final.message.startswith(
            "out of memory: exceeded 64 MiB limit (cgroup memory.max; 1 process(es) "
            "OOM-killed)")
    finally:
        await r.close(0.5)


def test_cgroup2_protocol_on_a_tree_laid_out_like_cgroupfs(tmp_path: Path) -> None:
    mount, proc = tmp_path / "cgroup", tmp_path / "proc"
    own = mount / "agent.slice"
    own.mkdir(parents=True)
    proc.mkdir()
    (proc / "mounts").write_text(f"cgroup2 {mount} cgroup2 rw 0 0\n")
    (proc / "cgroup").write_text("0::/agent.slice\n")
    (own / "cgroup.controllers").write_text("cpuset cpu io memory pids\n")
    (own / "cgroup.subtree_control").write_text("\n")
    tree = detect_cgroup2("h1", mount=mount, proc_self=proc)
    assert isinstance(tree, Cgroup2Tree) and tree.base == own / "peloton-h1"
    assert (own / "cgroup.subtree_control").read_text() == "+cpu +memory"
    assert (tree.base / "cgroup.subtree_control").read_text() == "+cpu +memory"
    path = tree.create("r-0-1", TaskLimits.of(0.5, 64))
    assert (path / "memory.max").read_text() == str(64 * MIB)
    assert (path / "cpu.max").read_text() == "50000 100000"
    unlimited = tree.create("r-0-2", TaskLimits())
    assert (unlimited / "memory.max").read_text() == "max"
    assert (unlimited / "cpu.max").read_text() == "max 100000"
    c = Confinement("cgroup2", resolve_task_user(None), tree)
    run = c.prepare("r-0-3", TaskLimits.of(1, 64))
    assert run.cgroup == tree.base / "r-0-3"
    (run.cgroup / "memory.events").write_text("oom 1\noom_kill 1\n")
    assert run.oom_message(-9, "killed by signal 9 (SIGKILL)", lambda: b"") == (
        "out of memory: exceeded 64 MiB limit (cgroup memory.max; 1 process(es) "
        "OOM-killed); killed by signal 9 (SIGKILL)")
    assert not run.release()  # a plain directory with files cannot be rmdir'ed...
    assert (run.cgroup / "cgroup.kill").read_text() == "1"  # ...but it was killed first
    (proc / "mounts").write_text(f"tmpfs {mount} tmpfs rw 0 0\n")
    assert "not a cgroup2 mount" in str(detect_cgroup2("h1", mount=mount, proc_self=proc))
    (proc / "mounts").write_text(f"cgroup2 {mount} cgroup2 rw 0 0\n")
    (own / "cgroup.controllers").write_text("cpuset io pids\n")
    assert "does not offer the cpu/memory" in str(
        detect_cgroup2("h1", mount=mount, proc_self=proc))


# -------------------------------------------------------------- sandbox collection


async def test_finished_sandboxes_are_collected_after_their_retention(
        rlimited: ProcessRunner, finals: Finals) -> None:
    for rid in ("old-0-1", "kept-0-1", "young-0-1"):
        await rlimited.launch(rid, "echo hi", {})
        await finals.final(rid)
    await rlimited.launch("vol-0-1", 'echo x > "$PELOTON_VOLUME/x"', {}, volume="/d")
    await finals.final("vol-0-1")
    await rlimited.launch("live-0-1", "sleep 30", {})
    for rid in ("old-0-1", "young-0-1", "vol-0-1"):
        rlimited.forget(rid)  # "kept" is still remembered; "live" is running
    now_ms = int(time.time() * 1000)
    hour_ago = time.time() - 3600
    for rid in ("old-0-1", "kept-0-1", "vol-0-1", "live-0-1"):
        sandbox = rlimited.sandboxes.path_for(rid)
        os.utime(sandbox, (hour_ago, hour_ago))
        if (sandbox / ".peloton-exit.json").exists():
            os.utime(sandbox / ".peloton-exit.json", (hour_ago, hour_ago))
    removed = await rlimited.collect_sandboxes(now_ms, retention_ms=600_000)
    assert removed == ["old-0-1", "vol-0-1"]
    assert not rlimited.sandboxes.exists("old-0-1")
    with pytest.raises(KeyError):
        rlimited.read_log("old-0-1", "stdout")
    for rid in ("kept-0-1", "young-0-1", "live-0-1"):
        assert rlimited.sandboxes.exists(rid)
    assert rlimited.read_log("young-0-1", "stdout") == b"hi\n"  # within its retention
    assert (rlimited.volumes.path_for("vol", 0) / "x").read_text() == "x\n"
    assert await rlimited.collect_sandboxes(now_ms, retention_ms=600_000) == []


# ------------------------------------------------------------------------ the agent


async def test_the_agent_reports_its_confinement_and_a_tasks_oom(open_tmp: Path) -> None:
    core = AgentCore(AgentConfig(host="h", incarnation="i", capacity=Resources(2, 1024),
                                 labels={"zone": "a"}, sandbox_root=open_tmp,
                                 confinement="rlimits", heartbeat_s=3600.0))
    try:
        now = int(time.time() * 1000)
        (registered,) = core.after_replay(now)
        assert core.confinement is not None
        assert registered.body["labels"] == {
            "zone": "a", "peloton.confinement": "rlimits",
            "peloton.task_user": core.confinement.user.name}
        core.handle("TaskLaunchRequested", {"host": "h", "incarnation": "i", "at": now,
                    "launches": [{"job_id": "hog", "instance": 0, "run": 1,
                                  "command": ALLOC_256_MIB, "env": {},
                                  "resources": {"cpu": 1.0, "memory": 64.0},
                                  "ports": {}, "kill_grace_period_s": 1.0}]}, now)
        ended: list[dict[str, object]] = []
        deadline = time.monotonic() + 20
        while not ended and time.monotonic() < deadline:
            for event in core.tick(int(time.time() * 1000)):
                if event.type == "TaskStatusReported":
                    ended += [s for s in event.body["statuses"] if s["state"] == "FAILED"]
            await asyncio.sleep(0.05)
        assert [s["message"] for s in ended] == [
            "out of memory: exceeded 64 MiB limit (RLIMIT_DATA; the task reported "
            "MemoryError); exit code 1"]
    finally:
        await core.runner.close()
