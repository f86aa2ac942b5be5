"""The API conventions on a real minicluster, through the typed client (peloton.sdk):
label-selector listing, and the job and cluster event streams (Server-Sent Events) while
a job really runs."""

from __future__ import annotations

import threading

import pytest
from e2e_helpers import api_client, job_state, wait_for

from peloton.minicluster.cluster import Cluster
from peloton.sdk import Client, WatchEvent

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]

JOB = """\
name: watched
labels: {team: sdk-e2e, run: "%s"}
instanceCount: 2
defaultConfig:
  resource: {cpuLimit: 0.5, memLimitMb: 32}
  command: {value: "echo hi"}
"""


def test_watch_a_job_and_the_cluster_while_it_runs(minicluster: Cluster) -> None:
    token = minicluster.admin_token
    url = minicluster.layout.api_url
    cluster_events: list[WatchEvent] = []
    seen = threading.Event()
    job_ids: list[str] = []

    def watch_cluster() -> None:
        with Client(url, token=token) as api:
            for ev in api.watch_cluster(max_seconds=5):
                cluster_events.append(ev)
                if (ev.event == "job" and job_ids and ev.data["job_id"] == job_ids[0]
                        and ev.data["state"] == "SUCCEEDED"):
                    seen.set()
                    return

    with Client(url, token=token, timeout=30) as api:
        threading.Thread(target=watch_cluster, daemon=True).start()
        job_id = api.submit_job(JOB % "1")
        job_ids.append(job_id)
        with api_client(minicluster) as raw:  # the stream of an unknown job is 404
            wait_for(lambda: job_state(raw, job_id), 30, what="the job in the read model")
        events = list(api.watch_job(job_id, until_done=True, max_seconds=30))
        assert events[-1].event == "job" and events[-1].data["state"] == "SUCCEEDED"
        ran = {(e.data["instance"], e.data["state"]) for e in events if e.event == "task"}
        assert {(i, s) for i in (0, 1) for s in ("PENDING", "RUNNING", "SUCCEEDED")} <= ran
        assert seen.wait(60), [e.data for e in cluster_events]
        assert [j.job_id for j in api.iter_jobs(label_selector="team=sdk-e2e,run in (1)")] \
            == [job_id]
        assert api.list_tasks(job_id, state="SUCCEEDED").items[0].instance == 0
