// Safe code cannot edit a Kernel: a wrong parameter list would let its
// launchers read or write out of bounds.
fn widen(k: &mut coda_runtime::Kernel) {
    k.params = &[];
}

fn main() {}
