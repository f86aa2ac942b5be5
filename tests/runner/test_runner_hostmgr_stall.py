"""A host manager whose whole process stalls (no tick, no read: a SIGSTOP, a frozen VM) for
longer than the heartbeat timeout loses no host when it resumes, even on a cluster too small
for the mass-silence guard (3 hosts). The first tick after the stall runs before the
heartbeats that waited in the log are read, as can happen in the service: every host then
looks silent past the timeout (checked), and only the stall rule (HostBook._stall) keeps
them (without it all 3 are lost, and their runs with them)."""

from __future__ import annotations

from runner_scenarios import assert_all_succeed_once, busy_cluster, lost_hosts


def test_a_stalled_host_manager_loses_no_host_of_a_small_cluster() -> None:
    runner = busy_cluster(4, 3, "stall", 10, 20.0, 10)
    node, book = runner.nodes["hostmgr"], runner.core("hostmgr").book
    budget, node.budget = node.budget, 0
    assert node.next_tick_ms is not None
    paused_at = book.last_tick_ms
    assert paused_at is not None
    node.next_tick_ms += 8_000  # neither ticks nor reads for 8 s (timeout 5 s)
    runner.run_for(8_000 + node.tick_ms)  # and the first tick after it reads nothing yet
    assert book.last_tick_ms is not None and book.last_tick_ms - paused_at > 8_000
    silent = [h.name for h in book.hosts.values()
              if book.last_tick_ms - h.last_seen_ms > book.heartbeat_timeout_ms]
    assert len(silent) == 3 and book.silence_guard.min_hosts > 3  # the guard cannot help
    assert book.grace_until == book.last_tick_ms + book.heartbeat_timeout_ms  # the stall
    node.budget = budget
    runner.run_for(6_000)
    assert lost_hosts(runner) == set()
    assert_all_succeed_once(runner)
