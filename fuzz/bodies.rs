//! The bodies of the fuzz targets, shared by the cargo-fuzz binaries
//! (`fuzz_targets/*.rs`, nightly) and the corpus replay in `cargo test`
//! (`tests/fuzz_corpus.rs`, stable), which include this file as a module.
//!
//! Each function takes the fuzzer's input and panics only on a broken
//! invariant of the decoder it exercises (what the fuzzer looks for); any
//! bytes that break a wire rule must come back as a typed error or a counted
//! violation.

// Each fuzz binary uses one of the bodies.
#![allow(dead_code)]

use std::sync::Arc;

use tessera::client::{ClientSession, ClientSessionParams};
use tessera::core::down::{self, DownKind, DownKindError};
use tessera::core::entity::{Audience, Entity, EntityTypeId, SyncKind, TypeRegistry};
use tessera::core::ids::EntityId;
use tessera::core::time::Time;
use tessera::core::view::{encode_event, BatchReader, ClientView, ClientViewParams};
use tessera::game::relay::{decode_down, hit_started, Down, DownError};
use tessera::wire::client::{
    split_frame, ClientMsg, DecodeError, Frame, FrameDecoder, ServerMsg, HEADER_BYTES,
};

/// Largest frame body the `frame_stream` target accepts.
pub const BODY_MAX: u32 = 4096;

/// The client protocol's frame stream, both directions, plus the client
/// session that consumes it.
///
/// Byte 0 picks the read size; the rest is the stream. Checks: no panic;
/// the streaming decoder yields exactly the frames the stateless
/// `split_frame` finds; a frame that decodes re-encodes to its own bytes
/// (the format is canonical); the session never panics on the stream.
pub fn frame_stream(data: &[u8]) {
    let Some((&chunk, stream)) = data.split_first() else {
        return;
    };
    let chunk = usize::from(chunk % 64) + 1;
    let (reference, end) = split_all(stream);
    let (got, err) = decode_chunked(stream, chunk);
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
}

/// A frame found in a stream: kind, flags, body start and end offsets.
type FrameAt = (u16, u16, usize, usize);

/// The stateless reference: every frame `split_frame` finds, each checked
/// canonical, and how the stream ended.
fn split_all(stream: &[u8]) -> (Vec<FrameAt>, Result<(), DecodeError>) {
    let mut frames = Vec::new();
    let mut at = 0;
    let end = loop {
        match split_frame(&stream[at..], BODY_MAX) {
            Ok(Some((f, n))) => {
                check_canonical(&stream[at..at + n], &f);
                frames.push((f.kind, f.flags, at + HEADER_BYTES, at + n));
                at += n;
            }
            Ok(None) => break Ok(()),
            Err(e) => break Err(e),
        }
    };
    (frames, end)
}

/// The streaming decoder fed `stream` in pieces of `chunk` bytes.
fn decode_chunked(stream: &[u8], chunk: usize) -> (Vec<FrameAt>, Option<DecodeError>) {
    let mut d = FrameDecoder::new(BODY_MAX);
    let mut got = Vec::new();
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
                Err(e) => return (got, Some(e)),
            }
        }
    }
    (got, None)
}

fn check_canonical(frame_bytes: &[u8], f: &Frame<'_>) {
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

/// The view batch decoder (`BatchReader`) and the checking client view.
///
/// Checks: no panic; every decoded event re-encodes to bytes that decode to
/// the same event; the client view turns any bytes into violations, never a
/// panic.
pub fn view_batch(data: &[u8]) {
    let mut buf = Vec::new();
    for ev in BatchReader::new(data) {
        let Ok(ev) = ev else { break };
        buf.clear();
        encode_event(&mut buf, &ev);
        let mut again = BatchReader::new(&buf);
        let back = again.next().expect("one event").expect("re-decodes");
        // NaN positions compare unequal: compare the bytes instead.
        let mut buf2 = Vec::new();
        encode_event(&mut buf2, &back);
        assert_eq!(buf, buf2);
        assert!(again.next().is_none());
    }
    let reg = Arc::new(TypeRegistry::with_builtins());
    let params = ClientViewParams {
        shown_max: 64,
        ..ClientViewParams::default()
    };
    let mut view = ClientView::new(EntityId(1), reg, params);
    // Twice: the second pass meets the state the first one built.
    view.handle_batch(data);
    view.handle_batch(data);
    let _ = view.violation_count();
}

/// The entity payload decoder (`Entity::apply_payload`): snapshots and
/// deltas for every audience and both built-in types.
///
/// Byte 0 picks the type (bit 0), the replica's audience (bits 1-2) and the
/// payload kind (bits 3-4); the rest is the payload. Checks: no panic; an
/// accepted snapshot leaves a replica whose properties verify and whose
/// re-encoded snapshot is accepted again and re-encodes identically.
pub fn entity_payload(data: &[u8]) {
    let Some((&sel, payload)) = data.split_first() else {
        return;
    };
    let reg = TypeRegistry::with_builtins();
    let ty = Arc::clone(reg.get(EntityTypeId(u16::from(sel & 1))).expect("builtin"));
    let aud = [
        Audience::Real,
        Audience::Ghost,
        Audience::OwnClient,
        Audience::OtherClients,
    ][usize::from(sel >> 1 & 3)];
    let kind = [
        SyncKind::Movement,
        SyncKind::Props,
        SyncKind::MovementAndProps,
        SyncKind::Snapshot,
    ][usize::from(sel >> 3 & 3)];
    let mut e = Entity::new_replica(EntityId(9), Arc::clone(&ty), aud);
    let ok = e.apply_payload(kind, payload).is_ok();
    e.props().verify();
    if ok && kind == SyncKind::Snapshot {
        let mut snap = Vec::new();
        e.encode_snapshot(aud, &mut snap);
        let mut f = Entity::new_replica(EntityId(9), ty, aud);
        f.apply_payload(SyncKind::Snapshot, &snap)
            .expect("a re-encoded snapshot applies");
        let mut snap2 = Vec::new();
        f.encode_snapshot(aud, &mut snap2);
        assert_eq!(snap, snap2);
    }
}

/// A downstream body (real -> gateway): its explicit kind byte, then the
/// kind's payload.
///
/// Checks: no panic; an empty body or an unknown kind byte is a typed
/// error naming it; a malformed payload names its kind; a view body's
/// batch is exactly the bytes after the kind (any first byte), and the
/// view codec's decoder runs on it (as on the batch of a view body that
/// carries an acknowledgement, which re-encodes to its own bytes); a Hit's combat seq and the resync
/// notice re-encode to their own bytes.
pub fn down_body(data: &[u8]) {
    match decode_down(data) {
        Ok(Down::ViewBatch(batch)) => {
            assert_eq!(data.first(), Some(&DownKind::View.byte()));
            assert_eq!(batch, &data[1..]);
            assert_eq!(&*down::with_kind(DownKind::View, batch), data);
            view_batch(batch);
        }
        Ok(Down::ViewAcked { batch, ack }) => {
            // The batch, then the acknowledgement: the body a view batch
            // becomes when it carries one, and gives back.
            assert_eq!(data.first(), Some(&DownKind::ViewAcked.byte()));
            let mut body = down::with_kind(DownKind::View, batch);
            assert!(body.carry_ack(ack));
            assert_eq!(&*body, data);
            assert_eq!(body.take_ack(), Some(ack));
            assert_eq!(&body[1..], batch);
            view_batch(batch);
        }
        Ok(Down::HitStarted {
            client_seq,
            combat_seq,
        }) => assert_eq!(&*hit_started(client_seq, combat_seq), data),
        Ok(Down::Resynced) => assert_eq!(data, [DownKind::Resynced.byte()]),
        Ok(Down::Reply(reply)) => {
            let _ = (reply.ack(), reply.results().count());
        }
        Ok(Down::HitDone { .. } | Down::Space { .. }) => {}
        Err(DownError::Kind(DownKindError::Empty)) => assert!(data.is_empty()),
        Err(DownError::Kind(DownKindError::Unknown(b))) => {
            assert_eq!(data.first(), Some(&b));
            assert!(DownKind::from_byte(b).is_err());
        }
        Err(DownError::Malformed(kind)) => {
            assert_eq!(data.first(), Some(&kind.byte()));
            assert_ne!(kind, DownKind::View, "a view body is never malformed");
        }
    }
}
