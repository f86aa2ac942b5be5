"""Errors raised by the host agent's task runners.

Exception tree::

    AgentError
    ├── InvalidRunIdError (ValueError)     run_id is not a safe single path component
    ├── UnknownRunError (KeyError)         no run (in memory or on disk) has this run_id
    ├── RunnerClosedError (RuntimeError)   launch() after close()
    └── InvalidTransitionError (RuntimeError)  a runner tried an undefined state change (a bug)

Task outcomes (non-zero exit, spawn failure, kill) are never exceptions: they are reported
as `TaskStatus` values.
"""

from __future__ import annotations

__all__ = [
    "AgentError",
    "InvalidRunIdError",
    "UnknownRunError",
    "RunnerClosedError",
    "InvalidTransitionError",
]


class AgentError(Exception):
    """Base of every error raised by `peloton.agent`."""


class InvalidRunIdError(AgentError, ValueError):
    """The run_id cannot name a sandbox directory (empty, too long, '/', '..', ...)."""


class UnknownRunError(AgentError, KeyError):
    """No run with this run_id is known to the runner or present in the sandbox root."""

    def __str__(self) -> str:
        # KeyError.__str__ repr()s its argument; keep the message readable.
        return str(self.args[0]) if self.args else "unknown run"


class RunnerClosedError(AgentError, RuntimeError):
    """The runner has been closed and accepts no new launches."""


class InvalidTransitionError(AgentError, RuntimeError):
    """A run state change that the transition table does not define."""
