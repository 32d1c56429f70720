#!/usr/bin/env bash
# Ship a retrained stand-in: everything measured under the old one is measured again under the new one.
#
#   bash tools/reship_standin.sh NEW_CHECKPOINT WORK_DIR [FROM_STEP]   # from the repository root, in the CPU venv
#
# NEW_CHECKPOINT is what `tools/device_train.sh` returns (standin.tgz unpacked: R/). The gate suite holds the
# near ties of the reference model, the gates file its noise, and the verdict table its decisions, so all three
# follow the checkpoint (checkpoints/laya-tiny/TRAINING.md, docs/gates.md). Steps, each logged to WORK_DIR:
#   1. copy the checkpoint into checkpoints/laya-tiny/ (all but the hand-written TRAINING.md; the trainer's
#      report goes to WORK_DIR/report.md for logs/)
#   2. rebuild the gate suite under it (laya_opt.fidelity.make_gate_suite)
#   3. calibrate the gates on it (laya-opt calibrate-gates --suite gate --noise-sample 128)
#   4. the verdict table, in two processes side by side (tools/verdict_table.py --only ...)
#   5. suite_report on every bundled suite
# Steps 2-4 share evaluations through the reference and stage caches (LAYA_OPT_CACHE_DIR; `run --reuse-stages`):
# the screen files the float32 reference and the 8-bit g64 stage, calibrate-gates reads the reference and files
# the float16 and bfloat16 casts, and the verdict table's fp16, bf16 and 8-bit g64 rows take them, each checked
# on its re-run sample (run 9's times below are from before: its verdict table evaluated those again, ~35 min).
# On 2 CPU cores, run 6 took about 95 minutes; run 9, with 512-token inputs and rarer near ties, 2 h 41 (steps 2-5:
# 40, 64, 49 and 9 minutes). What is left by hand is printed at the end: the numbers quoted in README.md,
# docs/standin.md, docs/gates.md and TRAINING.md, and the tests that pin the stand-in's numbers. FROM_STEP (2-5) goes on from that step in the WORK_DIR of an
# earlier, interrupted call, whose step 1 put NEW_CHECKPOINT in place (a reship can outlast a session).
# Step 2 ends with a screen (tools/reship_screen.py; TRAINING.md, "No cheap screen on the old suite"): the headline
# 8-bit experiment on the new gate suite, about 5 minutes; if it changes a decisive answer the call stops there
# (exit 4), before the calibration: the new checkpoint cannot be the reference. The frames candidate of 2026-12-07
# changed one, found after 2 hours. SKIP_SCREEN=1 skips it (a screen already run by hand).
# Run in an environment where `laya_opt` is this checkout (its own venv, `pip install -e .`); the script refuses
# otherwise.
set -euo pipefail
usage="usage: reship_standin.sh NEW_CHECKPOINT WORK_DIR [FROM_STEP]"
new="${1:?$usage}"
work="${2:?$usage}"
from="${3:-1}"
target=checkpoints/laya-tiny
[ -f "$new/model.safetensors" ] && [ -f "$new/rl_agent_config.json" ] || {
  echo "error: $new is not a checkpoint (no model.safetensors or rl_agent_config.json)" >&2; exit 2; }
[ -d "$target" ] && [ -f pyproject.toml ] || { echo "error: run from the repository root" >&2; exit 2; }
case "$from" in
  1) [ ! -e "$work" ] || { echo "error: $work exists; give a new directory" >&2; exit 2; } ;;
  [2-5])
    [ -d "$work" ] || { echo "error: FROM_STEP $from goes on in an earlier call's WORK_DIR; $work is not one" >&2
                        exit 2; }
    cmp -s "$new/model.safetensors" "$target/model.safetensors" \
      && cmp -s "$new/rl_agent_config.json" "$target/rl_agent_config.json" || {
      echo "error: $target is not $new; FROM_STEP $from needs step 1 done with it (run from step 1)" >&2; exit 2; } ;;
  *) echo "error: FROM_STEP must be 1 to 5, got '$from'" >&2; exit 2 ;;
esac
python - "$new" "$target" <<'PY' || exit 2
import sys
from pathlib import Path
import laya_opt
from laya_opt.util.resources import standin_checkpoint
try:
    laya_opt.load(sys.argv[1])
except laya_opt.LayaError as error:
    sys.exit(f"error: {sys.argv[1]} does not load: {error}")
# Every step measures the checkpoint the package resolves as `standin`: in a second checkout with the first one's
# editable install active, that is the first checkout's, and the whole reship would measure the old stand-in.
if standin_checkpoint().resolve() != Path(sys.argv[2]).resolve():
    sys.exit(f"error: this python's laya_opt uses the stand-in at {standin_checkpoint()}, not {Path(sys.argv[2]).resolve()}"
             "; install this checkout (pip install -e .) in the environment that runs the reship")
PY
mkdir -p "$work"

step() { echo "== $(date -u +%H:%M:%S) $*"; }
runs() { [ "$from" -le "$1" ]; }   # step N runs unless FROM_STEP is past it

if runs 1; then
step "1. checkpoint -> $target"
for item in "$new"/*; do
  name=$(basename "$item")
  case "$name" in
    TRAINING.md) cp "$item" "$work/report.md" ;;
    *) rm -rf "${target:?}/$name"; cp -r "$item" "$target/$name" ;;
  esac
done
fi

if runs 2; then
step "2. gate suite"
python -m laya_opt.fidelity.make_gate_suite 2>&1 | tee "$work/make_gate_suite.log"
if [ "${SKIP_SCREEN:-0}" != 1 ]; then
  step "2. screen: 8-bit on the new gate suite, decisive answers only"
  rm -rf "$work/screen"
  # the run's own exit status is the old gates file's verdict, not the screen's: reship_screen.py decides
  laya-opt run experiments/quant_enc8.yaml --no-bench --quiet --allow-failed-gates --json --reuse-stages \
    --output-dir "$work/screen" > "$work/screen.json" 2> "$work/screen.log" || true
  screened=0
  python tools/reship_screen.py "$work/screen.json" | tee "$work/screen.txt" || screened=$?
  [ "$screened" = 0 ] || { echo "reship stopped at the screen (exit $screened; the run's log: $work/screen.log)" >&2
                           exit "$screened"; }
fi
fi

if runs 3; then
step "3. gates calibrated on gate"
laya-opt calibrate-gates --suite gate --noise-sample 128 --out fidelity/gate_files/standin.yaml \
  2>&1 | tee "$work/calibrate.log"
fi

if runs 4; then
step "4. verdict table (two processes)"
rm -rf "$work/verdicts-a" "$work/verdicts-b"   # an interrupted call's partial tables
# split by time: bisect's row alone is ~21 minutes, each other row 3 to 6 (the casts and 8-bit g64 from the caches)
python tools/verdict_table.py --out "$work/verdicts-a" --only fp16 --only "8-bit g64" --only "6-bit g64" \
  --only "4-bit g64" --only "4-bit g64, layer 0 kept" --only "4-bit g128" > "$work/verdicts-a.log" 2>&1 &
first=$!
python tools/verdict_table.py --out "$work/verdicts-b" --only bf16 --only "8-bit g128" --only "5-bit g64" \
  --only "4-bit g64, bisect recipe" > "$work/verdicts-b.log" 2>&1
wait "$first"
fi

step "5. suite report"
python -m laya_opt.fidelity.suite_report --markdown > "$work/suite_report.md"

step "done: $work"
cat <<EOF
Left by hand:
- checkpoints/laya-tiny/TRAINING.md (the run, the table from $work/suite_report.md) and logs/ ($work/report.md,
  the trainer's log and metrics);
- docs/gates.md (the verdict table: $work/verdicts-a/verdicts.md and $work/verdicts-b/verdicts.md),
  docs/standin.md (the suite tables) and README.md (the headline's numbers);
- the tests that pin the stand-in's numbers: python -m pytest, then read each failure.
EOF
