"""`topograph-slurm draw` (and `generate --report FILE.html`): the pictures parse as XML, every
switch, leaf, block and planted fault is drawn with its colour class, legends list exactly
what is drawn, the bytes are deterministic, big fabrics become units with drill-downs, and bad
input is one error line with its exit code and nothing written."""

from __future__ import annotations

import os
import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from tests.conftest import real_fixture
from tests.support.sim_gpu import (
    gb200_tray_topology,
    nvl_node_gpus,
    render_query_q,
    render_topo_matrix,
)
from tests.support.snapshots import write_node_outputs
from topograph_slurm.cli.main import main
from topograph_slurm.errors import Exit
from topograph_slurm.model.gpu import GpuFabric
from topograph_slurm.sources import sim
from topograph_slurm.sources.snapshot import KEY_Q, KEY_TOPO

SVG = "{http://www.w3.org/2000/svg}"
#: two units of 8 nodes, 4 rails: gpu0001 rail 0 at 1xNDR and gpu0009 rail 0 at 4xSDR,
#: gpu0005's last rail cabled to the next unit's leaf
SPEC = "nodes=16,su=8,rails=4,degraded=2,disagree=5"


def run(*args: str) -> Result:
    return CliRunner().invoke(main, ["--config", os.devnull, *args])


def faulty_dump(tmp_path: Path) -> Path:
    """The SPEC fabric with more faults planted in its text: gpu0003's second HCA carries the
    firmware's default description (an excluded HCA, so gpu0003 misses a rail), and the first
    uplink of leaf-su001-r0 runs at 1xNDR at both ends."""
    text = sim.generate_ibnetdiscover(sim.parse_sim_spec(SPEC))
    text = text.replace('"gpu0003 mlx5_1"', '"MT4129 ConnectX7   Mellanox Technologies"')
    text = text.replace(
        '[9]\t"S-0002c90200000000"[1]\t\t# "MF0;spine-001:MQM9790/U1" lid 5 4xNDR',
        '[9]\t"S-0002c90200000000"[1]\t\t# "MF0;spine-001:MQM9790/U1" lid 5 1xNDR',
    )
    text, count = re.subn(r'(\[1\]\t"S-0002c90100000000"\[9\][^\n]*) 4xNDR', r"\1 1xNDR", text)
    assert count == 1
    path = tmp_path / "fabric.txt"
    path.write_text(text)
    return path


def drawn(svg_text: str) -> tuple[dict[str, set[str]], set[str], list[str]]:
    """Classes per data-key, every class drawn outside the legend, and the legend's classes."""
    root = ET.fromstring(svg_text)
    by_key: dict[str, set[str]] = {}
    classes: set[str] = set()
    drawing = root.find(f"{SVG}g[@class='drawing']")
    assert drawing is not None
    for element in drawing:
        cls = set(element.get("class", "").split())
        classes |= cls
        if element.get("data-key"):
            by_key.setdefault(element.get("data-key", ""), set()).update(cls)
    legend = root.find(f"{SVG}g[@class='legend']")
    assert legend is not None
    samples = [
        e.get("class", "").replace(" sample", "") for e in legend if "sample" in e.get("class", "")
    ]
    return by_key, classes, samples


def test_every_switch_leaf_block_and_planted_fault_is_drawn(tmp_path: Path) -> None:
    result = run("draw", "--ibnetdiscover", str(faulty_dump(tmp_path)))
    assert result.exit_code == 0, result.output
    by_key, classes, legend = drawn(result.stdout)
    assert "upper" in by_key["spine-001"]
    assert {"leaf", "fault-excluded"} <= by_key["leaf-su001-r0"]
    assert "leaf" in by_key["leaf-su002-r0"]
    assert {"node", "fault-degraded"} <= by_key["gpu0001"]
    assert {"node", "fault-degraded"} <= by_key["gpu0009"]
    assert {"node", "fault-rail-disagreement"} <= by_key["gpu0005"]
    assert {"node", "fault-missing-rail"} <= by_key["gpu0003"]
    assert by_key["gpu0002"] == {"node"}
    assert {"rail", "fault-degraded"} <= by_key["0002c90100000000"]  # the rail switch of gpu0001
    assert by_key["block #1"] == {"block"}
    assert len([k for k, c in by_key.items() if "node" in c]) == 16
    root = ET.fromstring(result.stdout).find(f"{SVG}g[@class='drawing']")
    assert root is not None
    edges = [e for e in root.iter(f"{SVG}line") if "edge" in e.get("class", "").split()]
    assert len(edges) == 2
    slow = [e for e in edges if "fault-degraded" in e.get("class", "")]
    assert len(slow) == 1 and "leaf-su001-r0 → spine-001" in "".join(slow[0].itertext())
    counts = [t.text for t in root.iter(f"{SVG}text") if t.get("class") == "count"]
    assert counts == ["×32", "×32"]
    # blocks outlined and numbered in the order generate writes them
    conf = run("generate", "--ibnetdiscover", str(faulty_dump(tmp_path)), "--format", "block")
    order = re.findall(r"^BlockName=(\S+)", conf.stdout, re.M)
    labels = [t.text for t in root.iter(f"{SVG}text") if t.text and t.text.startswith("#")]
    assert labels == [f"#{i + 1} {name}" for i, name in enumerate(order)]
    # the legend lists exactly the classes drawn (of those it explains), faults included
    assert set(legend) <= classes
    assert {c for c in classes if c.startswith("fault-")} == {
        c for c in legend if c.startswith("fault-")
    }
    assert {
        "fault-degraded",
        "fault-missing-rail",
        "fault-rail-disagreement",
        "fault-excluded",
    } <= set(legend)


def test_output_is_deterministic_and_self_contained(tmp_path: Path) -> None:
    dump = str(faulty_dump(tmp_path))
    for name in ("a.svg", "b.svg", "a.html", "b.html"):
        assert run("draw", "--ibnetdiscover", dump, "-o", str(tmp_path / name)).exit_code == 0
    assert (tmp_path / "a.svg").read_bytes() == (tmp_path / "b.svg").read_bytes()
    page = (tmp_path / "a.html").read_text()
    assert page == (tmp_path / "b.html").read_text()
    assert re.findall(r"https?://[^\"' ]+", page) == ["http://www.w3.org/2000/svg"]
    assert "<link" not in page and "src=" not in page and "@import" not in page
    assert "default-src 'none'" in page  # the page may not fetch anything, even by accident


def test_big_fabric_is_an_overview_of_units_with_a_detail_each(tmp_path: Path) -> None:
    spec = "nodes=2048,su=32,rails=2,tiers=3,degraded=4"
    out = tmp_path / "big.html"
    result = run("draw", "--sim", spec, "-o", str(out))
    assert result.exit_code == 0, result.output
    page = out.read_text()
    assert page.count('<div class="pic"') == 1 + 4  # the overview and four pods of 16 leaves
    overview = run("draw", "--sim", spec)
    assert "4 unit details are in --format html" in overview.stderr
    by_key, _, legend = drawn(overview.stdout)
    assert {"unit-1", "unit-2", "unit-3", "unit-4"} <= set(by_key)
    assert "fault-degraded" in by_key["unit-1"] and "fault-degraded" in legend
    assert not any("node" in c for c in by_key.values())
    unit = run("draw", "--sim", spec, "--unit", "gpu0600")
    by_key, _, _ = drawn(unit.stdout)
    assert "leaf" in by_key["leaf-su019-r0"] and "node" in by_key["gpu0600"]
    assert "gpu0001" not in by_key


def test_job_view_colours_groups_and_reds_slow_edges() -> None:
    result = run("draw", "--sim", SPEC, "--nodes", "gpu[0001-0016]", "--tp", "16", "--pp", "2")
    assert result.exit_code == 0, result.output
    root = ET.fromstring(result.stdout)
    paths = list(root.iter(f"{SVG}path"))
    tp = [p for p in paths if "edge-tp" in p.get("class", "")]
    pp = [p for p in paths if "edge-pp" in p.get("class", "")]
    # 8 TP groups of two neighbouring nodes inside a leaf; pipelines pair node i with i+8,
    # the next unit's leaf: every one of those edges leaves the leaf a pipeline fits in
    assert len(tp) == 8 and not any("slow" in p.get("class", "") for p in tp)
    assert len(pp) == 8 and all("slow" in p.get("class", "") for p in pp)
    by_key, _, legend = drawn(result.stdout)
    assert {"job", "g0"} <= by_key["gpu0001"] and {"job", "g0"} <= by_key["gpu0002"]
    assert "g1" in by_key["gpu0003"]
    assert {"slow", "edge-pp", "edge-tp", "job"} <= set(legend)


def test_node_view_from_stdin_is_the_files() -> None:
    path = real_fixture("nvidia-smi-topo/h100-8gpu-8ib-5eth-13nic-dgx.txt")
    piped = CliRunner().invoke(
        main, ["--config", os.devnull, "draw", "--topo-matrix", "-"], input=path.read_text()
    )
    assert piped.exit_code == 0, piped.output
    by_key, _, _ = drawn(piped.stdout)
    assert by_key == drawn(run("draw", "--topo-matrix", str(path)).stdout)[0]


def test_node_view_of_a_real_dgx_h100_matrix() -> None:
    path = real_fixture("nvidia-smi-topo/h100-8gpu-8ib-5eth-13nic-dgx.txt")
    result = run("draw", "--topo-matrix", str(path))
    assert result.exit_code == 0, result.output
    by_key, classes, legend = drawn(result.stdout)
    assert len([k for k, c in by_key.items() if "gpu" in c]) == 8
    assert len([k for k, c in by_key.items() if "nic" in c]) == 13
    assert {"NUMA 0", "NUMA 1"} <= set(by_key) and "nvswitch" in by_key["nvlink"]
    root = ET.fromstring(result.stdout)
    rails = [e for e in root.iter(f"{SVG}line") if "GPU0 → mlx5_ib0" in "".join(e.itertext())]
    assert len(rails) == 1 and rails[0].get("class") == "lk-pix"
    assert "cross-numa" not in classes  # every GPU's own rail is PIX on a DGX H100
    assert {"lk-nv", "lk-pix", "lk-sys"} <= set(legend)


def _tray_gpus(health: str, bandwidth: str = "Full") -> list[GpuFabric]:
    return nvl_node_gpus(
        "c0ffee00-0000-0000-0000-000000000001", 3, health=health, bandwidth=bandwidth
    )


def _tray_view(tmp_path: Path, gpus: list[GpuFabric]) -> Result:
    """The node view of a GB200 tray from a snapshot holding *gpus*' NVLink fabric."""
    outputs = {
        "gpu0001": {
            KEY_TOPO: render_topo_matrix(gb200_tray_topology()),
            KEY_Q: render_query_q(gpus),
        }
    }
    snap = write_node_outputs(tmp_path / "snap", outputs)
    result = run("draw", "--snapshot", str(snap), "--node", "gpu0001")
    assert result.exit_code == 0, result.output
    return result


def test_node_view_from_a_snapshot_marks_cross_numa_and_unhealthy_nvlink(tmp_path: Path) -> None:
    by_key, classes, legend = drawn(_tray_view(tmp_path, _tray_gpus("Unhealthy")).stdout)
    assert {"gpu", "fault-nvlink"} <= by_key["GPU0"]
    assert "cross-numa" in classes and "cross-numa" in legend and "fault-nvlink" in legend


def test_generate_report_html_embeds_the_fabric_view(tmp_path: Path) -> None:
    report, conf = tmp_path / "report.html", tmp_path / "topology.conf"
    dump = str(faulty_dump(tmp_path))
    result = run("generate", "--ibnetdiscover", dump, "--report", str(report), "-o", str(conf))
    assert result.exit_code == 0, result.output
    page = report.read_text()
    assert '<pre class="report">topograph-slurm report' in page
    assert '<svg xmlns="http://www.w3.org/2000/svg"' in page and "fault-missing-rail" in page
    assert conf.read_text().startswith("# topology.conf")


def test_a_topology_file_draws_places_without_rails(tmp_path: Path) -> None:
    conf = tmp_path / "topology.conf"
    assert run("generate", "--sim", "demo", "--format", "block", "-o", str(conf)).exit_code == 0
    result = run("draw", "--topology", str(conf))
    assert result.exit_code == 0, result.output
    by_key, classes, _ = drawn(result.stdout)
    assert "block" in by_key["leaf-su001-r0"] and "node" in by_key["gpu0032"]
    assert "block" in by_key["block #4"]
    assert "rail" not in classes and "upper" not in classes


def test_control_characters_in_names_are_escaped(tmp_path: Path) -> None:
    text = sim.generate_ibnetdiscover(sim.parse_sim_spec("nodes=8,su=8,rails=2"))
    path = tmp_path / "fabric.txt"
    path.write_text(text.replace('"gpu0002 mlx5_1"', '"gpu\x1b[31m0002 mlx5_1"'))
    result = run("draw", "--ibnetdiscover", str(path))
    assert result.exit_code == 0, result.output
    assert "\x1b" not in result.stdout and "\\x1b[31m0002" in result.stdout
    ET.fromstring(result.stdout)


@pytest.mark.parametrize(
    ("args", "code", "fragment"),
    [
        (["--sim", "demo", "--unit", "nosuch"], Exit.USAGE, "--unit nosuch: no unit"),
        (["--node", "gpu0001"], Exit.USAGE, "--node needs --snapshot"),
        (
            ["--topo-matrix", "/nonexistent/topo.txt"],
            Exit.INPUT,
            "/nonexistent/topo.txt: cannot read",
        ),
        (["--sim", "demo", "-o", "fabric.png"], Exit.USAGE, "cannot tell the format of fabric.png"),
        (["--sim", "demo", "-o", "/nonexistent/dir/fabric.svg"], Exit.OUTPUT, "/nonexistent/dir"),
        (
            ["--sim", "demo", "--nodes", "other[1-2]", "--gpus-per-node", "8"],
            Exit.INPUT,
            "2 of 2 nodes are not on the fabric",
        ),
    ],
)
def test_bad_input_is_one_line_and_its_exit_code(
    args: list[str], code: int, fragment: str, tmp_path: Path
) -> None:
    os.chdir(tmp_path)
    result = run("draw", *args)
    assert result.exit_code == code, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("topograph-slurm: error: "), result.stderr
    assert fragment in lines[0]
    assert list(tmp_path.iterdir()) == []


def test_draw_ufm_draws_what_the_same_fabrics_dump_draws(tmp_path: Path) -> None:
    from tests.support.ufm_standin import StandinState, make_pki, serve, ufm_json_from_fabric
    from topograph_slurm.sources.ibnetdiscover import parse_ibnetdiscover

    dump = faulty_dump(tmp_path)
    fabric = parse_ibnetdiscover(dump.read_text(), str(dump))
    pki = make_pki(tmp_path / "pki")
    state = StandinState(ufm_json_from_fabric(fabric), username="u", password="p-secret-9")
    creds = tmp_path / "ufm.yaml"
    creds.write_text("username: u\npassword: p-secret-9\n")
    creds.chmod(0o600)
    with serve(pki, state) as standin:
        args = [
            "--ufm",
            standin.url,
            "--ufm-ca-bundle",
            str(pki.ca),
            "--ufm-credentials",
            str(creds),
        ]
        via_ufm = run("draw", *args)
    assert via_ufm.exit_code == 0, via_ufm.output
    via_dump = run("draw", "--ibnetdiscover", str(dump))
    assert via_ufm.stdout.replace(standin.url, "SOURCE").count("fault-") == via_dump.stdout.count(
        "fault-"
    )
    assert drawn(via_ufm.stdout)[0] == drawn(via_dump.stdout)[0]


def test_a_snapshot_draws_its_nvlink_racks_as_blocks_with_the_sick_node(tmp_path: Path) -> None:
    outputs = {}
    for rack in range(2):
        for slot in range(4):
            node = f"gpu{rack * 4 + slot + 1:04d}"
            state = "In Progress" if node == "gpu0006" else "Completed"
            uuid = f"c0ffee00-0000-0000-0000-00000000000{rack + 1}"
            outputs[node] = {KEY_Q: render_query_q(nvl_node_gpus(uuid, 1, state=state))}
    spec = sim.parse_sim_spec("nodes=8,rails=2,su=8")
    fabric = {"fabric/ibnetdiscover.txt": sim.generate_ibnetdiscover(spec)}
    entry = {"node": "gpu0001", "command": "ibnetdiscover", "exit_code": 0}
    snap = write_node_outputs(
        tmp_path / "snap", outputs, fabric, fabric=entry | {"file": "fabric/ibnetdiscover.txt"}
    )
    result = run("draw", "--snapshot", str(snap))
    assert result.exit_code == 0, result.output
    by_key, _, legend = drawn(result.stdout)
    # the healthy rack is the one block (the sick node's rack is left out, with findings)
    assert "block" in by_key["block #1"] and "#1 nvl-gpu0001" in result.stdout
    assert {"node", "fault-nvlink"} <= by_key["gpu0006"] and "fault-nvlink" in legend
    assert by_key["gpu0001"] == {"node"}


def test_node_view_errors_name_the_node_and_the_snapshot(tmp_path: Path) -> None:
    outputs = {"gpu0001": {KEY_Q: render_query_q(nvl_node_gpus(None, None))}}
    snap = str(write_node_outputs(tmp_path / "snap", outputs))
    missing = run("draw", "--snapshot", snap, "--node", "gpu0009")
    assert missing.exit_code == Exit.USAGE and "--node gpu0009 is not in snapshot" in missing.stderr
    no_matrix = run("draw", "--snapshot", snap, "--node", "gpu0001")
    assert no_matrix.exit_code == Exit.INPUT
    assert "has no readable nvidia-smi topo -m for gpu0001" in no_matrix.stderr
    both = run("draw", "--snapshot", snap, "--topo-matrix", "-")
    assert both.exit_code == Exit.USAGE


def test_nvidia_selenes_real_dump_is_five_units_under_its_core() -> None:
    dump = real_fixture("ibnetdiscover/nvidia-selene-compute-hdr-quantum.txt")
    result = run("draw", "--ibnetdiscover", str(dump))
    assert result.exit_code == 0, result.output
    root = ET.fromstring(result.stdout)
    units = [e for e in root.iter(f"{SVG}rect") if e.get("class") == "unit"]
    names = ["".join(u.itertext()).split("\n")[0] for u in units]
    assert names == ["CSPINE1-01", "CSPINE2-01", "CSPINE3-01", "CSPINE4-01", "MSPINE3-01"]
    assert "9 leaves · 141 nodes" in result.stdout and "↑ CCORE1-001 ×1115" in result.stdout
    assert result.stdout.count('class="upper"') == 1  # the core, drawn once
    detail = run("draw", "--ibnetdiscover", str(dump), "--unit", "LG03-01")
    by_key, _, _ = drawn(detail.stdout)
    assert "leaf" in by_key["LG03-01"] and "upper" in by_key["CSPINE1-01"]
    assert len([k for k, c in by_key.items() if "node" in c]) == 141


def test_a_job_node_off_the_fabric_is_an_error_not_drawn() -> None:
    """A job node the fabric does not place (a typo, another cluster's node) is refused as
    explain and order refuse it: a picture without it would look complete."""
    result = run("draw", "--sim", "demo", "--nodes", "gpu[0001-0003],gpu00004", "--tp", "16")
    assert result.exit_code == Exit.INPUT
    assert result.stdout == ""
    assert "1 of 4 nodes are not on the fabric" in result.stderr
    assert "gpu00004 (did you mean gpu0004?)" in result.stderr


def test_islands_are_marked_on_their_top_switches() -> None:
    result = run("draw", "--sim", "nodes=32,su=8,rails=2,islands=2")
    assert result.exit_code == 0, result.output
    by_key, _, legend = drawn(result.stdout)
    tops = [k for k, c in by_key.items() if "upper" in c]
    assert len(tops) == 2 and all("fault-islands" in by_key[t] for t in tops)
    assert "fault-islands" in legend


def test_templates_override_the_built_in_drawing(tmp_path: Path) -> None:
    """--templates DIR (or the config's templates) replaces a draw template of the same name,
    the built-in ones fill the gaps; a missing directory is a config error before any work."""
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "draw.svg.j2").write_text("<svg>{{ picture.title }} by us</svg>\n")
    drawn = run("draw", "--sim", "nodes=4,rails=1,su=2", "--templates", str(tmp_path / "mine"))
    assert drawn.exit_code == 0 and drawn.output.endswith(" by us</svg>\n"), drawn.output
    config = tmp_path / "config.yaml"
    config.write_text(f"templates: {tmp_path / 'mine'}\n")
    args = ["--config", str(config), "draw", "--sim", "nodes=4,rails=1,su=2"]
    assert CliRunner().invoke(main, args).output == drawn.output
    page = run("draw", "--sim", "nodes=4,rails=1,su=2", "--format", "html")
    assert page.exit_code == 0 and "<html" in page.output, "the page still from the built-ins"
    missing = run("draw", "--sim", "nodes=4,rails=1,su=2", "--templates", str(tmp_path / "no"))
    assert missing.exit_code == Exit.CONFIG and "does not exist" in missing.output
    assert len(missing.output.strip().splitlines()) == 1


def test_a_job_picture_reads_the_config_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """The templates, the flags' settings and the picture's blocks all start from one read
    of the config file."""
    from topograph_slurm.cli import options

    reads: list[str | None] = []
    load = options.load_settings

    def counted(path: str | None = None) -> Any:
        reads.append(path)
        return load(path)

    monkeypatch.setattr(options, "load_settings", counted)
    result = run("draw", "--sim", SPEC, "--nodes", "gpu[0001-0016]", "--tp", "16", "--pp", "2")
    assert result.exit_code == 0, result.output
    assert reads == [os.devnull]


TOPO_CAPTURES = sorted(p.name for p in real_fixture("nvidia-smi-topo").iterdir())


def _extent(element: ET.Element) -> tuple[float, float, float, float]:
    """The box an SVG element covers as (left, top, right, bottom), text by its anchor."""

    def get(name: str) -> float:
        return float(element.get(name, 0))

    if element.tag == f"{SVG}rect":
        return get("x"), get("y"), get("x") + get("width"), get("y") + get("height")
    if element.tag == f"{SVG}line":
        xs, ys = (get("x1"), get("x2")), (get("y1"), get("y2"))
        return min(xs), min(ys), max(xs), max(ys)
    return get("x"), get("y"), get("x"), get("y")


@pytest.mark.parametrize("capture", TOPO_CAPTURES)
def test_the_node_view_holds_everything_it_draws_and_its_rails_in_front(capture: str) -> None:
    """The viewBox stopped at the NUMA boxes (952 px for 8 GPUs) while the matrix of 8 GPUs
    and 8 NICs reached 1083 px; the rails were drawn under the opaque NUMA boxes."""
    result = run("draw", "--topo-matrix", str(real_fixture(f"nvidia-smi-topo/{capture}")))
    assert result.exit_code == 0, result.output
    root = ET.fromstring(result.stdout)
    _, _, width, height = map(float, root.get("viewBox", "").split())
    for element in root.iter():
        if element.tag in (f"{SVG}rect", f"{SVG}line", f"{SVG}text"):
            left, top, right, bottom = _extent(element)
            assert left >= 0 and right <= width and top >= 0 and bottom <= height, (
                element.tag,
                element.attrib,
                "".join(element.itertext()),
            )
    drawing = list(root.find(f"{SVG}g[@class='drawing']") or [])
    last_numa = max(i for i, e in enumerate(drawing) if e.get("class") == "numa")
    rails = [i for i, e in enumerate(drawing) if "→" in "".join(e.itertext())]
    assert all(i > last_numa for i in rails)


def test_the_node_legend_counts_nvlink_faults_not_gpus(tmp_path: Path) -> None:
    from topograph_slurm.render.draw.faults import gpu_faults
    from topograph_slurm.sources.nvidia_smi import parse_query_fabric

    gpus = _tray_gpus("Unhealthy", "Degraded")
    faults = sum(map(len, gpu_faults(parse_query_fabric(render_query_q(gpus))).values()))
    result = _tray_view(tmp_path, gpus)
    by_key, _, _ = drawn(result.stdout)
    with_fault = sum("fault-nvlink" in classes for classes in by_key.values())
    assert faults > with_fault  # several faults on one GPU
    assert f"unhealthy NVLink fabric ({faults})" in result.stdout
