"""MoE expert placement: DeepSeek's EPLB policies (balanced packing, replication, the
hierarchical and global plans) and the traffic estimate of a layout."""
