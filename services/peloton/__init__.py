"""Peloton-py: a unified resource scheduler over an event backbone."""

import os as _os

# Services fork a child to write each large snapshot (`peloton.bus.snapshotfork`). gRPC's
# C core (the etcd client's) otherwise runs fork handlers that crash such a child when a
# gRPC thread is busy (measured: 5 of 40 forks died of SIGSEGV; none with this off). It is
# read when gRPC loads, so it is set here, before anything imports it; an operator's own
# setting wins.
_os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")
