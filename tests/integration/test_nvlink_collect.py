"""NVLink collection end to end on real Slurm (24.11 and 26.05).

Twelve node containers, 4 fake GPUs each, one NVLink clique per 4-node rack; gb0006's GPUs
report fabric state ``In Progress``. Every node carries a fake ``nvidia-smi`` that prints that
node's recorded-format output (``sim_gpu.fake_nvidia_smi_script``); gb0001 also carries a fake
``ibnetdiscover`` printing a simulated fabric (one IB leaf per rack under one spine,
``sources/sim``), collected with ``--ibnetdiscover-on``.

1. ``topograph-slurm collect --via srun`` gathers through the cluster's real ``srun`` (one
   srun for all nodes, then one per node). The test image has no Python, so topograph-slurm
   runs on the host and a ``srun`` shim on PATH execs the real srun inside the controller
   container. ``--via clush`` runs ClusterShell on the host against every node container's
   real sshd (an ``ssh`` shim only adds ``-F`` with the containers' addresses and a key).
2. Blocks are built from that snapshot (``load_snapshot`` → ``nvlink_blocks``) and rendered with
   ``topology.conf.block.j2``; a slurmctld of the same release accepts it with the expected
   blocks: 24.11 leaves the 3-node rack out (undersized), 26.05 keeps it.
3. The report lists gb0006 with the reason.
4. On 26.05, a topology.yaml with a tree, the NVLink blocks and a flat topology, plus the
   generated partition lines, is accepted, and jobs in every partition start.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import Shims
from harness import Cluster, ClusterSpec, NodeSpec, ValidationResult, on_path

from tests.support.sim_gpu import (
    fake_nvidia_smi_script,
    gb200_tray_topology,
    nvl_node_gpus,
    render_query_csv,
    render_query_q,
    render_topo_matrix,
)
from topograph_slurm.analysis.fabric.analyse import analyse
from topograph_slurm.analysis.fabric.naming import NamingPolicy
from topograph_slurm.analysis.nvlink.clique import domain_results
from topograph_slurm.analysis.nvlink.domains import nvlink_blocks
from topograph_slurm.model.findings import FindingKind
from topograph_slurm.model.result import NamedTopology, Tree
from topograph_slurm.model.slurm_version import SlurmVersion
from topograph_slurm.render.environment import environment, render
from topograph_slurm.render.report import render_report
from topograph_slurm.render.topology_yaml import (
    default_partitions,
    render_partition_lines,
    render_topology_yaml,
)
from topograph_slurm.sources.ibnetdiscover import parse_ibnetdiscover
from topograph_slurm.sources.layout import parse_layout
from topograph_slurm.sources.sim import SimSpec, generate_ibnetdiscover
from topograph_slurm.sources.snapshot import load_snapshot

pytestmark = pytest.mark.integration

RACKS, PER_RACK, GPUS = 3, 4, 4
SIM = SimSpec(nodes=RACKS * PER_RACK, gpus=GPUS, rails=1, su=PER_RACK, tiers=2, prefix="gb")
NODES = [SIM.node_name(i) for i in range(SIM.nodes)]
UNHEALTHY = "gb0006"


def rack(index: int) -> list[str]:
    return NODES[index * PER_RACK : (index + 1) * PER_RACK]


def fake_nvidia_smi(node: str) -> str:
    """This node's nvidia-smi: its rack's clique, In Progress on the unhealthy node."""
    index = NODES.index(node)
    uuid = f"{index // PER_RACK + 1:08x}-1111-4222-8333-444455556666"
    state = "In Progress" if node == UNHEALTHY else "Completed"
    gpus = nvl_node_gpus(
        uuid, index // PER_RACK + 1, GPUS, state=state, serial_base=1_650_000 + 10 * index
    )
    return fake_nvidia_smi_script(
        csv=render_query_csv(gpus),
        query=render_query_q(gpus),
        topo=render_topo_matrix(gb200_tray_topology(GPUS)),
    )


def install_fakes(cluster: Cluster, ibnetdiscover_on: str | None = None) -> None:
    """Each node's fake nvidia-smi (and a fake ibnetdiscover on one node) in /usr/local/bin,
    copied with docker put_archive per node."""
    for node in NODES:
        cluster.put_file(node, "/usr/local/bin/nvidia-smi", fake_nvidia_smi(node), mode=0o755)
    if ibnetdiscover_on:
        dump = generate_ibnetdiscover(SIM)
        script = f"#!/bin/sh\ncat <<'EOF_IBNET'\n{dump}EOF_IBNET\n"
        cluster.put_file(ibnetdiscover_on, "/usr/local/bin/ibnetdiscover", script, mode=0o755)


SSH_CONFIG = """Host *
  User root
  IdentityFile {key}
  IdentitiesOnly yes
  BatchMode yes
  StrictHostKeyChecking no
  UserKnownHostsFile /dev/null
  LogLevel ERROR
"""


def ssh_shim(tmp_path: Path, cluster: Cluster, host_env: dict[str, str]) -> dict[str, str]:
    """``host_env`` whose ``ssh`` reaches each node container's real sshd: the host's ssh with
    a config file naming the containers' addresses and a throwaway key."""
    ssh = shutil.which("ssh")
    if ssh is None:
        pytest.fail("ssh client not installed (Debian package openssh-client)")
    key = tmp_path / "id_ed25519"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    public = key.with_suffix(".pub").read_text()
    hosts = []
    for node in NODES:
        cluster.exec("mkdir -p -m 700 /root/.ssh", node=node).check("ssh dir")
        cluster.put_file(node, "/root/.ssh/authorized_keys", public, mode=0o600)
        cluster.exec("/usr/sbin/sshd", node=node).check("sshd")
        hosts.append(f"Host {node}\n  HostName {cluster.address(node)}\n")
    config = tmp_path / "ssh_config"
    config.write_text("".join(hosts) + SSH_CONFIG.format(key=key))
    bindir = tmp_path / "ssh-bin"
    bindir.mkdir(exist_ok=True)
    (bindir / "ssh").write_text(f'#!/bin/sh\nexec {ssh} -F {config} "$@"\n')
    (bindir / "ssh").chmod(0o755)
    return on_path(bindir, host_env)


def run_collect(tmp_path: Path, env: dict[str, str], mode: str = "batch") -> Path:
    """``topograph-slurm collect`` on the host: through srun (``mode``: batch or per-node;
    ``env`` with the srun shim), or over ssh with ClusterShell when ``mode`` is ``clush``
    (``env`` from :func:`ssh_shim`)."""
    snap = tmp_path / f"snapshot-{mode}"
    transport = ["--via", "clush"] if mode == "clush" else ["--via", "srun", "--srun-mode", mode]
    argv = [
        *("topograph-slurm", "-q", "collect", *transport),
        *("--nodes", f"gb[0001-{len(NODES):04d}]", "--ibnetdiscover-on", NODES[0]),
        *("--out-dir", str(snap), "--timeout", "60"),
    ]
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return snap


def noise_free(result: ValidationResult) -> list[str]:
    """slurmctld problems other than the expected 'blocks lack access to …' warning for
    nodes we deliberately left out of every block."""
    return [line for line in result.problems if "lack access to" not in line]


def test_collect_blocks_and_yaml_on_real_slurm(
    make_cluster: Callable[..., Cluster],
    validate: Callable[..., ValidationResult],
    slurm_version: str,
    tmp_path: Path,
    shims: Shims,
    host_env: dict[str, str],
) -> None:
    version = SlurmVersion.parse(slurm_version)
    spec = ClusterSpec(nodes=[NodeSpec(n, cpus=4, gpus=GPUS) for n in NODES])
    cluster = make_cluster(spec)
    install_fakes(cluster, ibnetdiscover_on=NODES[0])

    # 1. collect through the real srun
    srun = shims(cluster, "srun")
    snap = run_collect(tmp_path, srun)
    manifest = json.loads((snap / "manifest.json").read_text())
    assert manifest["via"] == "srun" and manifest["nodes"] == NODES
    assert manifest["srun_mode"] == "batch"
    # the per-node mode, and ClusterShell over the nodes' real sshd, read exactly the same
    # from every node
    per_node = run_collect(tmp_path, srun, "per-node")
    clush = run_collect(tmp_path, ssh_shim(tmp_path, cluster, host_env), "clush")
    over_ssh = json.loads((clush / "manifest.json").read_text())
    assert over_ssh["via"] == "clush" and over_ssh["nodes"] == NODES
    assert all(r["exit_code"] == 0 for r in over_ssh["results"]), over_ssh["results"]
    assert len(over_ssh["results"]) == 3 * len(NODES)
    for other in (per_node, clush):
        for node in NODES:
            for key in ("nvidia-smi-query", "nvidia-smi-q", "nvidia-smi-topo"):
                rel = f"nodes/{node}/{key}.txt"
                assert (snap / rel).read_bytes() == (other / rel).read_bytes(), (other, rel)
        assert (other / "fabric/ibnetdiscover.txt").read_text() == generate_ibnetdiscover(SIM)
    assert all(r["exit_code"] == 0 for r in manifest["results"]), manifest["results"]
    assert len(manifest["results"]) == 3 * len(NODES)
    assert manifest["fabric"]["node"] == NODES[0] and manifest["fabric"]["exit_code"] == 0
    snapshot = load_snapshot(snap)
    assert snapshot.findings == []
    assert all(len(n.gpus or []) == GPUS for n in snapshot.nodes.values())
    assert snapshot.ibnetdiscover == generate_ibnetdiscover(SIM)
    analysis = analyse(parse_ibnetdiscover(snapshot.ibnetdiscover, "snapshot"), NamingPolicy())
    assert [leaf.nodes for leaf in analysis.tree.leaves] == [rack(r) for r in range(RACKS)]

    # 2. blocks from the snapshot (ordered by the IB tree), accepted by slurmctld
    topo = nvlink_blocks(
        domain_results(snapshot.gpus), version, tree=analysis.tree, findings=snapshot.findings
    )
    env = environment()
    nodes = sum(len(b.nodes) for b in topo.blocks)
    conf = render(env, "topology.conf.block.j2", blocks=topo, node_count=nodes)
    (tmp_path / "topology.conf").write_text(conf)
    healthy_rack2 = [n for n in rack(1) if n != UNHEALTHY]
    if version.allows_small_blocks:
        expected = {"nvl-gb0001": rack(0), "nvl-gb0005": healthy_rack2, "nvl-gb0009": rack(2)}
    else:
        expected = {"nvl-gb0001": rack(0), "nvl-gb0009": rack(2)}
    assert {b.name: b.nodes for b in topo.blocks} == expected
    assert topo.block_sizes[0] == PER_RACK
    result = validate(NODES, topology_conf=conf)
    assert result.started, result.log_text
    assert not noise_free(result), result.log_text
    shown = {b.name: b.nodes for b in result.topology.base_blocks}
    assert shown == expected, result.topology_text

    # 2b. a rack disappears: with the first file as layout, 26.05 keeps an empty block in
    # its place (same names, same order); 24.11 leaves it out and reports the shift
    gone = {n: r for n, r in domain_results(snapshot.gpus).items() if n not in rack(0)}
    again = nvlink_blocks(gone, version, layout=parse_layout(conf))
    missing = [f for f in again.findings if f.kind == FindingKind.NVLINK_RACK_MISSING]
    assert [f.subject for f in missing] == ["nvl-gb0001"]
    conf2 = render(env, "topology.conf.block.j2", blocks=again, node_count=nodes)
    result2 = validate(NODES, topology_conf=conf2)
    assert result2.started and not noise_free(result2), result2.log_text
    shown2 = [(b.name, b.nodes) for b in result2.topology.base_blocks]
    if version.allows_small_blocks:
        assert "BlockName=nvl-gb0001\n" in conf2
        assert shown2 == [
            ("nvl-gb0001", []),
            *((n, m) for n, m in expected.items() if m != rack(0)),
        ]
    else:
        assert shown2 == [("nvl-gb0009", rack(2))]

    # 3. the report names the unhealthy node and why
    report = render_report(env, analysis, topo, "text")
    (tmp_path / "report.txt").write_text(report)
    line = next(line for line in report.splitlines() if UNHEALTHY in line)
    assert FindingKind.FABRIC_NOT_COMPLETED in line and "In Progress" in line
    if not version.allows_small_blocks:
        assert "nvl-gb0005" in report and "undersized" in report

    # 4. 25.05+: topology.yaml with tree + blocks (those of 2b, with the missing rack's empty
    # placeholder) + flat; partitions using each start jobs
    if version.has_topology_yaml:
        check_topology_yaml(cluster, analysis.tree, again, tmp_path)


def check_topology_yaml(cluster: Cluster, tree: Tree, topo: Any, tmp_path: Path) -> None:
    env = environment()
    topologies = [
        NamedTopology("ib", tree=tree),
        NamedTopology("nvl", blocks=topo),
        NamedTopology("flat"),
    ]
    text = render_topology_yaml(env, topologies, "ib", SlurmVersion(26, 5))
    assert any(not block.nodes for block in topo.blocks)  # an empty block goes to slurmctld
    lines = render_partition_lines(env, default_partitions(topologies), "ib")
    (tmp_path / "topology.yaml").write_text(text)
    (tmp_path / "partitions.conf").write_text(lines)
    spec = ClusterSpec(nodes=cluster.spec.nodes, topology_yaml=text, slurm_conf_extra=lines)
    cluster.reconfigure(spec)
    cluster.wait_idle(timeout=120)
    assert f"SwitchName={tree.tops[0]}" in cluster.show_topology("ib")
    nvl_shown = cluster.show_topology("nvl")
    for block in topo.blocks:
        assert f"BlockName={block.name} " in nvl_shown, nvl_shown
    nvl_blocks = {b.name: set(b.nodes) for b in topo.blocks if b.nodes}
    jobs = {
        "nvl": cluster.sbatch(f"-p nvl --exclusive -N {PER_RACK} --wrap 'sleep 300'"),
        "ib": cluster.sbatch("-p ib --exclusive -N 2 --wrap 'sleep 300'"),
        "flat": cluster.sbatch(f"-p flat --exclusive -N 2 -w {UNHEALTHY} --wrap 'sleep 300'"),
    }
    placed = {part: cluster.wait_job(job, timeout=120) for part, job in jobs.items()}
    assert any(set(placed["nvl"].nodes) == members for members in nvl_blocks.values()), placed
    assert UNHEALTHY in placed["flat"].nodes
    assert UNHEALTHY not in placed["nvl"].nodes
