"""When many hosts fall silent at once, suspect ourselves before the hosts.

A host is lost when no heartbeat of it was read for `heartbeat_timeout_ms`. Heartbeats are
judged by when the host manager READ them: when its intake falls behind (a burst holds its
loop, the broker is unreachable or slow for a while, a long pause of the process), every
host looks silent at once although the heartbeats sit unread in the log. Declaring them all
lost would end every run of the cluster and start them again elsewhere (there is no
elsewhere): a hiccup of the control plane would become an outage. Found under load
(`bench burst --jobs 22000` lost hosts that were only read late).

So, as Kubernetes' node lifecycle controller stops evicting when most nodes of a zone are
unready at once (it suspects the control plane or the network, not the nodes), the host
manager holds its judgement when more than `fraction` of its available hosts (and at least
`min_hosts` of them) are silent past the timeout: it then declares lost only the hosts
silent for `factor` times the timeout. A lag of ours ends, heartbeats are read again and
nothing is lost; a real mass failure (a power loss of the whole cluster) is declared after
`factor` timeouts instead of one, with a reason that says so. A few silent hosts among
many, or a small cluster (fewer than `min_hosts` available hosts), keep the plain rule.
`fraction` >= 1 turns the guard off.

The decision is a pure function of the hosts' last reads and the time: the same state gives
the same losses whatever the order of the ticks.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["SilenceGuard"]


@dataclass(frozen=True, slots=True)
class SilenceGuard:
    fraction: float = 0.5
    min_hosts: int = 10
    factor: int = 6

    def __post_init__(self) -> None:
        if not self.fraction > 0:
            raise ValueError(f"mass-silence fraction must be above 0, got {self.fraction}")
        if self.min_hosts < 1 or self.factor < 1:
            raise ValueError("mass-silence min_hosts and factor must be at least 1")

    def holds(self, silent: int, available: int) -> bool:
        """Whether `silent` of `available` hosts silent past the timeout at once is a mass
        silence (module doc)."""
        return (self.fraction < 1 and available >= self.min_hosts
                and silent > self.fraction * available)

    def limit_ms(self, timeout_ms: int, silent: int, available: int) -> int:
        """How long a host may be silent before it is lost, given how many are silent."""
        return timeout_ms * self.factor if self.holds(silent, available) else timeout_ms
