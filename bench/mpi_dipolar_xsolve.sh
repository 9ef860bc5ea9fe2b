#!/usr/bin/env bash
# The dipolar GPE's GPU ranks with the x solve by transposes and by
# substructuring (NLSEPY_DIPOLAR_XSOLVE): the rank tests (2 and 3 ranks,
# IPC and host-staged, and 2 ranks sharing GPU 0), then the strong-scaling
# step at the sizes given, both ways, and two ranks sharing GPU 0.
# Logs and tables to $OUT.
#   OUT=/some/dir bash bench/mpi_dipolar_xsolve.sh [SIZES] [RANKS]
# e.g. bash bench/mpi_dipolar_xsolve.sh 512 1,2
set -uo pipefail
. bench/gpu_prepare.sh
gpu_setup out/mpi-dipolar-xsolve mpi || exit 1
export OMP_NUM_THREADS=2 NLSEPY_RANKS_BACKEND=cuda
M="mpirun --allow-run-as-root --oversubscribe"
T="$PY -m pytest -q --color=no -p no:cacheprovider -x tests/dipolar/ranks_dipolar.py"
for xs in substructure transpose; do
  for n in 2 3; do
    for halo in "" host; do
      echo "== $xs, $n ranks, halo ${halo:-ipc}" | tee -a "$OUT/tests.log"
      NLSEPY_DIPOLAR_XSOLVE=$xs NLSEPY_HALO=$halo timeout 300 $M -n "$n" $T 2>&1 | tail -3 |
        tee -a "$OUT/tests.log"
    done
  done
  echo "== $xs, 2 ranks sharing GPU 0" | tee -a "$OUT/tests.log"
  NLSEPY_DIPOLAR_XSOLVE=$xs NLSEPY_CUDA_DEVICE=0 timeout 300 $M -n 2 $T 2>&1 | tail -3 |
    tee -a "$OUT/tests.log"
done
sizes=${1:-512}
ranks=${2:-1,2}
for xs in transpose substructure; do
  for sz in ${sizes//,/ }; do
    echo "== scaling $xs ${sz}^3 ranks $ranks" | tee -a "$OUT/scaling.log"
    NLSEPY_DIPOLAR_XSOLVE=$xs timeout 600 "$PY" bench/scaling.py --model dipolar --shape "$sz" \
      --ranks "$ranks" --backend cuda --steps 5 --repeats 3 --json "$OUT/scaling-$xs-$sz.json" 2>&1 |
      grep "^|\|p_t" | tee -a "$OUT/scaling.log"
    echo "== shared GPU $xs ${sz}^3" | tee -a "$OUT/scaling.log"
    NLSEPY_DIPOLAR_XSOLVE=$xs timeout 600 "$PY" bench/scaling.py --model dipolar --shape "$sz" \
      --ranks 1,2 --backend cuda --share-gpu --steps 5 --repeats 3 2>&1 | grep "^|\|p_t" |
      tee -a "$OUT/scaling.log"
  done
done
