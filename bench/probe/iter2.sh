#!/usr/bin/env bash
# build, the float tests, then the float benchmark for each register budget
set -uo pipefail
mkdir -p /tmp/g
OUT=/tmp/g bash bench/gpu.sh --no-bench --tests "${TESTS:-tests/test_mbloch_cuda.py -q -x}" 2>&1 | tail -4
export PYTHONPATH=/tmp/nlsepy-pkg PYTHONUNBUFFERED=1
NLSEPY_MB_TCF_BLOCKS=4 python3 -m pytest -q -p no:cacheprovider -x tests/test_mbloch_cuda.py -k "float or pipeline" 2>&1 | tail -3
for nb in ${NBS:-3 4 5}; do
  echo "blocks $nb"; (cd bench && NLSEPY_MB_TCF_BLOCKS=$nb python3 mbloch.py --backends cuda --dtypes float32 --numpy-z-steps 0 \
    --repeat ${REPEAT:-1} 2>&1 | grep -E "^cuda")
done
