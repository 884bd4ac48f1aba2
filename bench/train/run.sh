#!/usr/bin/env bash
# The training comparison: each variant in its own process,
# then the table. Usage (the wheel installed, e.g. PYTHONPATH=site):
#   bench/train/run.sh OUT_DIR MODEL:COMPILE:SEED...
# e.g. plain:none:0 plain:none:1 coda:none:0 plain:default:0 coda:default:0;
# COMPILE fsdp2 runs train.py under torchrun, one rank per GPU (FSDP2);
# TRAIN_ARGS are passed to every train.py (e.g. "--steps 50"); each run is
# stopped after TRAIN_TIMEOUT seconds (default 300); PROFILE=1 writes each
# run's kernel table beside its JSON, TRACE=1 its host and GPU trace
# (bench/train/gaps.py).
set -uo pipefail
here=$(dirname "$0") out=$1
shift
mkdir -p "$out"
for v in "$@"; do
  IFS=: read -r model compile seed <<< "$v"
  name="$model-$compile-$seed"
  if [[ $compile == fsdp2 ]]; then
    launch=(python3 -m torch.distributed.run --standalone --nproc-per-node "$(python3 -c 'import torch; print(torch.cuda.device_count())')" "$here/train.py")
    flags=()
  else
    launch=(python3 "$here/train.py")
    flags=(--compile "$compile" ${PROFILE:+--profile "$out/$name.prof.txt"} ${TRACE:+--trace "$out/$name.trace.json.gz"})
  fi
  # shellcheck disable=SC2086  # TRAIN_ARGS is a list of arguments
  timeout "${TRAIN_TIMEOUT:-300}" "${launch[@]}" --model "$model" --seed "$seed" --out "$out/$name.json" "${flags[@]}" ${TRAIN_ARGS:-} > "$out/$name.log" 2>&1
  echo "$name exit $?: $(tail -1 "$out/$name.log")"
done
python3 "$here/report.py" "$out"/*.json
