"""The dev broker's fetch wait, per Faust app: the read model polls less often.

The dev broker answers records that arrive during a fetch's wait late (it polls), so
every consumer here asks for a short wait (`FETCH_MAX_WAIT_MS`); an app may ask for its
own (`make_app`'s `fetch_wait_ms`: the read model, which covers every partition). Checked
on the consumer Faust's driver would build for each app; against Apache Kafka nothing is
changed.
"""

from __future__ import annotations

import pytest
from faust.transport.drivers import aiokafka as driver

from peloton.api.service import READ_MODEL_FETCH_WAIT_MS
from peloton.bus.devbroker import FETCH_MAX_WAIT_MS
from peloton.bus.faustapp import make_app


def _consumer_wait(group_id: str) -> int:
    consumer = driver.aiokafka.AIOKafkaConsumer(
        group_id=group_id, bootstrap_servers="127.0.0.1:1", fetch_max_wait_ms=1500)
    return int(consumer._fetch_max_wait_ms)


async def test_an_app_gets_the_wait_it_asks_for_and_the_others_the_default(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PELOTON_BROKER_KIND", "tansu")
    make_app("peloton-fetchwait-slow", "127.0.0.1:1", fetch_wait_ms=READ_MODEL_FETCH_WAIT_MS)
    make_app("peloton-fetchwait-default", "127.0.0.1:1")
    assert READ_MODEL_FETCH_WAIT_MS > FETCH_MAX_WAIT_MS
    assert _consumer_wait("peloton-fetchwait-slow") == READ_MODEL_FETCH_WAIT_MS
    assert _consumer_wait("peloton-fetchwait-default") == FETCH_MAX_WAIT_MS
    assert _consumer_wait("peloton-fetchwait-never-made") == FETCH_MAX_WAIT_MS
