"""Readers for the board's snapshot data (pure).

A snapshot is plain JSON read back from a store: any part may have the wrong shape. These
readers turn a wrong shape into TypeError (the snapshot contract allows only ValueError,
KeyError and TypeError), so `restore` never fails with an AttributeError half-way.
"""

from __future__ import annotations

from typing import Any

__all__ = ["as_dict", "as_list", "as_row"]


def as_dict(value: Any, what: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise TypeError(f"placement snapshot: {what} must be an object, "
                        f"got {type(value).__name__}")
    return value


def as_list(value: Any, what: str) -> list[Any]:
    if not isinstance(value, list):
        raise TypeError(f"placement snapshot: {what} must be a list, got {type(value).__name__}")
    return value


def as_row(value: Any, length: int, what: str) -> list[Any]:
    row = as_list(value, what)
    if len(row) != length:
        raise ValueError(f"placement snapshot: {what} must have {length} fields, got {len(row)}")
    return row
