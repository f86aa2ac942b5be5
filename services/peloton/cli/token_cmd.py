"""`peloton token new|hash`: make API tokens and the tokens-file entries that accept them.

`token new --name alice --role submitter --pool /team-a` prints a fresh random token (on
stderr, once: keep it) and, on stdout, the YAML entry for the API's tokens file with only
its SHA-256 (append it under `tokens:`; the format is peloton.api.tokens). `token hash`
prints the SHA-256 of a token read from stdin (for a token made elsewhere). The entry is
checked with the API's own parser before it is printed.
"""

from __future__ import annotations

import sys
from typing import Annotated

import typer
import yaml

from peloton.api.tokens import ROLES, TokenFileError, hash_token, new_token, parse_tokens

__all__ = ["register"]


def register(app: typer.Typer) -> None:
    token = typer.Typer(no_args_is_help=True, help="Make API bearer tokens.")
    app.add_typer(token, name="token")

    @token.command("new")
    def new_cmd(
        name: Annotated[str, typer.Option(help="the user the token stands for")],
        role: Annotated[list[str], typer.Option(help=f"one of {', '.join(ROLES)}; "
                                                "repeatable")],
        pool: Annotated[list[str] | None, typer.Option(
            help="a pool a submitter works in (with its subtree); repeatable")] = None,
    ) -> None:
        """A new token and its tokens-file entry."""
        secret = new_token()
        entry = {"name": name, "sha256": hash_token(secret), "roles": role,
                 "pools": pool or []}
        try:
            parse_tokens([entry])
        except TokenFileError as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(2) from None
        typer.echo(f"token (shown once): {secret}", err=True)
        typer.echo(yaml.safe_dump([entry], sort_keys=False), nl=False)

    @token.command("hash")
    def hash_cmd() -> None:
        """The SHA-256 (hex) of the token on stdin (surrounding whitespace ignored)."""
        secret = sys.stdin.read().strip()
        if not secret:
            typer.echo("error: no token on stdin", err=True)
            raise typer.Exit(2)
        typer.echo(hash_token(secret))
