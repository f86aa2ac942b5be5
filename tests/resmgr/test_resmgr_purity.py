"""The resource manager's domain core stays pure: no I/O, clock, randomness or async."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

DOMAIN = Path(__file__).resolve().parents[2] / "services" / "peloton" / "resmgr" / "domain"
FORBIDDEN = {
    "asyncio",
    "time",
    "datetime",
    "random",
    "secrets",
    "uuid",
    "os",
    "io",
    "socket",
    "subprocess",
    "threading",
    "logging",
    "faust",
    "aiokafka",
    "aetcd",
    "httpx",
    "clickhouse_connect",
    "chdb",
    "typer",
    "rich",
    "yaml",
}


def imported_roots(path: Path) -> set[str]:
    roots: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            roots.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            roots.add(node.module.split(".")[0])
    return roots


@pytest.mark.parametrize("module", sorted(DOMAIN.glob("*.py")), ids=lambda p: p.name)
def test_domain_module_imports_nothing_impure(module: Path) -> None:
    assert imported_roots(module) & FORBIDDEN == set()


def test_the_scan_sees_the_core_modules() -> None:
    names = {p.stem for p in DOMAIN.glob("*.py")}
    assert {"poolconfig", "pooltree", "entitlement", "slack", "admission", "preemption"} <= names
