"""`AdmissionAges`: the runs admitted and not READY yet, by their latest admission.

Property: after any sequence of notes and queries, `lapsed(cutoff)` is exactly the runs
whose latest noted admission is at or before the cut-off (a dict kept alongside is the
reference), whatever cut-offs were asked before; and the heap never holds more than about
twice the current runs, even when nothing queries it (a standby resource manager folds
without ticking).
"""

from __future__ import annotations

import hypothesis.strategies as st
from event_bodies import job_created, task_state_changed, tasks_admitted
from hypothesis import given, settings

from peloton.resmgr.domain.admissionages import AdmissionAges
from peloton.resmgr.domain.ledger import Ledger

ops = st.lists(st.one_of(
    st.tuples(st.just("note"), st.integers(0, 12), st.one_of(st.none(), st.integers(0, 50))),
    st.tuples(st.just("query"), st.integers(-5, 60), st.none())), max_size=120)


@settings(max_examples=300, deadline=None)
@given(ops)
def test_lapsed_is_every_run_whose_latest_admission_is_due(steps: list) -> None:
    ages: AdmissionAges[tuple[str, int]] = AdmissionAges()
    model: dict[tuple[str, int], int] = {}
    for op, a, b in steps:
        if op == "note":
            key = ("job", a)
            ages.note(key, b)
            if b is None:
                model.pop(key, None)
            else:
                model[key] = b
        else:
            assert ages.lapsed(a) == sorted(k for k, at in model.items() if at <= a)
        assert len(ages) == len(model)
        assert len(ages._heap) <= 2 * len(model) + 65


def test_the_heap_stays_bounded_when_nothing_queries_it() -> None:
    ages: AdmissionAges[tuple[str, int]] = AdmissionAges()
    for i in range(10_000):  # runs admitted, then READY, one after the other
        ages.note(("job", i), i)
        ages.note(("job", i), None)
    assert len(ages) == 0 and len(ages._heap) <= 65
    assert ages.lapsed(10**9) == []


def test_the_ledger_finds_the_lapsed_admissions_of_a_burst() -> None:
    """100 runs admitted at 1,000, one admitted again later: at a cut-off between the two
    only the 99 are due; READY runs leave the index."""
    ledger = Ledger()
    ledger.fold("JobCreated", job_created("j", 100, cpu=0.1))
    ledger.fold("TaskStateChanged", task_state_changed(
        "j", *((i, "PENDING") for i in range(100)), previous="INITIALIZED", at=10))
    for i in range(100):
        ledger.fold("TasksAdmitted", tasks_admitted("j", i, at=1_000))
    ledger.fold("TasksAdmitted", tasks_admitted("j", 7, at=5_000))  # a second decision
    assert [e.key for e in ledger.lapsed(4_999)] == [("j", i) for i in range(100) if i != 7]
    assert [e.key for e in ledger.lapsed(999)] == []
    ledger.fold("TaskStateChanged", task_state_changed("j", (3, "READY"), at=6_000))
    assert ("j", 3) not in [e.key for e in ledger.lapsed(10_000)]
    assert len(ledger.lapsed(10_000)) == 99
