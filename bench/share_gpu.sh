#!/usr/bin/env bash
# Two ranks sharing GPU 0 against one rank (the overhead of the distributed
# code on one device), for the FD NLSE and the dipolar GPE at EDGE^3:
# first as the processes time-slice the GPU, then, where the CUDA MPS
# control daemon is installed, with both ranks as clients of one MPS server
# (started here under /tmp and stopped before the script ends; the GPU's
# own settings are not touched).  Tables to $OUT/share.md.  MODELS picks
# the models (default "fd dipolar"); with NLSEPY_HALO=host the ranks stage
# their exchanges through host memory instead of CUDA IPC.
#   OUT=/some/dir [MODELS=dipolar] [NLSEPY_HALO=host] bash bench/share_gpu.sh [EDGE]
set -uo pipefail
. bench/gpu_prepare.sh
gpu_setup out/share-gpu mpi || exit 1
edge=${1:-512}
share() {
  for model in ${MODELS:-fd dipolar}; do
    echo "== $1${NLSEPY_HALO:+ (NLSEPY_HALO=$NLSEPY_HALO)}: $model ${edge}^3, 1 rank against 2 ranks on GPU 0" | tee -a "$OUT/share.md"
    timeout 400 "$PY" bench/scaling.py --model "$model" --shape "$edge" --ranks 1,2 --share-gpu \
      --backend cuda --threads 2 --steps 5 --repeats 3 --json "$OUT/share-$1-$model${NLSEPY_HALO:+-$NLSEPY_HALO}.json" 2>&1 |
      grep "^|\|p_t\|rror" | tee -a "$OUT/share.md"
  done
}
share time-sliced
if command -v nvidia-cuda-mps-control >/dev/null; then
  export CUDA_MPS_PIPE_DIRECTORY=/tmp/nlsepy-mps/pipe CUDA_MPS_LOG_DIRECTORY=/tmp/nlsepy-mps/log
  mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
  if nvidia-cuda-mps-control -d; then
    share mps
    echo quit | nvidia-cuda-mps-control
    sleep 2
  else
    echo "== the MPS control daemon did not start" | tee -a "$OUT/share.md"
  fi
  cp "$CUDA_MPS_LOG_DIRECTORY"/*.log "$OUT/" 2>/dev/null
else
  echo "== no nvidia-cuda-mps-control on this machine: the MPS runs are left out" |
    tee -a "$OUT/share.md"
fi
