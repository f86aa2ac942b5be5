"""The placement core stays pure: no I/O, clocks, randomness or service frameworks."""

from __future__ import annotations

import ast
from pathlib import Path

SERVICES = Path(__file__).resolve().parents[2] / "services" / "peloton"
CORE = sorted((SERVICES / "placement" / "domain").rglob("*.py")) + [
    SERVICES / "model" / "constraint.py"]
FORBIDDEN = {"asyncio", "time", "random", "datetime", "socket", "os", "subprocess", "faust",
             "aiokafka", "aetcd", "httpx", "clickhouse_connect", "threading", "secrets",
             "uuid", "logging"}
ENGINE_ONLY = {"peloton.placement.domain"}


def imported(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


def test_core_imports_nothing_impure() -> None:
    assert len(CORE) > 10
    for path in CORE:
        bad = {n for n in imported(path) if n.split(".")[0] in FORBIDDEN}
        assert not bad, f"{path}: {bad}"


def test_checker_shares_no_engine_code() -> None:
    names = imported(SERVICES / "placement" / "checker.py")
    engine = {n for n in names if n.startswith("peloton.placement.domain")}
    assert engine <= {"peloton.placement.domain.types"}, engine
    assert "numpy" not in names
