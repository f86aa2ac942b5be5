"""How plugins word resource requirements in reasons ("cpu>=4 gpu>=2")."""

from __future__ import annotations

from peloton.placement.domain.hostindex import FloatArray

__all__ = ["resource_text"]

_UNITS = (("cpu", ""), ("memory", "MB"), ("disk", "MB"), ("gpu", ""))


def resource_text(request: FloatArray) -> str:
    """The non-zero kinds of ``request``; "nothing" when all are zero."""
    parts = [
        f"{kind}>={float(v):g}{unit}" for (kind, unit), v in zip(_UNITS, request, strict=True)
        if v > 0
    ]
    return " ".join(parts) if parts else "nothing"
