"""The agent's run book (pure): a run is started at most once, and the book stays small.

Examples by shape, then a property over random launch / kill / redelivery / end / report /
time sequences: no run is started twice, whatever is redelivered and whatever has left.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import given, settings
from hypothesis import strategies as st

from peloton.agent.domain.runbook import KillAction, RunBook, RunPhase

T0 = 1_700_000_000_000
RETENTION_MS = 1_000


def ended_and_reported(book: RunBook, rid: str, now: int) -> None:
    book.ended(rid)
    book.reported(rid, now)


def test_a_run_is_started_once_while_the_book_holds_it() -> None:
    book = RunBook(RETENTION_MS)
    assert book.admit_launch("j-0-1", T0)
    assert not book.admit_launch("j-0-1", T0)  # redelivered while live
    book.ended("j-0-1")
    assert not book.admit_launch("j-0-1", T0)  # ended, report in flight
    book.reported("j-0-1", T0 + 10)
    assert not book.admit_launch("j-0-1", T0)  # reported, within the window
    assert book.phase("j-0-1") is RunPhase.REPORTED


def test_a_redelivered_launch_of_a_forgotten_run_is_not_started() -> None:
    book = RunBook(RETENTION_MS)
    assert book.admit_launch("j-0-1", T0)
    ended_and_reported(book, "j-0-1", T0 + 100)
    assert book.expire(T0 + 100 + RETENTION_MS - 1) == []
    assert book.expire(T0 + 100 + RETENTION_MS) == ["j-0-1"]
    assert len(book) == 0 and "j-0-1" not in book
    assert not book.admit_launch("j-0-1", T0)  # the same record again
    assert book.admit_launch("j-0-2", T0 + 5_000)  # a new request (later in the log)


def test_an_entry_leaves_only_after_its_end_was_reported() -> None:
    book = RunBook(RETENTION_MS)
    book.admit_launch("live", T0)
    book.admit_launch("ended", T0)
    book.ended("ended")
    assert book.expire(T0 + 100 * RETENTION_MS) == []
    assert len(book) == 2


def test_a_kill_before_the_launch_leaves_a_tombstone_and_is_reported_once() -> None:
    book = RunBook(RETENTION_MS)
    assert book.admit_kill("j-0-1", T0) is KillAction.REPORT_KILLED
    assert book.admit_kill("j-0-1", T0) is KillAction.IGNORE  # redelivered kill
    assert not book.admit_launch("j-0-1", T0 + 1)  # the launch came after: not started
    book.reported("j-0-1", T0 + 50)
    assert book.expire(T0 + 50 + RETENTION_MS) == ["j-0-1"]
    assert book.admit_kill("j-0-1", T0) is KillAction.IGNORE  # forgotten, same record
    assert not book.admit_launch("j-0-1", T0 + 1)  # the launch it saw, redelivered


def test_a_kill_of_a_live_run_asks_the_runner_and_of_an_ended_one_nothing() -> None:
    book = RunBook(RETENTION_MS)
    book.admit_launch("j-0-1", T0)
    assert book.admit_kill("j-0-1", T0 + 5) is KillAction.KILL
    book.ended("j-0-1")
    assert book.admit_kill("j-0-1", T0 + 5) is KillAction.IGNORE
    book.reported("j-0-1", T0 + 10)
    book.expire(T0 + 10 + RETENTION_MS)
    assert book.admit_kill("j-0-1", T0 + 5) is KillAction.IGNORE  # redelivered after it left


def test_many_waves_of_runs_leave_the_book_flat() -> None:
    book = RunBook(RETENTION_MS)
    now = T0
    sizes = []
    for wave in range(50):
        rids = [f"w{wave}-{i}-1" for i in range(40)]
        for rid in rids:
            assert book.admit_launch(rid, now)
        now += 300
        for rid in rids:
            ended_and_reported(book, rid, now)
        now += 300
        book.expire(now)
        sizes.append(len(book))
    assert max(sizes) <= 4 * 40  # the runs of the waves within one window, never more
    assert sizes[-1] == sizes[10]
    assert len(book._reported) == sizes[-1]


def test_expiry_follows_report_order_even_if_the_clock_steps_back() -> None:
    book = RunBook(RETENTION_MS)
    for rid in ("a", "b"):
        book.admit_launch(rid, T0)
    ended_and_reported(book, "a", T0 + 500)
    ended_and_reported(book, "b", T0 + 400)  # the clock went back a little
    assert book.expire(T0 + 1_450) == []  # "a" first, not due yet: "b" waits behind it
    assert book.expire(T0 + 1_500) == ["a", "b"]


# ------------------------------------------------------------------------------ property

@dataclass
class Log:
    """The two request topics of one host, with the event time of each request."""

    launches: list[tuple[str, int]] = field(default_factory=list)
    kills: list[tuple[str, int]] = field(default_factory=list)


OPS = st.lists(
    st.tuples(
        st.sampled_from(["launch", "kill", "redeliver_launch", "redeliver_kill", "end",
                         "report", "wait"]),
        st.integers(0, 3),  # which run (or which record to redeliver)
        st.sampled_from([10, RETENTION_MS // 2, RETENTION_MS, 3 * RETENTION_MS]),  # a wait
    ),
    min_size=10,
    max_size=80,
)


@settings(max_examples=150, deadline=None)
@given(OPS)
def test_no_run_is_started_twice_whatever_is_redelivered(ops: list[tuple[str, int, int]]
                                                         ) -> None:
    """Each run has one launch request in the log (the host manager launches a run once)
    and any number of kills; any record may be delivered again at any later time."""
    book = RunBook(RETENTION_MS)
    log = Log()
    now = T0
    started: list[str] = []
    live: set[str] = set()  # started and not ended (the runner's view)
    unreported: set[str] = set()  # ended (or tombstoned) and not reported yet
    for op, n, wait in ops:
        now += 1
        rid = f"j-{n}-1"
        if op == "launch" and all(r != rid for r, _ in log.launches):
            log.launches.append((rid, now))
        elif op == "kill":
            log.kills.append((rid, now))
        if op in ("launch", "redeliver_launch") and log.launches:
            rid, at = log.launches[-1 if op == "launch" else n % len(log.launches)]
            if book.admit_launch(rid, at):
                started.append(rid)
                live.add(rid)
        elif op in ("kill", "redeliver_kill") and log.kills:
            rid, at = log.kills[-1 if op == "kill" else n % len(log.kills)]
            action = book.admit_kill(rid, at)
            if action is KillAction.KILL:
                assert rid in live
                live.discard(rid)
                book.ended(rid)
                unreported.add(rid)
            elif action is KillAction.REPORT_KILLED:
                assert rid not in live, "a live run reported killed before its launch"
                unreported.add(rid)
        elif op == "end" and live:
            rid = sorted(live)[n % len(live)]
            live.discard(rid)
            book.ended(rid)
            unreported.add(rid)
        elif op == "report":
            for r in sorted(unreported):
                book.reported(r, now)
            unreported.clear()
        elif op == "wait":
            now += wait
            for r in book.expire(now):
                assert r not in live and r not in unreported  # only reported ends leave
        assert len(started) == len(set(started)), f"started twice: {started}"
        assert all(r in book for r in live | unreported)
        assert len(book) <= len({r for r, _ in log.launches} | {r for r, _ in log.kills})
