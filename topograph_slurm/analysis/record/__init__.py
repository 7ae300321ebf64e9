"""The job record: built from explain's answer on the job's nodes, fingerprinted, gated and
compared (docs/record.md). Pure functions: the app reads Slurm and the fabric, writes the file."""
