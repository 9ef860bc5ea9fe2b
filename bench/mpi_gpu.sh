#!/usr/bin/env bash
# The MPI layer on a GPU machine: mpi4py from the wheels carried in .whl/
# (no network there), the build, the distributed models' rank-side tests on
# 2 and 3 ranks sharing the GPU(s), and the host-staged overhead of the
# distributed NLSE (1 rank against 2 ranks on one GPU).  Logs go to $OUT.
#   OUT=/some/dir bash bench/mpi_gpu.sh [--no-bench]
set -uo pipefail
OUT=${OUT:-out/mpi-gpu}
mkdir -p "$OUT"
PY=${PY:-python3}
bench=1
[ "${1:-}" = --no-bench ] && bench=0
{ command -v mpirun mpicc; nproc; } 2>&1 | tee "$OUT/mpi-env.txt"
. bench/gpu_prepare.sh
need_mpi4py
"$PY" -c "from mpi4py import MPI; print(MPI.Get_library_version())" | tee -a "$OUT/mpi-env.txt"
OUT=$OUT bash bench/gpu.sh --no-bench --no-tests || exit 1
export PYTHONPATH=/tmp/nlsepy-pkg PYTHONUNBUFFERED=1 OMP_NUM_THREADS=2
"$PY" -c "import nlsepy._build_config as b; print('mpi', b.mpi)"
for n in 2 3; do
  for f in tests/fd/ranks_fd.py tests/dec/ranks_dec.py tests/mbloch/ranks_mbloch.py \
           tests/dipolar/ranks_dipolar.py; do
    timeout 300 mpirun --allow-run-as-root --oversubscribe -n $n "$PY" -m pytest -q \
      -p no:cacheprovider -x -k "cuda or single" "$f" 2>&1 | tail -4 | tee -a "$OUT/mpi-tests.log"
  done
done
if [ $bench = 1 ]; then
  "$PY" bench/scaling.py --model fd --shape 512 --ranks 1,2 --backend cuda --share-gpu \
    --steps 10 --repeats 5 2>&1 | tee "$OUT/scaling-fd-share.md"
fi
