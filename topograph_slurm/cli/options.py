"""Click options and helpers shared by several commands, so their flags read the same."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import click

from topograph_slurm.config import (
    RewriteRule,
    Settings,
    choices_metavar,
    load_settings,
    metrics_path,
    output_path,
    override,
    state_dir,
)
from topograph_slurm.errors import Exit
from topograph_slurm.model.numbers import decimal

F = TypeVar("F", bound=Callable[..., Any])


def warn(message: str) -> None:
    """One warning line on stderr (``--ufm-insecure``, plain-http UFM, a finding), control
    characters escaped as in the error line."""
    from topograph_slurm.render.environment import printable

    click.echo(f"topograph-slurm: warning: {printable(message)}", err=True)


def tls_options(stem: str, name: str) -> list[Callable[[F], F]]:
    """An appliance's ``--<stem>-ca-bundle`` and ``--<stem>-insecure`` (UFM, NetQ, NMX)."""
    return [
        click.option(
            f"--{stem}-ca-bundle", metavar="FILE", help=f"CA bundle to verify {name}'s certificate."
        ),
        click.option(
            f"--{stem}-insecure",
            is_flag=True,
            default=None,
            help=f"Do not verify {name}'s certificate (warns; for lab use).",
        ),
    ]


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
        *tls_options("ufm", "UFM"),
        click.option(
            "--ufm-timeout",
            type=FINITE_FLOAT,
            metavar="S",
            help="UFM timeout per socket operation: connect, handshake, each read (default 30).",
        ),
        click.option(
            "--ufm-deadline",
            type=FINITE_FLOAT,
            metavar="S",
            help="Seconds for the whole UFM fetch, all endpoints and retries included; a server "
            "that trickles is cut off here (exit 4; default 300).",
        ),
        click.option(
            "--ufm-max-response-mib",
            type=ASCII_INT,
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


def parse_rewrites(values: Sequence[str]) -> list[RewriteRule]:
    """``--rewrite PATTERN=>REPL`` values as rules (the pattern is checked with the settings)."""
    rules = []
    for value in values:
        pattern, sep, replacement = value.partition("=>")
        if not sep:
            raise click.BadParameter(f"expected PATTERN=>REPLACEMENT, got {value!r}")
        rules.append(RewriteRule(pattern, replacement))
    return rules


_FABRIC_OPTIONS = [
    click.option(
        "--ibnetdiscover",
        metavar="FILE",
        help="Saved ibnetdiscover output ('-' = stdin). Without a source, the live "
        "ibnetdiscover runs.",
    ),
    click.option(
        "--sim",
        metavar="SPEC",
        help="Simulated fabric, e.g. 'nodes=64,rails=8,su=32,tiers=2' or 'demo' "
        "(at most 65,536 nodes, su at most 127); add 'fabric=roce' for the same cabling as an "
        "Ethernet/RoCE fabric from NetQ.",
    ),
    click.option(
        "--netq",
        metavar="URL",
        help="Ask NVIDIA NetQ's API for an Ethernet/RoCE fabric (https://host); the UFM "
        "timeout, deadline and size-cap flags apply to it too.",
    ),
    click.option(
        "--netq-credentials",
        metavar="FILE",
        help="NetQ username/password file, mode 0600; else NETQ_USERNAME/NETQ_PASSWORD from "
        "the environment (never argv).",
    ),
    *tls_options("netq", "NetQ"),
    click.option(
        "--node-name-map", metavar="FILE", help='OpenSM node-name map: 0x<guid> "<name>" per line.'
    ),
    click.option(
        "--rewrite",
        "rewrites",
        metavar="PATTERN=>REPL",
        multiple=True,
        help="Regex rewrite of HCA descriptions before the host is taken (repeatable; 1 s "
        "per description, a pattern that backtracks catastrophically is an error).",
    ),
    click.option(
        "--hcas",
        metavar="REGEX",
        help="HCA names that are compute rails, e.g. 'mlx5_[0-7]'; others (storage HCAs) are "
        "excluded with a reason. Default: all.",
    ),
    click.option(
        "--slurm-nodes",
        metavar="HOSTLIST|scontrol|auto|all",
        help="Only these hosts become nodes; 'scontrol' asks Slurm (an error when it cannot "
        "answer); 'all' takes every host; default auto: Slurm's nodes when scontrol answers, "
        "else every host (the report says which).",
    ),
    click.option(
        "--snapshot",
        metavar="DIR",
        help="Build from a `collect` snapshot: its UFM answers or ibnetdiscover output, and the "
        "NVLink domains of its nvidia-smi outputs.",
    ),
    click.option(
        "--block-source",
        metavar=choices_metavar("block_source"),
        help="Blocks from NVLink domains (snapshot), IB scalable units, or auto (default: NVLink "
        "when a snapshot's GPUs name a multi-node NVLink domain, else the IB units).",
    ),
    click.option(
        "--nmx",
        metavar="URL",
        help="Ask NVIDIA NMX (NVLink management in NetQ, https://host) for the NVLink racks "
        "and partitions, read only: a node's block is its partition in its rack; with another "
        "fabric source for the tree. The UFM timeout, deadline and size-cap flags apply.",
    ),
    click.option(
        "--nmx-credentials",
        metavar="FILE",
        help="NMX username/password file, mode 0600; else NMX_USERNAME/NMX_PASSWORD from the "
        "environment (never argv).",
    ),
    *tls_options("nmx", "NMX"),
]


def naming_options(func: F) -> F:
    """How HCAs become nodes (node-name map, rewrites, HCA selection, Slurm's node list), for
    commands that take their fabric sources as arguments rather than flags."""
    for option in reversed(_FABRIC_OPTIONS[6:10]):
        func = option(func)
    return func


def fabric_options(func: F) -> F:
    """The fabric source flags every command that reads a fabric shares: a saved or live
    ibnetdiscover, a simulation, UFM, NetQ, a snapshot, and how HCAs become nodes."""
    for option in reversed(_FABRIC_OPTIONS[2:]):
        func = option(func)
    func = ufm_options("Ask NVIDIA UFM's REST API for the fabric (https://host).")(func)
    for option in reversed(_FABRIC_OPTIONS[:2]):
        func = option(func)
    return func


def config_settings(ctx: click.Context) -> Settings:
    """The config file's settings, read once per command run (a command may need them for
    its templates before its flags' settings, and again for a picture)."""
    obj = ctx.ensure_object(dict)
    if "settings" not in obj:
        obj["settings"] = load_settings(obj.get("config_file"))
    settings: Settings = obj["settings"]
    return settings


def flag_settings(ctx: click.Context, rewrites: Sequence[str], **flags: Any) -> Settings:
    """The config file's settings with the command's flags on top, checked (``override``)."""
    return override(config_settings(ctx), rewrites=parse_rewrites(rewrites), **flags)


class _Bounds:
    """What click's ranges say of their bounds in ``--help``: nothing when there is none
    (click's own says ``[x<=None]``), else click's words (``x>=1``, ``1<=x<=8``)."""

    min: Any
    max: Any

    def _describe_range(self) -> str:
        if self.min is None and self.max is None:
            return ""
        return super()._describe_range()  # type: ignore[misc, no-any-return]


class FiniteFloatRange(_Bounds, click.FloatRange):
    """click's FloatRange for plain ASCII decimals only: ``nan`` (it compares false with every
    bound, so the range alone lets it through, and every threshold it reaches then judges
    nothing), ``inf``, ``1_0`` and non-ASCII digits, which ``float`` reads, are refused."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, str) and decimal(value) is None:
            self.fail(f"{value!r} is not a plain decimal number", param, ctx)
        converted = super().convert(value, param, ctx)
        if math.isnan(converted):
            self.fail(f"{value!r} is not a number", param, ctx)
        return converted


class AsciiIntRange(_Bounds, click.IntRange):
    """click's IntRange (or plain int, without bounds) for ASCII digits only: ``int`` also
    reads ``１６`` (full-width), ``٤`` and ``1_0``, which no one means as a size."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        digits = value.strip().removeprefix("-") if isinstance(value, str) else "0"
        if not (digits.isascii() and digits.isdigit()):
            self.fail(f"{value!r} is not a whole number in ASCII digits", param, ctx)
        return super().convert(value, param, ctx)


#: An integer option: ASCII digits, no bounds.
ASCII_INT = AsciiIntRange()
#: A decimal option: ASCII digits, finite, no bounds (the setting's own rule bounds it).
FINITE_FLOAT = FiniteFloatRange()


#: ``--record-dir``: where the job records live (config ``record_dir``), for ``record`` and
#: ``health --job-records``.
RECORD_DIR = click.option(
    "--record-dir",
    metavar="DIR",
    help="Where job records live (default: config record_dir, else "
    "/var/lib/topograph-slurm/records); one directory the controller and the nodes share.",
)
#: ``--node``: the node a record hook runs on.
NODE = click.option(
    "--node",
    metavar="NAME",
    help="This node's Slurm name (default: $SLURMD_NODENAME, else the short host name).",
)


if TYPE_CHECKING:  # click 8.1/8.2 (Debian trixie's, forky's: the hooks' nodes) is not generic
    _StrParam = click.ParamType[str]
else:
    _StrParam = click.ParamType


class _PathRule(_StrParam):
    """A file path checked by one of the config's path rules, as generate's own flags are."""

    def __init__(self, name: str, rule: Callable[[str], None]) -> None:
        self.name, self._rule = name, rule

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        try:
            self._rule(str(value))
        except ValueError as err:
            self.fail(str(err), param, ctx)
        return str(value)


#: ``-o``/``--out FILE``: a file, never a directory's name (``DIR/``, ``/``).
OUTPUT_FILE = _PathRule("file", output_path)
#: ``--metrics FILE.prom``: what node_exporter's textfile collector reads.
METRICS_FILE = _PathRule("file.prom", metrics_path)


def write_output(
    ctx: click.Context, path: str, text: str, *, check: bool = False, diff: bool = False
) -> int:
    """Write one output file through the guarded writer (``output.write_output``: atomic,
    only on change, locked in the state directory); print the diff for --check/--diff, log
    what happened; the exit code (1 when --check finds *path* out of date). ``-`` is stdout,
    as for generate's -o."""
    from topograph_slurm.output import write_output as write

    if path == "-":
        if check or diff:
            raise click.UsageError("--check and --diff need a file, not stdout")
        click.echo(text, nl=False)
        return Exit.OK

    settings = config_settings(ctx)
    outcome = write(
        path,
        text,
        state_dir=state_dir(settings),
        check=check,
        show_diff=diff,
        lock_timeout=settings.lock_timeout,
    )
    if (check or diff) and outcome.diff:
        click.echo(outcome.diff, nl=False)
    if check:
        log(ctx, f"{path}: {'out of date' if outcome.changed else 'up to date'}")
        return Exit.DIFFERS if outcome.changed else Exit.OK
    log(ctx, f"{path}: {'written' if outcome.written else 'unchanged'}")
    return Exit.OK
