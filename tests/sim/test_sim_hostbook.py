"""The host book reuses one placement HostTable and refreshes its free resources: it
must place exactly as a table built afresh from host views."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from peloton.model.resources import Resources
from peloton.placement.domain import HostTable, HostView, Strategy, TaskRequest, place
from peloton.sim.hostbook import HostBook
from peloton.sim.scenario import HostGroup

GROUPS = (HostGroup(30, "cpu", Resources(16, 65536, 0, 0), zones=3),
          HostGroup(4, "gpu", Resources(16, 131072, 0, 4), zones=2))


def fresh_table(book: HostBook) -> HostTable:
    free = book.free()
    return HostTable([
        HostView(name, Resources(*cap), Resources(*f), labels={"zone": label})
        for name, cap, f, label in zip(
            book.names, book.capacity.tolist(), free.tolist(),
            [f"zone-{int(n.split('-')[1]) % (3 if n.startswith('cpu') else 2)}"
             for n in book.names], strict=True)
    ])


@settings(max_examples=15, deadline=None)
@given(st.integers(0, 2**31 - 1))
def test_a_refreshed_table_places_like_a_fresh_one(seed: int) -> None:
    rng = np.random.default_rng(seed)
    book = HostBook(GROUPS)
    for _ in range(3):  # several rounds on the same book, like a simulation
        busy = rng.random((len(book), 1)) < 0.7
        used = rng.uniform(0, 1, (len(book), 1)) * book.capacity * busy
        book.allocated[:] = np.minimum(used, book.capacity)
        down = rng.random(len(book)) < 0.1
        book.up[:] = ~down
        tasks = [TaskRequest(f"t{i}", f"j{i % 5}", Resources(float(rng.choice([0.5, 1, 4])),
                                                            float(rng.choice([512, 4096])),
                                                            0.0, float(i % 17 == 0)),
                             strategy=Strategy.SPREAD if i % 5 == 0 else Strategy.PACK)
                 for i in range(int(rng.integers(1, 120)))]
        table = book.offers(np.zeros(4))
        assert table is not None
        reused = place(table, tasks)
        fresh = place(fresh_table(book), tasks)
        assert [(p.task_id, p.host) for p in reused.placements] == \
            [(p.task_id, p.host) for p in fresh.placements]
        assert reused.unplaced == fresh.unplaced


def test_no_offer_when_no_host_has_room() -> None:
    book = HostBook(GROUPS)
    book.allocated[:] = book.capacity
    assert book.offers(np.array([0.1, 1.0, 0.0, 0.0])) is None
