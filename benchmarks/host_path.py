"""The host work of one predict call, stage by stage: prepare, collate, transfer, decode (issue 23, item 2).

    python benchmarks/host_path.py [--arch standin|laya-large] [--workload short-1] [--repeats 2000] [--blocks 5]
                                   [--experiment experiments/stack_gpu.yaml] [--json OUT.json]

Two runtimes on one request of the workload: MLX eager (the baseline) and the experiment's passes applied
without gating (on a CPU the fused kernels fall back to plain MLX ops, which changes no host work). Each
repetition runs the host stages in a predict call's order and times each on its own
(`laya_opt.timing.profile.host_stage_samples`); the forward runs once beforehand and is not in any number.
The runtimes take turns in --blocks blocks (the first one leading in alternate blocks), so a slow spell of
the host lands on both; the warm-up runs before each runtime's first block.
Prints p50 / p95 ms per stage and of the per-repetition total, with n, the device and the versions.

`standin` is the shipped checkpoint; `laya-large` is built in memory with random float32 weights and the
project tokenizer (about 10 s on a 2-core CPU): host work depends on the tokenizer, the token budgets
(max_len 512, head_max_len 192 for laya-large) and the output widths, never on the weights.
On a CPU the transfer is a host copy; a GPU's device-to-host transfer is only measured on a GPU.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import laya_opt as lo  # first: BLAS choice before mlx.core loads
import mlx.core as mx

from laya_opt.core.checkpoint_write import build_random_model
from laya_opt.core.config import architecture
from laya_opt.core.decode import calibration_from_tables
from laya_opt.core.runtime import Runtime
from laya_opt.core.tokens import load_codec
from laya_opt.runs.experiment import load_experiment
from laya_opt.runs.report import plain
from laya_opt.suites.workloads import WORKLOADS, build_workload
from laya_opt.timing.bench import environment, summarize
from laya_opt.timing.profile import HOST_STAGES, host_stage_samples
from laya_opt.util.resources import project_tokenizer

ROOT = Path(__file__).resolve().parent.parent


def random_runtime(arch: str) -> Runtime:
    """A real-size runtime with random float32 weights, built in memory (nothing written to disk)."""
    encoder, agent = architecture(arch)
    model = build_random_model(encoder, agent, seed=0, dtype=mx.float32)
    return Runtime(model=model, codec=load_codec(project_tokenizer()), encoder_config=encoder, agent_config=agent,
                   calibration=calibration_from_tables(agent.temperature, agent.temperature_by_options),
                   dtype=mx.float32, identity=f"random-{arch}:float32")


def with_passes(runtime: Runtime, experiment: Path) -> Runtime:
    for step in load_experiment(experiment).steps:
        runtime = lo.apply(runtime, step.config)
    return runtime


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--arch", default="standin", choices=("standin", "laya-large"))
    parser.add_argument("--workload", default="short-1", choices=WORKLOADS)
    parser.add_argument("--repeats", type=int, default=2000)
    parser.add_argument("--warmup", type=int, default=100)
    parser.add_argument("--blocks", type=int, default=None,
                        help="alternating blocks the repetitions are split into (default: 5, or --repeats if fewer)")
    parser.add_argument("--experiment", type=Path, default=ROOT / "experiments" / "stack_gpu.yaml")
    parser.add_argument("--json", type=Path, help="also write the summaries and the environment here")
    args = parser.parse_args(argv)
    started = time.time()
    base = lo.load("standin", dtype="float32") if args.arch == "standin" else random_runtime(args.arch)
    runtimes = {"eager": base, args.experiment.stem: with_passes(base, args.experiment)}
    state, questions = build_workload(args.workload).requests[0]
    prepared = base.prepare(state, questions)
    env = environment()
    print(f"{args.arch}, {args.workload}: {len(prepared)} question(s), {sum(p.length for p in prepared)} tokens; "
          f"{env['device']} ({env['backend']}), mlx {env['versions']['mlx']}, numpy {env['versions']['numpy']}, "
          f"tokenizers {env['versions']['tokenizers']}, python {env['versions']['python']}")
    if args.blocks is None:
        args.blocks = min(5, args.repeats)
    if not 1 <= args.blocks <= args.repeats:
        parser.error(f"--blocks must be between 1 and --repeats ({args.repeats}), got {args.blocks}")
    columns = (*HOST_STAGES, "total")
    samples = {label: {name: [] for name in columns} for label in runtimes}
    for block in range(args.blocks):
        size = args.repeats // args.blocks + (block < args.repeats % args.blocks)
        order = list(runtimes) if block % 2 == 0 else list(runtimes)[::-1]
        for label in order:
            taken = host_stage_samples(runtimes[label], state, questions, repeats=size,
                                       warmup=args.warmup if block == 0 else 0)
            for name, values in taken.items():
                samples[label][name].extend(values)
    results = {label: {name: summarize(values) for name, values in stages.items()}
               for label, stages in samples.items()}
    print(f"{'runtime':12s} " + " ".join(f"{name + ' p50/p95 ms':>22s}" for name in columns) + "      n")
    for label, summaries in results.items():
        print(f"{label:12s} " + " ".join(f"{summaries[name].p50_ms:11.4f}/{summaries[name].p95_ms:<10.4f}"
                                          for name in columns) + f" {summaries['total'].n:6d}")
    # On a CPU the "transfer" stage copies host memory; only a GPU run measures a device-to-host read.
    where = "a host copy on a CPU, not a device transfer" if env["backend"] == "cpu" else "a device-to-host read"
    print(f"({time.time() - started:.0f} s; transfer: {where})")
    if args.json:
        args.json.write_text(json.dumps({"arch": args.arch, "workload": args.workload, "repeats": args.repeats,
                                         "warmup": args.warmup, "blocks": args.blocks,
                                         "experiment": args.experiment.name,
                                         "environment": env, "stages_ms": plain(results)}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
