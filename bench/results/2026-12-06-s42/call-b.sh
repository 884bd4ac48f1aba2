#!/usr/bin/env bash
# Session 42, call B (≤ 330 s; main's build as in .device, kernels as at
# e0cdb3e; carry [".device"]). The scheduler rule held out: six programs
# the rule's data never had, searched with every option logged
# (CODA_LOG=debug) at four shapes of the classes the new rule changes —
# long K on ≥ 64 rows of tiles (16384 × 4096 × 14336, 8192 × 8192 × 12288)
# and grids ≥ 4× wider than tall at short K (4096 × 32768 × 2048 / 4096);
# bench/scheduler_rule.py ranks the old and the new rule on them. Then the
# loss variants' GPU time per kernel (head_variants.py --profile, d = 2048).
set -uo pipefail
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
left() { local l=$(( $1 - $(el) )); echo $(( l > 1 ? l : 1 )); }
o=$OUT/call-b; rm -rf /tmp/b /tmp/py; mkdir -p /tmp/b /tmp/py "$o"
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > "$o/gpu.txt" 2>&1; cat "$o/gpu.txt"
tar xJf .device/bins.tar.xz -C /tmp/b
for pr in gptoss_swiglu_clamp gemma2_softcap_xent mamba_softplus_dt cait_layerscale_droppath alpha_beta scaled_tanh_sums; do
  (( $(el) > 200 )) && break
  CODA_LOG=debug CODA_TUNE_CACHE=$o/held-out.json timeout "$(left 220)" scripts/device-run.sh /tmp/b/coda tune --program coda-user-programs::$pr \
    --shape 16384,4096,14336 --shape 8192,8192,12288 --shape 4096,32768,2048 --shape 4096,32768,4096 >> "$o/held-out-tune.log" 2>&1
  echo "tune $pr exit $? at $(el) s"
done
python3 bench/heuristic_report.py "$o/held-out-tune.log" > "$o/held-out-heuristic.txt" 2>&1; tail -3 "$o/held-out-heuristic.txt"
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/py .device/coda_rs-*.whl > "$o/pip.log" 2>&1
PYTHONPATH=/tmp/py timeout "$(left 320)" python3 bench/head_variants.py --hidden 2048 --profile > "$o/variants-profile.log" 2>&1
echo "variants --profile exit $? at $(el) s"; cat "$o/variants-profile.log" | cut -c1-150
tar czf "$OUT/call-b.tgz" -C "$OUT" call-b
echo "done at $(el) s"
