//! The entity payload decoder (`Entity::apply_payload`): snapshots and
//! deltas for every audience and both built-in types.
//!
//! Byte 0 picks the type (bit 0), the replica's audience (bits 1-2) and the
//! payload kind (bits 3-4); the rest is the payload. Checks: no panic; an
//! accepted snapshot leaves a replica whose properties verify and whose
//! re-encoded snapshot is accepted again and re-encodes identically.
//!
//! The body is [`bodies::entity_payload`] (`fuzz/bodies.rs`), which `cargo test` also
//! runs over this target's seeds and corpus (`tests/fuzz_corpus.rs`).
#![no_main]

#[path = "../bodies.rs"]
mod bodies;

libfuzzer_sys::fuzz_target!(|data: &[u8]| bodies::entity_payload(data));
