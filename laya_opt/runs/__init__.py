"""Runs: the gated pipeline, experiment files, the runner and its results directories, the reference cache,
history, diff, reports, bisect, exports and the head-to-head."""
