"""The read model's Faust app asks the dev broker for its longer fetch wait
(`READ_MODEL_FETCH_WAIT_MS`; the mechanism: tests/bus/test_bus_devbroker_fetchwait.py)."""

from __future__ import annotations

import pytest
from faust.transport.drivers import aiokafka as driver

from peloton.api.service import READ_MODEL_FETCH_WAIT_MS, build_worker_app
from peloton.readmodel.store import Store


async def test_the_read_models_consumer_waits_longer(store: Store,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PELOTON_BROKER_KIND", "tansu")
    app, _ = build_worker_app("127.0.0.1:1", store, 0)
    consumer = driver.aiokafka.AIOKafkaConsumer(
        group_id=app.conf.id, bootstrap_servers="127.0.0.1:1", fetch_max_wait_ms=1500)
    assert consumer._fetch_max_wait_ms == READ_MODEL_FETCH_WAIT_MS
