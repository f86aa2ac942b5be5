"""Parsing the list operations' query parameters: filters, label selectors and cursors.

Pure functions (no I/O); the SQL they feed is in peloton.readmodel.listing.

Contract:
- `parse_selector(text)` reads a Kubernetes-style label selector (the grammar and its
  one parser are peloton.model.selector, shared with the CLI's `-l`); garbage raises
  `SelectorError` listing every problem found; `format_selector` writes it back.
- `parse_states(values, allowed)` takes repeated and/or comma-separated states (any case)
  and returns them upper-cased, deduplicated, in the order given; unknown ones are
  problems.
- Cursors are opaque to clients: `encode_cursor(key)` is URL-safe base64 (no padding) of
  the JSON of the last row's sort key (a list of strings and ints); `decode_cursor` gives
  it back, or raises `CursorError` for anything that is not a cursor of that shape. Pages
  are keyset pages: the next page is the rows after the key in the sort order, so rows
  inserted meanwhile never shift the pages (see peloton.readmodel.listing).
- `job_filter`/`task_filter` turn the list routes' query parameters into read-model
  filters, and `job_cursor`/`task_cursor` their cursors into sort keys, raising
  BadRequest (400) that lists every problem with its field.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Iterable, Sequence
from typing import Any

from peloton.api.errors import BadRequest
from peloton.api.openapi import any_case
from peloton.model.selector import (
    MAX_SELECTOR,
    OPS,
    Requirement,
    SelectorError,
    format_selector,
)
from peloton.model.selector import parse as parse_selector
from peloton.readmodel.listing import JobFilter, TaskFilter

__all__ = ["Requirement", "SelectorError", "CursorError", "parse_selector", "format_selector",
           "parse_states", "encode_cursor", "decode_cursor", "OPERATORS", "MAX_SELECTOR",
           "state_list_pattern", "state_param", "parse_instance_ranges", "job_filter",
           "task_filter", "job_cursor", "task_cursor"]

OPERATORS = OPS
MAX_CURSOR = 2048


class CursorError(ValueError):
    pass


def parse_states(values: Iterable[str] | None, allowed: Sequence[str],
                 max_values: int | None = None) -> tuple[list[str], list[str]]:
    """(states, problems) from repeated and/or comma-separated values (any ASCII case,
    nothing around the commas: exactly what `state_list_pattern` matches)."""
    states: list[str] = []
    problems: list[str] = []
    values = list(values or ())
    if max_values is not None and len(values) > max_values:
        problems.append(f"give it at most {max_values} times")
    for value in values:
        for word in value.split(","):
            state = word.upper()
            if not word.isascii() or state not in allowed:
                problems.append(f"{word[:40]!r} is not one of {', '.join(allowed)}")
            elif state not in states:
                states.append(state)
    return states, problems


def state_param(allowed: Sequence[str], description: str) -> dict[str, Any]:
    """The OpenAPI parameter `state` (an array, repeated in the query): routes read it
    with `request.query_params.getlist("state")` and check it with `parse_states`."""
    return {"name": "state", "in": "query", "required": False, "style": "form",
            "explode": True, "description": description,
            "schema": {"type": "array", "maxItems": len(allowed),
                       "items": {"type": "string", "pattern": state_list_pattern(allowed)}}}


def encode_cursor(key: Sequence[str | int]) -> str:
    raw = json.dumps(list(key), separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str, shape: Sequence[type]) -> list[str | int]:
    """The sort key in `cursor`, whose items must have the types of `shape` in order."""
    if len(cursor) > MAX_CURSOR:
        raise CursorError("not a cursor this API made (too long)")
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        key = json.loads(raw)
    except (binascii.Error, ValueError) as exc:
        raise CursorError("not a cursor this API made") from exc
    if (not isinstance(key, list) or len(key) != len(shape)
            or not all(type(v) is t for v, t in zip(key, shape, strict=True))):
        raise CursorError("not a cursor this API made (pass next_cursor back unchanged)")
    if any(isinstance(v, int) and not -(2**63) <= v < 2**63 for v in key):
        raise CursorError("not a cursor this API made (out of range)")
    return key


# ---- the list operations' parameters -> read-model filters ----------------------------
def state_list_pattern(states: Sequence[str]) -> str:
    """A JSON Schema pattern: one state, or several separated by commas, any case."""
    word = any_case(list(states))[1:-1]
    return f"^{word}(?:,{word})*$"


def parse_instance_ranges(text: str | None) -> tuple[tuple[tuple[int, int], ...], list[str]]:
    """"0-3,7" -> (((0, 3), (7, 7)), problems); None or "" -> ((), [])."""
    if not text:
        return (), []
    out: list[tuple[int, int]] = []
    problems: list[str] = []
    for part in text.split(","):
        lo, _, hi = part.strip().partition("-")
        try:
            first, last = int(lo), int(hi or lo)
        except ValueError:
            problems.append(f"{part.strip()[:40]!r} is not N or N-M")
            continue
        if not 0 <= first <= last < 2**32:
            problems.append(f"{part.strip()[:40]}: want 0 <= N <= M < 2^32")
            continue
        out.append((first, last))
    return tuple(out), problems


def _problem(field: str, message: str) -> dict[str, str]:
    return {"field": field, "message": message}


def _raise(problems: list[dict[str, str]]) -> None:
    if problems:
        raise BadRequest("invalid request", problems)


def job_filter(*, states: list[str], allowed: Sequence[str], owner: str | None,
               pool: str | None, subpools: bool, label_selector: str | None,
               submitted_from: int | None, submitted_to: int | None) -> JobFilter:
    """The read-model filter for GET /v1/jobs; 400 listing every problem."""
    problems: list[dict[str, str]] = []
    chosen, bad = parse_states(states, allowed, len(allowed))
    problems += [_problem("state", b) for b in bad]
    reqs: list[Requirement] = []
    try:
        reqs = parse_selector(label_selector or "")
    except SelectorError as exc:
        problems += [_problem("label_selector", p) for p in exc.problems]
    if (submitted_from is not None and submitted_to is not None
            and submitted_from > submitted_to):
        problems.append(_problem("submitted_to", "must not be before submitted_from"))
    if subpools and pool is None:
        problems.append(_problem("subpools", "needs pool"))
    _raise(problems)
    if pool is not None:
        pool = "/" + pool.strip("/")
    return JobFilter(states=tuple(chosen), owner=owner, pool=pool, subpools=subpools,
                     selector=tuple(reqs), submitted_from=submitted_from,
                     submitted_to=submitted_to)


def task_filter(*, states: list[str], allowed: Sequence[str], instances: str | None,
                host: str | None) -> TaskFilter:
    """The read-model filter for GET /v1/jobs/{id}/tasks; 400 listing every problem."""
    chosen, bad = parse_states(states, allowed, len(allowed))
    problems = [_problem("state", b) for b in bad]
    ranges, bad = parse_instance_ranges(instances)
    problems += [_problem("instances", b) for b in bad]
    _raise(problems)
    return TaskFilter(states=tuple(chosen), instances=ranges, host=host)


def job_cursor(cursor: str | None) -> tuple[int, str] | None:
    if cursor is None:
        return None
    try:
        at, job_id = decode_cursor(cursor, (int, str))
    except CursorError as exc:
        raise BadRequest("invalid request", [_problem("cursor", str(exc))]) from exc
    return int(at), str(job_id)


def task_cursor(cursor: str | None) -> int | None:
    if cursor is None:
        return None
    try:
        (instance,) = decode_cursor(cursor, (int,))
    except CursorError as exc:
        raise BadRequest("invalid request", [_problem("cursor", str(exc))]) from exc
    return int(instance)
