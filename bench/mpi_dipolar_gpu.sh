#!/usr/bin/env bash
# The dipolar GPE on GPU ranks: its rank tests (2 and 3 ranks, each on its own
# GPU where there are enough, else sharing), the single-GPU dipolar tests, then
# the strong and weak scaling tables (bench/scaling.py; edges as the first
# argument).  Logs and tables to $OUT.
#   OUT=/some/dir bash bench/mpi_dipolar_gpu.sh [EDGES] [WEAK_EDGE]
set -uo pipefail
OUT=${OUT:-out/mpi-dipolar-gpu}
mkdir -p "$OUT"
PY=${PY:-python3}
"$PY" -c "import mpi4py" 2>/dev/null || "$PY" -m pip install -q --no-deps --no-index \
  --no-build-isolation .whl/mpi4py-*.tar.gz 2>&1 | tail -5
if [ ! -f /tmp/nlsepy-pkg/nlsepy/_build_config.py ]; then
  OUT=$OUT bash bench/gpu.sh --no-bench --no-tests >/dev/null || { tail -30 "$OUT/build.log"; exit 1; }
fi
export PYTHONPATH=/tmp/nlsepy-pkg PYTHONUNBUFFERED=1 OMP_NUM_THREADS=2
nvidia-smi -L | tee "$OUT/gpus.txt"
for n in 2 3; do
  echo "== $n GPU ranks: tests/dipolar/ranks_dipolar.py" | tee -a "$OUT/tests.log"
  NLSEPY_RANKS_BACKEND=cuda timeout 300 mpirun --allow-run-as-root --oversubscribe -n "$n" \
    "$PY" -m pytest -q -p no:cacheprovider -x tests/dipolar/ranks_dipolar.py 2>&1 | tail -25 |
    tee -a "$OUT/tests.log"
done
echo "== 2 GPU ranks sharing GPU 0: tests/dipolar/ranks_dipolar.py" | tee -a "$OUT/tests.log"
NLSEPY_CUDA_DEVICE=0 NLSEPY_RANKS_BACKEND=cuda timeout 300 mpirun --allow-run-as-root \
  --oversubscribe -n 2 "$PY" -m pytest -q -p no:cacheprovider -x tests/dipolar/ranks_dipolar.py \
  2>&1 | tail -25 | tee -a "$OUT/tests.log"
echo "== one GPU: tests/dipolar/test_dipolar_cuda.py" | tee -a "$OUT/tests.log"
timeout 300 "$PY" -m pytest -q -p no:cacheprovider -x tests/dipolar/test_dipolar_cuda.py 2>&1 |
  tail -5 | tee -a "$OUT/tests.log"
ngpu=$(nvidia-smi -L | wc -l)
ranks=1; n=2; while [ $n -le "$ngpu" ]; do ranks="$ranks,$n"; n=$((n * 2)); done
run() { timeout "${TMAX:-400}" "$PY" bench/scaling.py "$@" --backend cuda --threads 2 2>&1 |
  grep -v "^\s*$" | tee -a "$OUT/tables.md"; }
run --model dipolar --shape "${1:-256,512}" --ranks "$ranks" --steps 5 --repeats 3 \
  --json "$OUT/dipolar-strong.json"
[ -n "${2:-}" ] && run --model dipolar --shape "$2" --ranks "$ranks" --steps 5 --repeats 3 --weak \
  --json "$OUT/dipolar-weak.json"
exit 0
