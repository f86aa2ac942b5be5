"""peloton.bus.logformat: JSON logs are one object per line with ts, level, logger,
message, service; text stays as it was; logging configured by someone else is kept."""

from __future__ import annotations

import io
import json
import logging
import re

import pytest
from typer.testing import CliRunner

from peloton.bus import logformat


def test_json_lines(root: logging.Logger) -> None:
    out = io.StringIO()
    assert logformat.configure("resmgr-2", "json", "INFO", stream=out, force=True)
    logging.getLogger("peloton.test").info("two\nlines and %s", "ünïcode")
    logging.getLogger("peloton.test").debug("below the level")
    try:
        raise ValueError("boom")
    except ValueError:
        logging.getLogger("other").exception("failed")
    lines = out.getvalue().splitlines()
    assert len(lines) == 2
    first, second = (json.loads(line) for line in lines)
    assert set(first) == {"ts", "level", "logger", "message", "service"}
    assert first["message"] == "two\nlines and ünïcode"
    assert (first["level"], first["logger"], first["service"]) == (
        "INFO", "peloton.test", "resmgr-2")
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", first["ts"])
    assert second["level"] == "ERROR" and "ValueError: boom" in second["exc"]
    assert logformat.configured()


def test_text_format(root: logging.Logger) -> None:
    out = io.StringIO()
    logformat.configure("jobmgr", logformat.LogFormat.text, "INFO", stream=out, force=True)
    logging.getLogger("peloton.x").warning("hello")
    assert re.fullmatch(r"\S+ \S+ jobmgr WARNING peloton.x: hello\n", out.getvalue())


def test_logging_configured_elsewhere_is_kept(root: logging.Logger) -> None:
    mine = logging.StreamHandler(io.StringIO())
    root.addHandler(mine)
    assert logformat.configure("x", "json") is None
    assert mine in root.handlers
    with pytest.raises(ValueError):
        logformat.configure("x", "yaml", force=True)


def test_the_serve_commands_take_the_format_from_the_env() -> None:
    from peloton.cli.serve_cmd import build

    env = {"COLUMNS": "240", "NO_COLOR": "1"}
    result = CliRunner().invoke(build(), ["jobmgr", "--log-format", "xml"], env=env)
    assert result.exit_code == 2 and "xml" in result.output
    help_text = CliRunner().invoke(build(), ["agent", "--help"], env=env).output
    for option in ("--log-format", "PELOTON_LOG_FORMAT", "--health-port",
                   "PELOTON_HEALTH_PORT"):
        assert option in help_text
