"""A real Slurm cluster in Docker, for integration tests.

Why this exists: topology.conf/topology.yaml, job_submit.lua and cli_filter.lua only prove
themselves in a real slurmctld. This module starts one (Debian's Slurm 24.11 or 26.05) plus one
container per node on a private Docker network, renders the config from a small ``ClusterSpec``,
runs commands inside, and always removes what it created.

Typical use::

    image = ensure_image("24.11")
    spec = ClusterSpec.simple(16, topology_plugin="topology/block", topology_conf=BLOCKS)
    with Cluster(spec, image) as cluster:
        cluster.wait_idle()
        job = cluster.sbatch("--exclusive -N 4 --wrap 'sleep 600'")

    result = validate_topology("26.05", nodes, topology_conf=text)   # slurmctld only
    assert not result.problems, result.log_text
    blocks = result.topology.blocks

Everything the harness creates carries the label ``org.topograph-slurm.test-cluster``; a
crashed run's leftovers are removed by ``sweep_leftovers()`` (called before every start).
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import io
import os
import posixpath
import re
import shlex
import socket
import subprocess
import sys
import tarfile
import threading
import time
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, NamedTuple

import docker
import docker.errors
import yaml
from ClusterShell.NodeSet import NodeSet
from docker.models.containers import Container
from docker.models.networks import Network
from docker.types import Ulimit

HERE = Path(__file__).resolve().parent
#: The wheel ``ClusterSpec.tool`` installs when Cluster is given none (``tool_wheel=``).
WHEEL_ENV = "TOPOGRAPH_SLURM_WHEEL"
#: The tool as ``ClusterSpec.tool`` installs it: Dockerfile.tool's link to the venv's script.
TOOL_COMMAND = "/usr/local/bin/topograph-slurm"
LABEL = "org.topograph-slurm.test-cluster"
LABEL_OWNER = "org.topograph-slurm.owner"
LABEL_CREATED = "org.topograph-slurm.created"
IMAGE_ROLE_LABEL = "org.topograph-slurm.role"  # set by the Dockerfile
#: Objects older than this are leftovers whoever owns them (a CI run is capped at 90 minutes).
MAX_AGE_S = 6 * 3600
IMAGE_REPO = "topograph-slurm-test"
CONTROLLER = "slurmctld"
CONF_DIR = "/etc/slurm"
SLURMCTLD_LOG = "/var/log/slurm/slurmctld.log"
SLURMD_LOG = "/var/log/slurm/slurmd.log"
NOFILE = 8192  # well under the 20000 this host allows; keeps slurmd's close-all-fds loop short

#: Slurm version -> Debian suite shipping it.
VERSIONS: dict[str, str] = {"24.11": "trixie", "26.05": "forky"}


class HarnessError(RuntimeError):
    """The test cluster could not do what was asked; the message carries the daemon log.

    ``log`` holds the full slurmctld log when there was one (config-only validation returns it).
    """

    def __init__(self, message: str, log: str = "") -> None:
        super().__init__(message)
        self.log = log


# --------------------------------------------------------------------------------------------
# Cluster description and config rendering
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class NodeSpec:
    """One Slurm node. ``fake_gpu_devices`` defaults to ``gpus``; fewer makes the node INVALID."""

    name: str
    cpus: int = 4
    gpus: int = 0
    features: tuple[str, ...] = ()
    fake_gpu_devices: int | None = None

    @property
    def devices(self) -> int:
        return self.gpus if self.fake_gpu_devices is None else self.fake_gpu_devices


@dataclass(frozen=True)
class PartitionSpec:
    """A partition line; ``options`` is appended verbatim (e.g. ``Topology=nvl``)."""

    name: str
    nodes: str = "ALL"
    default: bool = False
    options: str = ""

    def line(self) -> str:
        parts = [f"PartitionName={self.name}", f"Nodes={self.nodes}", "MaxTime=INFINITE"]
        parts += ["State=UP", f"Default={'YES' if self.default else 'NO'}"]
        return " ".join(parts + ([self.options] if self.options else []))


DEFAULT_PARTITIONS = (PartitionSpec("debug", default=True),)


@dataclass
class ClusterSpec:
    """What to run: nodes (in slurm.conf order), partitions, topology and optional files.

    ``extra_files`` maps a file name relative to /etc/slurm to its content; it is copied to
    every container, like the named Lua and plugstack files.
    """

    nodes: list[NodeSpec]
    partitions: Sequence[PartitionSpec] = DEFAULT_PARTITIONS
    topology_plugin: str | None = None
    topology_conf: str | None = None
    topology_yaml: str | None = None
    slurm_conf_extra: str = ""
    job_submit_lua: str | None = None
    cli_filter_lua: str | None = None
    plugstack_conf: str | None = None
    extra_files: Mapping[str, str | bytes] = field(default_factory=dict)
    cluster_name: str = "tsc"
    #: Run slurmctld as a daemon (entrypoint.sh SLURMCTLD_DAEMON=1): a failed reconfigure then
    #: keeps the old config running, as under systemd, instead of killing slurmctld.
    slurmctld_daemon: bool = False
    #: Run every container from the image with the tool's wheel installed (Dockerfile.tool:
    #: a venv at /opt/topograph-slurm, ``/usr/local/bin/topograph-slurm``): Slurm's own hooks
    #: (PrologSlurmctld, Prolog, TaskProlog, Epilog) then run the tool as a site installs it.
    #: The wheel is Cluster's ``tool_wheel``, else the file named by $TOPOGRAPH_SLURM_WHEEL.
    tool: bool = False
    #: Directories mounted from one Docker volume each into every container: a file system
    #: the controller and all nodes share, as NFS does on a cluster (mode 1777, like /tmp).
    shared_dirs: Sequence[str] = ()

    @classmethod
    def simple(
        cls, count: int, prefix: str = "node", cpus: int = 4, gpus: int = 0, **kwargs: Any
    ) -> ClusterSpec:
        """``count`` identical nodes named ``<prefix>01..`` (zero-padded to two digits)."""
        width = max(2, len(str(count)))
        nodes = [NodeSpec(f"{prefix}{i:0{width}d}", cpus, gpus) for i in range(1, count + 1)]
        return cls(nodes=nodes, **kwargs)

    @property
    def node_names(self) -> list[str]:
        return [n.name for n in self.nodes]

    def render(self) -> dict[str, str | bytes]:
        """All files for /etc/slurm, by name."""
        files: dict[str, str | bytes] = {
            "slurm.conf": render_slurm_conf(self),
            "cgroup.conf": "CgroupPlugin=disabled\n",
        }
        gres = render_gres_conf(self.nodes)
        if gres:
            files["gres.conf"] = gres
        named = {
            "topology.conf": self.topology_conf,
            "topology.yaml": self.topology_yaml,
            "job_submit.lua": self.job_submit_lua,
            "cli_filter.lua": self.cli_filter_lua,
            "plugstack.conf": self.plugstack_conf,
        }
        files.update({k: v for k, v in named.items() if v is not None})
        files.update(self.extra_files)
        return files


def render_slurm_conf(spec: ClusterSpec) -> str:
    """slurm.conf for containers: no cgroups, no accounting, nodes may claim what they like."""
    lines = [
        f"ClusterName={spec.cluster_name}",
        f"SlurmctldHost={CONTROLLER}",
        "SlurmUser=root",
        "SlurmdUser=root",
        "AuthType=auth/munge",
        "CredType=cred/munge",
        "StateSaveLocation=/var/spool/slurmctld",
        "SlurmdSpoolDir=/var/spool/slurmd",
        f"SlurmctldLogFile={SLURMCTLD_LOG}",
        f"SlurmdLogFile={SLURMD_LOG}",
        "SlurmctldPidFile=/run/slurmctld.pid",
        "SlurmdPidFile=/run/slurmd.pid",
        "ProctrackType=proctrack/linuxproc",
        "TaskPlugin=task/none",
        "JobAcctGatherType=jobacct_gather/none",
        "AccountingStorageType=accounting_storage/none",
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_Core",
        "SlurmdParameters=config_overrides",
        "ReturnToService=2",
        "MailProg=/bin/true",
        "SchedulerParameters=bf_interval=2,sched_min_interval=100000",
        "SlurmctldTimeout=30",
        "SlurmdTimeout=60",
        "MessageTimeout=20",
        "InactiveLimit=0",
        "KillWait=2",
        "MinJobAge=600",
    ]
    if spec.topology_plugin:
        lines.append(f"TopologyPlugin={spec.topology_plugin}")
    if spec.job_submit_lua is not None:
        lines.append("JobSubmitPlugins=lua")
    if spec.cli_filter_lua is not None:
        lines.append("CliFilterPlugins=cli_filter/lua")
    if any(n.gpus for n in spec.nodes):
        lines.append("GresTypes=gpu")
    if spec.slurm_conf_extra.strip():
        lines.append(spec.slurm_conf_extra.strip())
    lines += [_node_line(n) for n in spec.nodes]
    lines += [p.line() for p in spec.partitions]
    return "\n".join(lines) + "\n"


def _node_line(node: NodeSpec) -> str:
    line = f"NodeName={node.name} CPUs={node.cpus} RealMemory=1000 State=UNKNOWN"
    if node.gpus:
        line += f" Gres=gpu:{node.gpus}"
    if node.features:
        line += " Features=" + ",".join(node.features)
    return line


def render_gres_conf(nodes: Iterable[NodeSpec]) -> str:
    """gres.conf: GPUs are the fake char devices the entrypoint creates (/dev/nvidiaN)."""
    lines = [
        f"NodeName={n.name} Name=gpu File=/dev/nvidia[0-{n.gpus - 1}]"
        if n.gpus > 1
        else f"NodeName={n.name} Name=gpu File=/dev/nvidia0"
        for n in nodes
        if n.gpus
    ]
    return "\n".join(lines) + "\n" if lines else ""


# --------------------------------------------------------------------------------------------
# Images
# --------------------------------------------------------------------------------------------


def docker_client() -> docker.DockerClient:
    """A client from the environment, or a HarnessError saying why there is none."""
    try:
        client = docker.from_env(timeout=120)
        client.ping()
    except Exception as exc:  # the SDK raises several unrelated types here
        raise HarnessError(f"cannot reach the Docker daemon: {exc}") from exc
    return client


def image_tag(version: str) -> str:
    """Tag of the test image for ``version``: content hash of Dockerfile, entrypoint and base.

    A changed Dockerfile or entrypoint gives a new tag, so stale images are never reused and
    unchanged ones are never rebuilt.
    """
    digest = hashlib.sha256(base_image(version).encode())
    for name in ("Dockerfile", "entrypoint.sh"):
        digest.update((HERE / name).read_bytes())
    return f"{IMAGE_REPO}:{version}-{digest.hexdigest()[:12]}"


def base_image(version: str) -> str:
    return f"debian:{_suite(version)}-slim"


def _suite(version: str) -> str:
    if version not in VERSIONS:
        raise HarnessError(f"unknown Slurm version {version!r}; known: {', '.join(VERSIONS)}")
    return VERSIONS[version]


def ensure_base_image(version: str, client: docker.DockerClient | None = None) -> str:
    """Make sure ``debian:<suite>-slim`` exists: present, pulled, or built by debootstrap."""
    client = client or docker_client()
    tag = base_image(version)
    if _has_image(client, tag):
        return tag
    with contextlib.suppress(docker.errors.DockerException):
        client.images.pull(tag)
        return tag
    script = HERE / "build-base-image.sh"
    proc = subprocess.run(  # the script is the one documented way; users run it by hand too
        ["bash", str(script), _suite(version)],
        env={**os.environ, "NO_PULL": "1"},
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0 or not _has_image(client, tag):
        raise HarnessError(f"building base image {tag} failed:\n{proc.stdout}{proc.stderr}")
    return tag


def ensure_image(version: str, client: docker.DockerClient | None = None) -> str:
    """Build (or reuse) the Slurm image for ``version``; returns its tag."""
    client = client or docker_client()
    tag = image_tag(version)
    if not _has_image(client, tag):
        ensure_base_image(version, client)
        _build(client, version, tag)
    check_image_version(client, tag, version)
    return tag


def _build(client: docker.DockerClient, version: str, tag: str) -> None:
    labels = {LABEL + ".image": "1", "org.topograph-slurm.slurm-version": version}
    try:
        client.images.build(
            path=str(HERE),
            dockerfile="Dockerfile",
            buildargs={"BASE": base_image(version)},
            tag=tag,
            labels=labels,
            rm=True,
            forcerm=True,
        )
    except docker.errors.BuildError as exc:
        log = "".join(str(chunk.get("stream", chunk.get("error", ""))) for chunk in exc.build_log)
        raise HarnessError(f"docker build of {tag} failed: {exc.msg}\n{log[-4000:]}") from exc


def ensure_tool_image(image: str, wheel: Path, client: docker.DockerClient | None = None) -> str:
    """``image`` with ``wheel`` installed by Dockerfile.tool; returns its tag.

    The tag names the base image and the wheel's digest, so one wheel is installed once per
    image and reused until the wheel changes (the product stage builds it reproducibly).
    """
    client = client or docker_client()
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()[:12]
    tag = f"{image}-tool-{digest}"
    if _has_image(client, tag):
        return tag
    context = _tar(
        {"Dockerfile.tool": (HERE / "Dockerfile.tool").read_bytes(), wheel.name: wheel.read_bytes()}
    )
    labels = {LABEL + ".image": "1", LABEL + ".tool": "1", LABEL_CREATED: str(int(time.time()))}
    try:
        client.images.build(
            fileobj=io.BytesIO(context),
            custom_context=True,
            dockerfile="Dockerfile.tool",
            buildargs={"BASE": image, "WHEEL": wheel.name},
            tag=tag,
            labels=labels,
            rm=True,
            forcerm=True,
        )
    except docker.errors.BuildError as exc:
        log = "".join(str(chunk.get("stream", chunk.get("error", ""))) for chunk in exc.build_log)
        raise HarnessError(
            f"installing {wheel.name} into {image} failed: {exc.msg}\n{log[-4000:]}"
        ) from exc
    return tag


def check_image_version(client: docker.DockerClient, image: str, version: str) -> str:
    """Run ``slurmctld -V`` in ``image``; raise unless it is Slurm ``version``.

    The container is created, started and removed step by step (``containers.run`` leaves a
    container behind when the start itself fails, as it does in an image without Slurm).
    """
    labels = {LABEL: "version-check", LABEL_OWNER: _owner(), LABEL_CREATED: str(int(time.time()))}
    container = None
    try:
        container = client.containers.create(
            image, ["slurmctld", "-V"], entrypoint=[], network_disabled=True, labels=labels
        )
        container.start()
        status = container.wait(timeout=60).get("StatusCode", -1)
        text = bytes(container.logs()).decode(errors="replace").strip()
    except docker.errors.DockerException as exc:
        raise HarnessError(f"image {image} cannot run slurmctld -V: {exc}") from exc
    finally:
        if container is not None:
            _quietly(client.api.remove_container, container.id, force=True)
    if status != 0 or not re.search(rf"\b{re.escape(version)}\.\d+", text):
        raise HarnessError(f"image {image} runs {text!r} (exit {status}), not Slurm {version}")
    return text


def _has_image(client: docker.DockerClient, tag: str) -> bool:
    try:
        client.images.get(tag)
    except docker.errors.ImageNotFound:
        return False
    return True


# --------------------------------------------------------------------------------------------
# Results and parsing
# --------------------------------------------------------------------------------------------


class ExecResult(NamedTuple):
    """What a command inside a container returned; unpacks as ``rc, stdout, stderr``."""

    rc: int
    stdout: str
    stderr: str

    def check(self, what: str = "command") -> ExecResult:
        """Raise HarnessError unless rc is 0 (for setup steps where failure is not the test)."""
        if self.rc != 0:
            raise HarnessError(f"{what} failed (rc={self.rc}):\n{self.stdout}{self.stderr}")
        return self


@dataclass(frozen=True)
class JobInfo:
    job_id: str
    state: str
    reason: str
    nodes: list[str]


@dataclass(frozen=True)
class TopoSwitch:
    """One ``SwitchName=`` line of ``scontrol show topology``."""

    name: str
    level: int
    link_speed: int
    nodes: list[str]
    switches: list[str]


@dataclass(frozen=True)
class TopoBlock:
    """One ``BlockName=`` or ``AggregatedBlock=`` line (24.11 and 26.05 print both).

    ``size`` is Slurm's ``BlockSize``: the configured size of that level, which on 25.05+ may
    exceed ``len(nodes)`` for a block smaller than the base size.
    """

    name: str
    index: int
    nodes: list[str]
    size: int
    aggregated: bool = False


@dataclass(frozen=True)
class Topology:
    """``scontrol show topology`` parsed back; ``other`` keeps lines no parser knew."""

    switches: list[TopoSwitch]
    blocks: list[TopoBlock]
    other: list[dict[str, str]]

    def switch(self, name: str) -> TopoSwitch:
        return next(s for s in self.switches if s.name == name)

    def block(self, name: str) -> TopoBlock:
        return next(b for b in self.blocks if b.name == name)

    @property
    def base_blocks(self) -> list[TopoBlock]:
        """The blocks of topology.conf / topology.yaml, without the aggregates Slurm adds."""
        return [b for b in self.blocks if not b.aggregated]

    def leaf_nodes(self) -> dict[str, list[str]]:
        """Leaf switch -> its nodes (compare with the model's leaves)."""
        return {s.name: s.nodes for s in self.leaves}

    def block_nodes(self) -> dict[str, list[str]]:
        """Base block -> its nodes, in Slurm's block order."""
        return {b.name: b.nodes for b in self.base_blocks}

    def parent_of(self) -> dict[str, str]:
        """Switch -> the switch that lists it under ``Switches=`` (top switches are absent)."""
        return {child: s.name for s in self.switches for child in s.switches}

    def nodes_in_several(self) -> set[str]:
        """Nodes under more than one leaf, or in more than one base block (must be empty)."""
        twice: set[str] = set()
        for groups in (self.leaf_nodes(), self.block_nodes()):
            seen: set[str] = set()
            for nodes in groups.values():
                twice.update(n for n in nodes if n in seen)
                seen.update(nodes)
        return twice

    @property
    def leaves(self) -> list[TopoSwitch]:
        return [s for s in self.switches if s.level == 0]


_PAIR = re.compile(r"(\w+)=(\S*)")


def parse_kv_line(line: str) -> dict[str, str]:
    """``Key=Value Key2=Value2`` -> dict; values never contain spaces in topology output."""
    return {m.group(1): m.group(2) for m in _PAIR.finditer(line)}


def expand(hostlist: str) -> list[str]:
    """Expand a Slurm hostlist; ``(null)`` and empty mean none."""
    if hostlist in ("", "(null)"):
        return []
    return list(NodeSet(hostlist))


def _int(value: str | None, default: int = 0) -> int:
    try:
        return int(value) if value is not None else default
    except ValueError:
        return default


def parse_show_topology(text: str) -> Topology:
    """Parse ``scontrol show topology`` of 24.11 and 26.05 (tree, block or both)."""
    switches: list[TopoSwitch] = []
    blocks: list[TopoBlock] = []
    other: list[dict[str, str]] = []
    for raw in text.splitlines():
        kv = parse_kv_line(raw)
        if "SwitchName" in kv:
            switches.append(_switch(kv))
        elif "BlockName" in kv or "AggregatedBlock" in kv:
            blocks.append(_block(kv))
        elif kv:
            other.append(kv)
    return Topology(switches, blocks, other)


def _switch(kv: dict[str, str]) -> TopoSwitch:
    return TopoSwitch(
        name=kv["SwitchName"],
        level=_int(kv.get("Level")),
        link_speed=_int(kv.get("LinkSpeed")),
        nodes=expand(kv.get("Nodes", "")),
        switches=expand(kv.get("Switches", "")),
    )


def _block(kv: dict[str, str]) -> TopoBlock:
    """A base block (``BlockName=``) or an aggregate of one BlockSizes level
    (``AggregatedBlock=b[1-2]``)."""
    nodes = expand(kv.get("Nodes", ""))
    aggregated = "BlockName" not in kv
    return TopoBlock(
        name=kv["AggregatedBlock"] if aggregated else kv["BlockName"],
        index=_int(kv.get("BlockIndex"), -1),
        nodes=nodes,
        size=_int(kv.get("BlockSize"), len(nodes)),
        aggregated=aggregated,
    )


_PROBLEM = re.compile(r"\b(error|fatal|warning)\b", re.IGNORECASE)
#: Log lines that every container cluster prints and that say nothing about the config tested.
BENIGN = (
    re.compile(r"No nodes in partition"),
    re.compile(r"_preserve_plugins"),
    re.compile(r"Could not open [\w ]+ state file"),
    re.compile(r"NOTE: Trying backup state save file"),
    re.compile(r"(Job|Node|Partition|Reservation|Trigger) state file .* missing"),
    re.compile(r"Unable to determine this slurmd's NodeName"),
    re.compile(r"Problem reading file|No such file or directory.*state"),
    re.compile(r"create_mmap_buf: Failed to open file `/var/spool/slurmctld"),
    re.compile(r"High latency for"),
    re.compile(r"Node .* not responding"),
    re.compile(r"Nodes? .* not responding"),
    re.compile(r"_sync_nodes_to_jobs"),
    re.compile(r"Configured MailProg is invalid"),
)


def problem_lines(log_text: str, benign: Sequence[re.Pattern[str]] = BENIGN) -> list[str]:
    """Error, fatal and warning lines of a Slurm log, without the container-noise ones."""
    return [
        line
        for line in log_text.splitlines()
        if _PROBLEM.search(line) and not any(p.search(line) for p in benign)
    ]


@dataclass(frozen=True)
class ValidationResult:
    """What slurmctld made of a topology: its log, ``scontrol show topology`` and whether it ran."""

    version: str
    started: bool
    log_text: str
    topology_text: str
    #: ``scontrol show topology <name>`` for every topology a topology.yaml names.
    named_topology_texts: Mapping[str, str] = field(default_factory=dict)

    @property
    def topology(self) -> Topology:
        """The default topology (the only one for topology.conf)."""
        return parse_show_topology(self.topology_text)

    def named(self, name: str) -> Topology:
        """One named topology of a topology.yaml (``KeyError`` if the YAML had no such name)."""
        return parse_show_topology(self.named_topology_texts[name])

    @property
    def problems(self) -> list[str]:
        """Error/fatal/warning lines of the slurmctld log (container noise filtered)."""
        return problem_lines(self.log_text)


# --------------------------------------------------------------------------------------------
# Cluster lifecycle
# --------------------------------------------------------------------------------------------

_LIVE: set[Cluster] = set()
_LIVE_LOCK = threading.Lock()


def _teardown_all_live() -> None:
    """atexit: a process leaving with clusters still up (Ctrl-C mid-test) removes them."""
    with _LIVE_LOCK:
        live = list(_LIVE)
    for cluster in live:
        cluster.teardown()


atexit.register(_teardown_all_live)


def _pid_namespace() -> str:
    try:
        return os.readlink("/proc/self/ns/pid").strip("pid:[]")
    except OSError:
        return "?"


def _start_time(pid: int) -> str:
    """Kernel start time of ``pid`` (guards against a reused pid looking alive)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return "?"


def _owner() -> str:
    pid = os.getpid()
    return f"{socket.gethostname()}:{_pid_namespace()}:{pid}:{_start_time(pid)}"


def _owner_alive(owner: str) -> bool:
    """Whether the process that created an object may still use it.

    Only an owner in this host's pid namespace can be checked; any other owner counts as
    alive (its objects go only when older than ``MAX_AGE_S``).
    """
    parts = owner.split(":")
    if len(parts) == 2 and parts[1].isdigit():  # older labels: host:pid
        parts = [parts[0], _pid_namespace(), parts[1], ""]
    if len(parts) != 4 or not parts[2].isdigit():
        return False  # no owner: nobody can be using it
    host, pidns, pid, started = parts
    if host != socket.gethostname() or pidns != _pid_namespace():
        return True
    return Path(f"/proc/{pid}").exists() and started in ("", _start_time(int(pid)))


def _stale(labels: Mapping[str, str] | None) -> bool:
    labels = labels or {}
    created = labels.get(LABEL_CREATED, "")
    too_old = created.isdigit() and time.time() - int(created) > MAX_AGE_S
    return too_old or not _owner_alive(labels.get(LABEL_OWNER, ""))


def sweep_leftovers(client: docker.DockerClient | None = None, everything: bool = False) -> int:
    """Remove containers, networks and volumes of test clusters whose owner process is gone,
    and images with a wheel installed older than MAX_AGE_S.

    ``everything=True`` also removes those of live owners (a manual cleanup). Returns how many
    objects were removed.
    """
    client = client or docker_client()
    flt = {"label": LABEL}
    removed = 0

    def stale(labels: Mapping[str, str] | None) -> bool:
        return everything or _stale(labels)

    # The low-level list calls: the high-level ones inspect every container after listing and
    # fail when a concurrent run removes one in between.
    api = client.api
    for c in api.containers(all=True, filters=flt):
        if stale(c.get("Labels")) and _quietly(api.remove_container, c["Id"], force=True, v=True):
            removed += 1
    for net in api.networks(filters=flt):
        if stale(net.get("Labels")) and _quietly(api.remove_network, net["Id"]):
            removed += 1
    for vol in api.volumes(filters=flt).get("Volumes") or []:
        if stale(vol.get("Labels")) and _quietly(api.remove_volume, vol["Name"], force=True):
            removed += 1
    # Images with a wheel installed (ensure_tool_image): one per wheel, so old code's pile up.
    for img in api.images(filters={"label": LABEL + ".tool"}):
        created = (img.get("Labels") or {}).get(LABEL_CREATED, "")
        old = created.isdigit() and time.time() - int(created) > MAX_AGE_S
        if (everything or old) and _quietly(api.remove_image, img["Id"], force=True):
            removed += 1
    return removed


def _quietly(call: Any, *args: Any, **kwargs: Any) -> bool:
    """Run a docker removal; an object already gone (or busy) is not an error here."""
    try:
        call(*args, **kwargs)
    except (docker.errors.NotFound, docker.errors.APIError):
        return False
    return True


def _tar(files: Mapping[str, str | bytes], mode: int = 0o644) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, content in sorted(files.items()):
            data = content.encode() if isinstance(content, str) else content
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mode = 0o755 if name.endswith((".sh", ".so")) else mode
            info.mtime = int(time.time())
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def _read_bytes(container: Container, path: str) -> bytes | None:
    """A file from a container, running or stopped; None if it does not exist."""
    try:
        stream, _ = container.get_archive(path)
    except docker.errors.NotFound:
        return None
    with tarfile.open(fileobj=io.BytesIO(b"".join(stream))) as tar:
        member = tar.next()
        handle = tar.extractfile(member) if member else None
        return handle.read() if handle else None


def _read_file(container: Container, path: str) -> str:
    data = _read_bytes(container, path)
    return data.decode(errors="replace") if data else ""


#: A host command that runs the controller's own (see :meth:`Cluster.shims`). The command runs
#: in the background so that the shim can forward SIGTERM/SIGINT into the container: ``docker
#: exec`` does not, and a timed-out srun must be cancelled in the cluster, not only on the host.
SHIM = """#!/bin/sh
# {command} of the test cluster's controller {ctl}, run from the host (harness.Cluster.shims)
tag="shim-$$"
after() {{
{after}:
}}
forward() {{
  docker exec {ctl} sh -c "kill -TERM \\$(cat /tmp/$tag.pid)"
  wait $child
  after
  exit 143
}}
{before}docker exec {env}{ctl} \\
  sh -c 'echo $$ > /tmp/'"$tag"'.pid; exec "$@"' {command} {command} "$@" &
child=$!
trap forward TERM INT
wait $child
rc=$?
after
exit $rc
"""


def on_path(directory: Path, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """A copy of ``environ`` (default: this process's) with ``directory`` first on PATH."""
    env = dict(os.environ if environ is None else environ)
    env["PATH"] = f"{directory}{os.pathsep}{env.get('PATH', os.defpath)}"
    return env


class Cluster:
    """A controller and one container per node on a private network; a context manager.

    ``version`` (e.g. ``"24.11"``) makes start() check that the image runs that Slurm release.

    ``controller_only=True`` starts slurmctld alone, with every node name resolving to a
    loopback address, so a topology can be validated without a slurmd per node.
    """

    def __init__(
        self,
        spec: ClusterSpec,
        image: str,
        *,
        version: str | None = None,
        controller_only: bool = False,
        client: docker.DockerClient | None = None,
        start_workers: int = 8,
        tool_wheel: Path | None = None,
    ) -> None:
        self.spec = spec
        self.image = image
        self.version = version
        self.controller_only = controller_only
        self.client = client or docker_client()
        self.run_id = uuid.uuid4().hex[:8]
        self.prefix = f"tsc-{self.run_id}"
        self.network: Network | None = None
        self.controller: Container | None = None
        self.nodes: dict[str, Container] = {}
        self._workers = start_workers
        self._torn_down = False
        self._volumes: dict[str, str] = {}  # shared dir -> volume name
        self._tool_wheel = tool_wheel

    # -- context manager ----------------------------------------------------------------------

    def __enter__(self) -> Cluster:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.teardown()

    # -- start / stop -------------------------------------------------------------------------

    def start(self) -> Cluster:
        """Create network and containers and wait for slurmctld; tear down on any failure."""
        with _LIVE_LOCK:
            _LIVE.add(self)
        try:
            sweep_leftovers(self.client)
            self._check_image()
            if self.spec.tool:
                self.image = ensure_tool_image(self.image, self._wheel(), self.client)
            self.network = self.client.networks.create(
                self.prefix, driver="bridge", internal=True, labels=self._labels()
            )
            files = self.spec.render()
            self._make_shared_volumes()
            env = {"SLURMCTLD_DAEMON": "1"} if self.spec.slurmctld_daemon else None
            self.controller = self._create(CONTROLLER, ["controller"], files, env)
            self._start_container(self.controller)
            for path in self._volumes:  # world-writable with the sticky bit, like /tmp
                self.controller.exec_run(["chmod", "1777", path])
            if not self.controller_only:
                self._start_nodes(files)
            self.wait_controller()
        except HarnessError:
            self.teardown()
            raise
        except docker.errors.DockerException as exc:
            message = f"starting the cluster on {self.image} failed: {exc}\n{self.logs_text()}"
            self.teardown()
            raise HarnessError(message) from exc
        except BaseException:  # Ctrl-C included: never leave containers behind
            self.teardown()
            raise
        return self

    def _check_image(self) -> None:
        """Refuse an image that is not a test-cluster image (of ``version``, if given)."""
        if not _has_image(self.client, self.image):
            raise HarnessError(f"image {self.image} not found (build it with ensure_image())")
        if self.version is not None:
            check_image_version(self.client, self.image, self.version)
            return
        labels = self.client.images.get(self.image).labels or {}
        if labels.get(IMAGE_ROLE_LABEL) != "slurm-test-cluster":
            raise HarnessError(
                f"image {self.image} is not a slurm-test-cluster image (label "
                f"{IMAGE_ROLE_LABEL} missing); build one with ensure_image()"
            )

    def _wheel(self) -> Path:
        """The wheel a ClusterSpec(tool=True) installs: ``tool_wheel``, else $WHEEL_ENV."""
        wheel = self._tool_wheel or (
            Path(os.environ[WHEEL_ENV]) if WHEEL_ENV in os.environ else None
        )
        if wheel is None or not wheel.is_file():
            raise HarnessError(
                f"ClusterSpec(tool=True) needs the tool's wheel (python3 -m build): pass "
                f"Cluster(tool_wheel=...) or set {WHEEL_ENV} (got {wheel})"
            )
        return wheel

    def _labels(self) -> dict[str, str]:
        return {LABEL: self.run_id, LABEL_OWNER: _owner(), LABEL_CREATED: str(int(time.time()))}

    def _make_shared_volumes(self) -> None:
        for index, path in enumerate(self.spec.shared_dirs):
            volume = self.client.volumes.create(
                f"{self.prefix}-shared{index}", labels=self._labels()
            )
            self._volumes[path] = volume.name

    def _create(
        self,
        host: str,
        command: list[str],
        files: Mapping[str, str | bytes],
        env: Mapping[str, str] | None = None,
    ) -> Container:
        extra_hosts = self._extra_hosts(host)
        net = self.network.name if self.network else ""
        container = self.client.containers.create(
            self.image,
            command=command,
            name=f"{self.prefix}-{host}",
            hostname=host,
            labels=self._labels(),
            environment=dict(env or {}),
            network=net,
            # the short name (node01, slurmctld) must resolve on the private network
            networking_config={net: self.client.api.create_endpoint_config(aliases=[host])},
            ulimits=[Ulimit(name="nofile", soft=NOFILE, hard=NOFILE)],
            extra_hosts=extra_hosts,
            volumes={name: {"bind": path, "mode": "rw"} for path, name in self._volumes.items()},
            detach=True,
        )
        container.put_archive(CONF_DIR, _tar(files))
        return container

    def _extra_hosts(self, host: str) -> dict[str, str]:
        """/etc/hosts entries that spare the daemons DNS look-ups the private network cannot
        answer (each one waits 10 s for the embedded DNS to time out).

        The daemons reverse-resolve their listening address 0.0.0.0 at start. In config-only
        mode every node name resolves too, to loopback, so no traffic leaves the container.
        """
        hosts = {"any-address": "0.0.0.0"}
        if self.controller_only and host == CONTROLLER:
            hosts.update({name: "127.0.0.2" for name in self.spec.node_names})
        return hosts

    def _start_container(self, container: Container) -> None:
        try:
            container.start()
        except docker.errors.APIError as exc:
            raise HarnessError(
                f"container {container.name} ({self.image}) did not start: {exc}\n"
                f"--- container output ---\n{self._container_output(container)}"
            ) from exc

    def _start_nodes(self, files: Mapping[str, str | bytes]) -> None:
        def one(node: NodeSpec) -> tuple[str, Container]:
            env = {"FAKE_GPUS": str(node.devices), "SLURM_NODENAME": node.name}
            container = self._create(node.name, ["node", node.name], files, env)
            self.nodes[node.name] = container  # registered before start: teardown finds it
            self._start_container(container)
            return node.name, container

        with ThreadPoolExecutor(max_workers=self._workers) as pool:
            for _ in pool.map(one, self.spec.nodes):
                pass

    def teardown(self) -> None:
        """Remove every container and the network; safe to call twice and after failures."""
        if self._torn_down:
            return
        self._torn_down = True
        api, flt = self.client.api, {"label": f"{LABEL}={self.run_id}"}
        known = [c.id for c in [self.controller, *self.nodes.values()] if c is not None]
        try:
            self._remove_all(known)
            # Anything created but not yet registered (interrupted mid-create) has our label.
            self._remove_all([c["Id"] for c in api.containers(all=True, filters=flt)])
            for net in api.networks(filters=flt):
                _quietly(api.remove_network, net["Id"])
            for vol in api.volumes(filters=flt).get("Volumes") or []:
                _quietly(api.remove_volume, vol["Name"], force=True)
        except Exception:  # daemon gone (the SDK raises requests' errors too): must not hide
            pass  # the error that brought us here; the next sweep_leftovers() cleans up
        finally:
            with _LIVE_LOCK:
                _LIVE.discard(self)

    def _remove_all(self, container_ids: Sequence[str | None]) -> None:
        """Remove containers in parallel (one at a time, 36 nodes take ~15 s)."""

        def remove(container_id: str | None) -> None:
            if container_id:
                _quietly(self.client.api.remove_container, container_id, force=True, v=True)

        with ThreadPoolExecutor(max_workers=self._workers) as pool:
            list(pool.map(remove, container_ids))

    # -- commands -----------------------------------------------------------------------------

    def exec(
        self, cmd: str | Sequence[str], node: str | None = None, timeout: int = 120
    ) -> ExecResult:
        """Run ``cmd`` (a shell string or argv) in the controller or in ``node``'s container."""
        container = self._container(node)
        argv = ["bash", "-c", cmd] if isinstance(cmd, str) else list(cmd)
        argv = ["timeout", str(timeout), *argv]
        try:
            rc, (out, err) = container.exec_run(argv, demux=True)
        except docker.errors.APIError as exc:
            raise HarnessError(
                f"exec in {container.name} failed: {exc}\n{self.logs_text(node or CONTROLLER)}"
            ) from exc
        return ExecResult(rc, (out or b"").decode(errors="replace"), (err or b"").decode())

    def _container(self, node: str | None) -> Container:
        container = self.controller if node in (None, CONTROLLER) else self.nodes.get(node or "")
        if container is None:
            raise HarnessError(f"no container for {node or CONTROLLER} (cluster not started?)")
        return container

    def shims(
        self,
        directory: Path,
        commands: Iterable[str],
        *,
        env: Sequence[str] = (),
        copy_in: Mapping[str, str] | None = None,
        copy_out: Mapping[str, str] | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> dict[str, str]:
        """Host commands (``scontrol``, ``srun``, ...) that are the controller's real ones.

        The tool under test runs on the host (the image has no Python) and calls Slurm's
        commands by name; each shim written to ``directory`` execs its command in the
        controller container with the caller's arguments and exit code, passes the caller's
        values of the variables named in ``env`` (``SLURM_JOB_ID``: a step in the caller's
        allocation), and forwards SIGTERM/SIGINT to the command in the container. Around each
        call it copies host files into the controller (``copy_in``: host path -> controller
        path, e.g. a topology.conf the host just wrote, as a shared /etc/slurm would hold it)
        and controller files back (``copy_out``: controller path -> host path, e.g. the
        slurmctld log). stdin is not passed: nothing here feeds a Slurm command on stdin.
        Returns ``environ`` (default: this process's) with ``directory`` first on PATH.
        """
        ctl = shlex.quote(self._container(None).name or "")
        before = "".join(
            f"docker exec -i {ctl} sh -c {shlex.quote('cat > ' + shlex.quote(inside))}"
            f" < {shlex.quote(host)}\n"
            for host, inside in (copy_in or {}).items()
        )
        after = "".join(
            f"docker exec {ctl} cat {shlex.quote(inside)} > {shlex.quote(host)}\n"
            for inside, host in (copy_out or {}).items()
        )
        passed = "".join(f"-e {shlex.quote(name)} " for name in env)
        directory.mkdir(parents=True, exist_ok=True)
        for command in commands:
            shim = directory / command
            shim.write_text(
                SHIM.format(
                    command=shlex.quote(command), ctl=ctl, env=passed, before=before, after=after
                )
            )
            shim.chmod(0o755)
        return on_path(directory, environ)

    def sbatch(self, args: str) -> str:
        """Submit with ``sbatch --parsable <args>``; returns the job id or raises with stderr."""
        res = self.exec(f"sbatch --parsable {args}")
        if res.rc != 0:
            raise HarnessError(f"sbatch {args} failed (rc={res.rc}): {res.stderr.strip()}")
        return res.stdout.strip().split(";")[0]

    def job(self, job_id: str) -> JobInfo:
        """State, reason and expanded node list of a job (from squeue, then scontrol)."""
        res = self.exec(["squeue", "-h", "-j", job_id, "-o", "%T|%r|%N"])
        fields = res.stdout.strip().split("|")
        if res.rc == 0 and len(fields) == 3:
            return JobInfo(job_id, fields[0], fields[1], expand(fields[2]))
        # Finished jobs leave squeue; scontrol still knows them for MinJobAge seconds.
        kv = parse_kv_line(self.exec(["scontrol", "-o", "show", "job", job_id]).stdout)
        nodes = expand(kv.get("NodeList", ""))
        return JobInfo(job_id, kv.get("JobState", "UNKNOWN"), kv.get("Reason", ""), nodes)

    def wait_job(
        self, job_id: str, states: Iterable[str] = ("RUNNING",), timeout: float = 90
    ) -> JobInfo:
        """Poll until the job is in one of ``states``; HarnessError with the log on timeout."""
        wanted = set(states)
        deadline = time.monotonic() + timeout
        info = self.job(job_id)
        while info.state not in wanted:
            if time.monotonic() > deadline:
                raise HarnessError(
                    f"job {job_id} is {info.state} ({info.reason}), not {sorted(wanted)} "
                    f"after {timeout:.0f} s\n{self.logs_text()}"
                )
            time.sleep(1)
            info = self.job(job_id)
        return info

    def node_states(self) -> dict[str, str]:
        res = self.exec(["sinfo", "-h", "-N", "-o", "%N %T"])
        return dict(line.split(None, 1) for line in res.stdout.splitlines() if " " in line)

    # -- waiting ------------------------------------------------------------------------------

    def wait_controller(self, timeout: float = 60) -> None:
        """Wait until ``scontrol ping`` answers; HarnessError with the log if slurmctld died."""
        deadline = time.monotonic() + timeout
        controller = self._container(None)
        while True:
            controller.reload()
            if controller.status not in ("created", "running"):
                raise HarnessError(
                    f"slurmctld exited ({controller.status}) in {self.image}\n"
                    + self.logs_text(CONTROLLER),
                    log=self.slurmctld_log(),
                )
            if controller.status == "running":
                res = self.exec(["scontrol", "ping"], timeout=10)
                if res.rc == 0 and "UP" in res.stdout:
                    return
            if time.monotonic() > deadline:
                raise HarnessError(
                    f"slurmctld did not answer within {timeout:.0f} s\n" + self.logs_text()
                )
            time.sleep(0.5)

    def wait_idle(self, count: int | None = None, timeout: float = 120) -> None:
        """Wait until ``count`` (default: all) nodes are idle.

        Fails fast, with that node's slurmd log, when a node container exits or a node turns
        INVALID or DOWN with a reason (e.g. fewer GPU devices than configured).
        """
        want = len(self.spec.nodes) if count is None else count
        deadline = time.monotonic() + timeout
        while True:
            self._raise_on_dead_nodes()
            states = self.node_states()
            if sum(1 for s in states.values() if s == "idle") >= want:
                return
            bad = [n for n, s in states.items() if s.startswith(("inval", "drain"))]
            if bad:
                raise HarnessError(
                    f"node(s) {NodeSet.fromlist(bad)} failed: "
                    + self._reasons(bad)
                    + "\n"
                    + self.logs_text(*bad)
                )
            if time.monotonic() > deadline:
                raise HarnessError(
                    f"only {sum(1 for s in states.values() if s == 'idle')} of {want} nodes idle "
                    f"after {timeout:.0f} s: {states}\n" + self.logs_text(*_not_idle(states))
                )
            time.sleep(1)

    def _raise_on_dead_nodes(self) -> None:
        for name, container in self.nodes.items():
            container.reload()
            if container.status not in ("created", "running"):
                raise HarnessError(
                    f"node {name}: slurmd exited ({container.status})\n" + self.logs_text(name)
                )

    def _reasons(self, nodes: Sequence[str]) -> str:
        res = self.exec(["sinfo", "-h", "-N", "-n", ",".join(nodes), "-o", "%N: %T %E"])
        return res.stdout.strip()

    # -- logs and config ----------------------------------------------------------------------

    def slurmctld_log(self) -> str:
        """The slurmctld log file (falls back to the container output if there is none)."""
        container = self._container(None)
        return _read_file(container, SLURMCTLD_LOG) or self._container_output(container)

    def slurmd_log(self, node: str) -> str:
        container = self._container(node)
        return _read_file(container, SLURMD_LOG) or self._container_output(container)

    def logs_text(self, *nodes: str, tail: int = 80) -> str:
        """Tails of the slurmctld log and of the named nodes' slurmd logs, for error messages."""
        parts = []
        for name in [CONTROLLER, *[n for n in nodes if n != CONTROLLER]][:6]:
            try:
                text = self.slurmctld_log() if name == CONTROLLER else self.slurmd_log(name)
            except (HarnessError, docker.errors.DockerException) as exc:
                text = f"(log unavailable: {exc})"
            lines = text.splitlines()[-tail:]
            parts.append(f"--- {name} log (last {len(lines)} lines) ---\n" + "\n".join(lines))
        return "\n".join(parts)

    @staticmethod
    def _container_output(container: Container) -> str:
        try:
            return bytes(container.logs(tail=200)).decode(errors="replace")
        except docker.errors.DockerException as exc:
            return f"(no output: {exc})"

    def read_file(self, path: str, node: str | None = None) -> bytes:
        """A file (binary-safe) from the controller or ``node``; HarnessError if missing."""
        data = _read_bytes(self._container(node), path)
        if data is None:
            raise HarnessError(f"{path} not found in {node or CONTROLLER}")
        return data

    def address(self, node: str | None = None) -> str:
        """The container's IP address on the cluster network; the host can reach it."""
        container = self._container(node)
        container.reload()
        networks = container.attrs["NetworkSettings"]["Networks"]
        name = self.network.name if self.network else ""
        if name not in networks:
            raise HarnessError(f"{node or CONTROLLER} is not on the cluster network {name!r}")
        return str(networks[name]["IPAddress"])

    def put_file(
        self, node: str | None, path: str, content: str | bytes, mode: int = 0o644
    ) -> None:
        """One file (absolute ``path``) into the controller or ``node``'s container only."""
        directory, name = posixpath.split(path)
        if not posixpath.isabs(path) or not name:
            raise HarnessError(f"put_file needs an absolute file path, got {path!r}")
        self._container(node).put_archive(directory, _tar({name: content}, mode))

    def write_files(self, files: Mapping[str, str | bytes], path: str = CONF_DIR) -> None:
        """Copy files into every container (config must be the same everywhere)."""
        data = _tar(files)
        for container in [self._container(None), *self.nodes.values()]:
            container.put_archive(path, data)

    def reconfigure(
        self,
        spec: ClusterSpec | None = None,
        files: Mapping[str, str | bytes] | None = None,
        restart: bool = True,
    ) -> None:
        """Install new config (a new spec with the same nodes, and/or single files) and apply it.

        ``restart=True`` restarts the slurmctld container (job state survives; a config that
        makes slurmctld fatal raises HarnessError with its log); otherwise ``scontrol
        reconfigure``.
        """
        if spec is not None:
            if spec.node_names != self.spec.node_names:
                raise HarnessError("reconfigure cannot change the node list; start a new cluster")
            self.spec = spec
            self.write_files(spec.render())
        if files:
            self.write_files(files)
        if restart:
            self.restart_slurmctld()
        else:
            self.exec(["scontrol", "reconfigure"]).check("scontrol reconfigure")

    def restart_slurmctld(self, timeout: float = 60) -> None:
        controller = self._container(None)
        controller.restart(timeout=10)
        self.wait_controller(timeout)

    def show_topology(self, name: str | None = None) -> str:
        """``scontrol show topology [name]`` (without a name: the default topology only)."""
        return self.exec(["scontrol", "show", "topology", *([name] if name else [])]).stdout


def _not_idle(states: Mapping[str, str]) -> list[str]:
    return [n for n, s in states.items() if s != "idle"][:5]


@contextlib.contextmanager
def cluster(spec: ClusterSpec, version: str, wait: bool = True) -> Iterator[Cluster]:
    """Start a cluster of ``version`` (building the image if needed), wait idle, clean up."""
    with Cluster(spec, ensure_image(version), version=version) as c:
        if wait and not c.controller_only:
            c.wait_idle()
        yield c


# --------------------------------------------------------------------------------------------
# Config-only topology validation
# --------------------------------------------------------------------------------------------


def validate_topology(
    version: str,
    nodes: Sequence[str] | Sequence[NodeSpec],
    topology_conf: str | None = None,
    topology_yaml: str | None = None,
    slurm_conf_extra: str = "",
    *,
    topology_plugin: str | None = None,
    partitions: Sequence[PartitionSpec] = DEFAULT_PARTITIONS,
    image: str | None = None,
    check: bool = True,
    client: docker.DockerClient | None = None,
) -> ValidationResult:
    """Start slurmctld alone with ``nodes`` defined and this topology; report what it made of it.

    ``topology_plugin`` defaults to ``topology/tree`` or ``topology/block`` guessed from a
    topology.conf (``BlockName=`` lines mean block); with only a topology.yaml no plugin line
    is written (25.05+ read the YAML instead). ``check=True`` raises HarnessError when slurmctld
    does not come up; ``check=False`` returns ``started=False`` and the log instead.
    """
    specs = [n if isinstance(n, NodeSpec) else NodeSpec(n) for n in nodes]
    if topology_plugin is None and topology_conf is not None:
        is_block = re.search(r"^\s*BlockName=", topology_conf, re.MULTILINE | re.IGNORECASE)
        topology_plugin = "topology/block" if is_block else "topology/tree"
    spec = ClusterSpec(
        nodes=specs,
        partitions=partitions,
        topology_plugin=topology_plugin,
        topology_conf=topology_conf,
        topology_yaml=topology_yaml,
        slurm_conf_extra=slurm_conf_extra,
    )
    client = client or docker_client()
    c = Cluster(spec, image or ensure_image(version, client), controller_only=True, client=client)
    try:
        c.start()
    except HarnessError as exc:
        if check:
            raise
        return ValidationResult(version, False, exc.log or str(exc), "")
    try:
        named = {name: c.show_topology(name) for name in yaml_topology_names(topology_yaml)}
        return ValidationResult(version, True, c.slurmctld_log(), c.show_topology(), named)
    finally:
        c.teardown()


def yaml_topology_names(topology_yaml: str | None) -> list[str]:
    """Names of the topologies in a topology.yaml (none if it is absent or not a list)."""
    try:
        data = yaml.safe_load(topology_yaml or "")
    except yaml.YAMLError:
        return []
    if not isinstance(data, list):
        return []
    return [str(t["topology"]) for t in data if isinstance(t, dict) and "topology" in t]


# --------------------------------------------------------------------------------------------
# Command line: manual clean-up and image builds
# --------------------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    """``python3 harness.py sweep`` or ``build [VERSION...]``: for people, not tests."""
    import argparse

    parser = argparse.ArgumentParser(prog="harness.py", description=main.__doc__)
    sub = parser.add_subparsers(dest="cmd", required=True)
    sub.add_parser("sweep", help="remove every test-cluster container and network")
    build = sub.add_parser("build", help="build (or reuse) the test images")
    build.add_argument("versions", nargs="*", default=list(VERSIONS))
    args = parser.parse_args(argv)
    try:
        if args.cmd == "sweep":
            print(f"removed {sweep_leftovers(everything=True)} object(s)")
        else:
            for version in args.versions:
                print(ensure_image(version))
    except HarnessError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
