//! Shared helpers for tessera's benchmarks (`bench/benches/*.rs`).
//!
//! Every benchmark reports its figures next to a baseline measured in the same
//! process, because this machine is shared and noisy: absolute numbers drift
//! between runs, ratios measured back to back do not.
