#!/usr/bin/env bash
# Build nlsepy with CUDA (plain CMake), run the whole test suite with the GPU
# present, then the CUDA benchmark.  Logs go to $OUT (default out/gpu).
#   bash bench/gpu.sh [--quick] [--no-bench] [--no-tests]
set -uo pipefail
OUT=${OUT:-out/gpu}
PY=${PYTHON:-python3}
mkdir -p "$OUT"
quick=""; bench=1; tests=1
for a in "$@"; do
  case "$a" in --quick) quick=--quick;; --no-bench) bench=0;; --no-tests) tests=0;; esac
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
"$PY" -c "import nlsepy as nl; print(nl.backends(), nl.build_info())"
if [ $tests = 1 ]; then
  "$PY" -m pytest -q -p no:cacheprovider tests 2>&1 | tee "$OUT/tests.log" | tail -40
fi
if [ $bench = 1 ]; then
  "$PY" bench/fd.py --backend cuda $quick --json "$OUT/bench.json" 2>&1 | tee "$OUT/bench.log" | tail -45
fi
