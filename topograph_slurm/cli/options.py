"""The command surface: every shared concept's option declared once, in a named group.

A command is declared with :func:`command` (its own options first in ``--help``, then each
group under its heading: Job, Parallel layout, Output, Slurm, Fabric source, Host naming,
Hook) and takes a shared concept only from a group here, so one idea has one flag
everywhere (docs/cli.md has the table; tests/unit/test_surface.py pins the whole surface).
A renamed flag keeps working for one release through the command's ``aliases``, with a
one-line deprecation warning.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping, Sequence
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
)
from topograph_slurm.model.numbers import decimal
from topograph_slurm.model.placement import LINE_KINDS, MEGATRON_ORDER

F = TypeVar("F", bound=Callable[..., Any])


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


def _ufm_list(url_help: str) -> list[Callable[[F], F]]:
    """``--ufm URL`` and its credentials/TLS/timeout flags; secrets never come from argv."""
    return [
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


def ufm_options(url_help: str) -> Callable[[F], F]:
    """``--ufm URL`` and its flags, as a group of their own (``collect``)."""
    return grouped(FABRIC_HEADING, _ufm_list(url_help))


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


#: ``--slurm-state DIR``: Slurm read from a saved state instead of slurmctld (config
#: ``slurm_state``), on every command that asks scontrol.
SLURM_STATE = click.option(
    "--slurm-state",
    metavar="DIR",
    help="Read Slurm from a saved state (`topograph-slurm slurm save DIR`) instead of asking "
    "slurmctld; a change to Slurm is refused (exit 6). Layout: docs/slurm-state.md.",
)


def naming_options(func: F) -> F:
    """How HCAs become nodes (node-name map, rewrites, HCA selection, Slurm's node list)."""
    return grouped(NAMING_HEADING, _FABRIC_OPTIONS[6:10])(func)


def fabric_options(func: F) -> F:
    """The fabric source flags every command that reads a fabric shares: a saved or live
    ibnetdiscover, a simulation, UFM, NetQ, a snapshot, and how HCAs become nodes; and
    --slurm-state (each of them asks scontrol: --slurm-nodes auto at least)."""
    func = grouped(SLURM_HEADING, [SLURM_STATE])(naming_options(func))
    sources = [
        *_FABRIC_OPTIONS[:2],
        *_ufm_list("Ask NVIDIA UFM's REST API for the fabric (https://host)."),
        *_FABRIC_OPTIONS[2:6],
        *_FABRIC_OPTIONS[10:],
    ]
    return grouped(FABRIC_HEADING, sources)(func)


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


# -- the surface: commands, help headings, renamed flags ------------------------------------

#: Help headings of the shared groups, in the order ``--help`` shows them after the
#: command's own options.
JOB_HEADING = "Job"
LAYOUT_HEADING = "Parallel layout"
OUTPUT_HEADING = "Output"
SLURM_HEADING = "Slurm"
FABRIC_HEADING = "Fabric source"
NAMING_HEADING = "Host naming"
HOOK_HEADING = "Hook"
HEADINGS = (
    JOB_HEADING,
    LAYOUT_HEADING,
    OUTPUT_HEADING,
    SLURM_HEADING,
    FABRIC_HEADING,
    NAMING_HEADING,
    HOOK_HEADING,
)


def grouped(heading: str, options: Sequence[Callable[[F], F]]) -> Callable[[F], F]:
    """Apply *options* (in the order given, as help lists them) and file them under
    *heading* in ``--help``."""

    def apply(func: F) -> F:
        for option in reversed(options):
            func = option(func)
            params = getattr(func, "__click_params__", [])
            if params and not hasattr(params[-1], "heading"):
                params[-1].heading = heading
        return func

    return apply


def renamed(args: Sequence[str], aliases: Mapping[str, str]) -> list[str]:
    """*args* with each old spelling in *aliases* replaced by its new one (``--out x`` and
    ``--out=x``; a new spelling of ``""`` makes the value positional: ``--job 5`` becomes
    ``5``), a warning line per old spelling used; nothing after ``--`` is touched."""
    from topograph_slurm.cli.messages import warn

    out: list[str] = []
    rest = iter(args)
    for arg in rest:
        if arg == "--":
            out.append(arg)
            out.extend(rest)
            break
        old, sep, value = arg.partition("=")
        new = aliases.get(old)
        if new is None or not old.startswith("-"):
            out.append(arg)
            continue
        where = "a JOBID argument" if new == "" else new
        warn(f"{old} is now {where}; the old spelling goes in the next release")
        if new:
            out.append(f"{new}={value}" if sep else new)
        elif sep:
            out.append(value)
    return out


_HELP_RECORD = "-h, --help"


class Command(click.Command):
    """A command whose ``--help`` shows its own options first and the shared groups under
    their headings, and which still takes its renamed flags (``aliases``: old -> new)."""

    def __init__(self, *args: Any, aliases: Mapping[str, str] | None = None, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.aliases = dict(aliases or {})

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        return super().parse_args(ctx, renamed(args, self.aliases))

    def format_options(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        own: list[tuple[str, str]] = []
        sections: dict[str, list[tuple[str, str]]] = {}
        for param in self.get_params(ctx):
            # click 8.5 lists arguments too; ours are named in the usage line and the text
            record = None if isinstance(param, click.Argument) else param.get_help_record(ctx)
            if record is None:
                continue
            heading = getattr(param, "heading", None)
            (sections.setdefault(heading, []) if heading else own).append(record)
        own.sort(key=lambda record: record[0] == _HELP_RECORD)  # --help last of its own
        for heading, records in [("Options", own), *((h, sections.get(h, [])) for h in HEADINGS)]:
            if records:
                with formatter.section(heading):
                    formatter.write_dl(records)


class Group(click.Group):
    """A command group (``record``, ``hooks``, ``spank``) whose commands are :class:`Command`."""

    command_class = Command


def command(name: str | None = None, **attrs: Any) -> Callable[[Callable[..., Any]], Command]:
    """``click.command`` for this surface (:class:`Command`; ``aliases=`` its renamed flags)."""
    made: Callable[[Callable[..., Any]], Command] = click.command(name, cls=Command, **attrs)
    return made


# -- Job: which job, where its ranks run ---------------------------------------------------

#: The job, positional wherever a job is read; inside a job it defaults to $SLURM_JOB_ID
#: (:func:`job_or_environment`).
JOB_ID = click.argument("job_id", metavar="[JOBID]", required=False)


def job_or_environment(job_id: str | None, *given: object) -> str | None:
    """*job_id*, else ``$SLURM_JOB_ID`` when the command runs inside a job and no other
    description of the nodes was *given* (``--nodes``, ``--hostfile``, a pools file)."""
    if job_id or any(given):
        return job_id
    return os.environ.get("SLURM_JOB_ID") or None


#: The topology file Slurm runs: places nodes without a fabric source.
TOPOLOGY = click.option(
    "--topology",
    metavar="FILE",
    help="The topology.conf or topology.yaml Slurm runs (places only; a fabric source adds "
    "link rates and health).",
)


def nodes_option(what: str, metavar: str = "HOSTLIST") -> Callable[[F], F]:
    """``--nodes HOSTLIST``: the nodes the command is about, one meaning everywhere ("these
    nodes"); *what* says which for this command (the job's, those to visit, those a capture
    stands for)."""
    return click.option("--nodes", "hostlist", metavar=metavar, help=what)


def these_nodes(what: str, metavar: str = "HOSTLIST") -> Callable[[F], F]:
    """:func:`nodes_option` in the Job group (collect, bench, gres, doctor)."""
    return grouped(JOB_HEADING, [nodes_option(what, metavar)])


#: ``--gpus-per-node N``: ranks (GPUs) per node.
GPUS_PER_NODE = click.option(
    "--gpus-per-node",
    type=ASCII_INT,
    metavar="N",
    help="GPUs (ranks) per node; default: measured in the snapshot, or the simulation's.",
)

#: Where a job's ranks run (explain, order, draw, experts, pools).
NODES = [
    nodes_option("The job's nodes."),
    click.option(
        "--hostfile",
        metavar="FILE",
        help="Where the ranks run: a SLURM_HOSTFILE (one line per task: rank r on line r's "
        "node) or a node list (one node per line, ranks laid GPUs-per-node at a time: plain, "
        "torchrun, MPI with slots=N, `order` output); default: the --nodes list in name order.",
    ),
    click.option(
        "--hostfile-lines",
        type=click.Choice(LINE_KINDS),
        default="auto",
        show_default=True,
        help="How --hostfile's lines are read: task, node, or auto (a file repeating a node "
        "without slots= is one line per task); explain says which it read.",
    ),
    GPUS_PER_NODE,
    TOPOLOGY,
]
#: The keys :data:`NODES` gives a command (its ``--topology`` is read apart).
NODE_KEYS = ("hostlist", "hostfile", "hostfile_lines", "gpus_per_node")


def node_options(func: F) -> F:
    """The Job group: where the ranks run and the topology file, then the fabric source."""
    return grouped(JOB_HEADING, NODES)(fabric_options(func))


#: Megatron-Core's parallel layout of a training job.
LAYOUT = [
    click.option(
        "--tp",
        type=ASCII_INT,
        metavar="N",
        help="Tensor-parallel size (default: the job's --tp-size record, else 1).",
    ),
    click.option(
        "--pp",
        type=ASCII_INT,
        metavar="N",
        help="Pipeline-parallel size (default: the job's --pp-size record, else 1).",
    ),
    click.option(
        "--cp",
        type=ASCII_INT,
        metavar="N",
        default=1,
        show_default=True,
        help="Context-parallel size.",
    ),
    click.option(
        "--ep",
        type=ASCII_INT,
        metavar="N",
        default=1,
        show_default=True,
        help="Expert-parallel size: EP groups come from Megatron-Core's expert grid "
        "(expert TP x EP x expert DP x PP), not from the dense one.",
    ),
    click.option(
        "--etp",
        type=ASCII_INT,
        metavar="N",
        help="Expert tensor-parallel size (Megatron-Core's --expert-tensor-parallel-size; "
        "default: --tp).",
    ),
    click.option(
        "--order",
        "rank_order",
        metavar="KINDS",
        default=MEGATRON_ORDER,
        show_default=True,
        help="The launcher's rank order, fastest-varying kind first (Megatron-Core's "
        "--rank-order string); kinds left out are appended with size 1. DP is what tp x cp x "
        "pp leave, expert DP what expert TP x EP x pp leave.",
    ),
]
#: The keys :data:`LAYOUT` gives a command.
LAYOUT_KEYS = ("tp", "pp", "cp", "ep", "etp", "rank_order")


def job_options(func: F) -> F:
    """The Job and Parallel layout groups, then the fabric source (explain, order, draw)."""
    return grouped(LAYOUT_HEADING, LAYOUT)(node_options(func))


#: ``--topo-matrix FILE``: one node's ``nvidia-smi topo -m``; ``-`` reads stdin everywhere.
TOPO_MATRIX = click.option(
    "--topo-matrix",
    metavar="FILE",
    help="One node's `nvidia-smi topo -m` (NVIDIA) or `rocm-smi --showtopo` (AMD) capture "
    "('-' = stdin), shared by every node it "
    "stands for (default: each node's own from --snapshot).",
)


#: ``--bench FILE|DIR``: the bench record ``bench --out-dir DIR`` writes (DIR/bench.json), read
#: by every command that weighs measured links (pools, health, record start).
BENCH = click.option(
    "--bench",
    metavar="FILE|DIR",
    help="A bench record (bench.json, or the directory or snapshot holding one): its slow "
    "nodes, slow links and level medians count too (default: the --snapshot's own record).",
)


# -- Output: where a result goes, in which form --------------------------------------------

_OUTPUT = {
    "output": click.option(
        "-o",
        "--output",
        type=OUTPUT_FILE,
        metavar="FILE",
        help="Write the result to FILE (atomic, only on change) instead of stdout.",
    ),
    "out_dir": click.option(
        "--out-dir",
        metavar="DIR",
        help="Write the result's files into DIR (atomic, only on change).",
    ),
    "json": click.option(
        "--json",
        "as_json",
        is_flag=True,
        help="JSON instead of text (a versioned schema: docs/json.md).",
    ),
    "check": click.option(
        "--check",
        is_flag=True,
        help="Write nothing; exit 1 with a diff when what is on disk is out of date.",
    ),
    "diff": click.option("--diff", is_flag=True, help="Write, and show the change as a diff."),
    "metrics": click.option(
        "--metrics",
        "metrics_file",
        type=METRICS_FILE,
        metavar="FILE.prom",
        help="Also write the run's figures as Prometheus text to FILE.prom (atomic, only on "
        "change; node_exporter's textfile collector reads *.prom only).",
    ),
    "templates": click.option(
        "--templates",
        metavar="DIR",
        help="Directory whose templates override the built-in ones (config: templates).",
    ),
}


def output_options(*kinds: str) -> Callable[[F], F]:
    """The Output group, with the given *kinds* of ``output``, ``out_dir``, ``json``,
    ``check``, ``diff``, ``metrics``, ``templates`` (in that order in help)."""
    unknown = set(kinds) - set(_OUTPUT)
    if unknown:
        raise ValueError(f"no output option {sorted(unknown)}")
    return grouped(OUTPUT_HEADING, [option for kind, option in _OUTPUT.items() if kind in kinds])


# -- Slurm: the release and the controller the command is for -----------------------------

#: ``--slurm-version X.Y|auto``: the Slurm release whose rules apply (block rules, the
#: topology file's form).
SLURM_VERSION = grouped(
    SLURM_HEADING,
    [
        click.option(
            "--slurm-version",
            metavar="X.Y|auto",
            help="Target Slurm release, or auto (default): `scontrol --version`, else `sinfo "
            "--version`, else 24.11 (the report says which); decides block rules.",
        )
    ],
)
#: ``--apply``: run the ``scontrol update`` lines a report lists; without it they are listed
#: only (the dry run).
APPLY = click.option(
    "--apply",
    is_flag=True,
    help="Run the scontrol update lines the report lists, only where Slurm's value differs "
    "(exit 10 when Slurm refuses one; the others still run). Without it: a dry run that "
    "lists them.",
)
#: ``--feature-prefix``: the node features this tool owns (health's, pools').
FEATURE_PREFIX = click.option(
    "--feature-prefix",
    "health_feature_prefix",
    metavar="PREFIX",
    help="Prefix of the node features health and pools set (default topo_; config "
    "health_feature_prefix); a feature without it is an admin's and is never changed.",
)


# -- Hook: a record hook's own job, node and record root -----------------------------------

#: ``--record-dir``: where the job records live (config ``record_dir``).
RECORD_DIR = click.option(
    "--record-dir",
    metavar="DIR",
    help="Where job records live (default: config record_dir, else "
    "/var/lib/topograph-slurm/records); one directory the controller and the nodes share.",
)
#: ``--this-node``: the node a record hook runs on.
THIS_NODE = click.option(
    "--this-node",
    "node",
    metavar="NAME",
    help="This node's Slurm name (default: $SLURMD_NODENAME, else the short host name).",
)


def split_flags(
    ctx: click.Context,
    flags: dict[str, Any],
    keys: tuple[str, ...] = (*NODE_KEYS, *LAYOUT_KEYS),
) -> tuple[Settings, str | None, dict[str, Any]]:
    """The settings the fabric flags make, the --topology file, and the job flags (*keys*)."""
    job = {key: flags.pop(key) for key in keys}
    topology = flags.pop("topology")
    rewrites = flags.pop("rewrites")
    settings = flag_settings(ctx, rewrites, **flags)
    return settings, topology, job
