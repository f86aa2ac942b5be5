"""`peloton job validate FILE...`: check job files offline (no API, no cluster).

Each file goes through the same parser (`model.jobfile.parse_job_file`) and checks
(`jobmgr.domain.validation.check_job_document`) the API applies before it accepts a job,
so a file that passes here is refused by the API only for what needs the cluster (an
unknown pool, a job id already taken). A file whose top-level fields are all rolling-update
settings (batchSize, maxUnavailable, maxInstanceRetries, maxTolerableInstanceFailures,
canary, rollbackOnFailure, startPaused and Peloton's aliases) is checked as an update spec
(`updates.domain.rolling.UpdateSettings`). Every problem of every file is printed, one per
line as `FILE:field: message` on stderr; exit 0 when all files are valid, 2 otherwise.
`-o json|yaml` prints {"files": [{"file", "kind", "valid", "problems"}]} on stdout.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any

import typer
import yaml

from peloton.cli.output import Output, OutputOpt, emit
from peloton.jobmgr.domain.validation import check_job_document
from peloton.model.jobfile import JobFileError, parse_job_file
from peloton.updates.domain.rolling import UpdateSettings, UpdateSpecError

__all__ = ["UPDATE_FIELDS", "check_file", "check_text", "validate"]

EXIT_INVALID = 2
UPDATE_FIELDS = frozenset({
    "batchSize", "maxUnavailable", "maxInstanceRetries", "maxInstanceAttempts",
    "maxTolerableInstanceFailures", "maxFailureInstances", "canary", "rollbackOnFailure",
    "startPaused"})


def _update_problems(doc: Mapping[str, Any]) -> list[str]:
    problems = []
    for key, value in doc.items():  # one at a time: every problem, not just the first
        try:
            UpdateSettings.from_body({key: value})
        except UpdateSpecError as exc:
            problems.append(f"{exc.field}: {exc.reason}")
    return problems


def check_text(text: str) -> tuple[str, list[str]]:
    """("job" or "update", the problems as "field: message") for one file's text."""
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError:
        doc = None  # the job file parser reports it
    if isinstance(doc, Mapping) and doc and set(map(str, doc)) <= UPDATE_FIELDS:
        return "update", _update_problems(doc)
    try:
        check_job_document(parse_job_file(text, "validate", int(time.time() * 1000)))
    except JobFileError as exc:
        return "job", list(exc.problems)
    return "job", []


def check_file(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        reason = getattr(exc, "strerror", None) or str(exc)
        return {"file": str(path), "kind": "unknown", "valid": False,
                "problems": [f"cannot read: {reason}"]}
    kind, problems = check_text(text)
    problems = [" ".join(p.split()) for p in problems]  # one line each (YAML errors)
    return {"file": str(path), "kind": kind, "valid": not problems, "problems": problems}


def validate(
    files: Annotated[list[Path], typer.Argument(help="job files or update specs (YAML or "
                                                "JSON)", show_default=False)],
    output: OutputOpt = Output.table,
) -> None:
    """Check job files (and update specs) offline, printing every problem at once."""
    results = [check_file(f) for f in files]
    if output.machine:
        emit({"files": results}, output)
    for r in results:
        for p in r["problems"]:
            typer.echo(f"{r['file']}:{p}", err=True)
        if r["valid"] and not output.machine:
            typer.echo(f"{r['file']}: valid {r['kind']} file" if r["kind"] == "job"
                       else f"{r['file']}: valid update spec")
    if not all(r["valid"] for r in results):
        raise typer.Exit(EXIT_INVALID)
