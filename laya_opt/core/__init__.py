"""The model and its runtime: configs, tokenizer, prompts, batching, the MLX model and kernels, decoding,
quantization, checkpoints. Knows no pass, gate, suite or run."""
