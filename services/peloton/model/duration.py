"""Durations as people write them: "90s", "10m", "1h30m", "2d", "500ms" (pure).

`parse_duration_ms(text)` gives milliseconds, more than 0 and at most `MAX_MS` (365 days),
or raises ValueError with a reason a person can read. Units ms, s, m, h, d, largest first
or not, no spaces inside, no bare numbers.
"""

from __future__ import annotations

import re

__all__ = ["parse_duration_ms", "MAX_MS"]

MAX_MS = 365 * 86_400_000
_PART = re.compile(r"(\d+)(ms|s|m|h|d)")
_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}


def parse_duration_ms(text: str) -> int:
    s = text.strip().lower()
    pos, total = 0, 0
    for m in _PART.finditer(s):
        if m.start() != pos:
            break
        total += int(m[1]) * _UNIT_MS[m[2]]
        pos = m.end()
    if not s or pos != len(s):
        raise ValueError(f"a duration such as 90s, 10m or 1h30m expected, got {text!r}")
    if not 0 < total <= MAX_MS:
        raise ValueError(f"must be more than 0 and at most 365d, got {text!r}")
    return total
