#!/usr/bin/env bash
# Session 43, call H (as run, on call G's warm H200; ≤ 245 s, the budget's
# last ~300 s): `coda bench --part llama` of this build (the Llama ops and
# blocks beside cuBLASLt; no PyTorch side), then `--part untuned` in what
# was left (it was not enough: stopped at 235 s with nothing written).
# Prediction: as session 36's compare.py run (no H200 pick changed since).
o=$OUT/call-h; mkdir -p $o /tmp/b; nvidia-smi --query-gpu=name --format=csv,noheader; [ -x /tmp/b/coda ] || tar xJf .device/bins.tar.xz -C /tmp/b; t0=$(date +%s); timeout 140 scripts/device-run.sh /tmp/b/coda bench --part llama --json $o/llama.json > $o/llama.log 2>&1; echo "llama exit $? at $(( $(date +%s)-t0 )) s"; timeout $(( 235 - ($(date +%s)-t0) )) scripts/device-run.sh /tmp/b/coda bench --part untuned --json $o/untuned.json > $o/untuned.log 2>&1; echo "untuned exit $? at $(( $(date +%s)-t0 )) s"; grep -v "^- \|^$" $o/llama.log | head -20; grep "programs, median" $o/untuned.log; tar czf $OUT/call-h.tgz -C $OUT call-h
