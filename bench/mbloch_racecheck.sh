#!/usr/bin/env bash
# The float Maxwell-Bloch kernel k_atoms_tcf under compute-sanitizer racecheck
# with each form of its stage barrier (cuda/mbloch/mbloch_tcf.cuh):
#   default      the split mbarrier (lane 0 of each warp arrives after __syncwarp)
#   sync-wait    NLSEPY_MBLOCH_SYNCTHREADS=1: __syncthreads where a warp waits
#   sync-arrive  NLSEPY_MBLOCH_SYNCTHREADS=2: __syncthreads where it arrives
#   arrive-all   NLSEPY_MBLOCH_ARRIVE_ALL=1: the mbarrier, every thread arriving
# One build folder (default build-racecheck, for this GPU's architecture only,
# with -lineinfo); each variant rebuilds the Maxwell-Bloch CUDA library alone
# (NLSEPY_MBLOCH_CUDA_DEFS) and is copied to a package of its own under
# $PKG_ROOT.  For each: the small float runs of bench/mbloch_racecheck.py
# without a tool (results kept) and under racecheck (hazard count and the
# source lines of the hazards), then the largest difference of every
# variant's results from the default's.  Logs and results in $OUT.
#   bash bench/mbloch_racecheck.sh [variants]       (default: all four)
# Environment: OUT (out/gpu), PYTHON (python3), BUILD_DIR (build-racecheck),
#   PKG_ROOT (/tmp/nlsepy-racecheck), RACECHECK_LIMIT (seconds a racecheck
#   run, 1200), JOBS (nproc), CUDA_ARCHS (e.g. 90-real; default: the GPU's).
# Exit status: 0 every build and run done (hazards are reported, not
#   failures); 1 a build or run failed; 2 a tool or the GPU is missing.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
OUT=${OUT:-out/gpu}; mkdir -p "$OUT" && OUT=$(cd "$OUT" && pwd) || exit 2
PY=${PYTHON:-python3}
BDIR=${BUILD_DIR:-build-racecheck}
PKG_ROOT=${PKG_ROOT:-/tmp/nlsepy-racecheck}
LIMIT=${RACECHECK_LIMIT:-1200}
JOBS=${JOBS:-$(nproc 2>/dev/null || echo 8)}
variants=${1:-"default sync-wait sync-arrive arrive-all"}
SUMMARY="$OUT/mbloch-racecheck-summary.txt"
: >"$SUMMARY"
say() { echo "$*" | tee -a "$SUMMARY"; }

defs_of() {
  case "$1" in
    default) echo "";;
    sync-wait) echo "NLSEPY_MBLOCH_SYNCTHREADS=1";;
    sync-arrive) echo "NLSEPY_MBLOCH_SYNCTHREADS=2";;
    arrive-all) echo "NLSEPY_MBLOCH_ARRIVE_ALL=1";;
    *) return 1;;
  esac
}

for v in $variants; do
  defs_of "$v" >/dev/null || { echo "unknown variant '$v' (default sync-wait sync-arrive arrive-all)"; exit 2; }
done
for tool in nvcc cmake compute-sanitizer nvidia-smi "$PY"; do
  command -v "$tool" >/dev/null || { echo "mbloch_racecheck: '$tool' not found"; exit 2; }
done
"$PY" -c "import numpy" 2>/dev/null || { echo "mbloch_racecheck: $PY has no numpy"; exit 2; }
gpu=$(nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv,noheader 2>/dev/null | head -1)
[ -n "$gpu" ] || { echo "mbloch_racecheck: no GPU (nvidia-smi lists none)"; exit 2; }
if [ -z "${CUDA_ARCHS:-}" ]; then
  cc=$(echo "$gpu" | awk -F', ' '{print $2}' | tr -d '.')
  CUDA_ARCHS="${cc}-real"
fi
gen=(); command -v ninja >/dev/null && gen=(-G Ninja)
say "mbloch_racecheck: $gpu; $(nvcc --version | tail -1); $(compute-sanitizer --version | head -1)"
say "archs $CUDA_ARCHS, build $BDIR, variants: $variants"

failed=0
results=()
for v in $variants; do
  defs=$(defs_of "$v")
  log="$OUT/mbloch-racecheck-$v-build.log"
  start=$(date +%s)
  cmake -S . -B "$BDIR" ${gen[@]+"${gen[@]}"} -DCMAKE_BUILD_TYPE=Release -DNLSEPY_CUDA=ON -DNLSEPY_MPI=OFF \
    -DCMAKE_CUDA_ARCHITECTURES="$CUDA_ARCHS" -DCMAKE_CUDA_FLAGS=-lineinfo \
    -DNLSEPY_MBLOCH_CUDA_DEFS="$defs" -DPython_EXECUTABLE="$(command -v "$PY")" >"$log" 2>&1 &&
    cmake --build "$BDIR" -j "$JOBS" --target _core _cuda >>"$log" 2>&1
  rc=$?
  if [ $rc != 0 ]; then
    say "$v: build failed (rc=$rc), see $log"; tail -30 "$log"; failed=1; continue
  fi
  # the definitions reached the library's compile line (and no other variant's did)
  on=$(grep -rhos --include=build.ninja --include=flags.make -E -- \
    "-DNLSEPY_MBLOCH_(SYNCTHREADS|ARRIVE_ALL)=[0-9]+" "$BDIR" | sort -u | tr '\n' ' ')
  if [ "${on% }" != "${defs:+-D$defs}" ]; then
    say "$v: the Maxwell-Bloch library is built with '${on% }', not '${defs:+-D$defs}' (see $log)"
    failed=1; continue
  fi
  pkg="$PKG_ROOT/$v"
  rm -rf "$pkg" && mkdir -p "$pkg" && cp -r python/nlsepy "$pkg/" &&
    cp "$BDIR"/_core*.so "$BDIR"/_cuda*.so "$BDIR"/_build_config.py "$pkg/nlsepy/" ||
    { say "$v: packaging into $pkg failed"; failed=1; continue; }
  build_s=$(( $(date +%s) - start ))
  res="$OUT/mbloch-racecheck-$v.npz"
  rm -f "$res"
  PYTHONPATH="$pkg" "$PY" bench/mbloch_racecheck.py run --out "$res" >"$OUT/mbloch-racecheck-$v-run.log" 2>&1
  rc=$?
  if [ $rc != 0 ]; then
    say "$v: plain run failed (rc=$rc), see $OUT/mbloch-racecheck-$v-run.log"
    tail -20 "$OUT/mbloch-racecheck-$v-run.log"; failed=1; continue
  fi
  results+=("$res")
  rlog="$OUT/mbloch-racecheck-$v.log"
  start=$(date +%s)
  PYTHONPATH="$pkg" timeout "$LIMIT" compute-sanitizer --tool racecheck --error-exitcode 9 \
    "$PY" bench/mbloch_racecheck.py run --out "$OUT/mbloch-racecheck-$v-sanitized.npz" >"$rlog" 2>&1
  rc=$?
  summary=$(grep -E "RACECHECK SUMMARY" "$rlog" | tail -1 | sed 's/^=* *//')
  say "$v: build ${build_s}s; racecheck rc=$rc $(( $(date +%s) - start ))s: ${summary:-no summary (see $rlog)}"
  case $rc in 0|9) ;; 124) say "$v: racecheck ran past RACECHECK_LIMIT=$LIMIT s"; failed=1;; *) failed=1;; esac
  # where the hazards are: the source lines of each race's two accesses, most hazards first
  "$PY" bench/mbloch_racecheck.py sites "$rlog" >"$OUT/mbloch-racecheck-$v-sites.txt" 2>&1
  say "  races by source line ($OUT/mbloch-racecheck-$v-sites.txt):"
  head -12 "$OUT/mbloch-racecheck-$v-sites.txt" | sed 's/^/    /' | tee -a "$SUMMARY"
done

# the variants' results against the first's (the plain runs; same bits expected)
if [ ${#results[@]} -ge 2 ]; then
  "$PY" bench/mbloch_racecheck.py compare "${results[@]}" 2>&1 | tee -a "$SUMMARY"
  crc=${PIPESTATUS[0]}
  [ "$crc" = 2 ] && failed=1
  say "results: $([ "$crc" = 0 ] && echo "every variant gives the first's bits" || echo "the variants differ (rc=$crc)")"
fi
if [ $failed = 0 ]; then say "mbloch_racecheck: done (summary in $SUMMARY)"; exit 0; fi
say "mbloch_racecheck: FAILED (see the lines above and the logs in $OUT)"
exit 1
