"""A host the host manager declared lost and then offers again (its heartbeats resumed:
a stall, not a crash) counts in the capacity again (resmgr/domain/ledger.py). Before, the
resource manager ignored every later offer of the lost incarnation: under a burst that
made hosts look silent, the cluster's capacity, and so every pool's entitlement, fell to 0
for good and nothing was admitted again (bench burst --jobs 22000)."""

from __future__ import annotations

import json

from event_bodies import host_lost, offer, offer_received

from peloton.resmgr.domain.ledger import Ledger


def available(ledger: Ledger, host: str) -> bool:
    return ledger.hosts[host][0]


def test_an_offer_made_after_the_loss_brings_the_host_back() -> None:
    ledger = Ledger()
    ledger.fold("OfferReceived", offer_received(offer("h1"), at=100))
    ledger.fold("HostLost", host_lost("h1", at=200))
    assert not available(ledger, "h1")
    ledger.fold("OfferReceived", offer_received(offer("h1", generation=2), at=300))
    assert available(ledger, "h1")


def test_an_offer_made_before_the_loss_and_read_after_it_changes_nothing() -> None:
    ledger = Ledger()
    ledger.fold("HostLost", host_lost("h1", at=200))  # read first (another partition)
    ledger.fold("OfferReceived", offer_received(offer("h1"), at=150))
    ledger.fold("OfferReceived", offer_received(offer("h1"), at=100))
    ledger.fold("HostLost", host_lost("h1", at=200))  # a redelivery
    assert "h1" not in ledger.hosts  # never offered after its loss


def test_the_loss_time_survives_a_snapshot() -> None:
    ledger = Ledger()
    ledger.fold("OfferReceived", offer_received(offer("h1"), at=100))
    ledger.fold("HostLost", host_lost("h1", at=200))
    restored = Ledger.restore(json.loads(json.dumps(ledger.snapshot())))
    restored.fold("OfferReceived", offer_received(offer("h1"), at=150))  # late, old
    assert not available(restored, "h1")
    restored.fold("OfferReceived", offer_received(offer("h1"), at=250))
    assert available(restored, "h1")
