"""Occupancy: how full each unit at the TP home level is, which jobs hold more units than
their size needs and which free GPUs no pending job can use (docs/occupancy.md)."""
