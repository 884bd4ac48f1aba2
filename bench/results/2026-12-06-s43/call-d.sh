#!/usr/bin/env bash
# Session 43, call D (carry [".device"]; ≤ 300 s; main's build with the
# H100 file's new searches of call C packed in .device). `gpu --quick`
# (every compiled config of every program: the four new ones of the
# SwiGLU forwards and the RMSNorm backward among them), then `coda bench
# --part llama` (the Llama table; session 41's run of it on an H100 took
# ~115 s). Prediction on an H100, against session 42's compare.py run
# (fbb55f3, another machine): the 8192 `gemm_rowscale_swiglu` row
# 1.048 → ~0.93 (2.99 against ~3.28 ms searched); the d = 8192 block
# forward 1.185 → ~1.10 (SwiGLU-save 25.2 → 21.3 ms), forward + backward
# 1.145 → ~1.04 (also the RMSNorm backward 30.3 → 21.7 ms); d = 4096
# forward + backward 1.128 → ~1.09 (its RMSNorm backward 4.95 → 3.92,
# SwiGLU-save 4.78 → 4.30); d = 2048 within noise. On an H200 the same
# runs (its file did not change; its shipped picks stand).
set -uo pipefail
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
left() { local l=$(( $1 - $(el) )); echo $(( l > 1 ? l : 1 )); }
o=$OUT/call-d; rm -rf /tmp/b; mkdir -p /tmp/b "$o"
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > "$o/gpu.txt" 2>&1; cat "$o/gpu.txt"
tar xJf .device/bins.tar.xz -C /tmp/b
timeout 110 scripts/device-run.sh /tmp/b/gpu --quick > "$o/gpu.log" 2>&1
echo "gpu --quick exit $? at $(el) s: $(tail -1 "$o/gpu.log")"; grep -E "^FAIL" -A8 "$o/gpu.log" | head -24
timeout "$(left 290)" scripts/device-run.sh /tmp/b/coda bench --part llama --json "$o/bench.json" > "$o/bench.log" 2>&1
echo "bench exit $? at $(el) s"; grep -v "^- \|^$" "$o/bench.log" | tail -22
tar czf "$OUT/call-d.tgz" -C "$OUT" call-d
echo "done at $(el) s"
