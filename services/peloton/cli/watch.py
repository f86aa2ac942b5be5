"""`--watch` (`-w`) for get/list commands: fetch, render, repeat every `--interval` s.

On a terminal each frame replaces the previous one (screen cleared, a header with the
interval and the time). Off a terminal (a pipe, a file) the first frame is printed whole,
then only what changed: for tables the lines that are new or different (`changes`, the
pure part, tested by property), for json/yaml the whole document again whenever it
differs (yaml documents separated by `---`). Ctrl-C ends the watch with exit code 0; an
API error ends it as it ends the command without --watch.
"""

from __future__ import annotations

import sys
import time
from collections import Counter
from collections.abc import Callable
from typing import Annotated, Any

import typer
from rich.console import RenderableType

from peloton.cli.output import Output, console, dump, emit, frame

__all__ = ["IntervalOpt", "WatchOpt", "changes", "run", "show"]

WatchOpt = Annotated[bool, typer.Option(
    "--watch", "-w", help="keep watching: redraw every --interval seconds (Ctrl-C stops)")]
IntervalOpt = Annotated[float, typer.Option(
    "--interval", min=0.1, help="seconds between refreshes with --watch")]

CLEAR = "\x1b[H\x1b[2J"


def changes(previous: list[str], current: list[str]) -> list[str]:
    """The lines of `current` that `previous` does not have (counting repeats), in
    `current`'s order: new rows and rows whose content changed."""
    left = Counter(previous)
    out: list[str] = []
    for line in current:
        if left[line] > 0:
            left[line] -= 1
        else:
            out.append(line)
    return out


def run(fetch: Callable[[], Any], render: Callable[[Any], str], interval: float, *,
        tty: bool, machine: bool, write: Callable[[str], Any] | None = None,
        sleep: Callable[[float], None] | None = None) -> None:
    """Render `fetch()` every `interval` seconds until Ctrl-C (see the module doc)."""
    out = write or _stdout
    pause = sleep or time.sleep
    previous: list[str] | None = None
    try:
        while True:
            text = render(fetch())
            lines = text.splitlines()
            if tty:
                out(f"{CLEAR}Every {interval:g}s: {time.strftime('%H:%M:%S')}\n\n{text}")
            elif previous is None or (machine and lines != previous):
                out(text)
            elif not machine:
                out("".join(line + "\n" for line in changes(previous, lines)))
            previous = lines
            pause(interval)
    except KeyboardInterrupt:
        return


def _stdout(text: str) -> None:
    sys.stdout.write(text)
    sys.stdout.flush()


def show(fetch: Callable[[Any], Any], draw: Callable[[Any, Output], list[RenderableType]],
         output: Output, watch: bool, interval: float, api: str | None) -> None:
    """A get/list command's body: `fetch(client)` the API's answer, then print it in
    `output` (`draw(data, output)` makes the table/wide renderables), once or watching."""
    from peloton.cli.user_cmds import api_client  # user_cmds imports this module

    with api_client(api) as client:
        if watch:
            tty = sys.stdout.isatty()
            width = console().width if tty else None

            def render(data: Any) -> str:
                if output.machine:
                    return ("---\n" if output is Output.yaml else "") + dump(data, output)
                return frame(draw(data, output), width)

            run(lambda: fetch(client), render, interval, tty=tty, machine=output.machine)
            return
        data = fetch(client)
    if output.machine:
        emit(data, output)
    else:
        console().print(*draw(data, output))
