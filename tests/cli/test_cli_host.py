"""`peloton host maintenance start|complete|cancel` and `peloton host list` against a real
API server (see conftest; its store plays the host manager's answers here)."""

from __future__ import annotations

import json
from typing import Any

import pytest
import typer
from event_bodies import host_state_changed, task_state_changed
from typer.testing import CliRunner

from peloton.bus.codec import default_codec
from peloton.readmodel.projector import SourcePos, project

ClusterPublisher = Any  # conftest's: a MemoryPublisher with the served `store`
CLOSED = "http://127.0.0.1:9"
runner = CliRunner()
OFFSETS = iter(range(10**6, 10**7))


def run(cli: typer.Typer, *args: str) -> tuple[int, str, str]:
    result = runner.invoke(cli, list(args))
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture
def publisher(served: tuple[str, ClusterPublisher]) -> ClusterPublisher:
    pub = served[1]
    pub.records.clear()
    set_state(pub, "h1", "UP")
    return pub


def set_state(pub: ClusterPublisher, host: str, state: str, at: int = 0) -> None:
    offset = next(OFFSETS)
    pub.store.insert(project("HostStateChanged", host_state_changed(
        host, state, "UP", at=at or offset, deadline_ms=None if state == "UP" else 4_000_000),
        SourcePos("host-events", 0, offset)))


def requests(pub: ClusterPublisher) -> list[dict[str, object]]:
    return [dict(default_codec().decode(v)[1]) for t, _, v in pub.records
            if t == "host-maintenance-requested"]


def test_start_with_a_deadline(cli: typer.Typer, api: str, publisher: ClusterPublisher) -> None:
    code, out, err = run(cli, "host", "maintenance", "start", "h1", "--deadline", "10m",
                         "--by", "ops", "--api", api)
    assert code == 0, err
    assert "h1: start_maintenance requested" in out
    (req,) = requests(publisher)
    assert (req["host"], req["command"], req["requested_by"]) == (
        "h1", "start_maintenance", "ops")
    assert req["deadline_ms"] == int(req["at"]) + 600_000  # type: ignore[call-overload]


def test_several_hosts_json_and_a_refusal(cli: typer.Typer, api: str,
                                          publisher: ClusterPublisher) -> None:
    code, out, err = run(cli, "host", "maintenance", "start", "h1", "nope", "h2", "-o", "json",
                         "--api", api)
    assert code == 1
    data = json.loads(out)
    assert [r["host"] for r in data["requests"]] == ["h1", "h2"]
    assert data["errors"] == [{"host": "nope", "status": 404, "error": "host nope not found",
                               "problems": ["host: unknown host nope"]}]
    assert "host: unknown host nope" in err
    assert [r["host"] for r in requests(publisher)] == ["h1", "h2"]


def test_a_state_that_forbids_it_exits_1_with_the_reason(
        cli: typer.Typer, api: str, publisher: ClusterPublisher) -> None:
    set_state(publisher, "h1", "DOWN")
    code, _, err = run(cli, "host", "maintenance", "start", "h1", "--api", api)
    assert code == 1
    assert "action: the host is already DOWN for maintenance" in err
    code, _, err = run(cli, "host", "maintenance", "cancel", "h1", "--api", api)
    assert code == 1 and "action: the host is DOWN" in err
    code, out, err = run(cli, "host", "maintenance", "complete", "h1", "--api", api)
    assert code == 0, err
    assert [r["command"] for r in requests(publisher)] == ["complete_maintenance"]


def test_bad_input_exits_2_before_sending(cli: typer.Typer, api: str,
                                          publisher: ClusterPublisher) -> None:
    code, _, err = run(cli, "host", "maintenance", "start", "h1", "--deadline", "soon",
                       "--api", api)
    assert code == 2
    assert "deadline: a duration such as 90s" in err
    assert requests(publisher) == []
    code, _, _ = run(cli, "host", "maintenance", "start", "--api", api)
    assert code == 2  # no host named


def test_host_list_shows_state_and_tasks(cli: typer.Typer, api: str,
                                         publisher: ClusterPublisher) -> None:
    set_state(publisher, "h1", "DRAINING")
    base = len(publisher.store.hosts("h1")[0]["runs"])
    publisher.store.insert(project("TaskStateChanged", task_state_changed(
        "jlist", (0, "RUNNING"), (1, "RUNNING"), host="h1", previous="LAUNCHED", at=9_000),
        SourcePos("job-events", 2, next(OFFSETS))))
    code, out, _ = run(cli, "host", "list", "--api", api)
    assert code == 0
    h1 = next(line for line in out.splitlines() if line.strip().startswith("h1")
              or "│ h1" in line)
    assert "DRAINING" in h1 and f" {base + 2} " in h1
    code, out, _ = run(cli, "host", "list", "-o", "json", "--api", api)
    hosts = {h["host"]: h for h in json.loads(out)["hosts"]}
    assert hosts["h1"]["maintenance_state"] == "DRAINING"
    assert hosts["h1"]["task_count"] == base + 2


def test_unreachable_api_exits_3(cli: typer.Typer) -> None:
    code, _, err = run(cli, "host", "maintenance", "cancel", "h1", "--api", CLOSED)
    assert code == 3 and "cannot reach" in err


def test_host_get_says_why_a_drain_is_not_finished(cli: typer.Typer, api: str,
                                                   publisher: ClusterPublisher) -> None:
    set_state(publisher, "h1", "DRAINING")
    publisher.store.insert(project("HostDrainProgressed", {
        "host": "h1", "at": 9_500, "reason": "host h1 is not drained yet: web/1: job web "
        "has 1 instance(s) unavailable, its SLA allows 1", "waiting": ["web/1: ..."],
        "moved": ["etl/0: batch: retried elsewhere"]},
        SourcePos("host-events", 1, next(OFFSETS))))
    code, out, _ = run(cli, "host", "get", "h1", "--api", api)
    assert code == 0, out
    assert "DRAINING" in out and "DRAIN" in out
    assert "its SLA allows 1" in " ".join(out.split())
    code, out, _ = run(cli, "host", "get", "h1", "-o", "json", "--api", api)
    drains = [e for e in json.loads(out)["events"] if e["kind"] == "DRAIN"]
    assert len(drains) == 1 and "moved: etl/0" in drains[0]["reason"]
