//! CODA's test kit, used by the workspace's tests, examples and the `coda`
//! CLI's benchmarks: host helpers (one RNG, [`host::Check`]), the reference
//! Llama block in f64 and bf16 ([`reference`]), a harness that verifies any
//! compiled program on the GPU against the interpreter from its IR alone,
//! the cuBLASLt baseline, the benchmark suite, and the external commands
//! integration tests drive; plus program variants beyond the example's.

pub mod backward;
pub mod baseline;
pub mod block;
pub mod edges;
pub mod harness;
pub mod host;
pub mod programs;
pub mod reference;
pub mod stress;
pub mod suite;
pub mod tools;
