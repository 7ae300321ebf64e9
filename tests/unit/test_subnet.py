"""Storage HCAs in the dump: several subnets (kept apart by cabling) and converged fabrics
(told apart by ``--hcas``). Either way the compute topology must come out as without them."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from click.testing import CliRunner, Result

from tests.conftest import real_fixture
from tests.support.fabric_builder import FabricBuilder
from topograph_slurm.analysis.fabric import naming, subnet
from topograph_slurm.analysis.fabric.analyse import analyse
from topograph_slurm.analysis.fabric.naming import NamingPolicy
from topograph_slurm.cli.main import main
from topograph_slurm.errors import Exit
from topograph_slurm.model.findings import FindingKind

COMPUTE = "nodes=32,rails=8,su=8"
WITH_STORAGE = COMPUTE + ",storage=1"


def run(*args: str) -> Result:
    return CliRunner().invoke(main, ["--config", os.devnull, *args])


def _report(tmp_path: Path, *args: str) -> dict[str, Any]:
    path = tmp_path / "report.json"
    result = run("generate", *args, "--report", str(path), "--json")
    assert result.exit_code == 0, result.output
    report: dict[str, Any] = json.loads(path.read_text())
    return report


def _topology(*args: str) -> str:
    result = run("generate", *args)
    assert result.exit_code == 0, result.output
    return result.output


def test_storage_subnet_hcas_are_left_out_with_a_reason_and_one_finding(tmp_path: Path) -> None:
    report = _report(tmp_path, "--sim", WITH_STORAGE)
    reasons = [ex["reason"] for ex in report["exclusions"]]
    assert reasons.count(subnet.REASON_OTHER_SUBNET) == 32 * 2
    assert {ex["description"].split()[1] for ex in report["exclusions"]} == {"mlx5_8", "mlx5_9"}
    split = [f for f in report["findings"] if f["kind"] == FindingKind.SPLIT_SUBNETS]
    assert len(split) == 1 and split[0]["subject"] == "gpu[0001-0032]"
    assert "left out 64 HCA(s)" in split[0]["message"]


def test_storage_subnet_leaves_the_compute_topology_unchanged() -> None:
    compute = _topology("--sim", COMPUTE)
    # the storage servers are hosts too until the Slurm node list says otherwise
    alone = _topology("--sim", WITH_STORAGE)
    assert "SwitchName=stor-leaf-009 Nodes=stor-[001-002]\n" in alone
    slurm_nodes = _topology("--sim", WITH_STORAGE, "--slurm-nodes", "gpu[0001-0032]")
    assert _same_lines(slurm_nodes, compute)
    assert _same_lines(_topology("--sim", WITH_STORAGE, "--hcas", "mlx5_[0-7]"), compute)


def _same_lines(a: str, b: str) -> bool:
    """Equal but for comment lines."""
    strip = lambda text: [line for line in text.splitlines() if not line.startswith("#")]  # noqa: E731
    return strip(a) == strip(b)


def test_hcas_names_the_compute_rails_of_a_converged_fabric() -> None:
    """Storage HCAs on storage leaves under the same spine: one subnet, so only names tell."""
    fb = FabricBuilder()
    for name in ("leaf-a", "leaf-b", "stor-leaf", "spine"):
        fb.switch(name)
    for leaf in ("leaf-a", "leaf-b", "stor-leaf"):
        fb.cable(leaf, "spine")
    for n in range(4):
        fb.host(f"gpu{n}", ["leaf-a" if n < 2 else "leaf-b"])
        fb.ca(f"gpu{n}/storage", f"gpu{n} mlx5_8")
        fb.cable(f"gpu{n}/storage", "stor-leaf")
    names = naming.name_switches(fb.fabric)
    mixed = analyse(fb.fabric, NamingPolicy())
    assert {len(rails) for rails in mixed.hosts.rails.values()} == {2}  # storage posed as a rail
    chosen = analyse(fb.fabric, NamingPolicy(hcas=naming.compile_hcas(r"mlx5_[0-7]")))
    assert {len(rails) for rails in chosen.hosts.rails.values()} == {1}
    assert [leaf.name for leaf in chosen.tree.leaves] == ["leaf-a", "leaf-b"]
    assert {(ex.reason, ex.leaf) for ex in chosen.exclusions} == {
        (naming.REASON_HCA, names[fb.guids["stor-leaf"]])
    }
    assert not [f for f in chosen.findings if f.kind == FindingKind.SPLIT_SUBNETS]


def test_bad_hcas_pattern_is_one_usage_error_and_writes_nothing(tmp_path: Path) -> None:
    out = tmp_path / "topology.conf"
    result = run("generate", "--sim", COMPUTE, "--hcas", "mlx5_[", "-o", str(out))
    assert result.exit_code == Exit.USAGE
    assert result.output.count("\n") == 1 and "--hcas: invalid regex" in result.output
    assert not out.exists()


def test_hcas_from_the_config_file(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text("hcas: 'mlx5_[0-7]'\n")
    result = CliRunner().invoke(main, ["--config", str(config), "generate", "--sim", WITH_STORAGE])
    assert result.exit_code == 0, result.output
    assert _same_lines(result.output, _topology("--sim", COMPUTE))


def test_help_lists_hcas() -> None:
    assert "--hcas REGEX" in run("generate", "--help").output


def test_selene_compute_and_storage_dumps_in_one_file(tmp_path: Path) -> None:
    """NVIDIA's real Selene dumps, compute then storage, in one file: the DGX nodes' storage
    HCAs are left out and the compute topology is the one the compute dump alone gives."""
    compute = real_fixture("ibnetdiscover/nvidia-selene-compute-hdr-quantum.txt")
    storage = real_fixture("ibnetdiscover/nvidia-selene-storage-hdr-edr.txt")
    both = tmp_path / "both.txt"
    both.write_bytes(compute.read_bytes() + storage.read_bytes())
    nodes = ("--slurm-nodes", "luna-[0001-9999]")
    alone = _topology("--ibnetdiscover", str(compute), *nodes)
    assert _same_lines(_topology("--ibnetdiscover", str(both), *nodes), alone)
    report = _report(tmp_path, "--ibnetdiscover", str(both), *nodes)
    split = [f for f in report["findings"] if f["kind"] == FindingKind.SPLIT_SUBNETS]
    assert len(split) == 1 and split[0]["subject"].startswith("luna-[0001-0034,")
    left_out = [ex for ex in report["exclusions"] if ex["reason"] == subnet.REASON_OTHER_SUBNET]
    assert left_out and all(ex["description"].startswith("luna-") for ex in left_out)


def test_planes_of_equal_weight_stay_rails_of_one_tree() -> None:
    """A two-plane fabric (rails 0-1 on plane A, 2-3 on plane B, no cable between the planes)
    is one fabric to Slurm: nothing is left out and each unit is still one logical leaf."""
    fb = FabricBuilder()
    for plane in ("a", "b"):
        fb.switch(f"spine-{plane}")
        for unit in (1, 2):
            for rail in (0, 1):
                leaf = f"leaf-{plane}{unit}-r{rail}"
                fb.switch(leaf)
                fb.cable(leaf, f"spine-{plane}")
    for n in range(4):
        unit = 1 + n // 2
        fb.host(f"gpu{n}", [f"leaf-{p}{unit}-r{r}" for p in ("a", "b") for r in (0, 1)])
    result = analyse(fb.fabric, NamingPolicy())
    assert not result.exclusions
    assert not [f for f in result.findings if f.kind == FindingKind.SPLIT_SUBNETS]
    assert [(leaf.nodes, len(leaf.switches)) for leaf in result.tree.leaves] == [
        (["gpu0", "gpu1"], 4),
        (["gpu2", "gpu3"], 4),
    ]
    assert len(result.tree.tops) == 1  # the two planes' spines are one logical parent
