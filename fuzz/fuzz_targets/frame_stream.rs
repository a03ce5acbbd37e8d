//! The client protocol's frame stream, both directions, plus the client
//! session that consumes it.
//!
//! Byte 0 picks the read size; the rest is the stream. Checks: no panic;
//! the streaming decoder yields exactly the frames the stateless
//! `split_frame` finds; a frame that decodes re-encodes to its own bytes
//! (the format is canonical); the session never panics on the stream.
//!
//! The body is [`bodies::frame_stream`] (`fuzz/bodies.rs`), which `cargo test` also
//! runs over this target's seeds and corpus (`tests/fuzz_corpus.rs`).
#![no_main]

#[path = "../bodies.rs"]
mod bodies;

libfuzzer_sys::fuzz_target!(|data: &[u8]| bodies::frame_stream(data));
