#!/usr/bin/env bash
# Device-to-device halos (CUDA IPC) on a GPU node: the rank-side CUDA tests
# of the NLSE on 2 ranks (one GPU each, then both on GPU 0) and 3 ranks,
# then the scaling tables.  Logs to $OUT.
set -uo pipefail
OUT=${OUT:-out/ipc}
mkdir -p "$OUT"
PY=${PY:-python3}
. bench/gpu_prepare.sh
need_mpi4py
rm -rf /tmp/nlsepy-pkg
OUT=$OUT bash bench/gpu.sh --no-bench --no-tests >/dev/null || { tail -30 "$OUT/build.log"; exit 1; }
export PYTHONPATH=/tmp/nlsepy-pkg PYTHONUNBUFFERED=1 OMP_NUM_THREADS=2
t() { timeout 300 mpirun --allow-run-as-root --oversubscribe -n "$1" "$PY" -m pytest -q \
        -p no:cacheprovider -x -k "cuda" "$2" 2>&1 | tail -3 | tee -a "$OUT/tests.log"; }
for f in tests/fd/ranks_fd.py; do
  t 2 $f; NLSEPY_CUDA_DEVICE=0 t 2 $f; t 3 $f
done
"$PY" - <<'PYEOF' 2>&1 | tee -a "$OUT/tests.log"
import subprocess, sys
code = ("from mpi4py import MPI\nimport numpy as np, nlsepy as nl\n"
        "s = nl.NLSE(np.ones((64, 32, 32), complex), 0.1, scheme='cd', bc='periodic', backend='cuda', comm=MPI.COMM_WORLD)\n"
        "s.step(2)\nif MPI.COMM_WORLD.rank == 0: print(s.comm_info['exchange'])\n")
print(subprocess.run(["mpirun", "--allow-run-as-root", "-n", "2", sys.executable, "-c", code],
                     capture_output=True, text=True).stdout)
PYEOF
OUT=$OUT bash bench/scaling_gpu.sh fd "${1:-512,1024}" 2>&1 | grep -v "^\s*$" | grep -v "^|---"
OUT=$OUT bash bench/scaling_gpu.sh share 2>&1 | grep "^| 2"
