#!/usr/bin/env bash
# Every distributed model's CUDA rank tests on 2 and 3 ranks (each on its own
# GPU where there are enough; the dipolar GPE's also with 2 ranks sharing GPU
# 0), the tests of handles on several GPUs, then the
# scaling tables named (bench/scaling_gpu.sh: fd, dipolar, dec, all or none).
# Logs and tables to $OUT.
#   OUT=/some/dir bash bench/mpi_gpu_all.sh [TABLES] [EDGES]
set -uo pipefail
. bench/gpu_prepare.sh
gpu_setup out/mpi-gpu-all mpi || exit 1
export OMP_NUM_THREADS=2
nvidia-smi -L | tee "$OUT/gpus.txt"

echo "== one process, several GPUs" | tee -a "$OUT/tests.log"
timeout 300 "$PY" -m pytest -q --color=no -p no:cacheprovider -x tests/test_cuda_devices.py 2>&1 | tail -5 | tee -a "$OUT/tests.log"
for n in 2 3; do
  for f in tests/fd/ranks_fd.py tests/dec/ranks_dec.py tests/mbloch/ranks_mbloch.py; do
    echo "== $n ranks: $f" | tee -a "$OUT/tests.log"
    timeout 300 mpirun --allow-run-as-root --oversubscribe -n "$n" "$PY" -m pytest -q --color=no \
      -p no:cacheprovider -x -k cuda "$f" 2>&1 | tail -4 | tee -a "$OUT/tests.log"
  done
  echo "== $n ranks: tests/dipolar/ranks_dipolar.py (GPU ranks)" | tee -a "$OUT/tests.log"
  NLSEPY_RANKS_BACKEND=cuda timeout 300 mpirun --allow-run-as-root --oversubscribe -n "$n" \
    "$PY" -m pytest -q --color=no -p no:cacheprovider -x tests/dipolar/ranks_dipolar.py 2>&1 |
    tail -4 | tee -a "$OUT/tests.log"
done
echo "== 2 ranks sharing GPU 0: tests/dipolar/ranks_dipolar.py" | tee -a "$OUT/tests.log"
NLSEPY_CUDA_DEVICE=0 NLSEPY_RANKS_BACKEND=cuda timeout 300 mpirun --allow-run-as-root \
  --oversubscribe -n 2 "$PY" -m pytest -q --color=no -p no:cacheprovider -x \
  tests/dipolar/ranks_dipolar.py 2>&1 | tail -4 | tee -a "$OUT/tests.log"
tables=${1:-none}
[ "$tables" = none ] && exit 0
OUT=$OUT bash bench/scaling_gpu.sh "$tables" "${2:-512,1024}" 2>&1 | grep -v "^\s*$" | grep -v "^|---"
