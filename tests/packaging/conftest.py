"""Shared by the packaging tests: the files a wheel (and the image) is built from."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
# what setup.py and pyproject.toml read: the Dockerfile's builder copies exactly these
BUILD_INPUTS = ("pyproject.toml", "setup.py", "MANIFEST.in", "services", "schemas",
                "examples")


@pytest.fixture(scope="session")
def build_inputs() -> tuple[str, ...]:
    return BUILD_INPUTS
