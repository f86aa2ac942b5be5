"""How long finished work stays in the job manager's memory, and what it keeps after.

A terminal job (and a rejected submission) stays in the book for `retention_ms` of event
time after it ended (late agent reports and kills still find it; the read model keeps the
history for good). Then it leaves, and only its id's 64-bit fingerprint stays in
`ForgottenIds`, so a resubmission (or a kill) of that id is still a no-op.

The bound: 8 bytes per forgotten job (a sorted `array('Q')` plus a small set of recent
additions merged into it in batches), i.e. 8 MB for a million jobs; a job in the book is
bounded by the jobs submitted within one retention window. Fingerprints are blake2b of
the id (deterministic); two ids share one with probability about n^2 / 2^65 (3e-8 for
a million forgotten jobs), in which case the newer submission would be ignored.
"""

from __future__ import annotations

import base64
import hashlib
from array import array
from bisect import bisect_left
from collections.abc import Iterable

__all__ = ["ForgottenIds", "DEFAULT_RETENTION_MS", "fingerprint"]

DEFAULT_RETENTION_MS = 10 * 60_000
_MERGE_AT = 4096


def fingerprint(job_id: str) -> int:
    return int.from_bytes(hashlib.blake2b(job_id.encode(), digest_size=8).digest(), "little")


class ForgottenIds:
    """A compact set of job ids that have left the book (see the module doc)."""

    def __init__(self, fingerprints: Iterable[int] = ()) -> None:
        self._sorted = array("Q", sorted(set(fingerprints)))
        self._recent: set[int] = set()

    def add(self, job_id: str) -> None:
        self._recent.add(fingerprint(job_id))
        if len(self._recent) >= _MERGE_AT:
            self._merge()

    def __contains__(self, job_id: object) -> bool:
        if not isinstance(job_id, str):
            return False
        fp = fingerprint(job_id)
        if fp in self._recent:
            return True
        i = bisect_left(self._sorted, fp)
        return i < len(self._sorted) and self._sorted[i] == fp

    def __len__(self) -> int:
        self._merge()
        return len(self._sorted)

    def _merge(self) -> None:
        if self._recent:
            self._sorted = array("Q", sorted(set(self._sorted) | self._recent))
            self._recent = set()

    def to_data(self) -> str:
        """Base64 of the sorted little-endian fingerprints."""
        self._merge()
        data = self._sorted.tobytes() if _LITTLE else _swapped(self._sorted).tobytes()
        return base64.b64encode(data).decode("ascii")

    @classmethod
    def from_data(cls, data: str) -> ForgottenIds:
        raw = base64.b64decode(data.encode("ascii"), validate=True)
        if len(raw) % 8:
            raise ValueError("forgotten ids: not a whole number of 8-byte fingerprints")
        values = array("Q")
        values.frombytes(raw)
        if not _LITTLE:
            values = _swapped(values)
        out = cls()
        out._sorted = array("Q", sorted(set(values)))
        return out

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ForgottenIds):
            return NotImplemented
        self._merge()
        other._merge()
        return self._sorted == other._sorted

    __hash__ = None  # type: ignore[assignment]


_LITTLE = array("H", [1]).tobytes() == b"\x01\x00"


def _swapped(values: array[int]) -> array[int]:
    out = array("Q", values)
    out.byteswap()
    return out
