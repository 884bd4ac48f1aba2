#!/usr/bin/env bash
# Session 28, call 2: the build that lands (64-column map subtiles, the maps'
# shipped searches re-run). The three maps at their small shipped shapes with
# main's previous build (old) and this one (new), alternated twice, each into
# an empty cache (call 1 found the new searches slower there than the shipped
# ones); the main job (llama-norm: checks, o_proj epilogue against
# cuBLASLt); then one compare.py run (coda bench + the PyTorch baselines).
set -uo pipefail
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
rm -rf /tmp/b /tmp/bo /tmp/o; mkdir -p /tmp/b /tmp/bo /tmp/o
tar xJf .device/bins.tar.xz -C /tmp/b && tar xJf .device/old/bins-main.tar.xz -C /tmp/bo && xz -dc .device/llama-norm.xz > /tmp/b/llama-norm && chmod +x /tmp/b/llama-norm
ab() { # $1 build dir, $2 log
  for p in "cross_entropy_grad --shape 232,4096,8 --shape 256,4096,8" "rms_input --shape 1000,256,8 --shape 4096,4096,8" \
           "rope_backward --shape 1000,512,8"; do
    # shellcheck disable=SC2086
    CODA_TUNE_CACHE=/tmp/ab-cache-$RANDOM.json timeout 60 scripts/device-run.sh $1/coda tune --program coda-llama::$p >> $2 2>&1
  done
}
for run in 1 2; do
  for w in old new; do
    bin=/tmp/b; [[ $w == old ]] && bin=/tmp/bo
    ab $bin /tmp/o/ab-small-$w-$run.log; echo "ab $w $run at $(el) s"
  done
done
timeout 90 scripts/device-run.sh /tmp/b/llama-norm > /tmp/o/llama-norm.log 2>&1; echo "llama-norm exit $? at $(el) s"
PARTS=compare timeout 470 scripts/device-verify.sh /tmp/b /tmp/o > /tmp/o/verify-compare.txt 2>&1
echo "compare done at $(el) s"
tar czf "$OUT/call2.tgz" -C /tmp/o .
for f in /tmp/o/ab-small-*.log; do echo "== $f"; grep -o "coda-llama::[a-z_]* M=[0-9]* N=[0-9]*.*: .* ms (own" $f | sed 's/ (own//'; done
grep -i "ratio\|×\|cuBLAS" /tmp/o/llama-norm.log | tail -6
grep "^|" /tmp/o/compare.log | tail -40
