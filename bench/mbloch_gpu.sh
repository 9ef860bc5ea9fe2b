#!/usr/bin/env bash
# Maxwell-Bloch on a GPU machine in one go: build (bench/gpu.sh), the CUDA
# Maxwell-Bloch tests, then bench/mbloch.py (CPU on every core beside CUDA).
# Then the float run on the FP64 kernel (tc64) and on the mma.sync split-TF32
# kernel (tcf). Logs and JSON go to $OUT (default out/gpu).
#   bash bench/mbloch_gpu.sh [--no-tests] [--tests "PYTEST ARGS"] [--repeat N]
#                        [--dtypes float64,float32]
set -uo pipefail
OUT=${OUT:-out/gpu}
PY=${PYTHON:-python3}
mkdir -p "$OUT"
tests=1; targs="tests/mbloch/test_mbloch_cuda.py tests/mbloch/test_mbloch.py"; repeat=1; dtypes=float64,float32
while [ $# -gt 0 ]; do
  case "$1" in
    --no-tests) tests=0;;
    --tests) targs="$2"; shift;;
    --repeat) repeat="$2"; shift;;
    --dtypes) dtypes="$2"; shift;;
  esac
  shift
done
if [ $tests = 1 ]; then
  OUT="$OUT" bash bench/gpu.sh --no-bench --tests "$targs" || exit 1
else
  OUT="$OUT" bash bench/gpu.sh --no-bench --no-tests || exit 1
fi
export PYTHONPATH=/tmp/nlsepy-pkg PYTHONUNBUFFERED=1
(cd bench && "$PY" mbloch.py --dtypes "$dtypes" --repeat "$repeat" --numpy-z-steps 0 \
  --json "$OUT/mbloch.json" 2>&1 | tee "$OUT/mbloch.log" | tail -12)
(cd bench && NLSEPY_MBLOCH_KERNEL=tc64 "$PY" mbloch.py --backends cuda --dtypes float32 --numpy-z-steps 0 \
  2>&1 | tee "$OUT/mbloch-tc64.log" | tail -4)
(cd bench && NLSEPY_MBLOCH_KERNEL=tcf "$PY" mbloch.py --backends cuda --dtypes float32 --numpy-z-steps 0 \
  2>&1 | tee "$OUT/mbloch-tcf.log" | tail -4)
