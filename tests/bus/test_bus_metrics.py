"""peloton.bus.metrics: names and units by the Prometheus conventions, bounded reason
classes, gauge families without stale series, the resmgr/placement recorders, and
consumer lag (`peloton.bus.consumerlag`, against a consumer seam)."""

from __future__ import annotations

import math
from types import SimpleNamespace
from typing import Any

import pytest
from faust.exceptions import ConsumerNotStarted
from faust.types import TP
from hypothesis import given
from hypothesis import strategies as st
from prometheus_client import REGISTRY, CollectorRegistry, Gauge, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from peloton.bus import metrics
from peloton.bus.consumerlag import HandledOffsets, sample_lag
from peloton.bus.metrics import (
    GaugeFamily,
    count_published,
    reason_class,
    record_entitlement,
    record_pending,
    resource_samples,
    service_label,
)


def sample(name: str, **labels: str) -> float | None:
    return REGISTRY.get_sample_value(name, labels)


def test_every_metric_follows_the_naming_conventions() -> None:
    families = {f.name: f for f in text_string_to_metric_families(generate_latest().decode())}
    ours = {name: f for name, f in families.items() if name.startswith("peloton_")}
    for obj in vars(metrics).values():
        if hasattr(obj, "_type") and hasattr(obj, "_name"):
            assert obj._name in ours, obj._name
    for name, family in ours.items():
        assert family.documentation, name
        if family.type == "counter":  # the exposition adds _total to the samples
            assert all(s.name == f"{name}_total" for s in family.samples), name
        if family.type == "histogram":
            assert name.endswith("_seconds"), name
        assert not name.endswith("_ms") and "millis" not in name, name


@pytest.mark.parametrize(("reason", "expected"), [
    (None, "none"),
    ("", "none"),
    ("waiting for 3 more gang members", "waiting for N more gang members"),
    ("pool over entitlement: cpu 4 > 2", "pool over entitlement"),
    ("pool over entitlement: cpu 4 > 2; non-preemptible work beyond reservation: mem 1",
     "pool over entitlement"),
    ("held back: gang job-1-0 has waited too long and reserves the nonslack budget",
     "held back"),
    ("unknown pool /prod/batch", "unknown pool /prod/batch"),
])
def test_reason_classes(reason: str | None, expected: str) -> None:
    assert reason_class(reason) == expected


@given(st.text(max_size=300), st.integers(0, 10**9), st.integers(0, 10**9))
def test_a_reason_class_is_bounded_and_free_of_numbers(text: str, a: int, b: int) -> None:
    got = reason_class(f"{text} {a}")
    assert 0 < len(got) <= 80
    assert not any(ch in "0123456789" for ch in got)
    # reasons that differ only in their numbers fall in one class
    assert reason_class(f"waiting for {a} more: x {b}") == reason_class(
        f"waiting for {b} more: y {a}")


def test_service_labels_are_the_service_kind() -> None:
    assert [service_label(n) for n in ("agent-h1", "agent-a-b", "resmgr", "readmodel")] == [
        "agent", "agent", "resmgr", "readmodel"]


def test_resources_in_base_units() -> None:
    got = list(resource_samples({"cpu": 1.5, "memory": 2.0, "disk": 1.0, "gpu": 1.0,
                                 "bogus": 3.0}))
    assert got == [("cpu", "core", 1.5), ("memory", "byte", 2.0 * 1024 * 1024),
                   ("disk", "byte", 1024.0 * 1024), ("gpu", "device", 1.0)]


def test_a_gauge_family_removes_series_that_disappear() -> None:
    registry = CollectorRegistry()
    gauge = Gauge("t_family", "test", ["svc", "pool"], registry=registry)
    family = GaugeFamily(gauge, "s1")
    other = GaugeFamily(gauge, "s2")
    family.replace({("a",): 1.0, ("b",): 2.0})
    other.replace({("a",): 7.0})
    family.replace({("b",): 3.0})
    got = {(s.labels["svc"], s.labels["pool"]): s.value
           for f in registry.collect() for s in f.samples}
    assert got == {("s1", "b"): 3.0, ("s2", "a"): 7.0}


def test_published_records_are_counted_by_topic() -> None:
    before = sample("peloton_events_published_total", service="t-pub", topic="x") or 0.0
    count_published("t-pub", ["x", "y", "x"])
    assert sample("peloton_events_published_total", service="t-pub", topic="x") == before + 2
    assert sample("peloton_events_published_total", service="t-pub", topic="y") is not None


def test_entitlement_and_allocation_per_pool_and_resource() -> None:
    record_entitlement([
        {"pool": "/t-ent", "entitlement": {"cpu": 4.0, "memory": 100.0},
         "allocation": {"cpu": 1.0, "memory": 10.0}},
        {"pool": "/t-ent/gone", "entitlement": {"cpu": 1.0}, "allocation": {}},
    ])
    assert sample("peloton_pool_entitlement", pool="/t-ent", resource="cpu",
                  unit="core") == 4.0
    assert sample("peloton_pool_allocation", pool="/t-ent", resource="memory",
                  unit="byte") == 10.0 * 1024 * 1024
    record_entitlement([{"pool": "/t-ent", "entitlement": {"cpu": 2.0},
                         "allocation": {"cpu": 2.0}}])
    assert sample("peloton_pool_entitlement", pool="/t-ent", resource="cpu",
                  unit="core") == 2.0
    assert sample("peloton_pool_entitlement", pool="/t-ent/gone", resource="cpu",
                  unit="core") is None


def test_pending_by_reason_replaces_the_service_series() -> None:
    record_pending("t-pend", {("/p", "held back"): 2, ("/p", "none"): 1})
    record_pending("t-pend", {("/p", "none"): 4})
    assert sample("peloton_pending_tasks", service="t-pend", pool="/p", reason="none") == 4
    assert sample("peloton_pending_tasks", service="t-pend", pool="/p",
                  reason="held back") is None


def pending_of(service: str) -> dict[tuple[str, str], float]:
    return {(s.labels["pool"], s.labels["reason"]): s.value
            for f in REGISTRY.collect() if f.name == "peloton_pending_tasks"
            for s in f.samples if s.labels["service"] == service}


def test_the_resmgr_and_placement_shells_record_cycles_rounds_pools_and_pending() -> None:
    """The real cores under the in-memory runner: 12 one-cpu tasks on 8 cpus."""
    from peloton.runner.cluster import batch_job, cluster

    cycles = sample("peloton_resmgr_cycle_duration_seconds_count") or 0.0
    rounds = sample("peloton_placement_round_duration_seconds_count") or 0.0
    runner = cluster(seed=1, hosts=2, cpu=4.0, memory=4096.0)
    try:
        runner.submit([batch_job("m-1", 12, cpu=1.0, duration_s=600.0)])
        runner.run_for(30_000)
    finally:
        runner.close()
    assert (sample("peloton_resmgr_cycle_duration_seconds_count") or 0.0) > cycles
    assert (sample("peloton_placement_round_duration_seconds_count") or 0.0) > rounds
    assert sample("peloton_pool_entitlement", pool="/", resource="cpu", unit="core") == 8.0
    assert sample("peloton_pool_allocation", pool="/default", resource="cpu",
                  unit="core") == 8.0
    pending = pending_of("resmgr")  # 4 wait; the reason texts' numbers are gone
    assert sum(pending.values()) == 4.0
    assert set(pending) <= {("/default", "pool over entitlement"), ("/default", "held back")}


class FakeConsumer:
    """The consumer seam `sample_lag` reads: assignment, high watermarks, positions."""

    def __init__(self, highs: dict[TP, int | None], positions: dict[TP, int],
                 started: bool = True) -> None:
        self.highs, self.positions, self.started = highs, positions, started

    def assignment(self) -> set[TP]:
        if not self.started:
            raise ConsumerNotStarted("not yet")
        return set(self.highs)

    def highwater(self, tp: TP) -> int | None:
        return self.highs[tp]

    async def position(self, tp: TP) -> int:
        return self.positions[tp]


async def test_lag_is_high_watermark_minus_the_next_offset_to_handle() -> None:
    a0, a1, b0 = TP("t-lag-a", 0), TP("t-lag-a", 1), TP("t-lag-b", 0)
    handled = HandledOffsets()
    handled.note([("t-lag-a", 0, 4), ("t-lag-a", 0, 9), ("t-lag-a", 0, 7)])
    app: Any = SimpleNamespace(consumer=FakeConsumer({a0: 15, a1: 3, b0: None},
                                                     {a1: 1, b0: 0}))
    got = await sample_lag(app, "t-lag", handled)
    assert got == {"t-lag-a/0": 5, "t-lag-a/1": 2}  # b0: nothing fetched yet
    assert sample("peloton_consumer_lag_records", service="t-lag", topic="t-lag-a",
                  partition="0") == 5
    app.consumer = FakeConsumer({a1: 3}, {a1: 3})  # a0 revoked
    assert await sample_lag(app, "t-lag", handled) == {"t-lag-a/1": 0}
    assert sample("peloton_consumer_lag_records", service="t-lag", topic="t-lag-a",
                  partition="0") is None
    app.consumer = FakeConsumer({}, {}, started=False)
    assert await sample_lag(app, "t-lag", handled) == {}


def test_snapshot_age_is_nan_without_a_snapshot() -> None:
    from peloton.bus.service import ServiceShell
    from peloton.hostmgr.service import HostManagerCore

    shell = ServiceShell("t-snap", "1", HostManagerCore(5.0), "127.0.0.1:1")
    assert math.isnan(shell._snapshot_age())
    assert sample("peloton_leader", service="t") == 1.0
    assert shell.role() == "single"
    assert shell.health.checks == {"rebuilt": False, "consuming": False}
