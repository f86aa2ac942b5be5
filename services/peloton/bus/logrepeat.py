"""Repeated client errors are logged once per window, with a count.

While the broker is unreachable, aiokafka logs the same few errors ("Unable connect to
node ...", "Failed fetch messages ...", "Group Coordinator Request failed ...") on every
retry, about every 100 ms: a minicluster service wrote 6,500 lines in the minute after its
broker was killed, which buries the first line that says what happened and fills a log
store during an outage. `RepeatFilter` (on the handler `logformat.configure` installs)
lets a message of the named loggers through once per `window_s` per (logger, level,
text); the next one after the window carries how many were held back
("... (412 more like it since the last one logged)"). Other loggers (our own) are never held back.

Pure in its inputs: the time is the record's own `created`.
"""

from __future__ import annotations

import logging
from collections import OrderedDict

__all__ = ["RepeatFilter", "NOISY_LOGGERS"]

NOISY_LOGGERS: tuple[str, ...] = ("aiokafka",)
_MAX_KEYS = 1024  # distinct repeated messages remembered (the oldest go first)


class RepeatFilter(logging.Filter):
    def __init__(self, window_s: float = 30.0, loggers: tuple[str, ...] = NOISY_LOGGERS
                 ) -> None:
        super().__init__()
        self.window_s = window_s
        self.loggers = loggers
        #: (logger, level, text) -> [time it was last let through, held back since]
        self._seen: OrderedDict[tuple[str, int, str], list[float]] = OrderedDict()

    def _noisy(self, name: str) -> bool:
        return any(name == p or name.startswith(p + ".") for p in self.loggers)

    def filter(self, record: logging.LogRecord) -> bool:
        if not self._noisy(record.name):
            return True
        text = record.getMessage()
        key = (record.name, record.levelno, text)
        seen = self._seen.get(key)
        if seen is not None and record.created - seen[0] < self.window_s:
            seen[1] += 1
            return False
        if seen is not None and seen[1]:
            record.msg = f"{text} ({int(seen[1])} more like it since the last one logged)"
            record.args = None
        self._seen[key] = [record.created, 0]
        self._seen.move_to_end(key)
        while len(self._seen) > _MAX_KEYS:
            self._seen.popitem(last=False)
        return True
