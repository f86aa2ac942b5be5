"""Host capacity across a host's incarnations, whatever order the two partitions give.

A lost host's HostLost (keyed by host) and the offers (one batch partition) travel on
different partitions of offer-received: the resource manager may read the loss of
incarnation 1 after the first offer of incarnation 2, or an offer of incarnation 1
after its loss. Either way the capacity must end as the host now is.
"""

from __future__ import annotations

import itertools
import json

from event_bodies import host_lost, offer, offer_received

from peloton.model.resources import Resources
from peloton.resmgr.domain.ledger import Ledger

OLD_OFFER = ("OfferReceived", offer_received(offer("h1", cpu=4, incarnation="i1"), at=1))
LOST = ("HostLost", host_lost("h1", incarnation="i1", at=2))
NEW_OFFER = ("OfferReceived", offer_received(offer("h1", cpu=8, incarnation="i2"), at=3))


def capacity_after(*records: tuple[str, dict]) -> float:  # type: ignore[type-arg]
    ledger = Ledger()
    for etype, body in records:
        ledger.fold(etype, body)
    return ledger.capacity().cpu


def test_every_order_of_loss_and_offers_ends_with_the_new_incarnation() -> None:
    orders = [o for o in itertools.permutations([OLD_OFFER, LOST, NEW_OFFER])
              if o.index(OLD_OFFER) < o.index(NEW_OFFER)]  # one partition keeps offers in order
    assert len(orders) == 3
    for order in orders:
        assert capacity_after(*order) == 8, [e["at"] for _, e in order]


def test_a_loss_with_no_new_incarnation_takes_the_capacity_away() -> None:
    for order in itertools.permutations([OLD_OFFER, LOST]):
        assert capacity_after(*order) == 0
    assert Resources().cpu == 0


def test_incarnations_survive_a_snapshot() -> None:
    ledger = Ledger()
    for etype, body in (NEW_OFFER, LOST):
        ledger.fold(etype, body)
    restored = Ledger.restore(json.loads(json.dumps(ledger.snapshot())))
    restored.fold(*OLD_OFFER)  # read late, after the loss: ignored
    assert restored.capacity().cpu == 8 == ledger.capacity().cpu


def test_capacity_asked_after_every_fact_is_the_sum_over_the_hosts() -> None:
    """capacity() is summed once per change of the hosts: asked between the facts it
    still follows every offer and loss (a cached sum that missed one would not)."""
    other = ("OfferReceived", offer_received(offer("h2", cpu=2, incarnation="j1"), at=4))
    for order in itertools.permutations([OLD_OFFER, LOST, NEW_OFFER, other]):
        ledger = Ledger()
        for etype, body in order:
            ledger.fold(etype, body)
            want = sum(c.cpu for available, c in ledger.hosts.values() if available)
            assert ledger.capacity().cpu == want
            assert ledger.capacity().cpu == want  # the cached answer
