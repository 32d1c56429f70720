#!/usr/bin/env bash
# Ship a retrained stand-in: everything measured under the old one is measured again under the new one.
#
#   bash tools/reship_standin.sh NEW_CHECKPOINT WORK_DIR        # from the repository root, in the CPU venv
#
# NEW_CHECKPOINT is what `tools/device_train.sh` returns (standin.tgz unpacked: R/). The gate suite holds the
# near ties of the reference model, the gates file its noise, and the verdict table its decisions, so all three
# follow the checkpoint (checkpoints/laya-tiny/TRAINING.md, docs/gates.md). Steps, each logged to WORK_DIR:
#   1. copy the checkpoint into checkpoints/laya-tiny/ (all but the hand-written TRAINING.md; the trainer's
#      report goes to WORK_DIR/report.md for logs/)
#   2. rebuild the gate suite under it (laya_opt.fidelity.make_gate_suite; about 5 minutes)
#   3. calibrate the gates on it (laya-opt calibrate-gates --suite gate --noise-sample 128; about 45 minutes)
#   4. the verdict table, in two processes side by side (tools/verdict_table.py --only ...; about 40 minutes)
#   5. suite_report on every bundled suite (about 6 minutes)
# About 95 minutes on 2 CPU cores. What is left by hand is printed at the end: the numbers quoted in README.md,
# docs/standin.md, docs/gates.md and TRAINING.md, and the tests that pin the stand-in's numbers.
set -euo pipefail
new="${1:?usage: reship_standin.sh NEW_CHECKPOINT WORK_DIR}"
work="${2:?usage: reship_standin.sh NEW_CHECKPOINT WORK_DIR}"
target=checkpoints/laya-tiny
[ -f "$new/model.safetensors" ] && [ -f "$new/rl_agent_config.json" ] || {
  echo "error: $new is not a checkpoint (no model.safetensors or rl_agent_config.json)" >&2; exit 2; }
[ -d "$target" ] && [ -f pyproject.toml ] || { echo "error: run from the repository root" >&2; exit 2; }
[ ! -e "$work" ] || { echo "error: $work exists; give a new directory" >&2; exit 2; }
python - "$new" <<'PY' || exit 2
import sys
import laya_opt
try:
    laya_opt.load(sys.argv[1])
except laya_opt.LayaError as error:
    sys.exit(f"error: {sys.argv[1]} does not load: {error}")
PY
mkdir -p "$work"

step() { echo "== $(date -u +%H:%M:%S) $*"; }

step "1. checkpoint -> $target"
for item in "$new"/*; do
  name=$(basename "$item")
  case "$name" in
    TRAINING.md) cp "$item" "$work/report.md" ;;
    *) rm -rf "${target:?}/$name"; cp -r "$item" "$target/$name" ;;
  esac
done

step "2. gate suite"
python -m laya_opt.fidelity.make_gate_suite 2>&1 | tee "$work/make_gate_suite.log"

step "3. gates calibrated on gate"
laya-opt calibrate-gates --suite gate --noise-sample 128 --out fidelity/gate_files/standin.yaml \
  2>&1 | tee "$work/calibrate.log"

step "4. verdict table (two processes)"
python tools/verdict_table.py --out "$work/verdicts-a" --only fp16 --only "8-bit g64" --only "6-bit g64" \
  --only "4-bit g64" --only "4-bit g64, layer 0 kept" > "$work/verdicts-a.log" 2>&1 &
first=$!
python tools/verdict_table.py --out "$work/verdicts-b" --only bf16 --only "8-bit g128" --only "5-bit g64" \
  --only "4-bit g128" --only "4-bit g64, bisect recipe" > "$work/verdicts-b.log" 2>&1
wait "$first"

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
