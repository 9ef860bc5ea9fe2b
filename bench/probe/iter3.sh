#!/usr/bin/env bash
# build, the CUDA Maxwell-Bloch tests, then the benchmark (CUDA) over slice slack and dtype
set -uo pipefail
mkdir -p /tmp/g
OUT=/tmp/g bash bench/gpu.sh --no-bench --tests "${TESTS:-tests/test_mbloch_cuda.py -q -x}" 2>&1 | tail -3
export PYTHONPATH=/tmp/nlsepy-pkg PYTHONUNBUFFERED=1
for lag in ${LAGS:-0 1 2}; do
  echo "lag $lag"; (cd bench && NLSEPY_MB_LAG=$lag python3 mbloch.py --backends cuda --dtypes ${DTYPES:-float32,float64} \
    --numpy-z-steps 0 2>&1 | grep -E "^cuda")
done
