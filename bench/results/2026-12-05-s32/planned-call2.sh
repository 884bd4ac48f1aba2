#!/usr/bin/env bash
# Session 32's plan, call 2 (~550 s): (1) searches with the X2 build (six
# configs of the two soft-capped LM-head GEMMs and the SwiGLU-save GEMM;
# session 31's planned call 3, part 3), .device/coda-x2 the stripped `coda` of
#   CARGO_TARGET_DIR=/work/tgt-x2 CODA_CONFIGS=pp_128x128_c1x2,pp_128x128_c2x1,pp_128x192_c2x1,pp_128x192_c1x2,coop_128x256_c1x1,coop_256x128_c2x1 \
#   CODA_CONFIG_PROGRAMS=linear_cross_entropy_save_softcap,linear_cross_entropy_softcap,linear_rowscale_swiglu_save \
#   cargo build --release -p coda-cli
# (2) the row_lse programs' 10 shipped entries searched again if call 1's
# A/B moved them (SEARCH_LSE=1). (3) One compare.py run (issue H's "Done
# when"), when call 1 left no change to make first (COMPARE=1).
set -uo pipefail
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
o=$OUT/call2; rm -rf /tmp/b; mkdir -p /tmp/b "$o"
tar xJf .device/bins.tar.xz -C /tmp/b
cp .device/coda-x2 /tmp/b/coda-x2; chmod +x /tmp/b/coda-x2
t() { CODA_LOG=debug CODA_TUNE_CACHE=$o/tuning-x2.json timeout 100 scripts/device-run.sh /tmp/b/coda-x2 tune --program "$@" >> "$o/tune-x2.log" 2>&1; echo "tune $1 exit $? at $(el) s"; }
t linear_cross_entropy_save_softcap --shape 4096,32768,2048 --shape 4096,32768,4096 --shape 4096,32768,8192
t linear_cross_entropy_softcap --shape 16384,32768,2048 --shape 8192,32768,8192
t linear_rowscale_swiglu_save --shape 16384,57344,8192 --shape 16384,22016,4096 --shape 16384,16384,2048
if [[ "${SEARCH_LSE:-0}" == 1 ]]; then
  for prog in linear_cross_entropy linear_cross_entropy_save; do
    args=$(python3 -c "import json,sys; print(' '.join(f\"--shape {e['m']},{e['n']},{e['k']}\" for e in json.load(open('.device/s31/shipped-lse.json')) if e['program']=='coda-llama::'+sys.argv[1]))" $prog)
    # shellcheck disable=SC2086
    CODA_LOG=debug CODA_TUNE_CACHE=$o/tuning-lse.json timeout 90 scripts/device-run.sh /tmp/b/coda tune --program $prog $args >> "$o/tune-lse.log" 2>&1
    echo "tune $prog exit $? at $(el) s"
  done
fi
if [[ "${COMPARE:-0}" == 1 ]]; then
  PARTS=compare timeout $((560 - $(el))) scripts/device-verify.sh /tmp/b "$o" > "$o/verify-compare.txt" 2>&1
  echo "compare exit $? at $(el) s"
fi
tar czf "$OUT/call2.tgz" -C "$OUT" call2
grep INFO "$o"/tune-*.log | sed 's/.*coda tune: //'
grep "^|" "$o/compare.log" 2>/dev/null | tail -40
