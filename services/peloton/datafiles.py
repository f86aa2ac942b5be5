"""Where the data files that live outside the Python package are found at run time.

The repository's top-level `schemas/` (the Avro event schemas, `<Event>.v<N>.avsc`) and
`examples/` (job, pool, update and simulator files the demo reads) stay the one source of
truth. A built wheel carries a copy of both under `peloton/_data/` (`setup.py`'s build step
copies them in; nothing is checked in there), so an installed package finds them without a
source tree. A source checkout or an editable install has no `_data/`: the files are read
from the repository top (three levels above this module's directory: services/peloton/).

`packaged_dir(name)` returns the first of these that exists: `peloton/_data/<name>`, then
`<repo>/<name>`. `FileNotFoundError` when neither exists (a broken install), naming both.
`schemas_dir()` honours `PELOTON_SCHEMAS` (a directory) first, for tests and operators.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["DATA_PACKAGE_DIR", "SHIPPED", "examples_dir", "packaged_dir", "schemas_dir"]

DATA_PACKAGE_DIR = "_data"
SHIPPED = ("schemas", "examples")  # top-level directories a wheel carries under _data/

_HERE = Path(__file__).resolve().parent


def packaged_dir(name: str) -> Path:
    """The directory `name` (one of SHIPPED) of this install: wheel copy, else repository."""
    if name not in SHIPPED:
        raise ValueError(f"{name!r} is not shipped with the package (one of {SHIPPED})")
    candidates = (_HERE / DATA_PACKAGE_DIR / name, _HERE.parents[1] / name)
    for candidate in candidates:
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(f"{name}/ is neither in the package ({candidates[0]}) nor in a "
                            f"source tree ({candidates[1]}): reinstall peloton-py")


def schemas_dir() -> Path:
    """The Avro event schemas (PELOTON_SCHEMAS overrides)."""
    override = os.environ.get("PELOTON_SCHEMAS")
    return Path(override) if override else packaged_dir("schemas")


def examples_dir() -> Path:
    """The example job, pool, update and simulator files."""
    return packaged_dir("examples")
