"""`python -m laya_opt.cli`: the same as the `laya-opt` script."""
from laya_opt.cli.app import main

main()
