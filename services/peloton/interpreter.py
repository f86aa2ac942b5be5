"""Which Python runs this process, in words for log lines and benchmark figures.

CPython builds differ in speed: the same services cost a fifth less CPU on Debian's
python3.11 than on a pyenv 3.11 built without `--enable-optimizations`
(docs/performance.md, "The interpreter"), so a service says at start which one it runs on,
and a benchmark's figures name it.
"""

from __future__ import annotations

import platform
import sys

__all__ = ["interpreter"]


def interpreter() -> str:
    """Implementation, version and executable, e.g. "CPython 3.11.2 (/srv/.venv/bin/python)"."""
    return f"{platform.python_implementation()} {platform.python_version()} ({sys.executable})"
