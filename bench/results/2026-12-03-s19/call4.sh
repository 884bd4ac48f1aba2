#!/usr/bin/env bash
# Session 19, call 4: the quick correctness set and the untuned suite on the committed build (the shipped tuning re-keyed).
set -uo pipefail
mkdir -p /tmp/b /tmp/o && tar xJf .device/bins2.tar.xz -C /tmp/b
GPU_ARGS=--quick PARTS="gpu user" timeout 420 scripts/device-verify.sh /tmp/b /tmp/o
tar czf "$OUT/call4.tgz" -C /tmp/o .
