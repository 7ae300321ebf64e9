"""Building the ``--tp-size`` SPANK plugin: the C compiler run and the install of the ``.so``.

This is I/O at the edge (a subprocess and a file install), kept apart from
:mod:`topograph_slurm.render.filters`, which only renders the plugin's C source. The plugin is
compiled in a private temporary directory and installed with
:func:`topograph_slurm.output.write_file`, the one atomic writer, so a failed or half-finished
build never leaves a plugin where slurmd/sbatch would load it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from topograph_slurm.errors import CollectError
from topograph_slurm.output import write_file

#: Mode of the installed plugin: slurmd and the clients of every user load it.
PLUGIN_MODE = 0o755


def _find_spank_header(include_dir: Path | None) -> Path | None:
    """Where ``slurm/spank.h`` is, if anywhere the compiler will look."""
    candidates = [include_dir] if include_dir else []
    candidates += [Path("/usr/include"), Path("/usr/local/include")]
    cpath = os.environ.get("CPATH", "")
    candidates += [Path(p) for p in cpath.split(os.pathsep) if p]
    for base in candidates:
        if (base / "slurm" / "spank.h").is_file():
            return base
    return None


def spank_compile_command(
    compiler: str, source: Path, output: Path, include_dir: Path | None = None
) -> list[str]:
    """The compiler command line that builds the SPANK plugin.

    One definition, so the integration tests compile the plugin inside a Slurm container with
    exactly the flags ``spank build`` uses (the container has no Python to run the CLI).
    """
    cmd = [compiler, "-shared", "-fPIC", "-O2", "-Wall", "-o", str(output), str(source)]
    if include_dir is not None:
        cmd[1:1] = ["-I", str(include_dir)]
    return cmd


def build_spank(
    source: Path,
    outdir: Path,
    *,
    cc: str = "cc",
    include_dir: Path | None = None,
    timeout: float = 120.0,
) -> Path:
    """Compile the SPANK plugin *source* into ``outdir/<stem>.so`` and return its path.

    Raises CollectError when the compiler or ``slurm/spank.h`` is missing or compilation fails;
    OutputError when the plugin cannot be installed.
    """
    compiler = shutil.which(cc)
    if compiler is None:
        raise CollectError(
            f"C compiler {cc!r} not found: install gcc (Debian: apt-get install gcc)"
        )
    if not source.is_file():
        raise CollectError(f"SPANK source {source} does not exist: run generate --filter-dir first")
    header_base = _find_spank_header(include_dir)
    if include_dir is not None and header_base != include_dir:
        raise CollectError(f"slurm/spank.h not found under {include_dir}")
    with tempfile.TemporaryDirectory(prefix="topograph-spank.") as tmp:
        built = Path(tmp) / f"{source.stem}.so"
        cmd = spank_compile_command(compiler, source, built, include_dir)
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
        except subprocess.TimeoutExpired as exc:
            raise CollectError(f"compiling {source} timed out after {timeout:.0f}s") from exc
        if proc.returncode != 0:
            raise CollectError(_compile_error(proc.stderr, header_base is None))
        plugin = built.read_bytes()
    outdir.mkdir(parents=True, exist_ok=True)
    target = outdir / f"{source.stem}.so"
    write_file(target, plugin, mode=PLUGIN_MODE)
    return target


def _compile_error(stderr: str, header_missing: bool) -> str:
    """One line that says what to do, not a page of compiler output."""
    if header_missing or "spank.h" in stderr:
        return (
            "slurm/spank.h not found: install the Slurm development headers "
            "(Debian/Ubuntu: libslurm-dev, RPM: slurm-devel) or pass include_dir"
        )
    first = next((line for line in stderr.splitlines() if "error" in line), stderr.strip())
    return f"compiling the SPANK plugin failed: {first}"
