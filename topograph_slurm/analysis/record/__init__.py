"""The job record's decisions: what changed on a node's links during a job."""
