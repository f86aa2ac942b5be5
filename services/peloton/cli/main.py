"""The `peloton` command: one Typer app; each concern registers its own sub-commands."""

from __future__ import annotations

import typer

__all__ = ["app"]

app = typer.Typer(no_args_is_help=True, help="Peloton-py: a unified resource scheduler.",
                  pretty_exceptions_enable=False)


def _register() -> None:
    from peloton.cli import (
        bench_cmd,
        bench_placement,
        cluster_cmd,
        placement_cmd,
        serve_cmd,
        sim_cmd,
        token_cmd,
        user_cmds,
        whatif_respool,
    )

    respool_app = user_cmds.register(app)
    whatif_respool.register(respool_app)
    placement_cmd.register(app)
    bench_app = bench_cmd.register(app)
    bench_placement.register(bench_app)
    serve_cmd.register(app)
    cluster_cmd.register(app)
    sim_cmd.register(app)
    token_cmd.register(app)


_register()


if __name__ == "__main__":
    app()
