#!/usr/bin/env bash
# Session 42, call C (≤ 300 s; carry [".device"]): the build of session 42's
# scheduler rule (swizzle 8 along M on grids of ≥ 128 rows and 8–31 columns
# of tiles at K ≥ 11008; kernels unchanged). `gpu --quick`; two suite
# programs no H100 search had, searched (CODA_LOG=debug) at four shapes of
# that class the rule's data never had: the log's "heuristic's" time is
# the new rule's choice, run by the Rust code; then the loss variants' GPU
# time per kernel (head_variants.py --profile, d = 2048, kernels named).
set -uo pipefail
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
left() { local l=$(( $1 - $(el) )); echo $(( l > 1 ? l : 1 )); }
o=$OUT/call-c; rm -rf /tmp/b /tmp/py; mkdir -p /tmp/b /tmp/py "$o"
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > "$o/gpu.txt" 2>&1; cat "$o/gpu.txt"
tar xJf .device/bins.tar.xz -C /tmp/b
timeout 120 scripts/device-run.sh /tmp/b/gpu --quick > "$o/gpu.log" 2>&1
echo "gpu --quick exit $? at $(el) s: $(tail -1 "$o/gpu.log")"; grep -E "^FAIL" -A6 "$o/gpu.log" | head -20
for pr in gated_rms_input quick_gelu_mul; do
  CODA_LOG=debug CODA_TUNE_CACHE=$o/rule.json timeout "$(left 200)" scripts/device-run.sh /tmp/b/coda tune --program coda-user-programs::$pr \
    --shape 16384,4096,11008 --shape 16384,2048,14336 --shape 32768,4096,11008 --shape 16384,6144,14336 >> "$o/rule-tune.log" 2>&1
  echo "tune $pr exit $? at $(el) s"
done
python3 bench/heuristic_report.py "$o/rule-tune.log" > "$o/rule-heuristic.txt" 2>&1; cat "$o/rule-heuristic.txt"
python3 bench/scheduler_rule.py --list h100="$o/rule-tune.log" 2>&1 | tee "$o/rule-scheduler.txt" | head -4
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/py .device/coda_rs-*.whl > "$o/pip.log" 2>&1
PYTHONPATH=/tmp/py timeout "$(left 290)" python3 bench/head_variants.py --hidden 2048 --profile > "$o/variants-profile.log" 2>&1
echo "variants --profile exit $? at $(el) s"; grep -v Warn "$o/variants-profile.log" | cut -c1-120
tar czf "$OUT/call-c.tgz" -C "$OUT" call-c
echo "done at $(el) s"
