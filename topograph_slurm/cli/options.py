"""Click options and helpers shared by several commands, so their flags read the same."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

F = TypeVar("F", bound=Callable[..., Any])


def warn(message: str) -> None:
    """One warning line on stderr (``--ufm-insecure``, plain-http UFM, a finding), control
    characters escaped as in the error line."""
    from topograph_slurm.render.environment import printable

    click.echo(f"topograph-slurm: warning: {printable(message)}", err=True)


def ufm_options(url_help: str) -> Callable[[F], F]:
    """``--ufm URL`` and its credentials/TLS/timeout flags; secrets never come from argv."""
    options = [
        click.option("--ufm", metavar="URL", help=url_help),
        click.option(
            "--ufm-credentials",
            metavar="FILE",
            help="UFM credentials (username/password, token, or client_cert/client_key), mode "
            "0600; else UFM_USERNAME/UFM_PASSWORD, UFM_TOKEN or UFM_CLIENT_CERT/UFM_CLIENT_KEY "
            "from the environment (never argv).",
        ),
        click.option(
            "--ufm-ca-bundle", metavar="FILE", help="CA bundle to verify UFM's certificate."
        ),
        click.option(
            "--ufm-insecure",
            is_flag=True,
            default=None,
            help="Do not verify UFM's certificate (warns; for lab use).",
        ),
        click.option(
            "--ufm-timeout",
            type=float,
            metavar="S",
            help="UFM timeout per socket operation: connect, handshake, each read (default 30).",
        ),
        click.option(
            "--ufm-deadline",
            type=float,
            metavar="S",
            help="Seconds for the whole UFM fetch, all endpoints and retries included; a server "
            "that trickles is cut off here (exit 4; default 300).",
        ),
        click.option(
            "--ufm-max-response-mib",
            type=int,
            metavar="MIB",
            help="Largest UFM response body accepted, per endpoint (exit 4; default 512).",
        ),
    ]

    def apply(func: F) -> F:
        for option in reversed(options):
            func = option(func)
        return func

    return apply


def log(ctx: click.Context, message: str) -> None:
    """A progress line on stderr, unless ``-q``."""
    if not ctx.obj.get("quiet"):
        click.echo(message, err=True)
