#!/usr/bin/env bash
# Two trees of nlsepy on one GPU machine, side by side: build each with CUDA
# (CMake + Ninja, in TREE/build-ab, skipped when already built), then run each
# pair of benchmark commands, the A tree's command then the B tree's, ROUNDS
# times, so that both see the same machine state.  For checking that a
# change which must not move speed (a refactor) did not.
#   bash bench/ab.sh TREE_A TREE_B ROUNDS 'CMD_A' 'CMD_B' ['CMD_A' 'CMD_B' ...]
# Each command runs in its tree's root with PYTHONPATH at that tree's build
# (a package folder under /tmp); output goes to $OUT/ab-<pair>-<round>-{A,B}.log.
set -uo pipefail
OUT=${OUT:-out/ab}
PY=${PYTHON:-python3}
mkdir -p "$OUT" && OUT=$(cd "$OUT" && pwd)
[ $# -ge 5 ] || { sed -n 2,10p "$0"; exit 2; }
A=$(cd "$1" && pwd); B=$(cd "$2" && pwd); rounds=$3; shift 3

build() {  # build TREE PKG LABEL
  local tree=$1 pkg=$2 label=$3
  if [ ! -f "$pkg/.built" ]; then
    (cd "$tree" && cmake -S . -B build-ab -G Ninja -DCMAKE_BUILD_TYPE=Release -DNLSEPY_CUDA=ON \
       -DPython_EXECUTABLE="$(command -v "$PY")" && cmake --build build-ab -j "${JOBS:-8}") \
       >"$OUT/build-$label.log" 2>&1 || { tail -40 "$OUT/build-$label.log"; return 1; }
    rm -rf "$pkg" && mkdir -p "$pkg" && cp -r "$tree/python/nlsepy" "$pkg/" &&
      cp "$tree"/build-ab/_core*.so "$tree"/build-ab/_cuda*.so "$tree"/build-ab/_build_config.py \
         "$pkg/nlsepy/" && touch "$pkg/.built"
  fi
}
build "$A" /tmp/nlsepy-ab-A A & pa=$!
build "$B" /tmp/nlsepy-ab-B B & pb=$!
wait $pa || exit 1
wait $pb || exit 1
export PYTHONUNBUFFERED=1
pair=0
while [ $# -ge 2 ]; do
  pair=$((pair + 1))
  for r in $(seq 1 "$rounds"); do
    (cd "$A" && PYTHONPATH=/tmp/nlsepy-ab-A bash -c "$1") >"$OUT/ab-$pair-$r-A.log" 2>&1
    (cd "$B" && PYTHONPATH=/tmp/nlsepy-ab-B bash -c "$2") >"$OUT/ab-$pair-$r-B.log" 2>&1
    echo "pair $pair round $r: A rc and tail"; tail -${TAIL:-6} "$OUT/ab-$pair-$r-A.log"
    echo "pair $pair round $r: B"; tail -${TAIL:-6} "$OUT/ab-$pair-$r-B.log"
  done
  shift 2
done
