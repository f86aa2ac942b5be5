"""`peloton bench devbroker` on the real dev broker: the batches it stores are there, one
record each, spread over the partitions in turn; each row reports the load it achieved;
the derived figures are those of its rows."""

from __future__ import annotations

import asyncio

import pytest
import typer
from aiokafka import AIOKafkaConsumer, TopicPartition
from typer.testing import CliRunner

from peloton.bus.brokerbench import HELD, _fill, broker_bench
from peloton.bus.devbroker import consumer_settings
from peloton.cli import bench_cmd

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


def test_a_fill_stores_every_batch_in_the_partitions_in_turn(fresh_broker: str) -> None:
    asyncio.run(_fill(fresh_broker, HELD, 203, create=True))

    async def read_all() -> dict[int, list[int]]:
        consumer = AIOKafkaConsumer(bootstrap_servers=fresh_broker, enable_auto_commit=False,
                                    auto_offset_reset="earliest", **consumer_settings())
        await consumer.start()
        try:
            parts = [TopicPartition(HELD, p) for p in range(4)]
            consumer.assign(parts)
            offsets: dict[int, list[int]] = {p: [] for p in range(4)}
            for _ in range(50):
                got = await consumer.getmany(timeout_ms=200)
                for tp, records in got.items():
                    offsets[tp.partition] += [r.offset for r in records]
                if sum(map(len, offsets.values())) >= 203:
                    break
            return offsets
        finally:
            await consumer.stop()

    offsets = asyncio.run(read_all())
    assert {p: len(o) for p, o in offsets.items()} == {0: 51, 1: 51, 2: 51, 3: 50}
    assert all(o == list(range(len(o))) for o in offsets.values())


def test_rows_report_their_load_and_the_derived_figures_are_the_rows() -> None:
    steps: list[str] = []
    result = broker_bench((300, 600), rate=40, readers=1, seconds=0.5,
                          progress=lambda message, _f: steps.append(message))
    cores = {k.split(":")[0]: v for k, v in result.items() if k.endswith("broker cores")}
    assert list(cores) == ["0 held in a topic nobody reads",
                           "300 held in a topic nobody reads",
                           "600 held in a topic nobody reads",
                           "600 held in the load's own partitions"]
    assert all(v >= 0 for v in cores.values())
    achieved = [v for k, v in result.items() if k.endswith("batches/s achieved")]
    assert len(achieved) == 4 and all(0 < a <= 40 * 1.1 for a in achieved)
    fresh, held = cores["0 held in a topic nobody reads"], cores["600 held in a topic nobody reads"]
    assert result["broker cores added per 10,000 batches held (a topic nobody reads)"] == \
        pytest.approx((held - fresh) * 10_000 / 600, abs=1e-3)
    assert steps[0] == "held 0: writing 0 batches" and steps[-1].startswith("fresh broker")
    reads = {k: v for k, v in result.items() if k.startswith("one read of")}
    assert list(reads) == [  # partition 0 holds a quarter of the 600, rounded up
        "one read of the last 1 batch(es) of a partition holding 150: broker ms",
        "one read of the last 50 batch(es) of a partition holding 150: broker ms"]
    assert all(v >= 0 for v in reads.values())


@pytest.mark.parametrize(("held", "rate"), [((), 10), ((0,), 10), ((200, 100), 10),
                                            ((100, 100), 10), ((100,), 0)])
def test_steps_that_do_not_grow_or_no_load_are_refused(held: tuple[int, ...],
                                                        rate: int) -> None:
    with pytest.raises(ValueError):
        broker_bench(held, rate=rate)


@pytest.mark.parametrize("held", [["400", "200"], ["0"], ["300", "300"]])
def test_the_command_refuses_held_steps_that_do_not_grow_before_any_broker_starts(
        held: list[str]) -> None:
    root = typer.Typer()

    @root.callback()
    def main() -> None:
        """peloton"""

    bench_cmd.register(root)
    args = ["bench", "devbroker", *[a for n in held for a in ("--held", n)]]
    result = CliRunner().invoke(root, args)
    assert result.exit_code == 2
    assert "growing positive batch counts" in " ".join(result.output.split())
