"""The web UI in headless Chromium (Debian's, through Playwright) against a live local
cluster: log in with the cluster's admin token, submit a job by pasting YAML and watch it
succeed (and read its log), see a bad job file's every problem, kill a running job from
its page, and load every page, writing a screenshot of each (to the test's tmp dir, or to
$PELOTON_UI_SCREENSHOTS, e.g. docs/ui, to refresh the README's pictures)."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest

from peloton.minicluster.cluster import Cluster

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]

GOOD = """\
name: ui-hello
owner: ui-test
type: BATCH
respool: /default
instanceCount: 2
labels: [{key: origin, value: ui}]
sla: {priority: 1, preemptible: true}
defaultConfig:
  resource: {cpuLimit: 0.1, memLimitMb: 32, diskLimitMb: 16}
  command: {value: "echo hello from the UI $PELOTON_INSTANCE_ID"}
"""
SLEEPER = GOOD.replace("ui-hello", "ui-sleeper").replace(
    "echo hello from the UI $PELOTON_INSTANCE_ID", "sleep 120").replace(
    "instanceCount: 2", "instanceCount: 1")
BAD = GOOD.replace("instanceCount: 2", "instanceCount: -1").replace("cpuLimit: 0.1",
                                                                    "cpuLimit: 0")


@pytest.fixture(scope="module")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    where = os.environ.get("PELOTON_UI_SCREENSHOTS")
    out = Path(where) if where else tmp_path_factory.mktemp("ui-screenshots")
    out.mkdir(parents=True, exist_ok=True)
    return out


def _submit(page: Any, text: str) -> None:
    page.goto_ui("/ui/submit")
    page.fill("#job-yaml", text)
    page.click("#submit-form button[type=submit]")


def test_ui_against_a_live_cluster(minicluster: Cluster, browser: Any, shots: Path) -> None:
    base = minicluster.layout.api_url
    ctx = browser.new_context(base_url=base, viewport={"width": 1280, "height": 900})
    page = ctx.new_page()
    page.set_default_timeout(15_000)
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("dialog", lambda d: d.accept())

    def goto_ui(path: str) -> None:
        page.goto(path)
        page.wait_for_selector("#content[data-loaded], #error:not([hidden])")
        assert page.is_hidden("#error"), page.inner_text("#error")

    page.goto_ui = goto_ui  # type: ignore[attr-defined]

    # no token yet: the shell sends the person to the login page; a wrong token is refused
    page.goto("/ui/jobs")
    page.wait_for_url("**/ui/login?next=*")
    page.fill("#token", "not-a-token")
    page.click("#login-form button")
    page.wait_for_selector("#error:not([hidden])")
    assert "invalid bearer token" in page.inner_text("#error")
    page.fill("#token", minicluster.admin_token or "")
    page.click("#login-form button")
    page.wait_for_url("**/ui/jobs")
    assert "?" not in page.url and (minicluster.admin_token or "x") not in page.url
    page.screenshot(path=str(shots / "login-then-jobs.png"))

    # a bad job file: every problem shown, nothing submitted
    _submit(page, BAD)
    page.wait_for_selector("#submit-result .error")
    problems = page.inner_text("#submit-result")
    assert "400: invalid job file" in problems and "instanceCount" in problems
    assert "cpuLimit" in problems
    page.screenshot(path=str(shots / "submit-error.png"), full_page=True)

    # a good one runs to the end; its page shows the tasks and their logs
    _submit(page, GOOD)
    page.wait_for_url("**/ui/job?id=*", timeout=20_000)
    job_id = page.url.split("id=", 1)[1]
    page.wait_for_selector("#content[data-loaded]", timeout=20_000)
    deadline = time.monotonic() + 60
    while "SUCCEEDED" not in page.inner_text("#live h1") and time.monotonic() < deadline:
        page.wait_for_timeout(500)
    assert "SUCCEEDED" in page.inner_text("#live h1"), page.inner_text("#content")
    page.click('button[data-logs][data-instance="1"][data-stream="stdout"]')
    page.locator("#logs-text", has_text="hello from the UI 1").wait_for()
    page.locator("details summary").first.click()  # its state history
    page.screenshot(path=str(shots / "job.png"), full_page=True)

    # a running job killed from its page (through POST /v1/jobs/{id}/kill)
    _submit(page, SLEEPER)
    page.wait_for_url("**/ui/job?id=*", timeout=20_000)
    page.wait_for_selector("button[data-kill]", timeout=30_000)
    deadline = time.monotonic() + 30
    while "RUNNING" not in page.inner_text("#live") and time.monotonic() < deadline:
        page.wait_for_timeout(500)
    sleeper = page.url.split("id=", 1)[1]
    goto_ui("/ui/hosts")  # what runs where: the sleeper's run on its host
    assert f"{sleeper}/0" in page.inner_text("#content"), page.inner_text("#content")
    page.screenshot(path=str(shots / "hosts.png"), full_page=True)
    goto_ui(f"/ui/job?id={sleeper}")
    page.click("button[data-kill]")
    deadline = time.monotonic() + 45
    while "KILLED" not in page.inner_text("#live h1") and time.monotonic() < deadline:
        page.wait_for_timeout(500)
    assert "KILLED" in page.inner_text("#live h1"), page.inner_text("#content")

    # every page loads from the live cluster, with its data
    checks = {
        "/ui/jobs": job_id,
        "/ui/jobs?label=origin%3Dui&state=SUCCEEDED": job_id,
        "/ui/pools": "/default",
        "/ui/pool?path=%2Fdefault&minutes=5": "entitlement",
        "/ui/preemptions": "Preemptions",
        "/ui/dead-letters": "Dead letters",
        "/ui/submit": "Submit a job",
    }
    for path, expect in checks.items():
        goto_ui(path)
        assert expect in page.inner_text("#content"), (path, page.inner_text("#content"))
        name = path.split("?")[0].removeprefix("/ui/") + ("-filtered" if "label" in path else "")
        if name == "pool":  # entitlement vs allocation over the cluster's cycles so far
            assert page.locator("svg.chart polyline.entitlement").count() >= 1
            assert page.locator("svg.chart polyline.allocation").count() >= 1
        page.screenshot(path=str(shots / f"{name}.png"), full_page=True)

    # an API error reaches the person instead of a blank page
    page.goto("/ui/job?id=no-such-job")
    page.wait_for_selector("#error:not([hidden])")
    assert "no-such-job not found" in page.inner_text("#error")
    assert not errors, errors
    ctx.close()
