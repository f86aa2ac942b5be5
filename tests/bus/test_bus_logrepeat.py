"""peloton.bus.logrepeat: the Kafka client's repeated errors are logged once per window with
a count of those held back; other loggers are never held back."""

from __future__ import annotations

import io
import logging
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from peloton.bus import logformat
from peloton.bus.logrepeat import RepeatFilter


def _record(name: str, msg: str, created: float, *args: object,
            level: int = logging.ERROR) -> logging.LogRecord:
    record = logging.LogRecord(name, level, __file__, 1, msg, args or None, None)
    record.created = created
    return record


_COUNT = re.compile(r" \((\d+) more like it since the last one logged\)$")


def test_a_repeated_client_error_passes_once_per_window_then_with_its_count() -> None:
    f = RepeatFilter(window_s=30)
    times = [i * 0.1 for i in range(600)]  # every retry for a minute
    passed = [r for r in (_record("aiokafka", "Unable connect to node with id %s", t, 111)
                          for t in times) if f.filter(r)]
    assert [r.created for r in passed] == [0.0, 30.0]
    assert passed[0].getMessage() == "Unable connect to node with id 111"
    assert passed[1].getMessage() == ("Unable connect to node with id 111 (299 more like it "
                                      "since the last one logged)")


def test_other_loggers_and_other_texts_are_never_held_back() -> None:
    f = RepeatFilter(window_s=30)
    assert all(f.filter(_record("peloton.bus.service", "same", t)) for t in (0, 0.1, 0.2))
    assert f.filter(_record("aiokafka.consumer.fetcher", "a", 0))
    assert f.filter(_record("aiokafka.consumer.fetcher", "b", 0))  # another text
    assert f.filter(_record("aiokafka", "a", 0))  # another logger
    assert f.filter(_record("aiokafka.consumer.fetcher", "a", 0, level=logging.WARNING))
    assert not f.filter(_record("aiokafka.consumer.fetcher", "a", 1))
    assert f.filter(_record("aiokafkax", "a", 0)) and f.filter(_record("aiokafkax", "a", 1))


@given(st.lists(st.tuples(st.floats(0, 5), st.sampled_from(["x", "y", "z"]),
                          st.sampled_from(["aiokafka", "aiokafka.conn", "peloton"])),
                max_size=200))
def test_every_record_is_logged_or_counted(steps: list[tuple[float, str, str]]) -> None:
    """Records held back and the counts of the lines logged add up: nothing vanishes
    without being counted, except those after the last line of their kind (still held)."""
    f = RepeatFilter(window_s=2)
    now, held, counted = 0.0, 0, 0
    pending: dict[tuple[str, str], int] = {}
    for gap, text, name in steps:
        now += gap
        record = _record(name, text, now)
        if f.filter(record):
            m = _COUNT.search(record.getMessage())
            n = int(m.group(1)) if m else 0
            assert n == pending.pop((name, text), 0)
            counted += n
        else:
            assert name != "peloton"
            held += 1
            pending[(name, text)] = pending.get((name, text), 0) + 1
    assert held == counted + sum(pending.values())


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_a_service_log_holds_the_retries_back(root: logging.Logger, fmt: str) -> None:
    out = io.StringIO()
    logformat.configure("hostmgr-1", fmt, "INFO", stream=out, force=True)
    for _ in range(100):
        logging.getLogger("aiokafka").error("Unable connect to node with id %s", 111)
        logging.getLogger("peloton.bus.service").warning("still here")
    lines = out.getvalue().splitlines()
    assert sum("Unable connect" in line for line in lines) == 1
    assert sum("still here" in line for line in lines) == 100
