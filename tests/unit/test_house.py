"""The house's shape, as ARCHITECTURE.md draws it: few top-level modules, no import cycle,
processes started only at the edges, one analysed fabric that every command reads, and the
config's scontrol honoured by every command that asks Slurm."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import grimp
import pytest
from click.testing import CliRunner

from tests.support.scontrol import Answer, ReplayScontrol
from topograph_slurm.app.fabric import read_fabric
from topograph_slurm.cli.main import main
from topograph_slurm.config import Settings
from topograph_slurm.errors import Exit

PACKAGE = Path(__file__).resolve().parents[2] / "topograph_slurm"
#: Where a process may be started: the Slurm package, the fan-out, the live ibnetdiscover.
PROCESS_EDGES = ("slurm/", "collect/", "sources/ibnetdiscover/command.py")


def test_the_top_level_holds_at_most_five_modules() -> None:
    modules = sorted(path.name for path in PACKAGE.glob("*.py"))
    assert len(modules) <= 5, modules


def test_no_module_imports_itself_through_others() -> None:
    graph = grimp.build_graph("topograph_slurm")
    cycles = [
        (module, other)
        for module in sorted(graph.modules)
        for other in sorted(graph.find_modules_directly_imported_by(module))
        if graph.find_shortest_chain(importer=other, imported=module)
    ]
    assert cycles == []


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
    return found


def test_processes_start_only_at_the_edges() -> None:
    starters = {"subprocess", "multiprocessing", "pty"}
    found = sorted(
        str(path.relative_to(PACKAGE))
        for path in PACKAGE.rglob("*.py")
        if _imports(path) & starters
    )
    assert found and all(name.startswith(PROCESS_EDGES) for name in found), found


def _sim(**changes: object) -> Settings:
    return Settings(sim="nodes=16,su=4", slurm_version="24.11", slurm_nodes="all", **changes)


def test_one_fabric_carries_the_tree_the_units_and_no_domains_without_gpu_data() -> None:
    fabric = read_fabric(_sim(), print)
    assert fabric.tree is fabric.analysis.tree and fabric.units is not None
    assert [block.nodes[0] for block in fabric.units.blocks] == [
        "gpu0001",
        "gpu0005",
        "gpu0009",
        "gpu0013",
    ]
    assert fabric.domains is None and not fabric.nvlink and fabric.blocks is fabric.units
    assert fabric.findings == [*fabric.analysis.findings, *fabric.units.findings]


def test_nvlink_asked_without_gpu_data_is_an_error_unless_no_blocks_are_needed() -> None:
    from topograph_slurm.errors import InputError

    with pytest.raises(InputError, match="--block-source nvlink needs a --snapshot"):
        read_fabric(_sim(block_source="nvlink"), print)
    fabric = read_fabric(_sim(block_source="nvlink"), print, blocks_needed=False)
    assert fabric.nvlink and fabric.blocks is None and fabric.units is not None


def test_health_and_draw_read_the_blocks_generate_writes(tmp_path: Path) -> None:
    """The IB unit blocks of one fabric: generate --format block writes them, health labels
    nodes by them, draw draws them."""
    spec = "nodes=16,su=4"
    runner = CliRunner()
    conf = runner.invoke(main, ["generate", "--sim", spec, "--format", "block"]).stdout
    written = [line.split()[0] for line in conf.splitlines() if line.startswith("BlockName=")]
    assert len(written) == 4
    nodes = [
        {"name": f"gpu{i:04d}", "weight": 1, "features": [], "active_features": [], "state": []}
        for i in range(1, 17)
    ]
    scontrol = ReplayScontrol(tmp_path, {"show nodes --json": Answer(json.dumps({"nodes": nodes}))})
    config = tmp_path / "c.yaml"
    config.write_text(f"scontrol: {scontrol.path}\nscontrol_timeout: 7\n")
    health = runner.invoke(main, ["--config", str(config), "health", "--sim", spec, "--json"])
    assert health.exit_code == Exit.DIFFERS, health.output
    labels = {f for c in json.loads(health.stdout)["nodes"] for f in c["features"]["new"]}
    blocks = {name.removeprefix("BlockName=") for name in written}
    assert {f"topo_block_{block}" for block in blocks} <= labels
    svg = runner.invoke(main, ["draw", "--sim", spec]).stdout
    assert all(block in svg for block in blocks)


def test_every_command_asks_the_configured_scontrol(tmp_path: Path) -> None:
    """explain JOBID reads the job and the running topology through the config's scontrol
    (it once ran `scontrol` from PATH with a fixed 60 s timeout)."""
    job = {
        "job_id": 5,
        "job_state": ["RUNNING"],
        "nodes": "node[01-02]",
        "gres_detail": ["gpu:4(IDX:0-3)"] * 2,
        "admin_comment": "",
        "job_resources": {
            "nodes": {
                "allocation": [{"index": 0, "name": "node01"}, {"index": 1, "name": "node02"}]
            }
        },
    }
    topology = "SwitchName=s1 Switches=(null) Nodes=node[01-02]\n"
    scontrol = ReplayScontrol(
        tmp_path / "bin",
        {
            "show job --json 5": Answer(json.dumps({"jobs": [job]})),
            "show topology": Answer(topology),
        },
        name="my-scontrol",
    )
    config = tmp_path / "c.yaml"
    config.write_text(f"scontrol: {scontrol.path}\nscontrol_timeout: 7\n")
    result = CliRunner().invoke(main, ["--config", str(config), "explain", "5", "--tp", "4"])
    assert result.exit_code == Exit.OK, result.output
    assert scontrol.calls == ["show job --json 5", "show topology"]


def test_architecture_names_every_template() -> None:
    """ARCHITECTURE.md's Templates table lists every file in templates/ with what renders it."""
    page = (PACKAGE.parent / "ARCHITECTURE.md").read_text()
    table = page.split("\n## Templates\n", 1)[1].split("\n## ", 1)[0]
    named = {
        cell
        for row in table.splitlines()
        if row.startswith("| `")
        for cell in row.split("|")[1].replace("`", "").replace(",", " ").split()
    }
    on_disk = {path.name for path in (PACKAGE.parent / "templates").iterdir() if path.is_file()}
    assert on_disk - named == set()
    assert named - on_disk == set()
