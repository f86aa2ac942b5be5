"""Integer settings from the environment: unset or blank is the default; anything else
must be an integer at or above a bound, or it is refused with the variable's name."""

from __future__ import annotations

from collections.abc import Mapping

__all__ = ["env_int"]


def env_int(env: Mapping[str, str], name: str, default: int | None, low: int,
            error: type[ValueError] = ValueError) -> int | None:
    """`env[name]` as an integer >= `low` (`default` when unset or blank); `error` (a
    ValueError) naming the variable otherwise."""
    raw = env.get(name, "").strip()
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise error(f"{name}: not an integer: {raw!r}") from None
    if value < low:
        raise error(f"{name}: {value} is below {low}")
    return value
