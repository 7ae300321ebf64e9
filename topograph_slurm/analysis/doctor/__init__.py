"""``doctor``'s checks: is the Slurm side wired for what this tool makes (pure, over
:class:`topograph_slurm.model.doctor.DoctorFacts`)."""
