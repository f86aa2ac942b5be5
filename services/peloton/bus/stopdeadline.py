"""A service process stops within a deadline, broker or no broker.

A Faust worker stops its services one by one, each given mode's `shutdown_timeout` (60 s)
to finish. With the broker gone, the consumer's stop (its last commit, leaving the group)
retries until that runs out, and the services after it wait their turn: measured on the dev
cluster with its broker killed, no service had exited 60 s after SIGTERM (the host
manager not after 90 s), while with the broker up every one exits in about 1.1 s.
Kubernetes waits `terminationGracePeriodSeconds` and then kills the pod without a word;
`cluster down` kills after 10 s.

So the worker the shells run (`logformat.worker`) is a `Worker` here: the first stop
(a signal, or the end of its run) arms a `Deadline`; if the process is still stopping
when it runs out, it logs why at ERROR and ends with exit code `EXIT_CODE`. Nothing is
lost by that: every shell commits a record's offset only after what it decided was
published, so what it had not committed is read again by whoever reads the partition next.
An elected leader does not revoke its lease then; its successor takes over once the lease
expires (its TTL).

The deadline is `--stop-timeout` of `peloton serve` (env PELOTON_STOP_TIMEOUT_S, default
`DEFAULT_STOP_TIMEOUT_S`; 0: wait as long as Faust does). The Helm chart sets it below the
pods' grace period (values `stopTimeoutSeconds`).
"""

from __future__ import annotations

import logging
import os
import sys
import threading
from collections.abc import Callable
from typing import Any

import faust

__all__ = ["DEFAULT_STOP_TIMEOUT_S", "EXIT_CODE", "Deadline", "Worker", "configure",
           "stop_timeout"]

log = logging.getLogger(__name__)

DEFAULT_STOP_TIMEOUT_S = 10.0
EXIT_CODE = 3  # not 0 (a clean stop) nor 1 (a crash): stopped by the deadline

_timeout_s = DEFAULT_STOP_TIMEOUT_S


def configure(seconds: float) -> None:
    """Set this process's stop deadline (seconds; 0: none). `peloton serve` does, once."""
    global _timeout_s
    if seconds < 0:
        raise ValueError(f"a stop timeout cannot be negative (got {seconds})")
    _timeout_s = seconds


def stop_timeout() -> float:
    return _timeout_s


def _exit_now(code: int) -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # closed or gone: nothing more to say there
            pass
    os._exit(code)


class Deadline:
    """Ends the process `seconds` after `arm` unless it ended first. Armed once: a
    second stop (say another SIGTERM) does not move the deadline."""

    def __init__(self, seconds: float, service: str,
                 exit_: Callable[[int], None] = _exit_now) -> None:
        self.seconds = seconds
        self.service = service
        self._exit = exit_
        self._timer: threading.Timer | None = None

    @property
    def armed(self) -> bool:
        return self._timer is not None

    def arm(self, why: str) -> None:
        if self._timer is not None or self.seconds <= 0:
            return
        log.info("%s: stopping (%s); it ends within %.0f s at the latest", self.service,
                 why, self.seconds)
        self._timer = threading.Timer(self.seconds, self._expired)
        self._timer.daemon = True  # a process that stopped in time does not wait for it
        self._timer.start()

    def _expired(self) -> None:
        log.error("%s did not stop within %.0f s (is the broker reachable?): exiting now "
                  "with code %d; records not committed are read again on restart",
                  self.service, self.seconds, EXIT_CODE)
        self._exit(EXIT_CODE)


class Worker(faust.Worker):
    """The Faust worker of a service process, its stop bounded by a `Deadline`."""

    def __init__(self, app: faust.App, *args: Any, stop_timeout_s: float | None = None,
                 **kwargs: Any) -> None:
        super().__init__(app, *args, **kwargs)
        seconds = _timeout_s if stop_timeout_s is None else stop_timeout_s
        self.deadline = Deadline(seconds, str(app.conf.id))

    def _schedule_shutdown(self, signal: Any) -> None:  # mode: on SIGTERM and SIGINT
        self.deadline.arm(f"signal {getattr(signal, 'name', signal)}")
        super()._schedule_shutdown(signal)

    def stop_and_shutdown(self) -> None:  # mode: once the run ended, however it ended
        self.deadline.arm("the worker's run ended")
        super().stop_and_shutdown()
