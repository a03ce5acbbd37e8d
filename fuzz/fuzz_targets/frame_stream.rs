//! The client protocol's frame stream, both directions, plus the client
//! session that consumes it.
//!
//! Byte 0 picks the read size; the rest is the stream. Checks: no panic;
//! the streaming decoder yields exactly the frames the stateless
//! `split_frame` finds; a frame that decodes re-encodes to its own bytes
//! (the format is canonical); the session never panics on the stream.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::sync::Arc;
use tessera::client::{ClientSession, ClientSessionParams};
use tessera::core::entity::TypeRegistry;
use tessera::core::time::Time;
use tessera::wire::client::{split_frame, ClientMsg, FrameDecoder, ServerMsg, HEADER_BYTES};

const BODY_MAX: u32 = 4096;

fn check_canonical(frame_bytes: &[u8], f: &tessera::wire::client::Frame<'_>) {
    let mut out = Vec::new();
    if let Ok(m) = ClientMsg::decode(f) {
        m.encode(&mut out);
        assert_eq!(out, frame_bytes, "client message not canonical: {m:?}");
    }
    out.clear();
    if let Ok(m) = ServerMsg::decode(f) {
        m.encode(&mut out);
        assert_eq!(out, frame_bytes, "server message not canonical: {m:?}");
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&chunk, stream)) = data.split_first() else {
        return;
    };
    let chunk = usize::from(chunk % 64) + 1;
    // The stateless reference.
    let mut reference = Vec::new();
    let mut at = 0;
    let end = loop {
        match split_frame(&stream[at..], BODY_MAX) {
            Ok(Some((f, n))) => {
                check_canonical(&stream[at..at + n], &f);
                reference.push((f.kind, f.flags, at + HEADER_BYTES, at + n));
                at += n;
            }
            Ok(None) => break Ok(()),
            Err(e) => break Err(e),
        }
    };
    // The streaming decoder, fed in chunks.
    let mut d = FrameDecoder::new(BODY_MAX);
    let mut got = Vec::new();
    let mut err = None;
    let mut base = 0;
    for piece in stream.chunks(chunk) {
        d.push(piece);
        loop {
            match d.next_frame() {
                Ok(Some(f)) => {
                    let len = HEADER_BYTES + f.body.len();
                    assert_eq!(&stream[base + HEADER_BYTES..base + len], f.body);
                    got.push((f.kind, f.flags, base + HEADER_BYTES, base + len));
                    base += len;
                }
                Ok(None) => break,
                Err(e) => {
                    err = Some(e);
                    break;
                }
            }
        }
        if err.is_some() {
            break;
        }
    }
    assert_eq!(got, reference);
    assert_eq!(err, end.err());
    // The client session on the same bytes, after a handshake.
    let reg = Arc::new(TypeRegistry::with_builtins());
    let mut s = ClientSession::new(ClientSessionParams::default(), reg);
    s.connect("fuzz", None).expect("connect");
    for piece in stream.chunks(chunk) {
        s.handle_bytes(Time(1), piece, &mut ());
        while s.poll_event().is_some() {}
    }
    s.handle_eof(Time(2));
    let _ = s.violation_count();
});
