"""One way to render what the CLI prints: `-o table|wide|json|yaml` on every command.

`table` (default) and `wide` (more columns) are for people; `json` and `yaml` print the
API's answer unchanged (the same document in either syntax), for scripts. `emit` prints a
machine format; `frame` turns a command's rendering into text (used by --watch to compare
frames); `console` is the Console every command prints tables with.
"""

from __future__ import annotations

import io
import json
import sys
from collections.abc import Iterable
from enum import StrEnum
from typing import Annotated, Any

import typer
import yaml
from rich.console import Console, RenderableType

__all__ = ["Output", "OutputOpt", "console", "dump", "emit", "frame"]


class Output(StrEnum):
    table = "table"
    wide = "wide"
    json = "json"
    yaml = "yaml"

    @property
    def machine(self) -> bool:
        """json or yaml: the API's document, for scripts."""
        return self in (Output.json, Output.yaml)

    @property
    def more(self) -> bool:
        """wide: tables with more columns."""
        return self is Output.wide


OutputOpt = Annotated[Output, typer.Option(
    "--output", "-o", help="table, wide (more columns), json or yaml (for scripts)")]


def dump(data: Any, output: Output) -> str:
    """`data` as JSON (indented) or YAML (block style, keys in the API's order)."""
    if output is Output.yaml:
        return str(yaml.safe_dump(data, sort_keys=False, default_flow_style=False,
                                  allow_unicode=True))
    return json.dumps(data, indent=2) + "\n"


def emit(data: Any, output: Output) -> None:
    """Print `data` in a machine format (json when `output` is not one)."""
    typer.echo(dump(data, output if output.machine else Output.json), nl=False)


def console() -> Console:
    # piped output (grep, less) gets wide tables rather than truncated cells
    return Console(soft_wrap=False, width=None if sys.stdout.isatty() else 200)


def frame(renderables: Iterable[RenderableType], width: int | None = None) -> str:
    """What `console().print(*renderables)` would print, as plain text."""
    buf = io.StringIO()
    out = Console(file=buf, soft_wrap=False, width=width or 200, color_system=None,
                  force_terminal=False, force_jupyter=False)
    for r in renderables:
        out.print(r)
    return buf.getvalue()
