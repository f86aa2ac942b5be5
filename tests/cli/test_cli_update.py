"""`peloton job update|restart|stop` and `peloton update get|list|pause|...` against a real
API server (see conftest; a hook on its publisher plays the job manager's answers)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import typer
from readmodel_scenario import SERVICE_YAML
from typer.testing import CliRunner

from peloton.bus.codec import default_codec
from peloton.model.event import Event
from peloton.readmodel.projector import SourcePos, project

ClusterPublisher = Any  # conftest's: a MemoryPublisher with the served `store` and hooks
CLOSED = "http://127.0.0.1:9"
runner = CliRunner()
OFFSETS = iter(range(2 * 10**6, 3 * 10**6))
FAST = ("--interval", "0.02", "--timeout", "20")


def run(cli: typer.Typer, *args: str) -> tuple[int, str, str]:
    result = runner.invoke(cli, list(args))
    return result.exit_code, result.stdout, result.stderr


def set_update(pub: ClusterPublisher, job_id: str, update_id: str, state: str,
               done: list[int], reason: str, resume_to: str | None = None) -> None:
    offset = next(OFFSETS)
    record = {"command_at": 0, "update": {
        "old_count": 2, "new_count": 2, "settings": {"batchSize": 1},
        "status": {"state": state, "resume_to": resume_to}}}
    pub.store.insert(project("UpdateStateChanged", {
        "job_id": job_id, "update_id": update_id, "at": offset, "request_at": 0,
        "state": state, "previous_state": "", "reason": reason, "from_version": 1,
        "to_version": 2, "done": done, "failed": [1] if state == "FAILED" else [],
        "in_flight": [], "record_json": json.dumps(record)}, SourcePos("job-events", 1, offset)))


def play(pub: ClusterPublisher, timers: list[threading.Timer]) -> Any:
    """The job manager's answers to an update request: it rolls one instance at a time and
    succeeds, or fails when the new command is `./fail`."""
    def hook(event: Event) -> None:
        if event.type != "JobUpdateRequested":
            return
        jid, uid = event.body["job_id"], event.body["update_id"]
        fails = event.body["config"]["default_config"]["command"] == "./fail"
        steps = [("ROLLING_FORWARD", [], "replacing instance 0"),
                 ("ROLLING_FORWARD", [0], "replacing instance 1"),
                 ("FAILED", [0], "1 instance(s) failed: 1") if fails else
                 ("SUCCEEDED", [0, 1], "SUCCEEDED: 2 instance(s) at version 2")]
        for i, step in enumerate(steps):
            timers.append(threading.Timer(0.15 * i, set_update, (pub, jid, uid, *step)))
            timers[-1].start()
    return hook


@pytest.fixture
def publisher(served: tuple[str, ClusterPublisher]) -> Iterator[ClusterPublisher]:
    pub = served[1]
    pub.records.clear()
    timers: list[threading.Timer] = []
    pub.hooks.append(play(pub, timers))
    yield pub
    pub.hooks.clear()
    for timer in timers:  # every update ends before the next test
        timer.join(5)


def sent(pub: ClusterPublisher) -> list[tuple[str, dict[str, Any]]]:
    return [default_codec().decode(v) for t, _, v in pub.records]


@pytest.fixture
def v2(tmp_path: Path) -> Path:
    path = tmp_path / "web.yaml"
    path.write_text(SERVICE_YAML.replace("./serve", "./serve2"))
    return path


def test_update_with_settings_publishes_the_request(
        cli: typer.Typer, api: str, publisher: ClusterPublisher, v2: Path) -> None:
    code, out, err = run(cli, "job", "update", "job-svc", str(v2), "--batch-size", "1",
                         "--max-unavailable", "1", "--max-failures", "2",
                         "--max-instance-retries", "3", "--rollback-on-failure",
                         "--start-paused", "--canary", "1", "--update-id", "cli-u1",
                         "--by", "ops", "-o", "json", "--api", api)
    assert code == 0, err
    assert json.loads(out) == {"job_id": "job-svc", "update_id": "cli-u1"}
    ((etype, body),) = sent(publisher)
    assert etype == "JobUpdateRequested" and body["requested_by"] == "ops"
    assert body["settings"] == {
        "batch_size": 1, "max_unavailable": 1, "max_tolerable_instance_failures": 2,
        "max_instance_retries": 3, "rollback_on_failure": True, "start_paused": True,
        "canary": 1}
    assert body["config"]["default_config"]["command"] == "./serve2"


def test_update_wait_prints_progress_and_succeeds(
        cli: typer.Typer, api: str, publisher: ClusterPublisher, v2: Path) -> None:
    code, out, err = run(cli, "job", "update", "job-svc", str(v2), "--wait", *FAST,
                         "--api", api)
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].startswith("waiting for update ")
    assert lines[1:] == ["ROLLING_FORWARD 0/2 done: replacing instance 0",
                         "ROLLING_FORWARD 1/2 done: replacing instance 1",
                         "SUCCEEDED 2/2 done: SUCCEEDED: 2 instance(s) at version 2"]


def test_a_failed_update_exits_1_and_json_gives_the_update(
        cli: typer.Typer, api: str, publisher: ClusterPublisher, tmp_path: Path) -> None:
    bad = tmp_path / "fail.yaml"
    bad.write_text(SERVICE_YAML.replace("./serve", "./fail"))
    code, out, err = run(cli, "job", "update", "job-svc", str(bad), "--wait", *FAST,
                         "-o", "json", "--api", api)
    assert code == 1
    final = json.loads(out)
    assert (final["state"], final["failed"]) == ("FAILED", [1])
    assert "FAILED 1/2 done, 1 failed (1): 1 instance(s) failed: 1" in err


def test_restart_waits_too(cli: typer.Typer, api: str, publisher: ClusterPublisher) -> None:
    code, out, err = run(cli, "job", "restart", "job-svc", "--batch-size", "1", "--wait",
                         *FAST, "--api", api)
    assert code == 0, err
    assert out.splitlines()[-1].startswith("SUCCEEDED 2/2 done")
    ((etype, body),) = sent(publisher)
    assert etype == "JobUpdateRequested" and body["settings"]["batch_size"] == 1
    assert body["config"]["name"] == "web"


def test_bad_input_exits_2_before_sending(cli: typer.Typer, api: str,
                                          publisher: ClusterPublisher, v2: Path,
                                          tmp_path: Path) -> None:
    code, _, err = run(cli, "job", "update", "job-svc", str(v2), "--batch-size", "-1",
                       "--max-unavailable", "0", "--api", api)
    assert code == 2
    assert "batch_size: must be >= 0" in err
    assert "max_unavailable: must be >= 1 (leave it out for no limit)" in err
    broken = tmp_path / "broken.yaml"
    broken.write_text(SERVICE_YAML.replace("cpuLimit: 1", "cpuLimit: 0"))
    code, _, err = run(cli, "job", "update", "job-svc", str(broken), "--api", api)
    assert code == 2 and "defaultConfig.resource.cpuLimit: must be > 0" in err
    code, _, err = run(cli, "job", "update", "job-svc", str(tmp_path / "none"), "--api", api)
    assert code == 2 and "cannot read" in err
    code, _, err = run(cli, "job", "restart", "job-svc", "--batch-size", "-3", "--api", api)
    assert code == 2 and "batch_size: must be >= 0" in err
    assert sent(publisher) == []


def test_api_refusals(cli: typer.Typer, api: str, publisher: ClusterPublisher,
                      tmp_path: Path, v2: Path) -> None:
    moved = tmp_path / "moved.yaml"
    moved.write_text(SERVICE_YAML.replace("/prod/batch", "/dev"))
    code, _, err = run(cli, "job", "update", "job-svc", str(moved), "--api", api)
    assert code == 2  # the API's 400
    assert "respool: an update cannot change it (/prod/batch -> /dev)" in err
    code, _, err = run(cli, "job", "update", "nope", str(v2), "--api", api)
    assert code == 1 and "job_id: unknown job nope" in err
    code, _, err = run(cli, "job", "restart", "job-ok", "--api", api)
    assert code == 2 and "type: only SERVICE and STATEFUL jobs" in err
    assert sent(publisher) == []


def test_update_get_list_and_commands(cli: typer.Typer, api: str,
                                      publisher: ClusterPublisher) -> None:
    set_update(publisher, "job-cmd", "cmd-1", "PAUSED", [0], "paused by a user",
               "ROLLING_FORWARD")
    code, out, _ = run(cli, "update", "get", "cmd-1", "--api", api)
    assert code == 0
    assert "PAUSED (resumes ROLLING_FORWARD)" in out and "1/2 done" in out
    assert "batch_size=1" in out
    code, out, _ = run(cli, "update", "get", "cmd-1", "-o", "json", "--api", api)
    assert json.loads(out)["state"] == "PAUSED"
    code, out, _ = run(cli, "update", "list", "job-svc", "--api", api)
    assert code == 0 and "u-1" in out and "ABORTED" in out and "u-bad" in out
    code, out, _ = run(cli, "update", "list", "job-svc", "-o", "json", "--api", api)
    ids = [u["update_id"] for u in json.loads(out)["updates"]]
    assert ids[-2:] == ["u-1", "u-bad"]
    code, out, err = run(cli, "update", "resume", "cmd-1", "--by", "me", "--api", api)
    assert code == 0, err
    assert out.strip() == "resume of update cmd-1 (job job-cmd) requested"
    code, _, err = run(cli, "update", "pause", "cmd-1", "--api", api)
    assert code == 1 and "command: the update is already paused" in err
    code, out, err = run(cli, "update", "abort", "cmd-1", "-o", "json", "--api", api)
    assert code == 0 and json.loads(out)["command"] == "abort"
    assert [(e, b["command"], b["requested_by"]) for e, b in sent(publisher)][0] == (
        "UpdateCommandRequested", "resume", "me")
    code, _, err = run(cli, "update", "rollback", "nope", "--api", api)
    assert code == 1 and "update_id: unknown update nope" in err


def test_stop(cli: typer.Typer, api: str, publisher: ClusterPublisher) -> None:
    code, out, err = run(cli, "job", "stop", "job-wait", "--api", api)
    assert code == 0, err
    assert out.strip() == "stop of job job-wait requested"
    ((etype, body),) = sent(publisher)
    assert (etype, body["job_id"], body["instances"]) == ("JobKillRequested", "job-wait", [])
    code, out, _ = run(cli, "job", "stop", "nope", "-o", "json", "--api", api)
    assert code == 1


def test_unreachable_api_exits_3(cli: typer.Typer, v2: Path) -> None:
    for args in (("job", "update", "job-svc", str(v2)), ("update", "get", "x"),
                 ("job", "stop", "j"), ("update", "pause", "x")):
        code, _, err = run(cli, *args, "--api", CLOSED)
        assert code == 3 and "cannot reach" in err, args
