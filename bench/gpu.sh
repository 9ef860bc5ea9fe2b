#!/usr/bin/env bash
# Build nlsepy with CUDA (plain CMake), run the test suite with the GPU
# present, then the CUDA benchmarks of the models named (bench/<stem>.py).
# Logs go to $OUT (default out/gpu).
#   bash bench/gpu.sh [--quick] [--no-bench] [--no-tests] [--tests "PYTEST ARGS"]
#                     [--bench all|fd,dipolar,magnet,mbloch,dec]
#                     [--dipolar-sizes small,large,huge] [--dec-args "BENCH/DEC.PY ARGS"]
set -uo pipefail
OUT=${OUT:-out/gpu}
PY=${PYTHON:-python3}
mkdir -p "$OUT" && OUT=$(cd "$OUT" && pwd)
quick=""; bench=1; tests=1; targs="tests"; which=all; dipolar_sizes="small,large,huge"; dec_args=""
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) quick=--quick;;
    --no-bench) bench=0;;
    --no-tests) tests=0;;
    --tests) targs="$2"; shift;;
    --bench) which="$2"; shift;;
    --dipolar-sizes) dipolar_sizes="$2"; shift;;
    --dec-args) dec_args="$2"; shift;;
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
  cp build-gpu/_core*.so build-gpu/_cuda*.so build-gpu/_build_config.py "$pkg/nlsepy/" &&
  { cp build-gpu/_mpi*.so "$pkg/nlsepy/" 2>/dev/null || true; }
export PYTHONPATH="$pkg" PYTHONUNBUFFERED=1
"$PY" -c "import nlsepy as nl; print(nl.backends(), nl.backends('DipolarGPE'), nl.build_info())"
if [ $tests = 1 ]; then
  # shellcheck disable=SC2086
  "$PY" -m pytest -q -p no:cacheprovider $targs 2>&1 | tee "$OUT/tests.log" | tail -40
fi
want() { [ $bench = 1 ] && { [ "$which" = all ] || [[ ",$which," == *",$1,"* ]]; }; }
if want fd; then
  "$PY" bench/fd.py --backend cuda $quick --json "$OUT/bench.json" 2>&1 | tee "$OUT/bench.log" | tail -45
fi
if want dipolar; then
  for dt in complex128 complex64; do
    "$PY" bench/dipolar.py --backend cuda --sizes "$dipolar_sizes" --dtype $dt --steps 20 \
      --ref-steps 3 --ref-mem-gb 60 --json "$OUT/dipolar-$dt.json" 2>&1 | tee "$OUT/dipolar-$dt.log" | tail -16
  done
fi
if want magnet; then
  (cd bench && "$PY" magnet.py --backend cuda --json "$OUT/magnet.json" 2>&1 | tee "$OUT/magnet.log" | tail -8)
fi
if want mbloch; then
  (cd bench && "$PY" mbloch.py --numpy-z-steps 0 --json "$OUT/mbloch.json" 2>&1 | tee "$OUT/mbloch.log" | tail -8)
fi
if want dec; then
  "$PY" bench/dec.py --backend cuda $dec_args --json "$OUT/dec.json" 2>&1 | tee "$OUT/dec.log" | tail -40
fi
