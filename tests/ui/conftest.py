"""Web UI fixtures: the in-process API over a chdb read model holding the read-model
scenario plus a few entitlement cycles (`ui_app`, `admin`; no browser), and, for the
browser tests, the e2e minicluster fixtures (tests/e2e/conftest.py, loaded by path) and
Debian's chromium driven by Playwright (`browser`; skips, naming the reason, when either
is missing: infra/setup-browser.sh installs both).
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

_TESTS = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(_TESTS / "readmodel"))
sys.path.insert(0, str(_TESTS / "e2e"))

from api_tokens import ADMIN, authenticator, client_as  # noqa: E402
from readmodel_scenario import Bus, full_scenario, res  # noqa: E402

from peloton.api.app import create_app  # noqa: E402
from peloton.api.publisher import MemoryPublisher  # noqa: E402
from peloton.readmodel.store import Store  # noqa: E402

_spec = importlib.util.spec_from_file_location("e2e_conftest", _TESTS / "e2e" / "conftest.py")
assert _spec is not None and _spec.loader is not None
_e2e = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_e2e)
minicluster_factory = _e2e.minicluster_factory  # the e2e fixtures, for tests/ui/test_ui_browser
minicluster = _e2e.minicluster

NOW = 123_456


def cycles(bus: Bus) -> None:
    """Three more entitlement cycles: /prod/batch goes over its entitlement (cpu 8 of 4)
    at t=1 500, before the scenario's preemption in that pool (t=1 610)."""
    for i, (t, alloc) in enumerate(((1_200, 2.0), (1_500, 8.0), (1_700, 3.0))):
        pools = [{"pool": p, "parent": parent, "reservation": res(2), "limit": res(8),
                  "entitlement": res(4, 1024), "slack_entitlement": res(),
                  "nonslack_entitlement": res(4),
                  "allocation": res(alloc if p == "/prod/batch" else 1), "demand": res(5)}
                 for p, parent in (("/", None), ("/prod", "/"), ("/prod/batch", "/prod"),
                                   ("/dev", "/"))]
        bus.add("EntitlementUpdated", "cluster", {
            "at": t, "cycle": 8 + i, "capacity": res(8, 8192), "pools": pools})


@pytest.fixture
def ui_store(tmp_path: Path) -> Iterator[Store]:
    s = Store(f"chdb://{tmp_path / 'chdb'}")
    bus = full_scenario()
    cycles(bus)
    s.insert(bus.rows())
    try:
        yield s
    finally:
        s.close()


@pytest.fixture
def publisher() -> MemoryPublisher:
    return MemoryPublisher()


@pytest.fixture
def ui_app(ui_store: Store, publisher: MemoryPublisher) -> FastAPI:
    return create_app(ui_store, publisher, clock=lambda: NOW,
                      authenticator=authenticator())


@pytest.fixture
async def admin(ui_app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    async with client_as(ui_app, ADMIN) as c:
        yield c


def chromium_path() -> str | None:
    return os.environ.get("PELOTON_CHROMIUM") or shutil.which("chromium") or shutil.which(
        "chromium-browser")


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Debian's chromium, headless, through Playwright (never a downloaded browser)."""
    exe = chromium_path()
    if exe is None:
        pytest.skip("no chromium on PATH: run infra/setup-browser.sh")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.skip("playwright is not installed: run infra/setup-browser.sh")
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=exe, headless=True,
                              args=["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"])
        try:
            yield b
        finally:
            b.close()
