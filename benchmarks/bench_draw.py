"""Scale benchmark of ``draw``: the fabric view of simulated 2,048- and 16,384-node fabrics.

    python benchmarks/bench_draw.py                     # 2,048 and 16,384 nodes x 8 rails
    python benchmarks/bench_draw.py --nodes 16384 --repeat 5

Per fabric (``--sim nodes=N,su=32,tiers=3`` with degraded links and rail disagreements
planted, written once as ibnetdiscover text), per round and in one process: ``generate``
through the CLI (the reference: reading and analysing the same dump), ``draw -o fabric.svg``
and ``draw -o fabric.html`` through the CLI, and the drawing alone on the analysed fabric
(faults placed and cables counted, geometry, and the HTML page rendered) split in its three
stages. The table shows the best time of each over ``--repeat`` rounds, ``draw``'s ratio to
``generate`` in the same round (median), the sizes of the SVG (overview) and HTML (overview
and every unit's detail), and how many pictures and elements the page holds.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from click.testing import CliRunner

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from topograph_slurm.analysis.fabric.analyse import analyse, ib_blocks
from topograph_slurm.analysis.fabric.naming import NamingPolicy
from topograph_slurm.cli.main import main as cli
from topograph_slurm.model.slurm_version import SlurmVersion
from topograph_slurm.render.draw.fabric import fabric_pictures, scene
from topograph_slurm.render.draw.picture import render_page
from topograph_slurm.render.environment import environment
from topograph_slurm.sources import ibnetdiscover, sim


def spec_for(nodes: int) -> str:
    return f"nodes={nodes},su=32,rails=8,tiers=3,degraded={nodes // 512},disagree=5"


def timed(run: Callable[[], object]) -> float:
    start = time.perf_counter()
    run()
    return time.perf_counter() - start


def run_cli(*args: str) -> None:
    result = CliRunner().invoke(cli, ["--config", os.devnull, "-q", *args])
    assert result.exit_code == 0, result.output


def drawing_stages(dump: Path) -> dict[str, float]:
    """The drawing alone on an analysed fabric: scene, pictures, page."""
    fabric = ibnetdiscover.parse_ibnetdiscover(dump.read_text(), str(dump))
    analysis = analyse(fabric, NamingPolicy(), None)
    blocks = ib_blocks(analysis, SlurmVersion.parse("24.11"), None)
    times: dict[str, float] = {}
    start = time.perf_counter()
    made = scene(analysis.tree, blocks, analysis, [], str(dump))
    times["scene (faults, cables)"] = time.perf_counter() - start
    start = time.perf_counter()
    pictures = fabric_pictures(made)
    times["geometry"] = time.perf_counter() - start
    start = time.perf_counter()
    render_page(environment(None), "bench", pictures)
    times["HTML render"] = time.perf_counter() - start
    return times


def measure(nodes: int, repeat: int, directory: Path) -> None:
    dump = directory / f"fabric-{nodes}.txt"
    dump.write_text(sim.generate_ibnetdiscover(sim.parse_sim_spec(spec_for(nodes))))
    svg, html = directory / "fabric.svg", directory / "fabric.html"
    best: dict[str, float] = {}
    ratios = []
    for _ in range(repeat):
        rounds = {
            "generate (reference)": timed(
                lambda: run_cli("generate", "--ibnetdiscover", str(dump))
            ),
            "draw -o fabric.svg": timed(
                lambda: run_cli("draw", "--ibnetdiscover", str(dump), "-o", str(svg))
            ),
            "draw -o fabric.html": timed(
                lambda: run_cli("draw", "--ibnetdiscover", str(dump), "-o", str(html))
            ),
            **drawing_stages(dump),
        }
        ratios.append(rounds["draw -o fabric.html"] / rounds["generate (reference)"])
        for name, seconds in rounds.items():
            best[name] = min(best.get(name, seconds), seconds)
    page = html.read_text()
    print(f"\n{nodes} nodes x 8 rails ({spec_for(nodes)}), best of {repeat}")
    for name, seconds in best.items():
        print(f"  {name:28} {seconds:6.2f} s")
    print(f"  draw html / generate (median) {statistics.median(ratios):.2f}x")
    print(f"  SVG {svg.stat().st_size / 1e3:.0f} kB, HTML {len(page.encode()) / 1e6:.2f} MB, ")
    print(
        f"  {page.count('<svg ')} pictures, {page.count('<rect ')} boxes, "
        f"{page.count('<line ') + page.count('<path ')} edges"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, nargs="+", default=[2048, 16384])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        for nodes in args.nodes:
            measure(nodes, args.repeat, Path(tmp))
    return 0


if __name__ == "__main__":
    sys.exit(main())
