"""``generate --reconfigure`` and the ``auto`` defaults against real slurmctld 24.11 and 26.05.

One 4-node tree cluster per version, its slurmctld a daemon (``ClusterSpec.slurmctld_daemon``)
as under systemd at a site: in the foreground (``-D``, the harness default) a refused
reconfigure kills slurmctld instead of keeping the old config. topograph-slurm runs on the
host; ``scontrol`` and ``sinfo`` on its PATH are shims that run the real commands in the
controller container. Only the transport is a stand-in: before each call the shim copies the
host's topology.conf to the controller's /etc/slurm (as a shared /etc/slurm would hold it) and
afterwards copies the slurmctld log back (as on the controller host). On 26.05 a second
cluster takes a topology.yaml, whose named topologies are each checked.

The fabric is a simulation with 6 hosts of which the cluster defines 4: ``--slurm-nodes auto``
must leave the other 2 out because Slurm does not know them.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from conftest import Shims
from harness import Cluster, ClusterSpec, NodeSpec

from tests.support.live_examples import assert_page_shows, run_here
from topograph_slurm.cli.main import main
from topograph_slurm.errors import Exit
from topograph_slurm.render.environment import builtin_templates
from topograph_slurm.slurm.applied import differences
from topograph_slurm.slurm.reconfigure import parse_log_file
from topograph_slurm.slurm.topology import parse_show_topology
from topograph_slurm.sources.layout import parse_topology
from topograph_slurm.sources.metrics import parse_last_success

pytestmark = pytest.mark.integration

NODES = [f"gpu{i:04d}" for i in range(1, 5)]
SIM = "nodes=6,rails=1,su=2,tiers=2"  # leaves of 2: gpu[0001-0002], [0003-0004], [0005-0006]
START = "SwitchName=s1 Nodes=gpu[0001-0004]\n"
RECONFIGURES = "Processing Reconfiguration Request"
#: A tree template whose file slurmctld refuses: the first leaf defined twice.
BROKEN = "\nSwitchName={{ tree.leaves[0].name }} Nodes={{ tree.leaves[0].nodes | hostlist }}\n"


def started(
    make_cluster: Any, shims: Shims, tmp_path: Path, name: str, text: str, **spec: Any
) -> tuple[Cluster, Path, dict[str, str]]:
    """The 4-node cluster with a daemonized slurmctld running *text* as /etc/slurm/*name*, the
    same file on the host, a config naming the log copy, and the shims' environment."""
    cluster = make_cluster(
        ClusterSpec(nodes=[NodeSpec(node, 4, 0) for node in NODES], slurmctld_daemon=True, **spec)
    )
    conf, log = tmp_path / name, tmp_path / "slurmctld.log"
    conf.write_text(text)
    (tmp_path / "config.yaml").write_text(
        f"slurmctld_log: {log}\nstate_dir: {tmp_path / 'state'}\n"
    )
    env = shims(
        cluster,
        "scontrol",
        "sinfo",
        copy_in={str(conf): f"/etc/slurm/{name}"},
        copy_out={"/var/log/slurm/slurmctld.log": str(log)},
    )
    return cluster, conf, env


def generate(
    tmp_path: Path, env: dict[str, str], *extra: str, output: str = "topology.conf"
) -> tuple[Result, dict[str, Any]]:
    """The real CLI with a config naming the log copy; returns the result and JSON report."""
    report = tmp_path / "report.json"
    report.unlink(missing_ok=True)
    args = ["--config", str(tmp_path / "config.yaml"), "generate", "--sim", SIM]
    args += ["-o", str(tmp_path / output), "--reconfigure"]
    args += ["--metrics", str(tmp_path / "run.prom"), "--report", str(report)]
    args += ["--json", *extra]
    result = CliRunner(env=env).invoke(main, args, env=env)
    data = json.loads(report.read_text()) if report.exists() else {}
    return result, data


def running(cluster: Cluster, written: str) -> list[str]:
    """How the topology slurmctld runs differs from *written* (empty: it runs it)."""
    return differences(parse_topology(written), parse_show_topology(cluster.show_topology()))


def metrics(tmp_path: Path) -> dict[str, float]:
    """The metrics file, parsed by prometheus_client's own text parser."""
    from prometheus_client.parser import text_string_to_metric_families

    text = (tmp_path / "run.prom").read_text()
    return {
        sample.name + json.dumps(sample.labels, sort_keys=True): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def test_reconfigure_applies_skips_and_rolls_back(
    make_cluster: Any, shims: Shims, slurm_version: str, tmp_path: Path
) -> None:
    cluster, conf, env = started(
        make_cluster,
        shims,
        tmp_path,
        "topology.conf",
        START,
        topology_plugin="topology/tree",
        topology_conf=START,
    )
    show_config = cluster.exec(["scontrol", "show", "config"]).stdout
    assert parse_log_file(show_config) == "/var/log/slurm/slurmctld.log"  # where reasons are

    # 1. a changed topology is written, slurmctld reconfigured, and it runs what was written
    result, report = generate(tmp_path, env)
    assert result.exit_code == Exit.OK, result.output
    applied = conf.read_text()
    assert "gpu0005" not in applied and "SwitchName=leaf-su002-r0 Nodes=gpu[0003-0004]" in applied
    assert running(cluster, applied) == []
    notes = {f["kind"]: f["message"] for f in report["findings"]}
    assert notes["slurm-nodes"].startswith("4 nodes from `scontrol show nodes --json`")
    installed = cluster.exec(["scontrol", "--version"]).stdout.split()[1]
    assert installed.startswith(slurm_version)
    assert notes["slurm-version"] == f"Slurm {installed} (`scontrol --version`)"
    first = metrics(tmp_path)
    assert first["topograph_slurm_success{}"] == 1 and first["topograph_slurm_reconfigured{}"] == 1
    assert first['topograph_slurm_nodes{"state": "placed"}'] == 4

    # 2. the same fabric again: nothing written, no reconfigure
    before = cluster.slurmctld_log().count(RECONFIGURES)
    result, _ = generate(tmp_path, env)
    assert result.exit_code == Exit.OK, result.output
    assert "no reconfigure" in result.stderr
    assert cluster.slurmctld_log().count(RECONFIGURES) == before
    second = metrics(tmp_path)
    assert second["topograph_slurm_reconfigured{}"] == 0
    assert second["topograph_slurm_topology_written{}"] == 0

    # 3. a candidate slurmctld refuses: old file back, candidate kept, exit 10, Slurm's reason
    templates = tmp_path / "templates"
    templates.mkdir()
    tree = (builtin_templates() / "topology.conf.tree.j2").read_text()
    (templates / "topology.conf.tree.j2").write_text(tree + BROKEN)
    result, _ = generate(tmp_path, env, "--templates", str(templates))
    assert result.exit_code == Exit.APPLY, result.output
    errors = [line for line in result.stderr.splitlines() if line.startswith("topograph-slurm:")]
    assert len(errors) == 1 and errors[0].startswith("topograph-slurm: error: slurmctld did not")
    assert "Switch (leaf-su001-r0) has already been defined" in errors[0]
    assert conf.read_text() == applied
    rejected = (tmp_path / "topology.conf.rejected").read_text()
    assert rejected.count("SwitchName=leaf-su001-r0 ") == 2
    assert running(cluster, applied) == []  # the old config still runs
    assert cluster.exec(["scontrol", "ping"]).rc == 0
    failed = metrics(tmp_path)
    assert failed["topograph_slurm_success{}"] == 0
    last = parse_last_success((tmp_path / "run.prom").read_text())
    assert last == second["topograph_slurm_last_success_timestamp_seconds{}"]

    # 4. docs/keep-true.md's example, as printed, from the start again (the page shows 24.11)
    if slurm_version == "24.11":
        conf.write_text(START)
        shutil.rmtree(tmp_path / "state")
        (tmp_path / "topology.conf.rejected").unlink()
        subprocess.run(["scontrol", "reconfigure"], env=env, check=True, timeout=120)
        assert_page_shows("docs/keep-true.md", 1, lambda line: run_here(tmp_path, env, line))


YAML_START = """\
- topology: ib
  cluster_default: true
  tree:
    switches:
      - switch: s1
        nodes: gpu[0001-0004]
"""


def test_reconfigure_checks_every_topology_of_a_yaml(
    make_cluster: Any, shims: Shims, slurm_version: str, tmp_path: Path
) -> None:
    if slurm_version < "25.05":
        pytest.skip(f"topology.yaml needs Slurm 25.05+, this is {slurm_version}")
    cluster, conf, env = started(
        make_cluster, shims, tmp_path, "topology.yaml", YAML_START, topology_yaml=YAML_START
    )
    result, _ = generate(tmp_path, env, "--format", "yaml", output="topology.yaml")
    assert result.exit_code == Exit.OK, result.output
    assert "slurmctld reconfigured" in result.stderr
    written = conf.read_text()
    for name in ("ib", "su"):
        mine = parse_topology(written, topology=name)
        theirs = parse_show_topology(cluster.show_topology(name), name)
        assert mine.kind == theirs.kind and differences(mine, theirs) == [], name
