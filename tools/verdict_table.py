r"""The verdict table (docs/gates.md): one gated run per configuration on the gating suite, one row each.

    python tools/verdict_table.py --out OUT [--suite gate] [--checkpoint standin] [--only NAME ...]

Each configuration is a normal `laya-opt run --no-bench` of an experiment this script writes under
OUT/experiments (fp16 and bf16 are stage 0's cast alone; the quantized rows are `quantize_encoder` on
float32 activations, as `experiments/quant_enc8.yaml`). The reference is computed once and then read from
the reference cache; each run takes with `--reuse-stages` what an earlier run or `calibrate-gates` already
evaluated on the suite (the fp16 and bf16 casts after a calibration on it), once its re-run sample matches.
`bisect recipe` first runs `laya-opt bisect --unit linear` on the 4-bit g64 experiment and then gates the
exclusion list bisect verified (the row says when bisect found none).

Writes OUT/verdicts.md (the table, with the commands), OUT/verdicts.json (every row's numbers and its
results directory) and keeps each run's results directory under OUT/runs. A configuration's run that
fails for another reason than its gates (exit 1 or 2) stops the script with that run's error.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import yaml

QUANT = "quantize_encoder"
CONFIGS: dict[str, dict] = {
    "fp16": {"candidate_dtype": "float16", "passes": []},
    "bf16": {"candidate_dtype": "bfloat16", "passes": []},
    "8-bit g64": {"bits": 8, "group_size": 64},
    "8-bit g128": {"bits": 8, "group_size": 128},
    "6-bit g64": {"bits": 6, "group_size": 64},
    "5-bit g64": {"bits": 5, "group_size": 64},
    "4-bit g64": {"bits": 4, "group_size": 64},
    "4-bit g128": {"bits": 4, "group_size": 128},
    "4-bit g64, layer 0 kept": {"bits": 4, "group_size": 64, "exclude": ["encoder.layers.0"]},
    "4-bit g64, bisect recipe": {"bits": 4, "group_size": 64, "bisect": True},
}
GATE_EXIT = 3   # `laya-opt run` and `bisect`: a gate failed (a verdict, not an error)


def experiment(name: str, settings: dict, checkpoint: str, suite: str) -> dict:
    """The experiment document of one configuration."""
    document = {"name": name.replace(" ", "_").replace(",", ""), "checkpoint": checkpoint,
                "reference_dtype": "float32", "candidate_dtype": settings.get("candidate_dtype", "float32"),
                "suites": [suite], "gates_file": "standin", "passes": []}
    if "bits" in settings:
        config = {"bits": settings["bits"], "group_size": settings["group_size"], "eval_path": "auto"}
        if settings.get("exclude"):
            config["exclude"] = list(settings["exclude"])
        document["passes"] = [{"name": QUANT, "config": config, "on_fail": "stop"}]
    return document


def laya_opt(*args: str) -> tuple[int, dict]:
    """Run the CLI with --json; (exit code, its JSON). Exit codes other than 0 and 3 stop the script."""
    done = subprocess.run([sys.executable, "-m", "laya_opt.cli", *args, "--json"], capture_output=True, text=True)
    if done.returncode not in (0, GATE_EXIT):
        raise SystemExit(f"error: laya-opt {' '.join(args)} exited {done.returncode}:\n{done.stdout}{done.stderr}")
    return done.returncode, json.loads(done.stdout)


def row(name: str, outcome: dict, note: str = "") -> dict:
    """One table row from a run's results directory: its last stage against the reference."""
    records = [json.loads(line) for line in (Path(outcome["results_dir"]) / "stages.jsonl").read_text().splitlines()]
    last = records[-1]
    metrics = last["metrics"]["cumulative"]
    # A failed gate (FAIL, or WAIVED under --allow-failed-gates) once, whether it failed vs the previous stage,
    # the reference or both.
    failed = list(dict.fromkeys(gate["gate"] for gate in last["gates"] if gate["status"] in ("FAIL", "WAIVED")))
    return {"config": name, "stage": f"{last['index']} {last['stage']}", "verdict": last["verdict"],
            "questions": int(metrics.get("labelled", 0)), "near_ties": int(metrics.get("near_ties", 0)),
            "decisive_r2w": int(metrics["decisive_right_to_wrong"]),
            "decisive_w2r": int(metrics["decisive_wrong_to_right"]),
            "near_tie_r2w": int(metrics["near_tie_right_to_wrong"]),
            "near_tie_w2r": int(metrics["near_tie_wrong_to_right"]),
            "other_changes": int(metrics["wrong_to_other_wrong"] + metrics["unlabelled_changes"]),
            "accuracy_delta": metrics.get("accuracy_delta"), "p99_abs_dp": metrics.get("p99_abs_dp"),
            "max_abs_dp": metrics.get("max_abs_dp"), "max_abs_dlogit": metrics.get("max_abs_dlogit"),
            "kl_logits_max": metrics.get("kl_logits_max"), "failed_gates": failed,
            "results_dir": outcome["results_dir"], "exit_code": outcome["exit_code"], "note": note}


def _num(value, spec: str) -> str:
    return "—" if value is None else format(value, spec)


def markdown(rows: list[dict], suite: str, checkpoint: str) -> str:
    from laya_opt.util.markdown import markdown_table

    header = ["config", "verdict", "r→w / w→r decisive", "r→w / w→r near-tie", "other", "Δaccuracy",
              "p99 / max |Δp|", "max |Δlogit|", "max KL", "failed gates"]
    cells = [[r["config"] + (f" ({r['note']})" if r["note"] else ""), r["verdict"],
              f"{r['decisive_r2w']} / {r['decisive_w2r']}", f"{r['near_tie_r2w']} / {r['near_tie_w2r']}",
              str(r["other_changes"]), _num(r["accuracy_delta"], "+.4f"),
              f"{_num(r['p99_abs_dp'], '.3g')} / {_num(r['max_abs_dp'], '.3g')}", _num(r["max_abs_dlogit"], ".3g"),
              _num(r["kl_logits_max"], ".3g"), "; ".join(r["failed_gates"]) or "—"] for r in rows]
    return (f"Gating suite `{suite}`, checkpoint `{checkpoint}`; every row against the float32 reference.\n\n"
            + markdown_table(header, cells, "ll" + "r" * 7 + "l") + "\n")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="a directory that does not exist yet")
    parser.add_argument("--suite", default="gate", help="the gating suite (default: gate)")
    parser.add_argument("--checkpoint", default="standin")
    parser.add_argument("--only", action="append", choices=list(CONFIGS), help="these configurations (repeatable)")
    parser.add_argument("--bisect-unit", choices=["layer", "linear"], default="layer",
                        help="what bisect ranks and excludes for the `bisect recipe` row")
    args = parser.parse_args(argv)
    if args.out.exists():
        parser.error(f"--out {args.out} already exists")
    (args.out / "experiments").mkdir(parents=True)
    rows = []
    for name in args.only or list(CONFIGS):
        settings, note = dict(CONFIGS[name]), ""
        started = time.time()
        path = args.out / "experiments" / f"{experiment(name, settings, '', '')['name']}.yaml"
        if settings.pop("bisect", False):
            path.write_text(yaml.safe_dump(experiment(name, settings, args.checkpoint, args.suite), sort_keys=False))
            code, found = laya_opt("bisect", str(path), "--unit", args.bisect_unit)
            if code == 0 and found["exclude"] is not None:
                settings["exclude"] = found["exclude"]
                note = f"exclude {', '.join(found['exclude']) or 'nothing'}"
            else:
                note = "bisect verified no recipe; all linears quantized"
        path.write_text(yaml.safe_dump(experiment(name, settings, args.checkpoint, args.suite), sort_keys=False))
        _, outcome = laya_opt("run", str(path), "--no-bench", "--reuse-stages", "--output-dir", str(args.out / "runs"))
        rows.append(row(name, outcome, note))
        print(f"{name}: {rows[-1]['verdict']} in {time.time() - started:.0f}s", flush=True)
    (args.out / "verdicts.json").write_text(json.dumps(rows, indent=2) + "\n")
    command = "python tools/verdict_table.py --out OUT" + (f" --suite {args.suite}" if args.suite != "gate" else "")
    (args.out / "verdicts.md").write_text(markdown(rows, args.suite, args.checkpoint) + f"\nMade by `{command}`.\n")
    print(markdown(rows, args.suite, args.checkpoint))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
