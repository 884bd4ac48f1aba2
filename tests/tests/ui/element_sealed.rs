// Safe code cannot add an element type: finishers and cuBLAS take the width
// from `DTYPE`, so a type of another size claiming F32 (with a `TensorMut`
// of it over a bf16 tensor) would write past the allocation.
#[derive(Clone, Copy, Default)]
struct Wide(u8);

unsafe impl cudarc::driver::DeviceRepr for Wide {}
unsafe impl cudarc::driver::ValidAsZeroBits for Wide {}

impl coda_runtime::Element for Wide {
    const DTYPE: coda_runtime::dsl::ir::DType = coda_runtime::dsl::ir::DType::F32;
}

fn main() {}
