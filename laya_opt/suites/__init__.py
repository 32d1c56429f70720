"""Labelled suites: the JSONL format (`suite_file`), benchmark workloads, the lexical baseline and the
bundled files (`data/`); `synthetic/` generates the suites and the stand-in's training data."""
