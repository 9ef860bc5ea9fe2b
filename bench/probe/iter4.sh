#!/usr/bin/env bash
# build, the float tests on two variants, then the float benchmark for each variant of the float kernel
set -uo pipefail
mkdir -p /tmp/g
OUT=/tmp/g bash bench/gpu.sh --no-bench --tests "${TESTS:-tests/test_mbloch_cuda.py -q -x}" 2>&1 | tail -3
export PYTHONPATH=/tmp/nlsepy-pkg PYTHONUNBUFFERED=1
for v in ${TVARS:-3 4}; do
  NLSEPY_MB_TCF_VARIANT=$v python3 -m pytest -q -p no:cacheprovider -x tests/test_mbloch_cuda.py -k "float or pipeline" 2>&1 | tail -1
done
for v in ${VARS:-1 2 3 4 5}; do
  echo "variant $v"; (cd bench && NLSEPY_MB_TCF_VARIANT=$v python3 mbloch.py --backends cuda --dtypes float32 --numpy-z-steps 0 \
    --repeat ${REPEAT:-1} 2>&1 | grep -E "^cuda")
done
