"""Reading a scenario file (the I/O edge of the simulator; the rest is pure)."""

from __future__ import annotations

from pathlib import Path

import yaml

from .scenario import Scenario, ScenarioError
from .scenario_parser import parse_scenario

__all__ = ["load_scenario"]


def load_scenario(path: str | Path, seed: int | None = None) -> Scenario:
    """Parse a YAML (or JSON) scenario file; `seed` overrides the file's seed.

    Raises `ScenarioError` for unreadable, malformed or invalid files.
    """
    try:
        doc = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise ScenarioError(f"cannot read {path}: {exc.strerror or exc}") from None
    except yaml.YAMLError as exc:
        raise ScenarioError(f"{path} is not valid YAML: {exc}") from None
    scenario = parse_scenario(doc)
    return scenario if seed is None else scenario.with_seed(seed)
