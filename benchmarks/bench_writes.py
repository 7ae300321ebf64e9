"""Writing many files at the cluster's size: ``pools --out``'s tree and a ``collect`` snapshot
of 16,384 nodes, through ``output.write_directory`` (files written, one ``syncfs``, the tree
renamed into place) against the previous rule (one fsync per file, the code of
``--base-commit``, read from git) and a middle way (all written, then an fsync each), each
paired with a whole ``generate`` of the same fabric in the same round.

The pools tree is the real one: ``pools_files`` of a placement of every node of a simulated
16,384-node × 8-rail fabric (24,578 files). The snapshot holds, per node, the real
``nvidia-smi -q`` of an 8-GPU HGX H100 (80 KB) and its ``topo -m`` capture (the files collect
writes for those commands), so 16,384 nodes are 1.3 GB on disk. Wall seconds (the sync waits on
the disk, not on the CPU), and the process's CPU seconds per stage.

Usage: python benchmarks/bench_writes.py [--nodes N] [--rounds N] [--base-commit REV]
       [--work DIR] [--skip-base]
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from topograph_slurm import output  # noqa: E402
from topograph_slurm.analysis.pools.place import place  # noqa: E402
from topograph_slurm.app.fabric import read_fabric  # noqa: E402
from topograph_slurm.app.view import from_fabric  # noqa: E402
from topograph_slurm.config import Settings  # noqa: E402
from topograph_slurm.model.pools import Deployment, PoolSize  # noqa: E402
from topograph_slurm.render.environment import environment  # noqa: E402
from topograph_slurm.render.pools import pools_files  # noqa: E402

REAL = ROOT / "tests" / "fixtures" / "real"
Q = REAL / "nvidia-smi-q" / "h100-sxm-8gpu-hgx-q-fabric-completed.txt"
TOPO = REAL / "nvidia-smi-topo" / "h100-8gpu-sxm-ht-nonic-stas00.txt"


def base_output(commit: str) -> ModuleType:
    """``output.py`` as it was at *commit* (one fsync per file in write_directory)."""
    source = subprocess.run(
        ["git", "-C", str(ROOT), "show", f"{commit}:topograph_slurm/output.py"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    path = Path(tempfile.mkdtemp()) / "output_base.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("output_base", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["output_base"] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


class BatchFsync:
    """The middle way, for comparison: every file written first, then an fsync each (no
    syncfs, so nothing else's dirty data is waited for), then the same swap."""

    @staticmethod
    def write_directory(dest: Path, files: Mapping[str, str], **_: Any) -> None:
        tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.tmp-", dir=dest.parent))
        output._write_tree_files(tmp, files)
        for rel in files:
            fd = os.open(tmp / rel, os.O_RDONLY)
            os.fsync(fd)
            os.close(fd)
        output._swap_in(tmp, dest)


def pools_tree(nodes: int) -> dict[str, str]:
    settings = Settings(sim=f"nodes={nodes},su=32,tiers=3")
    view = from_fabric(read_fabric(settings, print), settings)
    half = nodes // 2
    deployment = Deployment(PoolSize(half, 8), PoolSize(half // 2, 16))
    plan = place(deployment, sorted(view.fmap.places), 8, view.fmap, view.facts)
    return pools_files(environment(None), plan)


def snapshot_tree(nodes: int) -> dict[str, str]:
    q, topo = Q.read_text(), TOPO.read_text()
    files = {}
    for i in range(1, nodes + 1):
        files[f"nodes/gpu{i:05d}/nvidia-smi-q.txt"] = q
        files[f"nodes/gpu{i:05d}/nvidia-smi-topo.txt"] = topo
    files["manifest.json"] = "{}\n"
    return files


def cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def timed(call: Callable[[], Any]) -> tuple[float, float]:
    wall, used = time.perf_counter(), cpu()
    call()
    return time.perf_counter() - wall, cpu() - used


def generate(nodes: int, work: Path) -> tuple[float, float]:
    """A whole ``generate`` of the fabric (process wall and CPU, children included)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    command = [sys.executable, "-m", "topograph_slurm", "--config", os.devnull, "-q"]
    fabric = ["--sim", f"nodes={nodes},su=32,tiers=3", "--slurm-nodes", "all"]
    subprocess.run(
        [*command, "generate", *fabric, "--slurm-version", "24.11", "-o", str(work / "t.conf")],
        check=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    used = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return time.perf_counter() - start, used


def write(module: Any, dest: Path, files: Mapping[str, str]) -> tuple[float, float]:
    shutil.rmtree(dest, ignore_errors=True)
    os.sync()  # start each stage with nothing dirty
    result = timed(lambda: module.write_directory(dest, files, replaceable=lambda _: True))
    shutil.rmtree(dest, ignore_errors=True)
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=16384)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--base-commit", default="67159b7")
    parser.add_argument("--work", help="where the trees are written (default: a temp dir)")
    parser.add_argument("--skip-base", action="store_true", help="only the new writer")
    args = parser.parse_args(argv)
    work = Path(args.work or tempfile.mkdtemp(prefix="bench-writes-"))
    work.mkdir(parents=True, exist_ok=True)
    trees = {"pools --out": pools_tree(args.nodes), "snapshot": snapshot_tree(args.nodes)}
    writers: dict[str, Any] = {"new": output}
    if not args.skip_base:
        writers["base"] = base_output(args.base_commit)
        writers["batch fsync"] = BatchFsync
    for name, files in trees.items():
        size = sum(len(text.encode()) for text in files.values()) / 2**20
        print(f"{name}: {len(files)} files, {size:.0f} MiB")
    for round_ in range(1, args.rounds + 1):
        gen_wall, gen_cpu = generate(args.nodes, work)
        print(f"round {round_}: generate {gen_wall:.2f} s wall, {gen_cpu:.2f} s CPU")
        for name, files in trees.items():
            for label, module in writers.items():
                wall, used = write(module, work / "tree", files)
                print(
                    f"  {name} ({label}): {wall:.2f} s wall ({wall / gen_wall:.2f}x generate), "
                    f"{used:.2f} s CPU ({used / gen_cpu:.2f}x)"
                )
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
