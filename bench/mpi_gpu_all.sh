#!/usr/bin/env bash
# Every distributed model's CUDA rank tests on 2 ranks and on all the node's
# GPUs, then the scaling tables (NLSE strong and weak, DEC strong at source
# 001's 87 x 87 x 302 BCC blocks).  Logs and tables to $OUT.
#   OUT=/some/dir bash bench/mpi_gpu_all.sh [EDGES]
set -uo pipefail
OUT=${OUT:-out/mpi-gpu-all}
mkdir -p "$OUT"
PY=${PY:-python3}
"$PY" -c "import mpi4py" 2>/dev/null || "$PY" -m pip install -q --no-deps --no-index \
  --no-build-isolation .whl/mpi4py-*.tar.gz 2>&1 | tail -5
rm -rf /tmp/nlsepy-pkg
OUT=$OUT bash bench/gpu.sh --no-bench --no-tests >/dev/null || { tail -30 "$OUT/build.log"; exit 1; }
export PYTHONPATH=/tmp/nlsepy-pkg PYTHONUNBUFFERED=1 OMP_NUM_THREADS=2
ngpu=$(nvidia-smi -L | wc -l)
for n in 2 3; do
  for f in tests/fd/ranks_fd.py tests/dec/ranks_dec.py tests/mbloch/ranks_mbloch.py; do
    echo "== $n ranks: $f" | tee -a "$OUT/tests.log"
    timeout 300 mpirun --allow-run-as-root --oversubscribe -n "$n" "$PY" -m pytest -q \
      -p no:cacheprovider -x -k cuda "$f" 2>&1 | tail -2 | tee -a "$OUT/tests.log"
  done
done
OUT=$OUT bash bench/scaling_gpu.sh fd "${1:-512,1024}" 2>&1 | grep -v "^\s*$" | grep -v "^|---"
OUT=$OUT bash bench/scaling_gpu.sh dec 2>&1 | grep -v "^\s*$" | grep -v "^|---"
