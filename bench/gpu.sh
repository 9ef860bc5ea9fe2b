#!/usr/bin/env bash
# Build nlsepy with CUDA (plain CMake), run the test suite with the GPU
# present, then the CUDA benchmarks.  Logs go to $OUT (default out/gpu).
#   bash bench/gpu.sh [--quick] [--no-bench] [--no-tests] [--tests "PYTEST ARGS"]
#                     [--bench fd|ss|all] [--ss-sizes small,large,huge]
set -uo pipefail
OUT=${OUT:-out/gpu}
PY=${PYTHON:-python3}
mkdir -p "$OUT"
quick=""; bench=1; tests=1; targs="tests"; which=all; ss_sizes="small,large,huge"
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) quick=--quick;;
    --no-bench) bench=0;;
    --no-tests) tests=0;;
    --tests) targs="$2"; shift;;
    --bench) which="$2"; shift;;
    --ss-sizes) ss_sizes="$2"; shift;;
  esac
  shift
done
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv | tee "$OUT/gpu.txt"
nvcc --version | tail -2
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DNLSEPY_CUDA=ON \
  -DPython_EXECUTABLE="$(command -v "$PY")" >"$OUT/build.log" 2>&1 &&
  cmake --build build-gpu -j 16 >>"$OUT/build.log" 2>&1 || { tail -60 "$OUT/build.log"; exit 1; }
grep -iE "warning|spill" "$OUT/build.log" | head -20
pkg=/tmp/nlsepy-pkg
rm -rf "$pkg" && mkdir -p "$pkg" && cp -r python/nlsepy "$pkg/" &&
  cp build-gpu/_core*.so build-gpu/_cuda*.so build-gpu/_build_config.py "$pkg/nlsepy/"
export PYTHONPATH="$pkg" PYTHONUNBUFFERED=1
"$PY" -c "import nlsepy as nl; print(nl.backends(), nl.backends('DipolarGPE'), nl.build_info())"
if [ $tests = 1 ]; then
  # shellcheck disable=SC2086
  "$PY" -m pytest -q -p no:cacheprovider $targs 2>&1 | tee "$OUT/tests.log" | tail -40
fi
if [ $bench = 1 ] && { [ "$which" = all ] || [ "$which" = fd ]; }; then
  "$PY" bench/fd.py --backend cuda $quick --json "$OUT/bench.json" 2>&1 | tee "$OUT/bench.log" | tail -45
fi
if [ $bench = 1 ] && { [ "$which" = all ] || [ "$which" = ss ]; }; then
  for dt in complex128 complex64; do
    "$PY" bench/splitstep.py --backend cuda --sizes "$ss_sizes" --dtype $dt --steps 20 \
      --ref-steps 3 --ref-mem-gb 60 --json "$OUT/ss-$dt.json" 2>&1 | tee "$OUT/ss-$dt.log" | tail -16
  done
fi
