"""``python -m topograph_slurm`` runs the CLI."""

from topograph_slurm.cli import main

main()
