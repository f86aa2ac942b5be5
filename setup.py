"""Build step: copy the repository's top-level data directories into the built package.

Everything else about the package is declared in pyproject.toml; this file only adds the
step setuptools cannot declare: `schemas/` (Avro event schemas) and `examples/` (the demo's
job, pool and update files) live at the repository top, outside services/peloton/, and stay
the one source of truth there. `build_py` copies them into `peloton/_data/<dir>/` of the
build tree, so a wheel (built from the tree or from the sdist, which carries them through
MANIFEST.in) installs them beside the code; `peloton.datafiles` finds them there, or at the
repository top in a source checkout or an editable install (where nothing is copied:
an editable install reads the tree itself).
"""

from __future__ import annotations

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent
SHIPPED = ("schemas", "examples")  # keep in step with peloton.datafiles.SHIPPED
PATTERNS = {"schemas": ("*.avsc",), "examples": ("*.yaml", "*.yml", "*.json")}


class BuildPyWithData(build_py):
    """build_py, plus the top-level data directories copied under peloton/_data/."""

    def run(self) -> None:
        super().run()
        if getattr(self, "editable_mode", False):
            return
        for name in SHIPPED:
            source = ROOT / name
            if not source.is_dir():
                raise FileNotFoundError(f"{source}: missing from the source tree or sdist")
            target = Path(self.build_lib) / "peloton" / "_data" / name
            if target.exists():
                shutil.rmtree(target)
            files = sorted({p for pattern in PATTERNS[name] for p in source.rglob(pattern)})
            if not files:
                raise FileNotFoundError(f"{source}: no {', '.join(PATTERNS[name])} files")
            for path in files:
                dest = target / path.relative_to(source)
                dest.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(path, dest)


setup(cmdclass={"build_py": BuildPyWithData})
