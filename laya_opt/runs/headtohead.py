"""Head to head, in one run on one machine: the MLX eager baseline, every accepted stage of an experiment
and (when installed) the upstream PyTorch runtime's eager and compile backends, timed in rotating blocks
on the same checkpoint directory and workloads, with their answers compared side by side.

Steps: load the FP32 reference from the checkpoint; gate the experiment's stages on its suites (stage 0
is the eager baseline in the candidate dtype); load upstream's backends; check that upstream feeds the
model the same token ids; compare every runtime's answers with the FP32 reference (argmax agreement,
max |dp|); time everything with the shared harness (laya_opt.timing.bench); optionally profile (phase split
and CUDA kernel timeline).

The results are a results directory like `run`'s (docs/results.md), of kind "bench", written through the
runner's functions (preflight, reference cache, staging, history): stages.jsonl holds every stage's gates
with their measured values, timings.json every timed cell plus the answers' drift and the profile per
runtime and workload, manifest.json's `bench` section the peers and token identity. `bench_view` puts
them back together as the head-to-head record that report.md and the plots show.
"""
from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import mlx.core as mx

from laya_opt.core.synth import has_random_weights
from laya_opt.runs.experiment import Experiment
from laya_opt.runs.plots import write_plots
from laya_opt.runs.report import load_results, plain, record_metric, stage_label, stage_record
from laya_opt.runs.runner import (RunFacts, build_manifest, load_reference, measure_inputs, preflight,
                                  publish_unique, record_history, reference_outputs, results_timings, write_results)
from laya_opt.suites.workloads import build_workload
from laya_opt.timing.bench import MODES, BenchConfig, benchmark
from laya_opt.timing.peer import BACKENDS, load_upstream, upstream_problem, upstream_version
from laya_opt.timing.profile import HOST_PHASES, profile_runtimes
from laya_opt.util.errors import InputError
from laya_opt.util.markdown import markdown_table
from laya_opt.util.progress import silent
from laya_opt.util.staging import staging_dir
from laya_opt.util.system import mlx_backend

BASELINE = "mlx eager"
TIMED_STAGES = ("stages", "final")


def answer_vector(answer: dict) -> list[float]:
    if answer["type"] == "noul":
        return [1.0 - answer["noul"], answer["noul"]]
    return list(answer["probabilities"].values())


def answer_drift(reference: dict, candidate: dict) -> dict:
    """Argmax agreement and max |dp| of one envelope's answers against another's (rounded answers)."""
    agree, worst, count = 0, 0.0, 0
    for qid, ref in reference["answers"].items():
        a, b = answer_vector(ref), answer_vector(candidate["answers"][qid])
        agree += int(max(range(len(a)), key=a.__getitem__) == max(range(len(b)), key=b.__getitem__))
        worst = max(worst, max(abs(x - y) for x, y in zip(a, b)))
        count += 1
    return {"questions": count, "argmax_agreement": agree / count if count else 1.0, "max_abs_dp": worst}


def compare_answers(runtimes: dict, reference, workloads: Sequence) -> dict:
    """Per runtime and workload: agreement and max |dp| of its answers vs the FP32 reference's."""
    out: dict = {}
    for workload in workloads:
        truth = [reference.predict(state, questions) for state, questions in workload.requests]
        for label, runtime in runtimes.items():
            drifts = [answer_drift(t, runtime.predict(state, questions))
                      for t, (state, questions) in zip(truth, workload.requests)]
            out.setdefault(label, {})[workload.name] = {
                "questions": sum(d["questions"] for d in drifts),
                "argmax_agreement": sum(d["argmax_agreement"] * d["questions"] for d in drifts)
                / max(1, sum(d["questions"] for d in drifts)),
                "max_abs_dp": max(d["max_abs_dp"] for d in drifts)}
    return out


def token_identity(peer, reference, workloads: Sequence) -> dict:
    """How many questions upstream tokenizes to exactly the ids, markers and qtype laya-opt prepares."""
    same = total = 0
    first = None
    for workload in workloads:
        for state, questions in workload.requests:
            ours = [(item.ids, item.markers, item.qtype) for item in reference.prepare(state, questions)]
            theirs = peer.model_inputs(state, questions)
            for qid, a, b in zip(questions, ours, theirs):
                total += 1
                same += int(a == b)
                if a != b and first is None:
                    first = f"{workload.name}/{qid}"
    return {"identical": same, "questions": total, "first_difference": first}


@dataclass(frozen=True)
class HeadToHead:
    experiment: Experiment
    checkpoint: Path
    workloads: tuple[str, ...] = ("short-1", "short-50", "long-1")
    bench: BenchConfig = BenchConfig()
    peer: bool = True
    profile: bool = True
    # wall-clock budget: timing cells not started by 85% of it are skipped, profile entries not started by its end
    budget_s: float | None = None
    # which accepted stages are timed: "stages" every one, "final" only the last (the stack); all are gated
    timed_stages: str = "stages"
    arch: str | None = None          # the architecture of a random checkpoint made for the run (bench --arch)

    def __post_init__(self):
        if self.timed_stages not in TIMED_STAGES:
            raise ValueError(f"timed_stages must be one of {', '.join(TIMED_STAGES)}, got {self.timed_stages!r}")


def bench_label(stage) -> str:
    """The timing label of a stage: stage 0 is the `mlx eager` baseline, the others `<index>:<pass>`."""
    return BASELINE if stage.index == 0 else stage_label(stage)


@dataclass(frozen=True)
class BenchOutcome:
    results_dir: Path
    record: dict                     # the head-to-head view of what was written (`bench_view`)
    history: str = ""                # where the run was recorded, or why it was not


def run_head_to_head(plan: HeadToHead, output_dir: str | Path, say: Callable[[str], None] = lambda message: None,
                     cache: bool = True, history: bool = True, now: datetime | None = None) -> BenchOutcome:
    """Preflight, gate, compare, time and profile; write a results directory of kind "bench" under `output_dir`.

    The same machinery as `run` (laya_opt.runs.runner): every input is checked before a weight is read, the
    reference's outputs come from the reference cache, the directory is staged and published with one rename
    under a fresh name, and the run is appended to the history."""
    started_s, started = time.time(), now or datetime.now(timezone.utc)
    timing_deadline = None if plan.budget_s is None else time.monotonic() + 0.85 * plan.budget_s
    deadline = None if plan.budget_s is None else time.monotonic() + plan.budget_s
    experiment = dataclasses.replace(plan.experiment, checkpoint=Path(plan.checkpoint))
    out_root = Path(output_dir)
    inputs = preflight(experiment, bench=False, output_dir=out_root)
    workloads = [build_workload(name) for name in plan.workloads]
    labels = "used"
    if has_random_weights(plan.checkpoint):  # chance-level answers: a label flip says nothing about a pass
        inputs = dataclasses.replace(inputs, requests=tuple(dataclasses.replace(request, labels=None)
                                                           for request in inputs.requests))
        labels = "ignored: the checkpoint has random weights (gates on labels are skipped; drift gates apply)"
        say(f"suite labels {labels}")
    say(f"backend {mlx_backend()} ({mx.default_device()}); loading {plan.checkpoint} as {experiment.reference_dtype} "
        "(reference)")
    reference = load_reference(experiment, inputs)
    measured = measure_inputs(reference, inputs.requests, inputs.checkpoint.path)
    base_name = f"{experiment.name}-{started.strftime('%Y%m%dT%H%M%SZ')}"
    with staging_dir(out_root, base_name) as staging:
        mx.random.seed(plan.bench.seed)
        cached = reference_outputs(reference, inputs, measured, cache, silent, say)
        say(f"reference: {cached.describe()}")
        result = experiment.pipeline().run(reference, inputs.requests, progress=say,
                                           reference_dtype=experiment.reference_dtype, reference_outputs=cached.outputs)
        if not result.stages[0].accepted:
            raise RuntimeError("the baseline stage failed its gates; nothing to compare")
        timed_stages = result.accepted_stages[1:]
        if plan.timed_stages == "final":  # half the runtimes: a cold lent machine times every cell in one call
            timed_stages = timed_stages[-1:]
        runtimes: dict[str, Any] = {bench_label(stage): stage.runtime for stage in (result.stages[0], *timed_stages)}
        peers, peer_note = {}, upstream_problem() if plan.peer else "not requested"
        if peer_note is None:
            for peer_backend in BACKENDS:
                say(f"loading upstream laya {upstream_version()} with backend {peer_backend}")
                peers[f"upstream {peer_backend}"] = load_upstream(plan.checkpoint, peer_backend)
        else:
            say(f"upstream skipped: {peer_note}")
        runtimes.update(peers)
        say("comparing answers with the reference")
        answers = compare_answers(runtimes, reference, workloads)
        tokens = token_identity(next(iter(peers.values())), reference, workloads) if peers else None
        say(f"timing {len(runtimes)} runtimes on {', '.join(plan.workloads)}")
        timed = benchmark(BASELINE, runtimes, workloads, plan.bench, deadline=timing_deadline)
        profiles = None
        if plan.profile and (deadline is None or time.monotonic() < deadline):
            say("profiling")
            fastest = result.accepted_stages[-1]  # the final accepted stage (stages run in index order)
            chosen = {label: runtimes[label] for label in dict.fromkeys((BASELINE, bench_label(fastest)))}
            chosen.update({label: peer for label, peer in peers.items() if label.endswith("compile")})
            profiles = profile_runtimes(chosen, workloads, deadline=deadline)
        facts = RunFacts(reference_cache=cached, export=None, **measured)
        records = tuple(stage_record(stage, timed, False, label=bench_label) for stage in result.stages)
        manifest = build_manifest(experiment, inputs, reference, result, timed, started, False, facts, kind="bench")
        manifest["seeds"] = {"mlx": plan.bench.seed, "bootstrap": plan.bench.seed}
        manifest["bench"] = plain({
            "arch": plan.arch, "upstream": upstream_version(), "peer_note": peer_note, "token_identity": tokens,
            "peers": {label: {"backend": peer.backend, "load_s": peer.load_s} for label, peer in peers.items()},
            "suite_labels": labels, "timed_stages": plan.timed_stages, "wall_s": round(time.time() - started_s, 1)})
        timings = {**results_timings(timed, BASELINE, baseline_stage=0), "skipped_for_time": list(timed.skipped),
                   "answers": plain(answers), "profile": plain(profiles)}
        write_results(staging, manifest, records, timings,
                      render=lambda m, r, t: render_head_to_head(bench_view(m, r, t)),
                      draw=lambda r, t, directory: write_plots(bench_view(plain(manifest), r, t), directory))
        target = publish_unique(staging, out_root, base_name)
    written = plain(manifest)
    return BenchOutcome(results_dir=target, record=bench_view(written, records, plain(timings)),
                        history=record_history(written, records, target, 0) if history else "")


def _gate_view(gate: Mapping) -> dict:
    return {"kind": gate["comparison"], "gate": gate["gate"], "measured": gate["measured"],
            "passed": gate["status"] not in ("FAIL", "WAIVED"), "status": gate["status"]}


def bench_view(manifest: Mapping, records: Sequence[Mapping], timings: Mapping) -> dict:
    """The head-to-head record (what report.md and the plots of a bench show) from a results directory's files.

    Every number comes from manifest.json, stages.jsonl and timings.json; nothing is stored twice."""
    facts = manifest["bench"]
    return {
        "kind": manifest["kind"], "experiment": manifest["experiment"], "arch": facts["arch"],
        "checkpoint": manifest["checkpoint"]["path"], "checkpoint_sha256": manifest["checkpoint"]["sha256"],
        "environment": {**manifest["environment"], "upstream": facts["upstream"]},
        "workloads": manifest["workloads"],
        "token_sha256": {w["name"]: w["token_sha256"] for w in manifest["workloads"]},
        "stages": [{"index": r["index"], "name": r["stage"], "verdict": r["verdict"], "exact": r["exact"],
                    "failed_gates": [f"{g['comparison']}: {g['message'] or g['gate']}" for g in r["gates"]
                                     if g["status"] in ("FAIL", "WAIVED")],
                    # every gate's measured value, passed ones too (a passing kernel probe says by how much)
                    "gates": [_gate_view(g) for g in r["gates"]], "report": r["report"],
                    "max_abs_dp_cumulative": record_metric(r, "cumulative", "max_abs_dp")} for r in records],
        "peers": facts["peers"], "suite_labels": facts["suite_labels"], "timed_stages": facts["timed_stages"],
        "peer_note": facts["peer_note"], "token_identity": facts["token_identity"], "answers": timings["answers"],
        "bench": {"config": timings["config"], "summary": timings["summary"], "samples": timings["samples"],
                  "skipped_for_time": timings["skipped_for_time"]},
        "profile": timings["profile"], "wall_s": facts["wall_s"],
    }


def load_bench(path: str | Path) -> dict:
    """The head-to-head record of a bench results directory; InputError when the directory is not one."""
    try:
        loaded = load_results(path)
    except FileNotFoundError as exc:
        raise InputError(str(exc)) from None
    if loaded.manifest.get("kind") != "bench":
        raise InputError(f"{path}: not a bench result (manifest kind {loaded.manifest.get('kind', 'run')!r})")
    return bench_view(loaded.manifest, loaded.stages, loaded.timings)


def _cell(row: dict | None) -> str:
    if row is None:
        return "—"
    speed = row["speedup"]
    ratio = "" if speed is None else f" ({speed['median']:.2f}× {speed['low']:.2f}–{speed['high']:.2f})"
    return f"{row['p50_ms']:.2f}{ratio}"


def _tail_cell(row: dict | None) -> str:
    return "—" if row is None else f"{row['p95_ms']:.2f} / {row['p99_ms']:.2f} ({row['n']})"


def render_head_to_head(record: dict) -> str:
    """report.md of a head-to-head record: the table, answers, token identity, profile, environment."""
    summary = record["bench"]["summary"]
    runtimes = list(dict.fromkeys(row["runtime"] for row in summary))
    workloads = [w["name"] for w in record["workloads"]]
    modes = sorted({row["mode"] for row in summary}, key=MODES.index)
    found = {(row["runtime"], row["workload"], row["mode"]): row for row in summary}
    columns = [(w, m, f"{w} {'e2e' if m == 'end_to_end' else 'fwd'}") for w in workloads for m in modes]
    header = ["runtime"] + [f"{name} p50 ms (vs {BASELINE})" for *_, name in columns] + ["agreement / max |dp| vs FP32"]
    rows = []
    for runtime in runtimes:
        answers = record["answers"].get(runtime, {})
        fidelity = "; ".join(f"{w} {a['argmax_agreement']:.3f} / {a['max_abs_dp']:.1e}" for w, a in answers.items())
        rows.append([runtime] + [_cell(found.get((runtime, w, m))) for w, m, _ in columns] + [fidelity])
    env = record["environment"]
    lines = [f"# Head to head: {record['experiment']}", "",
             f"- checkpoint `{record['checkpoint']}` (sha256 {record['checkpoint_sha256'][:16]})",
             f"- device {env['device']}; mlx {env['versions']['mlx']}; upstream laya {env.get('upstream')}; "
             f"{record['bench']['config']['requests']} timed requests per cell in "
             f"{record['bench']['config']['blocks']} rotating blocks after {record['bench']['config']['warmup']} "
             "warmup; p50 with the paired speed-up over the MLX eager baseline and its bootstrap 95% interval",
             f"- upstream: {record['peer_note'] or 'loaded'}" + (
                 f"; token identity {record['token_identity']['identical']}/{record['token_identity']['questions']}"
                 if record["token_identity"] else ""),
             f"- suite labels: {record.get('suite_labels', 'used')}",
             "- timed: " + ("the final accepted stage only (every stage gated)"
                            if record.get("timed_stages") == "final" else "every accepted stage")]
    if record["bench"]["skipped_for_time"]:
        lines.append(f"- not timed (time budget): {', '.join(record['bench']['skipped_for_time'])}")
    lines += ["", markdown_table(header, rows, "l" + "r" * (len(header) - 2) + "l"), "",
             "## Tails", "",
             markdown_table(["runtime"] + [f"{name} p95 / p99 ms (n)" for *_, name in columns],
                            [[runtime] + [_tail_cell(found.get((runtime, w, m))) for w, m, _ in columns]
                             for runtime in runtimes], "l" + "r" * len(columns)), "",
             "## Stages", "",
             markdown_table(["stage", "verdict", "max |dp| vs FP32", "failed gates"],
                            [[f"{s['index']} {s['name']}", s["verdict"],
                              "—" if s["max_abs_dp_cumulative"] is None else f"{s['max_abs_dp_cumulative']:.2e}",
                              "; ".join(s["failed_gates"]) or "—"] for s in record["stages"]]), ""]
    if record.get("profile"):
        lines += ["## Profile", ""]
        prof_rows = []
        for runtime, by_workload in record["profile"].items():
            for workload, entry in by_workload.items():
                phases = entry["phases"]["phases_ms"]
                timeline = entry["timeline"]
                kernels = "skipped: " + timeline["skipped"] if "skipped" in timeline else \
                    (f"{timeline['kernels_per_forward']:.0f} kernels, {timeline['kernel_ms_per_forward']:.2f} ms busy "
                     f"/ {timeline['wall_ms_per_forward']:.2f} ms wall ({timeline['idle_share']:.0%} idle)")
                graph = entry.get("graph") or {}
                host = entry["phases"].get("host_p50_ms")  # absent for a peer and in older results
                prof_rows.append([runtime, workload, f"{entry['phases']['total_p50_ms']:.2f}",
                                  "—" if host is None else f"{host:.3f} / {entry['phases']['host_p95_ms']:.3f}",
                                  ", ".join(f"{k} {v:.2f}" for k, v in phases.items() if v >= 0.005) or "—",
                                  str(graph["nodes_per_forward"]) if "nodes_per_forward" in graph else "—",
                                  kernels])
        header = ["runtime", "workload", "e2e p50 ms", "host p50 / p95 ms", "phases ms (p50)", "graph nodes",
                  "forward kernels"]
        lines += [markdown_table(header, prof_rows), "",
                  f"Host: the sum of {', '.join(HOST_PHASES)} per profiled request (the forward left out). Graph "
                  "nodes: MLX primitives one forward hands to eval (MLX's host cost per call grows with them). GPU "
                  "busy / wall and the kernels per forward come from CUPTI on CUDA.", ""]
    return "\n".join(lines) + "\n"
