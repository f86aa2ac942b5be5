"""The local cluster's /default pool reserves the whole cluster (and gives it back).

The resource manager creates /default with reservation 0 (resmgr/domain/pooltree.py), and
with preemption on it admits non-preemptible work only within its pool's reservation: on
a fresh local cluster a new user's first `sla.preemptible: false` job would wait forever.
`peloton cluster up` (Layout.reserve_default) therefore updates /default, once every host
is registered, to reserve (and be limited to) the capacity of the registered hosts, through
the API as an admin would (`peloton respool update /default`), and waits for the resource
manager's answer. Pools reserving something of their own need that room back:
`release_default` sets the reservation to 0 again (the demo does this before it creates
/services and /batch). Failures are reported, never raised: the cluster is usable anyway.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from typing import Any

from peloton.cli.client import ClientError, PelotonClient
from peloton.model.resources import KINDS

__all__ = ["pool_document", "cluster_capacity", "reserve_default", "release_default"]


def pool_document(reservation: Mapping[str, float], limit: Mapping[str, float]) -> str:
    """A pool config (JSON) reserving `reservation` with limit `limit`, share 1."""
    return json.dumps({
        "description": "the local cluster's default pool",
        "resources": [{"kind": k, "reservation": float(reservation.get(k, 0.0)),
                       "limit": float(limit.get(k, 0.0)), "share": 1} for k in KINDS]})


def cluster_capacity(client: PelotonClient) -> dict[str, float]:
    """The summed capacity of the hosts the read model knows (not LOST)."""
    total = dict.fromkeys(KINDS, 0.0)
    for h in client.hosts()["hosts"]:
        if h.get("state") != "LOST":
            for k in KINDS:
                total[k] += float(h["capacity"].get(k, 0.0))
    return total


def _answer(client: PelotonClient, request_id: str, deadline: float) -> dict[str, Any]:
    while True:
        try:
            found = client.pool_request(request_id)
            if found["state"] != "REQUESTED":
                return found
        except ClientError:
            pass  # not projected yet
        if time.monotonic() > deadline:
            return {"state": "TIMEOUT", "reasons": ["no answer from the resource manager"]}
        time.sleep(0.3)


def _update(client: PelotonClient, document: str, timeout: float) -> tuple[bool, str]:
    deadline = time.monotonic() + timeout
    last = ""
    while time.monotonic() < deadline:
        try:
            accepted = client.update_pool("/default", document, "application/json")
        except ClientError as exc:
            last = str(exc)
            time.sleep(0.5)
            continue
        answer = _answer(client, str(accepted["request_id"]), deadline)
        if answer["state"] == "ACCEPTED":
            return True, ""
        last = "; ".join(map(str, answer.get("reasons") or [])) or str(answer["state"])
        time.sleep(0.5)  # the resource manager may not count every host's offer yet
    return False, last


def reserve_default(client: PelotonClient, timeout: float = 30.0,
                    say: Callable[[str], None] | None = None) -> bool:
    """Make /default reserve the cluster's capacity; True once the resource manager
    accepted it."""
    capacity = cluster_capacity(client)
    ok, why = _update(client, pool_document(capacity, capacity), timeout)
    if say is not None:
        text = ", ".join(f"{k} {v:g}" for k, v in capacity.items() if v)
        say(f"/default reserves the cluster: {text}" if ok
            else f"/default could not reserve the cluster ({why})")
    return ok


def release_default(client: PelotonClient, timeout: float = 30.0) -> bool:
    """Give /default's reservation back (limit: the cluster's capacity)."""
    capacity = cluster_capacity(client)
    return _update(client, pool_document({}, capacity), timeout)[0]
