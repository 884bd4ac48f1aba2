#!/usr/bin/env bash
# Session 39, call B (≤ 590 s), on the build of branch `group-fused-on-main`:
# main's headers (sin/cos's far angles by the non-inlined call: call A
# measured the branch that inlines them 2–3× slower in every sin/cos
# program) plus, in group programs, values used more than once or unpaired
# computed per column pair as locals of the one node that reads them
# (coda-codegen plan.rs `by_pair`) and qk_norm_rope_backward's second
# reduction reformed. No other program's source changed (their keys are
# main's). Checks first (gpu --quick, the random batch, the untuned suite's
# programs, session 38's wheel tests); then the RoPE and QK-norm rows of
# this build and of main's time_programs (packed as `time_programs_main`)
# alternated twice, and the d = 2048 blocks with and without QK-norm of
# both. Carry [".device"].
set -uo pipefail
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
left() { local l=$(( ${1:-585} - $(el) )); echo $(( l > 1 ? l : 1 )); }
o=$OUT/call-b; rm -rf /tmp/b /tmp/py; mkdir -p /tmp/b /tmp/py "$o"
tar xJf .device/bins.tar.xz -C /tmp/b
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > "$o/gpu.txt" 2>&1; cat "$o/gpu.txt"
timeout 150 scripts/device-run.sh /tmp/b/gpu --quick > "$o/gpu.log" 2>&1
echo "gpu --quick exit $? at $(el) s: $(tail -1 "$o/gpu.log")"
grep -E "^FAIL" -A6 "$o/gpu.log" | head -20
grep -E "qk_norm|block_amax|fp8_requant|pair_head" "$o/gpu.log" | head -12
GPU_ARGS=--quick PARTS="random user" timeout 60 scripts/device-verify.sh /tmp/b "$o" > "$o/verify.txt" 2>&1
echo "random / user at $(el) s: $(tail -1 "$o/random.log") / $(tail -1 "$o/user.log")"
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/py .device/coda_rs-*.whl > "$o/pip.log" 2>&1
(cd coda-python/tests && PYTHONPATH=/tmp/py timeout 60 python3 -m unittest -v test_head test_gpu.PoolMemory test_block) > "$o/python.log" 2>&1
echo "python exit $? at $(el) s"; grep -E "FAIL|ERROR|^Ran|^OK" "$o/python.log" | tail -6
for run in 1 2; do
  for build in main new; do
    bin=/tmp/b/time_programs; [[ $build == main ]] && bin=/tmp/b/time_programs_main
    timeout "$(left $((run == 1 ? 330 : 540)))" scripts/device-run.sh "$bin" --programs-only --quick --only qk_norm > "$o/qk-$build-$run.log" 2>&1
    echo "qk $build $run exit $? at $(el) s"
  done
done
echo "row; ratio to cuBLASLt: main 1, new 1, main 2, new 2"
paste -d' ' <(cut -c1-64 "$o/qk-main-1.log") <(awk '{print $NF}' "$o/qk-new-1.log") <(awk '{print $NF}' "$o/qk-main-2.log") <(awk '{print $NF}' "$o/qk-new-2.log")
for build in main new; do
  bin=/tmp/b/time_programs; [[ $build == main ]] && bin=/tmp/b/time_programs_main
  timeout "$(left)" scripts/device-run.sh "$bin" --quick --only no-program-row > "$o/blocks-$build.log" 2>&1
  echo "blocks $build exit $? at $(el) s"; tail -2 "$o/blocks-$build.log"
done
tar czf "$OUT/call-b.tgz" -C "$OUT" call-b
echo "done at $(el) s"
