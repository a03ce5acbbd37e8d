//! The `tessera` binary.
fn main() {}
