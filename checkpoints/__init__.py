"""Bundled checkpoints (package data): the trained stand-in `laya-tiny/` and the project tokenizer `tokenizer/`.

The scripts beside them (build_tokenizer.py, train_standin.py, standin_data.py) are run as scripts, not imported.
"""
