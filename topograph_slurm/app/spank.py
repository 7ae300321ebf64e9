"""``spank build``'s use case: the --tp-size SPANK plugin compiled from the source
``generate --filter-dir`` rendered (:mod:`topograph_slurm.slurm.spank`), and the
plugstack.conf line that loads it."""

from __future__ import annotations

from pathlib import Path


def build(
    templates: Path | None, source: Path, outdir: Path, cc: str, include_dir: Path | None
) -> tuple[Path, str]:
    """The plugin built into *outdir* and its plugstack.conf line (the site's *templates*
    loaded first: a broken template directory fails before the compiler runs)."""
    from topograph_slurm.render.environment import environment
    from topograph_slurm.render.filters import render_plugstack_line
    from topograph_slurm.slurm.spank import build_spank

    env = environment(templates)
    plugin = build_spank(source, outdir, cc=cc, include_dir=include_dir)
    return plugin, render_plugstack_line(env, str(plugin.resolve()))
