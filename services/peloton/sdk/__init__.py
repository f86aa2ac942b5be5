"""A typed Python client for the Peloton HTTP API (httpx), sync and async.

    from peloton.sdk import Client
    with Client("http://localhost:8080", token="...") as api:
        job_id = api.submit_job(open("job.yaml").read())
        for job in api.iter_jobs(state=["RUNNING"], label_selector="team=ml"):
            print(job.job_id, job.state)
        for ev in api.watch_job(job_id, until_done=True):
            print(ev.event, ev.data)

Models are dataclasses (peloton.sdk.models) built from the API's JSON (unknown fields
kept in `.raw`); errors are exceptions carrying the API's `error` and `details`
(peloton.sdk.errors); list calls return a `Page` (items + next_cursor) and `iter_*`
follow the cursors; `watch_*` iterate Server-Sent Events and resume with Last-Event-ID
when the server ends a stream. docs/client.md has the guide.
"""

from peloton.sdk.client import AsyncClient, Client
from peloton.sdk.errors import (
    ApiUnreachable,
    BadRequest,
    Conflict,
    Forbidden,
    NotFound,
    PelotonError,
    Unauthorized,
    Unavailable,
)
from peloton.sdk.models import (
    Host,
    Job,
    Page,
    Pool,
    Task,
    TaskTransition,
    Update,
    WatchEvent,
)

__all__ = ["Client", "AsyncClient", "PelotonError", "ApiUnreachable", "BadRequest",
           "Unauthorized", "Forbidden", "NotFound", "Conflict", "Unavailable", "Job", "Task",
           "TaskTransition", "Pool", "Host", "Update", "Page", "WatchEvent"]
