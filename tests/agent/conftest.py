"""Agent test fixtures.

`open_tmp`: a fresh directory the task user can reach. Agents running as root drop tasks
to an unprivileged user and refuse a sandbox root that user cannot search into; pytest's
own tmp_path sits under a 0700 directory (/tmp/pytest-of-<user>), so tests of confined
runs use this instead.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture
def open_tmp() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="peloton-agent-test-"))
    path.chmod(0o755)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)
