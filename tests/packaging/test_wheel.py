"""The wheel built from this tree installs and runs on its own (issue 11, packaging).

The wheel is built with `pip wheel --no-deps` from a copy of the build inputs in a temp
dir (nothing is written into the repository), then installed, not editable, into a fresh
virtualenv made with `--system-site-packages` so the dependencies come from the dev
environment (a venv itself, infra/setup.sh's .venv: its site-packages through a .pth
file); `--force-reinstall` puts peloton itself in the venv, ahead of the editable
install on the path. The tests check that the wheel carries every event schema, the read
model's SQL and the examples; that the venv imports peloton from the venv and finds its
data there; that `peloton serve api` and `peloton serve placement` from the venv join a real
dev broker (their ready files; placement's /readyz, the probe the chart uses, answers 200),
the API answering /openapi.json and serving back a job submitted to it (published with the
wheel's schemas, materialized into its SQL tables); and that an editable install still
reads the source tree.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import site
import subprocess
import sys
import time
import zipfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from api_tokens import ADMIN, headers, tokens_document

from peloton.minicluster.servers import ServerProcess, free_port, start_tansu

pytestmark = pytest.mark.timeout(180)

REPO = Path(__file__).resolve().parents[2]


def schemas() -> list[str]:
    return sorted(p.name for p in (REPO / "schemas").glob("*.avsc"))


def events() -> list[str]:
    return sorted({name.split(".")[0] for name in schemas()})


def examples() -> list[str]:
    root = REPO / "examples"
    return sorted(str(p.relative_to(root)) for p in root.rglob("*.yaml"))


JOB = """\
name: packaged
instanceCount: 1
defaultConfig:
  resource: {cpuLimit: 1}
  command: {value: "true"}
"""

PROBE = """\
import importlib.resources, json, peloton
from peloton.bus.codec import default_codec
from peloton.datafiles import examples_dir, schemas_dir
sql = importlib.resources.files("peloton.readmodel") / "schema.sql"
print(json.dumps({"module": peloton.__file__, "schemas": str(schemas_dir()),
                  "examples": str(examples_dir()), "events": default_codec().event_types,
                  "sql": str(sql), "sql_has_tables": "CREATE TABLE" in sql.read_text()}))
"""


def _clean_env(**extra: str) -> dict[str, str]:
    """The environment without anything that points Python or peloton at the source tree."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "PYTHONHOME", "PELOTON_SCHEMAS", "VIRTUAL_ENV")}
    return {**env, "PIP_DISABLE_PIP_VERSION_CHECK": "1", "PIP_NO_INPUT": "1", **extra}


def _run(argv: list[str | Path], cwd: Path, timeout: float = 120) -> str:
    done = subprocess.run([str(a) for a in argv], cwd=cwd, env=_clean_env(), text=True,
                          capture_output=True, timeout=timeout)
    assert done.returncode == 0, f"{argv} failed:\n{done.stdout}\n{done.stderr}"
    return done.stdout


def _source_copy(build_inputs: tuple[str, ...], dest: Path) -> Path:
    """The build inputs copied to dest (builds write build/ and *.egg-info beside them)."""
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info")
    dest.mkdir(parents=True, exist_ok=True)
    for name in build_inputs:
        if (REPO / name).is_dir():
            shutil.copytree(REPO / name, dest / name, ignore=ignore)
        else:
            shutil.copy2(REPO / name, dest / name)
    return dest


def _new_venv(root: Path, *pip_install: str | Path) -> Path:
    """A venv at root that sees the dev environment's packages, with pip_install run in it
    (pip itself comes from the system site-packages; it installs into the venv)."""
    _run([sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", root],
         cwd=root.parent)
    if sys.prefix != sys.base_prefix:
        # the dev environment is itself a venv (infra/setup.sh's .venv), whose packages
        # --system-site-packages does not reach: its site-packages go on the new venv's path,
        # after the venv's own (its .pth files, the editable install among them, unread)
        site_dir = _run([root / "bin" / "python", "-c",
                         "import sysconfig; print(sysconfig.get_path('purelib'))"], cwd=root)
        Path(site_dir.strip(), "_dev_environment.pth").write_text(
            "".join(f"{p}\n" for p in site.getsitepackages()))
    _run([root / "bin" / "python", "-m", "pip", "install", "-q", "--no-deps", *pip_install],
         cwd=root)
    return root


@pytest.fixture(scope="module")
def wheel(build_inputs: tuple[str, ...], tmp_path_factory: pytest.TempPathFactory) -> Path:
    src = _source_copy(build_inputs, tmp_path_factory.mktemp("src"))
    dist = tmp_path_factory.mktemp("dist")
    _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", dist, src], cwd=src)
    (built,) = dist.glob("peloton_py-*.whl")
    return built


@pytest.fixture(scope="module")
def venv(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _new_venv(tmp_path_factory.mktemp("venv"), "--no-index", "--force-reinstall", wheel)


def test_the_wheel_carries_schemas_sql_and_examples(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    assert schemas() and examples()
    missing = [s for s in schemas() if f"peloton/_data/schemas/{s}" not in names]
    missing += [e for e in examples() if f"peloton/_data/examples/{e}" not in names]
    missing += [f for f in ("peloton/readmodel/schema.sql", "peloton/py.typed",
                            "peloton/api/ui/templates/shell.html",  # the web UI's
                            "peloton/api/ui/static/ui.js") if f not in names]
    assert not missing, f"not in {wheel.name}: {missing}"
    assert not any(n.startswith(("tests/", "schemas/", "examples/")) for n in names)


def test_the_venv_runs_peloton_from_the_wheel_with_its_data(venv: Path) -> None:
    found = json.loads(_run([venv / "bin" / "python", "-c", PROBE], cwd=venv))
    site = str(venv / "lib")
    assert found["module"].startswith(site), f"peloton imported from {found['module']}"
    for key in ("schemas", "examples", "sql"):
        assert found[key].startswith(site), f"{key} read from {found[key]}"
    assert sorted(found["events"]) == events()
    assert found["sql_has_tables"]


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    server: ServerProcess = start_tansu(free_port(),
                                        tmp_path_factory.mktemp("tansu") / "tansu.log")
    try:
        yield server.address
    finally:
        server.stop()


def test_an_editable_install_reads_the_source_tree_and_writes_nothing_into_it(
        build_inputs: tuple[str, ...], tmp_path: Path) -> None:
    src = _source_copy(build_inputs, tmp_path / "src")
    venv = _new_venv(tmp_path / "venv", "--force-reinstall", "--editable", src)
    found = json.loads(_run([venv / "bin" / "python", "-c", PROBE], cwd=venv))
    assert found["module"] == str(src / "services" / "peloton" / "__init__.py")
    assert (found["schemas"], found["examples"]) == (str(src / "schemas"),
                                                     str(src / "examples"))
    assert sorted(found["events"]) == events()
    assert not (src / "services" / "peloton" / "_data").exists()


@contextmanager
def _served(venv: Path, run_dir: Path, argv: list[str]) -> Iterator[Callable[[], bool]]:
    """`peloton serve ARGV` from the venv's console script, stopped on exit; yields
    `ready()`: it has joined its consumer group (the PELOTON_READY_FILE contract). Raises
    AssertionError with the log's errors if the process exits first."""
    ready, log_path = run_dir / "ready", run_dir / "serve.log"
    with log_path.open("wb") as log:
        proc = subprocess.Popen([str(venv / "bin" / "peloton"), "serve", *argv], cwd=run_dir,
                                stdout=log, stderr=subprocess.STDOUT,
                                env=_clean_env(PELOTON_READY_FILE=str(ready)))

    def is_ready() -> bool:
        if proc.poll() is not None:
            raise AssertionError(f"{argv[0]} exited {proc.returncode}:\n{_errors(log_path)}")
        return ready.exists()

    try:
        yield is_ready
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _wait(what: str, check: Callable[[], object], log: Path, timeout: float = 60.0) -> object:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.3)
    raise AssertionError(f"{what} not within {timeout:.0f}s:\n{_errors(log)}")


def _errors(log: Path) -> str:
    """The log's error lines (Faust logs a lot while it stops), then its tail."""
    lines = log.read_text(errors="replace").splitlines()
    errors = [line for line in lines if "Error" in line or "ERROR" in line]
    return "\n".join(errors[-20:] + ["-- tail:"] + lines[-15:])


@pytest.mark.integration
def test_peloton_serve_api_from_the_venv_serves_and_materializes_a_job(
        venv: Path, broker: str, tmp_path: Path) -> None:
    port = free_port()
    tokens = tmp_path / "tokens.yaml"
    tokens.write_text(yaml.safe_dump(tokens_document()))
    http = httpx.Client(base_url=f"http://127.0.0.1:{port}", headers=headers(ADMIN),
                        timeout=5)

    def openapi() -> dict[str, Any] | None:
        try:
            r = http.get("/openapi.json")
        except httpx.TransportError:
            return None
        return r.json() if r.status_code == 200 else None

    def job() -> dict[str, Any] | None:
        r = http.get("/v1/jobs/pkg-1")
        return r.json() if r.status_code == 200 else None

    argv = ["api", "--bootstrap", broker, "--port", str(port), "--tokens-file", str(tokens),
            "--dsn", f"chdb://{tmp_path / 'chdb'}"]
    with http, _served(venv, tmp_path, argv) as ready:
        log = tmp_path / "serve.log"
        _wait("api ready", ready, log)
        spec = _wait("/openapi.json", openapi, log)
        assert isinstance(spec, dict)
        assert spec["openapi"].startswith("3.") and "/v1/jobs" in spec["paths"]
        # published with the wheel's Avro schemas, read back into the wheel's SQL tables
        r = http.post("/v1/jobs?job_id=pkg-1", content=JOB,
                      headers={"content-type": "application/yaml"})
        assert r.status_code == 202, r.text
        found = _wait("the job in the read model", job, log)
        assert isinstance(found, dict)
        assert (found["name"], found["state"]) == ("packaged", "SUBMITTED")


@pytest.mark.integration
def test_peloton_serve_placement_from_the_venv_joins_the_broker_and_is_ready(
        venv: Path, broker: str, tmp_path: Path) -> None:
    port = free_port()

    def readyz() -> dict[str, Any] | None:
        try:
            r = httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=5)
        except httpx.TransportError:
            return None
        return r.json() if r.status_code == 200 else None

    argv = ["placement", "--bootstrap", broker, "--health-port", str(port),
            "--health-bind", "127.0.0.1"]
    with _served(venv, tmp_path, argv) as ready:
        _wait("placement ready", ready, tmp_path / "serve.log")
        probe = _wait("/readyz (the Kubernetes readiness probe)", readyz,
                      tmp_path / "serve.log")
        assert isinstance(probe, dict) and probe["ready"] is True
