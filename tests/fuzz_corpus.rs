//! The fuzz targets' bodies (`fuzz/bodies.rs`, shared with the cargo-fuzz
//! binaries) replayed on stable in `cargo test`, so every decoder of
//! untrusted bytes runs in CI even though the fuzz runs themselves need
//! nightly.
//!
//! Inputs per target: the files of `fuzz/seeds/<target>/` (PROTOCOL.md's
//! hex examples, the current protocol, v3, checked against the encoder by
//! `tests/wire_props.rs`; a test here keeps the seeds equal to them) and,
//! when present, `fuzz/corpus/<target>/` (what local fuzz runs found); and
//! deterministic mutations of all of them (every truncation, byte flips at
//! every offset).

#[path = "../fuzz/bodies.rs"]
mod bodies;

mod protocol_doc;

use std::path::{Path, PathBuf};

use tessera::core::down::{self, DownKind};
use tessera::core::geom::Vec3;
use tessera::core::view::{BatchReader, ClientEvent};
use tessera::game::relay::{
    hit_done, hit_started, reply_push_result, reply_set_ack, reply_start, space_down, DOWN_RESYNCED,
};
use tessera::wire::client::{split_frame, CallOutcome, ClientMsg, ServerMsg};

/// Inputs longer than this are replayed as they are, not mutated (keeps
/// the run short if a local corpus holds big files).
const MUTATE_BYTES_MAX: usize = 2048;

/// Byte flips tried at every offset.
const FLIPS: [u8; 3] = [0x01, 0x80, 0xff];

/// Selector byte of `entity_payload`: Avatar (bit 0 clear), OtherClients
/// audience (3 << 1), the payload kind `k` (<< 3).
fn avatar_other(kind: u8) -> u8 {
    3 << 1 | kind << 3
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The files of `dir` (none if it does not exist), sorted.
fn files(dir: &Path) -> Vec<Vec<u8>> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut paths: Vec<PathBuf> = entries.flatten().map(|e| e.path()).collect();
    paths.sort();
    paths
        .iter()
        .filter(|p| p.is_file())
        .map(|p| std::fs::read(p).expect("readable corpus file"))
        .collect()
}

/// The checked-in seeds and the local corpus of `target`.
fn stored(target: &str) -> Vec<Vec<u8>> {
    let mut out = files(&root().join("fuzz/seeds").join(target));
    out.extend(files(&root().join("fuzz/corpus").join(target)));
    out
}

/// PROTOCOL.md's ```` ```hex NAME ```` blocks, in order.
fn protocol_examples() -> Vec<(String, Vec<u8>)> {
    let doc = std::fs::read_to_string(root().join("PROTOCOL.md")).expect("PROTOCOL.md");
    let out = protocol_doc::parse(&doc);
    assert!(out.len() >= 10, "PROTOCOL.md has its examples");
    out
}

/// The example view batch's events (after the frame header and tick).
fn example_batch() -> Vec<u8> {
    for (_, bytes) in protocol_examples() {
        let (f, _) = split_frame(&bytes, bodies::BODY_MAX)
            .expect("example frames")
            .expect("whole");
        if let Ok(ServerMsg::ViewBatch { batch, .. }) = ServerMsg::decode(&f) {
            return batch.to_vec();
        }
    }
    panic!("PROTOCOL.md has a view batch example");
}

/// The checked-in seeds, built from PROTOCOL.md: `(target, file, bytes)`.
/// `frame_stream`: the server's and the client's frames of the example
/// session, each as one stream (byte 0: the read size); `view_batch`: the
/// example batch; `entity_payload`: the snapshot of its Enter and the delta
/// of its first Props event, each at the kind that carries it;
/// `down_body`: the example batch as a view body (its kind byte first),
/// the same carrying an input acknowledgement, and one body of each of the
/// relay's other kinds (its encoders).
fn protocol_seeds() -> Vec<(&'static str, &'static str, Vec<u8>)> {
    let (mut server, mut client) = (Vec::new(), Vec::new());
    for (name, bytes) in protocol_examples() {
        let (f, n) = split_frame(&bytes, bodies::BODY_MAX)
            .expect("example frames")
            .expect("whole");
        assert_eq!(n, bytes.len(), "example `{name}` is one frame");
        if ServerMsg::decode(&f).is_ok() {
            server.extend_from_slice(&bytes);
        } else if ClientMsg::decode(&f).is_ok() {
            client.extend_from_slice(&bytes);
        } else {
            panic!("example `{name}` decodes in neither direction");
        }
    }
    let batch = example_batch();
    let (mut snapshot, mut delta) = (None, None);
    for ev in BatchReader::new(&batch) {
        match ev.expect("the example batch decodes") {
            ClientEvent::Enter { snapshot: s, .. } => snapshot = snapshot.or(Some(s)),
            ClientEvent::Props { delta: d, .. } => delta = delta.or(Some(d)),
            _ => {}
        }
    }
    let snapshot = snapshot.expect("the example has an Enter");
    let landed = CallOutcome::HitLanded {
        dealt: 12,
        killed: true,
    };
    let mut reply = Vec::new();
    reply_start(&mut reply);
    reply_push_result(&mut reply, 4, CallOutcome::Applied);
    reply_push_result(&mut reply, 5, landed);
    reply_set_ack(&mut reply, 5);
    let delta = delta.expect("the example has a Props event");
    vec![
        ("frame_stream", "client", [&[5][..], &client].concat()),
        ("frame_stream", "session", [&[7][..], &server].concat()),
        (
            "frame_stream",
            "session_whole",
            [&[63][..], &server].concat(),
        ),
        ("view_batch", "example", batch.clone()),
        (
            "down_body",
            "view_example",
            down::with_kind(DownKind::View, &batch).to_vec(),
        ),
        ("down_body", "view_acked", {
            let mut body = down::with_kind(DownKind::View, &batch);
            assert!(body.carry_ack(5));
            body.to_vec()
        }),
        ("down_body", "reply", reply.clone()),
        ("down_body", "hit_started", hit_started(7, 3).to_vec()),
        ("down_body", "hit_done", hit_done(3, landed).to_vec()),
        (
            "down_body",
            "space",
            space_down(100, 2, Vec3::ground(1.5, -2.0), Vec3::ground(3.0, 4.0)).to_vec(),
        ),
        ("down_body", "resynced", vec![DOWN_RESYNCED]),
        (
            "entity_payload",
            "avatar_other_snapshot",
            [&[avatar_other(3)][..], snapshot].concat(),
        ),
        (
            "entity_payload",
            "avatar_other_props",
            [&[avatar_other(1)][..], delta].concat(),
        ),
    ]
}

/// `seeds` and, for each one not too long, every truncation and a byte flip
/// at every offset.
fn with_mutations(seeds: &[Vec<u8>]) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for s in seeds {
        out.push(s.clone());
        if s.len() > MUTATE_BYTES_MAX {
            continue;
        }
        out.extend((0..s.len()).map(|n| s[..n].to_vec()));
        for i in 0..s.len() {
            for x in FLIPS {
                let mut m = s.clone();
                m[i] ^= x;
                out.push(m);
            }
        }
    }
    out
}

/// Runs `body` over `target`'s stored inputs, all mutated; returns how
/// many inputs ran.
fn replay(target: &str, body: fn(&[u8])) -> usize {
    let seeds = stored(target);
    assert!(!seeds.is_empty(), "fuzz/seeds/{target} holds seeds");
    let inputs = with_mutations(&seeds);
    for input in &inputs {
        body(input);
    }
    inputs.len()
}

#[test]
fn frame_stream_corpus_replays() {
    let n = replay("frame_stream", bodies::frame_stream);
    assert!(n > 1000, "{n} inputs");
}

#[test]
fn view_batch_corpus_replays() {
    let n = replay("view_batch", bodies::view_batch);
    assert!(n > 200, "{n} inputs");
}

#[test]
fn down_body_corpus_replays() {
    let n = replay("down_body", bodies::down_body);
    assert!(n > 500, "{n} inputs");
}

#[test]
fn entity_payload_corpus_replays() {
    let n = replay("entity_payload", bodies::entity_payload);
    assert!(n > 100, "{n} inputs");
}

/// The checked-in seeds are PROTOCOL.md's examples in the current protocol,
/// so the fuzzer starts past the handshake on valid input. After a format
/// change, `TESSERA_WRITE_FUZZ_SEEDS=1 cargo test --test fuzz_corpus`
/// rewrites them.
#[test]
fn checked_in_seeds_are_the_protocol_examples() {
    let write = std::env::var_os("TESSERA_WRITE_FUZZ_SEEDS").is_some();
    for (target, name, bytes) in protocol_seeds() {
        let path = root().join("fuzz/seeds").join(target).join(name);
        if write {
            std::fs::write(&path, &bytes).expect("seed written");
        }
        let stored = std::fs::read(&path).expect("the seed is checked in");
        assert!(
            stored == bytes,
            "{} is not PROTOCOL.md's example (rewrite: TESSERA_WRITE_FUZZ_SEEDS=1)",
            path.display()
        );
    }
}
