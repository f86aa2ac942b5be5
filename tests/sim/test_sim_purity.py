"""The simulator core is pure: no clock, no randomness but the Generator passed in, no
I/O. Only the loader (YAML file) and the report (files, plots) touch the outside."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SIM = Path(__file__).resolve().parents[2] / "services" / "peloton" / "sim"
SHELL = {"loader.py", "report.py"}
FORBIDDEN = {
    "asyncio", "time", "datetime", "random", "secrets", "uuid", "os", "io", "socket",
    "subprocess", "threading", "logging", "faust", "aiokafka", "aetcd", "httpx",
    "clickhouse_connect", "chdb", "typer", "rich", "yaml", "matplotlib", "pathlib",
}


def imported_roots(path: Path) -> set[str]:
    roots: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            roots.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            roots.add(node.module.split(".")[0])
    return roots


CORE = sorted(p for p in SIM.glob("*.py") if p.name not in SHELL | {"__init__.py"})


@pytest.mark.parametrize("module", CORE, ids=lambda p: p.name)
def test_core_module_imports_nothing_impure(module: Path) -> None:
    assert imported_roots(module) & FORBIDDEN == set()


@pytest.mark.parametrize("module", CORE, ids=lambda p: p.name)
def test_core_module_draws_no_global_randomness(module: Path) -> None:
    text = module.read_text()
    assert "np.random.default_rng" not in text and "np.random.seed" not in text


def test_the_scan_sees_the_core_modules() -> None:
    names = {p.stem for p in CORE}
    assert {"events", "workload", "scheduler", "simulation", "metrics", "state"} <= names
