#!/usr/bin/env bash
# The float Maxwell-Bloch kernel k_atoms_tcf with its stage barrier as built
# by default against a variant (NLSEPY_MBLOCH_CUDA_DEFS, default: every
# thread arrives, NLSEPY_MBLOCH_ARRIVE_ALL=1): both builds on one GPU, the
# benchmark (bench/mbloch.py, float32, the tcf kernel forced) run in turns.
#   OUT=dir bash bench/mbloch_barrier_ab.sh [DEFS] [ROUNDS] [BENCH ARGS...]
set -uo pipefail
OUT=${OUT:-out/gpu}; mkdir -p "$OUT"
PY=${PYTHON:-python3}
defs=${1:-NLSEPY_MBLOCH_ARRIVE_ALL=1}; rounds=${2:-3}; shift 2 2>/dev/null || shift $#
args=${*:-"--atoms 2048 --z-steps 40"}
[ -f /tmp/nlsepy-pkg/nlsepy/_build_config.py ] ||
  OUT=$OUT bash bench/gpu.sh --no-bench --no-tests >/dev/null || exit 1
cmake -S . -B build-ab -G Ninja -DCMAKE_BUILD_TYPE=Release -DNLSEPY_CUDA=ON \
  -DNLSEPY_MBLOCH_CUDA_DEFS="$defs" -DPython_EXECUTABLE="$(command -v "$PY")" >"$OUT/ab-build.log" 2>&1 &&
  cmake --build build-ab -j 16 >>"$OUT/ab-build.log" 2>&1 || { tail -30 "$OUT/ab-build.log"; exit 1; }
rm -rf /tmp/nlsepy-ab && mkdir -p /tmp/nlsepy-ab && cp -r python/nlsepy /tmp/nlsepy-ab/ &&
  cp build-ab/_core*.so build-ab/_cuda*.so build-ab/_build_config.py /tmp/nlsepy-ab/nlsepy/
for r in $(seq "$rounds"); do
  for pkg in /tmp/nlsepy-pkg /tmp/nlsepy-ab; do
    # shellcheck disable=SC2086
    NLSEPY_MBLOCH_KERNEL=tcf PYTHONPATH=$pkg "$PY" bench/mbloch.py --backends cuda --dtypes float32 \
      --numpy-z-steps 0 $args 2>&1 | grep -E "^cuda float32" | sed "s|^|round $r $(basename $pkg): |" |
      tee -a "$OUT/ab.log"
  done
done
