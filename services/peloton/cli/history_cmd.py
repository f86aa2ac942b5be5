"""`peloton respool history POOL [--from --to --step] [-o json]`: a pool's entitlement,
allocation and demand per cycle over a time range (GET /v1/pools/{path}/history).

Times are passed to the API as given (ms since the epoch, ISO 8601, `now`, or relative
to the API's clock: `-1h`, `-15m`, `-2d`); the API answers garbage with 400 (exit 2).
The table has one row per point (a cycle, or the last cycle of a `step` when the server
sampled: its SAMPLING line says so) and, for the chosen kinds, a text sparkline of
entitlement, allocation and demand scaled to the largest value shown (no plotting
dependency). `-o json|yaml` prints the API's answer.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.table import Table
from rich.text import Text

from peloton.cli.output import Output, OutputOpt
from peloton.cli.watch import show

__all__ = ["respool_history", "sparkline", "KINDS"]

KINDS = ("cpu", "memory", "disk", "gpu")
_BARS = "▁▂▃▄▅▆▇█"
_SERIES = ("entitlement", "allocation", "demand")


def sparkline(values: list[float], top: float | None = None) -> str:
    """One bar per value, scaled to `top` (default: the largest value; all-zero: lowest)."""
    high = max(values, default=0.0) if top is None else top
    if high <= 0:
        return _BARS[0] * len(values)
    out = []
    for v in values:
        level = round(max(0.0, min(v, high)) / high * (len(_BARS) - 1))
        out.append(_BARS[level])
    return "".join(out)


def _draw(kinds: list[str]) -> Any:
    def draw(data: dict[str, Any], output: Output) -> list[Any]:
        from peloton.cli.user_cmds import _ts

        points = data["points"]
        head = Text(f"pool {data['pool']}: {len(points)} points, {data['cycles']} cycles "
                    f"from {_ts(data['from']) if data['from'] else data['from']} to "
                    f"{_ts(data['to'])}\nsampling: {data['sampling']}")
        cols = ["AT", "CYCLE"] + [f"{k.upper()} {s[:5].upper()}" for k in kinds
                                  for s in _SERIES]
        if output.more:
            cols.append("CYCLES")
        table = Table(*cols)
        for p in points:
            row = [_ts(p["at"]), str(p["cycle"])]
            row += [f"{p[s].get(k, 0.0):g}" for k in kinds for s in _SERIES]
            if output.more:
                row.append(str(p["cycles"]))
            table.add_row(*row)
        lines = []
        for k in kinds:
            top = max((p[s].get(k, 0.0) for p in points for s in _SERIES), default=0.0)
            for s in _SERIES:
                line = sparkline([p[s].get(k, 0.0) for p in points], top)
                lines.append(f"{k:<6} {s:<11} {line}  (max {top:g})")
        return [head, table, Text("\n".join(lines)) if points else Text("no cycles")]

    return draw


def respool_history(
    path: Annotated[str, typer.Argument(help="pool path, e.g. /team-a/batch")],
    frm: Annotated[str | None, typer.Option(
        "--from", help="start: ms since epoch, ISO 8601, now or relative (-1h) "
                       "(default: an hour before --to)", show_default=False)] = None,
    to: Annotated[str | None, typer.Option(
        "--to", help="end, same forms (default: now)", show_default=False)] = None,
    step: Annotated[int | None, typer.Option(
        "--step", min=1, help="sample the last cycle of each STEP ms (default: every "
                              "cycle, or the server's step past its point limit)",
        show_default=False)] = None,
    kind: Annotated[list[str] | None, typer.Option(
        "--kind", "-k", help="resource kinds to show (repeatable; default cpu, memory)",
        show_default=False)] = None,
    output: OutputOpt = Output.table,
    api: Annotated[str | None, typer.Option(
        "--api", help="API base URL (default: $PELOTON_API or http://127.0.0.1:5290)",
        show_default=False)] = None,
) -> None:
    """A pool's entitlement, allocation and demand over time (table and sparklines)."""
    kinds = kind or ["cpu", "memory"]
    unknown = [k for k in kinds if k not in KINDS]
    if unknown:
        typer.echo(f"error: unknown kind {', '.join(unknown)} (one of {', '.join(KINDS)})",
                   err=True)
        raise typer.Exit(2)
    show(lambda client: client.pool_history(path, frm, to, step), _draw(kinds), output,
         False, 2.0, api)
