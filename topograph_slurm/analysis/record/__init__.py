"""The job record: built from explain's answer on the job's nodes, fingerprinted, gated and
compared, and what changed on a node's links during the job (docs/record.md). Pure functions:
the app reads Slurm, the fabric and the counters, and writes the files."""
