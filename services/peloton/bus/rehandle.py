"""Handling again, at a rebuild, the records of the topics a core reads whole.

A shard of a partitioned service reads some topics whole, with no consumer group of its
own there (the job manager's shards: the host manager's launches and the agents' statuses,
`peloton.jobmgr.shard`). Their records are inputs to decisions, not facts to fold: what
the core made of them is in its own output (job-events), which its replay folds. With no
group offset to resume from, the positions of those topics go into the core's snapshots
(covering only records whose decisions were delivered, as every position does), and a
rebuild handles their records again from the restored snapshot's positions (from their
start without one) to the log end, after the replay: a decision the last owner made and
published is in the folded output and the core, idempotent to redelivered inputs, makes
nothing of it again; one it did not publish (it died first, or the partition moved) is
made now. The core names those topics in its optional `rehandle` attribute.

The records are handled in log order per partition, each fact by `core.handle` with the
rebuild's clock; the decisions come back to the driver, which publishes them with the
`after_replay` backlog. An undecodable record, or a fact whose handling raises, is logged
and passed over, as the replay does (a bad record never stops a restart).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from functools import partial
from typing import Any

from peloton.bus.codec import Codec
from peloton.bus.replay import Positions, StartBeyondEnd, replay_topics
from peloton.model.event import Event

__all__ = ["rehandle_topics"]

log = logging.getLogger(__name__)


async def rehandle_topics(bootstrap: str, core: Any, codec: Codec, start: Positions,
                          now: int, takes: Callable[[str, int], bool] | None = None,
                          name: str = "") -> tuple[list[Event], Positions, int]:
    """Handle the records of `core.rehandle` from `start` (0 where absent) to the log end:
    the decisions made, the positions reached and how many facts were handled. A start
    past a partition's end (the topics were recreated) starts those topics from the
    beginning, with a warning."""
    topics = list(getattr(core, "rehandle", ()))
    if not topics:
        return [], {}, 0
    decided: list[Event] = []
    handled = 0

    def handle(etype: str, body: dict[str, Any]) -> None:
        nonlocal handled
        decided.extend(core.handle(etype, body, now))
        handled += 1

    read = partial(replay_topics, bootstrap, topics, codec, handle,
                   skip=getattr(core, "ignores", None) or (), takes=takes)
    mine = {tp: o for tp, o in start.items() if tp[0] in topics}
    try:
        positions = await read(start=mine)
    except StartBeyondEnd as exc:
        log.warning("%s: %s; handling %s again from their start", name, exc,
                    ", ".join(topics))
        positions = await read()
    log.info("%s: handled %d facts of %s again (from %s): %d decisions", name, handled,
             ", ".join(topics), "the snapshot's positions" if mine else "their start",
             len(decided))
    return decided, positions, handled
