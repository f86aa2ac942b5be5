"""Distribution helpers: named examples."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from peloton.placement.domain.waterfill import best_first, fill_in_order, water_fill


def ints(*xs: int) -> np.ndarray:
    return np.array(xs, dtype=np.int64)


def test_fill_in_order() -> None:
    assert fill_in_order(ints(2, 3, 4), 4).tolist() == [2, 2, 0]
    assert fill_in_order(ints(2, 3), 10).tolist() == [2, 3]


def test_best_first_orders_by_score_then_position() -> None:
    scores = np.array([0.5, 0.9, 0.5, 0.9, 0.1])
    assert best_first(scores, 3).tolist() == [1, 3, 0]
    assert best_first(scores, 9).tolist() == [1, 3, 0, 2, 4]
    assert best_first(scores, 0).tolist() == []


WATER = [
    ("new job: one each, best score first", ints(0, 0, 0, 0), ints(5, 5, 5, 5),
     [0.1, 0.4, 0.3, 0.2], 2, [0, 1, 1, 0]),
    ("levels out existing tasks", ints(3, 0, 1), ints(9, 9, 9), [0, 0, 0], 4, [0, 3, 1]),
    ("limits cap a slot", ints(0, 0), ints(1, 9), [0, 0], 5, [1, 4]),
    ("more than room", ints(0, 0), ints(1, 2), [0, 0], 9, [1, 2]),
]


@pytest.mark.parametrize(("name", "existing", "limits", "scores", "n", "expected"), WATER,
                         ids=[w[0] for w in WATER])
def test_water_fill(name, existing, limits, scores, n, expected) -> None:  # type: ignore[no-untyped-def]
    assert water_fill(existing, limits, np.array(scores, dtype=float), n).tolist() == expected


@given(st.lists(st.tuples(st.integers(0, 5), st.integers(0, 6)), min_size=1, max_size=12),
       st.integers(0, 40))
def test_water_fill_properties(slots: list[tuple[int, int]], n: int) -> None:
    existing = np.array([e for e, _ in slots], dtype=np.int64)
    limits = np.array([lim for _, lim in slots], dtype=np.int64)
    given_ = water_fill(existing, limits, np.zeros(len(slots)), n)
    assert (given_ >= 0).all() and (given_ <= limits).all()
    assert int(given_.sum()) == min(n, int(limits.sum()))
    # balanced: a slot below the top level that still had room would have been used
    level = existing + given_
    top = int(level[given_ > 0].max()) if (given_ > 0).any() else None
    if top is not None:
        starved = (given_ < limits) & (level < top - 1)
        assert not starved.any()


def test_best_first_with_huge_scores_still_orders() -> None:
    scores = np.array([1e12, 3e12, 1e12])
    assert best_first(scores, 2).tolist() == [1, 0]
