//! Program variants beyond the example's, and a harness that verifies any
//! compiled program on the GPU against the interpreter from its IR alone.

pub mod backward;
pub mod block;
pub mod harness;
pub mod programs;
pub mod suite;
