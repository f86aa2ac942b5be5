"""Test helper: labelled jobs submitted through the real job manager core, as rows.

`LabelledJobs()` adds jobs with given labels, owner and pool at given times
(JobSubmitted, then the job manager's own facts); `rows_since(n)` projects only the
records added after the first n (for inserting while a test pages or watches).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import yaml
from readmodel_scenario import Bus

from peloton.jobmgr.domain.book import JobBook
from peloton.model.jobfile import parse_job_file
from peloton.readmodel.projector import Row, project


def job_yaml(name: str, labels: dict[str, str], owner: str = "team-a",
             respool: str = "/prod/batch", n: int = 1) -> str:
    return yaml.safe_dump({
        "name": name, "owner": owner, "instanceCount": n, "respool": respool,
        "labels": labels, "sla": {"priority": 1},
        "defaultConfig": {"resource": {"cpuLimit": 1, "memLimitMb": 64},
                          "command": {"value": "true"}}})


class LabelledJobs:
    def __init__(self, first_offset: int = 1_000_000) -> None:
        self.bus = Bus()  # offsets past the read-model scenario's, as a live bus's would be
        self.bus._next = defaultdict(lambda: first_offset)
        self.book = JobBook()

    def add(self, job_id: str, t: int, labels: dict[str, str] | None = None,
            owner: str = "team-a", respool: str = "/prod/batch", n: int = 1) -> None:
        sub = parse_job_file(job_yaml(job_id, labels or {}, owner, respool, n), job_id, t)
        self.bus.add("JobSubmitted", job_id, sub)
        self.bus.add_events(self.book.handle("JobSubmitted", sub, t + 1))

    def rows_since(self, n: int = 0) -> list[Row]:
        return [row for r in self.bus.records[n:]
                for row in project(r.etype, r.body, r.source)]

    def __len__(self) -> int:
        return len(self.bus.records)

    def body(self, i: int) -> dict[str, Any]:
        return self.bus.records[i].body
