"""Helpers shared by the agent tests.

`TASK_PYTHON`: a python3 the task user can execute (the system one on the default PATH;
the test runner's own interpreter may live under a 0700 home, e.g. a pyenv in /root).
"""

from __future__ import annotations

import os
import shutil
import sys

TASK_PYTHON = shutil.which("python3", path=os.defpath) or sys.executable
