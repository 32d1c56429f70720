"""Synthetic typed-decision data, labelled suites and benchmark workloads for fidelity gates."""
