"""Makes the shared event-body helpers (tests/model/event_bodies.py) importable."""

from __future__ import annotations

import sys
from pathlib import Path

_MODEL_TESTS = str(Path(__file__).resolve().parents[1] / "model")
if _MODEL_TESTS not in sys.path:
    sys.path.insert(0, _MODEL_TESTS)
