#!/usr/bin/env bash
# The CUDA DEC leapfrog step under each kernel variant (NLSEPY_DEC_KERNEL,
# cuda/dec/dec.cu) and y-tile size (NLSEPY_DEC_TILE_MIB, MiB of psi(n) per
# plane of a tile): bench/dec.py's GPU rows for each pair, then the CUDA DEC
# tests under each variant other than the default.  Logs to $OUT.
#   OUT=/some/dir bash bench/dec_kernels.sh [VARIANTS] [BCC BLOCKS] [DTYPES] [TILE MIBS]
# e.g. bash bench/dec_kernels.sh 0,3,6 189 complex128,complex64 8,2
set -uo pipefail
. bench/gpu_prepare.sh
gpu_setup out/dec-kernels || exit 1
variants=${1:-0,3,6}
blocks=${2:-189}
dtypes=${3:-complex128,complex64}
tiles=${4:-8}
for v in ${variants//,/ }; do
  for m in ${tiles//,/ }; do
    echo "== NLSEPY_DEC_KERNEL=$v NLSEPY_DEC_TILE_MIB=$m" | tee -a "$OUT/dec-kernels.log"
    NLSEPY_DEC_KERNEL=$v NLSEPY_DEC_TILE_MIB=$m "$PY" bench/dec.py --backend cuda --cpu-threads "" \
      --blocks "$blocks" --dtypes "$dtypes" --repeats 5 --json "$OUT/dec-k$v-t$m.json" 2>&1 |
      grep -v "^\s*$" | grep -v "^cpu copy" | tee -a "$OUT/dec-kernels.log"
  done
done
[ -n "${NO_TESTS:-}" ] && exit 0
for v in ${variants//,/ }; do
  [ "$v" = 0 ] && continue
  echo "== tests, NLSEPY_DEC_KERNEL=$v" | tee -a "$OUT/dec-kernels.log"
  NLSEPY_DEC_KERNEL=$v timeout 300 "$PY" -m pytest -q --color=no -p no:cacheprovider -x \
    -m "not slow" tests/dec/test_dec_cuda.py 2>&1 | tail -3 | tee -a "$OUT/dec-kernels.log"
done
