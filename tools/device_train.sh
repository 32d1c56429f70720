#!/usr/bin/env bash
# Train the laya-tiny stand-in on a lent GPU machine, split over consecutive calls of one session.
#
# A device call carries at most 64 MiB and runs at most 10 minutes, and MLX's CUDA wheel (~90 MB) is
# larger than one call may carry, so the wheel travels in parts (the `wheel` step) and training
# resumes from a state kept on the machine (the trainer's --resume; checkpoints/laya-tiny/TRAINING.md).
#
#   bash tools/device_train.sh wheel DIR              # copy one wheel part (a folder) to /tmp/mlxw
#   bash tools/device_train.sh install                # join and install the wheel (train does it too)
#   bash tools/device_train.sh train TOTAL [ARGS...]  # train; TOTAL = training seconds of the whole run
#
# Every `train` call installs the wheel from /tmp/mlxw if the machine has none yet, trains until its
# call budget (CALL_SECONDS, default 585) is nearly spent, keeps the state under $WORK, and
# copies into $OUT: the log; while the schedule runs on, the state's metadata and the weights so far as
# a float16 checkpoint (snapshot.tgz, for --init-from if the machine is lost with the AdamW state); MLX's
# compiled-kernel cache (ptx.tgz: a fresh machine skips the ~300 s kernel compilation by unpacking it into
# $MLX_PTX_CACHE_DIR); and, once the schedule is complete, the checkpoint (standin.tgz). Run the same `train` command again, within the
# machine's idle window, until the log says the checkpoint was written. ARGS override the recipe below
# (argparse keeps the last value of a repeated option).
#
# WORK (default /tmp/train) is the run's folder on the machine: two runs with their own WORK and OUT (a
# subfolder of the call's $OUT each) train side by side in one call, sharing the GPU; install first, so that
# they do not both join the wheel, and give the second a copy of the kernel cache (both compile the kernels
# their recipe adds at the same moment, and two writers of one cache file could leave it torn):
#   bash tools/device_train.sh install && cp -r /tmp/ptx /tmp/ptx_b && {
#     WORK=/tmp/ta OUT=$OUT/a bash tools/device_train.sh train 900 A... &
#     MLX_PTX_CACHE_DIR=/tmp/ptx_b WORK=/tmp/tb OUT=$OUT/b bash tools/device_train.sh train 900 B...; wait; }
# (A CPU rehearsal of two at once, 2026-12-07: a 24 GiB machine holds one; the second was killed for memory.
# Run 11 on an H100, 2026-12-07: two of the --max-len 512, --batch-size 128 recipe did not fit in its 78 GiB, and
# one stopped at its first step with "cudaMallocAsync ... out of memory". Run 12 alone then peaked at 23.1 GiB of
# arrays, and the recipe below lets MLX keep 16 GB of freed buffers on top (--cache-limit-gb): two runs of
# 39 GiB each are the H100's 78. Side by side on an H100, pass --cache-limit-gb 4 to both (about 27 GiB each;
# not yet tried on a GPU). Each progress line gives the run's peak memory so far.)
set -euo pipefail
step="${1:?usage: device_train.sh wheel DIR | install | train TOTAL_SECONDS [ARGS...]}"
shift
work="${WORK:-/tmp/train}"
export MLX_PTX_CACHE_DIR="${MLX_PTX_CACHE_DIR:-/tmp/ptx}"
python="${PYTHON:-python3}"

install_wheel() {
  # The machine's own Python has MLX's dependencies; MLX itself comes from the carried wheel, unless
  # the Python already imports it (a CPU rehearsal of this script).
  if ! "$python" -c "import mlx.core" 2>/dev/null && [ ! -d /tmp/site/mlx ]; then
    if ls /tmp/mlxw/cuda.part.* >/dev/null 2>&1; then
      cat /tmp/mlxw/cuda.part.* > "/tmp/mlxw/${WHEEL_NAME:?WHEEL_NAME (the CUDA wheel file name) is not set}"
      rm /tmp/mlxw/cuda.part.*
    fi
    "$python" -m pip install -q --no-index --no-deps --no-compile --target /tmp/site /tmp/mlxw/*.whl
  fi
}

case "$step" in
  wheel)
    mkdir -p /tmp/mlxw && cp "${1:?wheel part folder}"/* /tmp/mlxw/
    ls -la /tmp/mlxw
    exit 0 ;;
  install)
    install_wheel
    exit 0 ;;
  train) ;;
  *) echo "error: unknown step '$step' (wheel | install | train)" >&2; exit 2 ;;
esac

total="${1:?training seconds of the whole run}"
shift
: "${OUT:?OUT, the output folder of the device call, is not set}"
install_wheel

# The project's packages as they install (passes/, fidelity/ and checkpoints/ live under laya_opt).
pkg="$work/pkg"
rm -rf "$pkg" && mkdir -p "$pkg"
cp -r laya_opt "$pkg/laya_opt"
cp -r passes "$pkg/laya_opt/passes"
cp -r fidelity "$pkg/laya_opt/fidelity"
cp -r checkpoints "$pkg/laya_opt/checkpoints"
export PYTHONPATH="/tmp/site:$pkg${PYTHONPATH:+:$PYTHONPATH}"
mkdir -p "$work" "$MLX_PTX_CACHE_DIR" "$OUT"

status=0
"$python" tools/train_standin.py --out "$work/R" --train-records 120000 --hard-fraction 0.5 \
  --batch-size 256 --hidden-size 256 --aux-weight 1.0 --noul-weight 1 --replace-prob 0.15 \
  --label-smoothing 0.03 --lexical-init 1.0 --lr 1.4e-3 --calib-suite validation --eval-every 1000 \
  --steps 1000000 --max-train-seconds "$total" --report-seconds 60 --seed 0 --resume \
  --max-total-seconds "${CALL_SECONDS:-585}" --data-cache "$work/data.npz" --snapshot "$work/snapshot" \
  --workers "$(nproc)" --cache-limit-gb 16 "$@" 2>&1 | tee -a "$work/train.log" || status=$?

cp "$work/train.log" "$OUT/"
if [ -f "$work/R.state/state.json" ]; then
  cp "$work/R.state/state.json" "$OUT/state.json"
  tar -C "$work" -czf "$OUT/snapshot.tgz" snapshot   # float16 weights so far (~13 MB): --init-from if the machine is lost
fi
tar -C "$MLX_PTX_CACHE_DIR" -czf "$OUT/ptx.tgz" .
if [ -f "$work/R/model.safetensors" ]; then
  tar -C "$work" -czf "$OUT/standin.tgz" R
fi
exit "$status"
