# shellcheck shell=bash
# Sourced by the device scripts of bench/ (after OUT and PY are set):
#   need_mpi4py   mpi4py from the wheels carried in .whl/ where it is missing
#                 (the device machine has no network);
#   need_build    the CUDA build of bench/gpu.sh into /tmp/nlsepy-pkg unless
#                 one is there (the end of $OUT/build.log shown when it fails),
#                 then that package on PYTHONPATH.
#   . bench/gpu_prepare.sh; need_mpi4py; need_build || exit 1
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
