#!/usr/bin/env bash
# The scaling tables on a machine with several GPUs (one rank per GPU):
# mpi4py from .whl/ when it is missing (no network there), the build, then
# bench/scaling.py for the models with a GPU distributed path.  Tables and
# JSON go to $OUT.
#   OUT=/some/dir bash bench/scaling_gpu.sh [fd|dipolar|dec|share|all] [EDGES]
set -uo pipefail
. bench/gpu_prepare.sh
gpu_setup out/scaling-gpu mpi || exit 1
what=${1:-all}
edges=${2:-512,1024}
ngpu=$(nvidia-smi -L | wc -l)
ranks=1; n=2; while [ $n -le "$ngpu" ]; do ranks="$ranks,$n"; n=$((n * 2)); done
nvidia-smi topo -m > "$OUT/topo.txt" 2>&1
echo "GPUs: $ngpu, rank counts: $ranks" | tee "$OUT/setup.txt"
run() { "$PY" bench/scaling.py "$@" --backend cuda --threads 2 2>&1 | tee -a "$OUT/tables.md"; }
case $what in fd|all)
  run --model fd --shape "$edges" --ranks "$ranks" --steps 5 --repeats 3 --json "$OUT/fd-strong.json"
  run --model fd --shape 512 --ranks "$ranks" --steps 5 --repeats 3 --weak --json "$OUT/fd-weak.json";;
esac
case $what in dipolar|all)
  run --model dipolar --shape "$edges" --ranks "$ranks" --steps 5 --repeats 3 --json "$OUT/dipolar-strong.json"
  run --model dipolar --shape 512 --ranks "$ranks" --steps 5 --repeats 3 --weak --json "$OUT/dipolar-weak.json";;
esac
case $what in dec|all)
  run --model dec --shape 87x87x302 --ranks "$ranks" --steps 20 --repeats 3 --json "$OUT/dec-strong.json"
  run --model dec --shape 87x87x302 --ranks "$ranks" --steps 20 --repeats 3 --weak --json "$OUT/dec-weak.json";;
esac
case $what in share|all)
  run --model fd --shape 512 --ranks 1,2 --share-gpu --steps 5 --repeats 3 --json "$OUT/fd-share.json";;
esac
