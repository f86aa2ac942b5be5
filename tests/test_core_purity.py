"""Every scheduling core stays pure (house style: functional core, imperative shell).

The cores are the `domain/` packages of each service, the shared `model/` value types and
the simulator (but for its file loader and report writer). They import no Kafka, etcd,
ClickHouse, HTTP, asyncio, clock, randomness, OS or logging module, nor any shell module
of this package (bus, api, cli, ...): time, ids and seeds are passed in.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[1] / "services" / "peloton"
SIM_SHELL = {"loader.py", "report.py"}
FORBIDDEN = {
    "asyncio", "time", "datetime", "random", "secrets", "uuid", "os", "io", "socket",
    "subprocess", "threading", "logging", "signal", "faust", "mode", "aiokafka", "aetcd",
    "grpc", "httpx", "fastapi", "uvicorn", "clickhouse_connect", "chdb", "typer", "rich",
    "fastavro", "confluent_kafka",
}
SHELL_PACKAGES = {"bus", "api", "cli", "readmodel", "minicluster", "ha", "agent", "serve"}


def core_modules() -> list[Path]:
    found = sorted(PKG.glob("*/domain/**/*.py")) + sorted(PKG.glob("model/*.py"))
    found += sorted(p for p in (PKG / "sim").glob("*.py") if p.name not in SIM_SHELL)
    return found


def imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
    return names


@pytest.mark.parametrize("module", core_modules(), ids=lambda p: str(p.relative_to(PKG)))
def test_core_module_imports_nothing_impure(module: Path) -> None:
    names = imports(module)
    assert {n.split(".")[0] for n in names} & FORBIDDEN == set()
    shells = {n for n in names if n.startswith("peloton.")
              and n.split(".")[1] in SHELL_PACKAGES}
    assert shells == set(), f"{module.name} imports shell modules {sorted(shells)}"


def test_the_scan_covers_every_core() -> None:
    covered = {p.relative_to(PKG).parts[0] for p in core_modules()}
    assert {"jobmgr", "hostmgr", "resmgr", "placement", "model", "sim"} <= covered


@pytest.mark.parametrize("module", sorted(p for p in (PKG / "sim").glob("*.py")
                                          if p.name not in SIM_SHELL), ids=lambda p: p.name)
def test_simulator_draws_no_global_randomness(module: Path) -> None:
    text = module.read_text()
    assert "np.random.default_rng" not in text and "np.random.seed" not in text
