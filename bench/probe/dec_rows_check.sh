#!/bin/bash
# k_rows (NLSEPY_DEC_KERNEL=23): the CUDA DEC tests under it, then its
# timing against the default forms on A15, C15, Z.
export PY=${PY:-python3} OUT=${OUT:-out/dec_rows}
mkdir -p "$OUT"
rm -rf /tmp/nlsepy-pkg
. bench/gpu_prepare.sh; need_build || exit 1
NLSEPY_DEC_KERNEL=23 timeout 120 $PY -m pytest -q -x tests/dec/test_dec_cuda.py > $OUT/tests23.log 2>&1
tail -2 $OUT/tests23.log
V="$PY bench/dec_variant_check.py --blocks 189 --steps 40 --time 3"
timeout 200 $V --grids a15,c15,z --dtypes complex64,complex128 --variants 23 > $OUT/v.log 2>&1
grep -h " ms " $OUT/v.log | cut -c1-150; grep -h "diff" $OUT/v.log | grep -v "0.00e+00" | cut -c1-150
