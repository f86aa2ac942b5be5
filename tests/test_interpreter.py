"""`peloton.interpreter`: the Python a process runs on, as its log line and a benchmark's
figures name it."""

from __future__ import annotations

import platform
import subprocess
import sys
from pathlib import Path

from peloton.interpreter import interpreter

SERVICES = Path(__file__).resolve().parents[1] / "services"


def test_it_names_this_process_s_implementation_version_and_executable() -> None:
    assert interpreter() == (f"{platform.python_implementation()} "
                             f"{platform.python_version()} ({sys.executable})")


def test_another_interpreter_names_itself() -> None:
    base = Path(sys.base_prefix) / "bin" / "python3"  # a venv's base, or this one again
    said = subprocess.run(
        [str(base), "-c", "from peloton.interpreter import interpreter; print(interpreter())"],
        env={"PYTHONPATH": str(SERVICES)}, capture_output=True, text=True, check=True)
    assert said.stdout.strip().endswith(f"({base})")
    assert said.stdout.split()[1] == subprocess.run(
        [str(base), "-c", "import platform; print(platform.python_version())"],
        capture_output=True, text=True, check=True).stdout.strip()
