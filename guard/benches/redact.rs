//! Placeholder bench; replaced by the guard's real benchmark.
fn main() {}
