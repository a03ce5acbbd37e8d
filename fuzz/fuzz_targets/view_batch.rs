//! The view batch decoder (`BatchReader`) and the checking client view.
//!
//! Checks: no panic; every decoded event re-encodes to bytes that decode to
//! the same event; the client view turns any bytes into violations, never a
//! panic.
//!
//! The body is [`bodies::view_batch`] (`fuzz/bodies.rs`), which `cargo test` also
//! runs over this target's seeds and corpus (`tests/fuzz_corpus.rs`).
#![no_main]

#[path = "../bodies.rs"]
mod bodies;

libfuzzer_sys::fuzz_target!(|data: &[u8]| bodies::view_batch(data));
