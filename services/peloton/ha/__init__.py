"""High availability: leader election over etcd for the singleton services."""

from peloton.ha.election import LeaderElection

__all__ = ["LeaderElection"]
