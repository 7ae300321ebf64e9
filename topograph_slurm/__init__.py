"""topograph-slurm: topology-aware scheduling for GPU clusters on Slurm."""

__version__ = "0.1.0"
