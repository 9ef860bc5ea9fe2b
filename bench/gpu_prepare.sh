# shellcheck shell=bash
# Sourced by the device scripts of bench/:
#   need_mpi4py   mpi4py from the wheels carried in .whl/ where it is missing
#                 (the device machine has no network);
#   need_build    the CUDA build of bench/gpu.sh into /tmp/nlsepy-pkg unless
#                 one is there (the end of $OUT/build.log shown when it fails),
#                 then that package on PYTHONPATH;
#   gpu_setup DEFAULT_OUT [mpi]
#                 the usual start of a device script: OUT (DEFAULT_OUT unless
#                 set) created, PY (python3 unless set), mpi4py where "mpi" is
#                 given, then need_build; fails when the build does.
#   . bench/gpu_prepare.sh; gpu_setup out/some-dir mpi || exit 1
# need_mpi4py and need_build use OUT and PY: set them first when calling
# those two directly.
need_mpi4py() {
  "$PY" -c "import mpi4py" 2>/dev/null || "$PY" -m pip install -q --no-deps --no-index \
    --no-build-isolation .whl/mpi4py-*.tar.gz 2>&1 | tail -5
}
need_build() {
  if [ ! -f /tmp/nlsepy-pkg/nlsepy/_build_config.py ]; then
    OUT=$OUT bash bench/gpu.sh --no-bench --no-tests >/dev/null || { tail -30 "$OUT/build.log"; return 1; }
  fi
  export PYTHONPATH=/tmp/nlsepy-pkg PYTHONUNBUFFERED=1
}
gpu_setup() {
  OUT=${OUT:-$1}
  mkdir -p "$OUT"
  PY=${PY:-python3}
  if [ "${2:-}" = mpi ]; then
    need_mpi4py
  fi
  need_build
}
