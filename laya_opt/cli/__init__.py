"""The `laya-opt` command line: one module per command group, the error contract in `contract`."""
from laya_opt.cli.app import main

__all__ = ["main"]
