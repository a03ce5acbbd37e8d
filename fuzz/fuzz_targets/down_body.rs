//! The downstream body decoder (`game::relay::decode_down`): the explicit
//! `core::down::DownKind` byte, then that kind's payload.
//!
//! Checks: no panic; an unknown or missing kind is a typed error naming the
//! byte; a view body passes its bytes after the kind through unchanged.
//!
//! The body is [`bodies::down_body`] (`fuzz/bodies.rs`), which `cargo test` also
//! runs over this target's seeds and corpus (`tests/fuzz_corpus.rs`).
#![no_main]

#[path = "../bodies.rs"]
mod bodies;

libfuzzer_sys::fuzz_target!(|data: &[u8]| bodies::down_body(data));
