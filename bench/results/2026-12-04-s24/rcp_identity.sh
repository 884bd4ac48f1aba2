#!/usr/bin/env bash
# Session 24, call 5: builds and runs rcp_identity.cu on the GPU machine (its nvcc).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd); w=$(mktemp -d)
mkdir -p "$w/cutlass"
echo '#define CUTLASS_HOST_DEVICE __host__ __device__ __forceinline__' > "$w/cutlass/cutlass.h"
src=cutlass-templates/include/coda/math.hpp
cp "$src" "$w/math_new.hpp"
sed -e 's/rcp\.approx\.ftz\.f32/rcp.approx.f32/' -e 's/namespace coda::math/namespace coda::math_old/' "$src" > "$w/math_old.hpp"
grep -c 'rcp.approx.f32' "$w/math_old.hpp"
cp "$here/rcp_identity.cu" "$w/"
nvcc -std=c++17 -O3 -DNDEBUG -gencode=arch=compute_90a,code=sm_90a -I"$w" -o "$w/check" "$w/rcp_identity.cu"
"$w/check"
