"""Timing: the latency harness (warm-up, synchronised blocks, percentiles), the profiler, peer runtimes."""
