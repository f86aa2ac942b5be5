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

The same holds for each zone of hosts, when the caller gives one (`zone_of`): the host
manager's zones are the partitions of host-registered the hosts' heartbeats are written to.
A partition read late (the consumer stuck on it, the broker that leads it slow or down)
silences its hosts together, a quarter of a cluster with 4 partitions: too few for the
cluster-wide rule, and hosts hash to partitions evenly, so no failure of the hosts
themselves silences most of one partition and few of the others. As Kubernetes judges
each zone of nodes apart, a zone where more than `fraction` of its available hosts (and at
least `min_hosts`) are silent has its hosts declared lost only after `factor` timeouts.

The decision is a pure function of the hosts' last reads, their zones and the time: the
same state gives the same losses whatever the order of the ticks.

A hold's end excuses its hosts for one more timeout (the host manager's book,
`HostBook.silence_released`): a host manager catching up reads the partitions' backlogs
in no set order, so the guard lifts once most hosts are heard of while the heartbeats of
the rest still wait unread; those hosts' silence counts from the hold's end.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

__all__ = ["SilenceGuard", "Verdict", "ZoneOf"]


@dataclass(frozen=True, slots=True)
class Verdict:
    """How long each available host may be silent, and what holds (see the module doc)."""

    timeout_ms: int
    limit_ms: int  # for hosts outside a held zone (the factor when the whole cluster holds)
    #: (silent, available) over what holds: the cluster, or the held zones together
    held: tuple[int, int] | None = None
    #: the zones held, with their (silent, available); empty when the cluster holds or
    #: nothing does
    zones: dict[int, tuple[int, int]] = field(default_factory=dict)
    zone_limit_ms: int = 0

    def limit_of(self, zone: int | None) -> int:
        return self.zone_limit_ms if zone in self.zones else self.limit_ms

    def why(self, zone: int | None) -> str:
        """The reason's note for a host declared lost under a hold ("" without one)."""
        if zone in self.zones:
            silent, available = self.zones[zone]
            return (f" ({silent} of {available} hosts whose heartbeats share partition "
                    f"{zone} silent at once: declared after {self.zone_limit_ms / 1000:.0f}s, "
                    f"not {self.timeout_ms / 1000:.0f}s, in case that partition was read late)")
        if self.held is not None and not self.zones:
            silent, available = self.held
            return (f" ({silent} of {available} hosts silent at once: declared after "
                    f"{self.limit_ms / 1000:.0f}s, not {self.timeout_ms / 1000:.0f}s, in case "
                    f"the host manager was the one behind)")
        return ""


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

    def verdict(self, timeout_ms: int, quiet: Sequence[tuple[int | None, int]]) -> Verdict:
        """`quiet`: (zone or None, ms since its last heartbeat was read) of every available
        host. The cluster-wide rule first; else each zone's (module doc)."""
        silent = sum(q > timeout_ms for _, q in quiet)
        limit = self.limit_ms(timeout_ms, silent, len(quiet))
        if limit != timeout_ms:
            return Verdict(timeout_ms, limit, (silent, len(quiet)))
        counts: dict[int, list[int]] = {}
        for zone, q in quiet:
            if zone is not None:
                cell = counts.setdefault(zone, [0, 0])
                cell[0] += q > timeout_ms
                cell[1] += 1
        zones = {z: (c[0], c[1]) for z, c in sorted(counts.items())
                 if self.limit_ms(timeout_ms, c[0], c[1]) != timeout_ms}
        if not zones:
            return Verdict(timeout_ms, timeout_ms)
        held = (sum(s for s, _ in zones.values()), sum(a for _, a in zones.values()))
        return Verdict(timeout_ms, timeout_ms, held, zones, timeout_ms * self.factor)


#: a host's zone from its name (None: every host in one zone, the cluster)
ZoneOf = Callable[[str], int] | None
