"""How a service process writes its logs: text (the default) or JSON lines.

`configure(service, fmt, level)` gives the root logger one handler writing to stderr, one
record per line (like `logging.basicConfig`, it does nothing when the root logger already
has handlers, e.g. under pytest, unless `force`):
- "text": `<asctime> <service> <LEVEL> <logger>: <message>`;
- "json": one JSON object per line, keys `ts` (UTC, RFC 3339 with milliseconds), `level`,
  `logger`, `message`, `service`, plus `exc` (the formatted traceback) when the record
  carries an exception and `stack` for stack info. Newlines inside a message are escaped,
  so a line is always one record (what log shippers expect).
Either way the Kafka client's repeated errors (every retry while the broker is away) are
logged once per 30 s with a count (`peloton.bus.logrepeat`).
`configured()` is True once `configure` ran. `worker(app)` is the Faust worker the shells
run: once `configure` ran it keeps this setup (mode's worker otherwise replaces the root
handlers with its own coloured text format at start, and the JSON option would end
there), and it never draws Faust's terminal spinner (escape codes in a log file); it
ends within a deadline once it stops (`peloton.bus.stopdeadline`).
"""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime
from enum import StrEnum
from typing import IO, Any

import faust

from peloton.bus import stopdeadline
from peloton.bus.logrepeat import RepeatFilter

__all__ = ["LogFormat", "JsonFormatter", "configure", "configured", "worker"]


class LogFormat(StrEnum):
    text = "text"
    json = "json"


class JsonFormatter(logging.Formatter):
    def __init__(self, service: str) -> None:
        super().__init__()
        self.service = service

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC)
            .isoformat(timespec="milliseconds").replace("+00:00", "Z"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            "service": self.service,
        }
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        elif record.exc_text:
            out["exc"] = record.exc_text
        if record.stack_info:
            out["stack"] = self.formatStack(record.stack_info)
        return json.dumps(out, ensure_ascii=False, default=str)


_configured = False


def configure(service: str, fmt: LogFormat | str = LogFormat.text, level: str | int = "INFO",
              stream: IO[str] | None = None, force: bool = False) -> logging.Handler | None:
    """Set up the root logger (see the module doc); returns the handler installed (None:
    logging was configured already and `force` is off)."""
    global _configured
    root = logging.getLogger()
    if root.handlers and not force:
        return None
    handler = logging.StreamHandler(stream or sys.stderr)
    if LogFormat(fmt) is LogFormat.json:
        handler.setFormatter(JsonFormatter(service))
    else:
        handler.setFormatter(logging.Formatter(
            f"%(asctime)s {service} %(levelname)s %(name)s: %(message)s"))
    handler.addFilter(RepeatFilter())  # the Kafka client's retries, once per window
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level if isinstance(level, int) else level.upper())
    _configured = True
    return handler


def configured() -> bool:
    return _configured


def worker(app: faust.App) -> faust.Worker:
    """The Faust worker of a service process (see the module doc; its stop is bounded:
    `peloton.bus.stopdeadline`)."""
    w = stopdeadline.Worker(app, loglevel="INFO", quiet=True, override_logging=not _configured)
    w.spinner = None  # what Faust itself does for log levels below WARN
    return w
