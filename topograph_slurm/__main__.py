"""``python -m topograph_slurm`` runs the CLI."""

from topograph_slurm.cli.main import main

main()
