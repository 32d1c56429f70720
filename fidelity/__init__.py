"""The gate machinery (installed as `laya_opt.fidelity`): the checker runs a runtime over a suite, metrics
compare two runs question by question, gates judge the metrics, probes check kernels and captures, and
`gate_files/` holds the calibrated gate tables."""
