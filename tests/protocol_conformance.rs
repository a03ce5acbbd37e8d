//! PROTOCOL.md's tables are the contract: this test holds its own copy of
//! every row of the kinds table (§2), the refuse reasons (§5.1), the error
//! codes (§5.2) and the limits (§5.3), checks the copy against the
//! document (a row added to one and not the other fails) and against the
//! code, then drives the real server over TCP to see every code of §5.2
//! come back with the document's value: each test below provokes some, and
//! [`PROVOKED`] lists which test provokes which code, checked to be every
//! code of the enum (so a new code needs a test here).
//!
//! Two codes never come back as a frame, by their nature, and are shown by
//! what the client does see plus the server's counter under the rule:
//! `not-visible` (4) is answered at the real by CallResult
//! `Refused(not-visible)`, and `slow-reader` (7) closes the connection
//! without a frame (its send queue is full, so nothing more can be queued).
//! Codes that need a limit to be reached (`rate-limited`, `server-full`,
//! `space-full`, `slow-reader`) are provoked with that limit set tiny in
//! the test's config.

mod gateway_support;

use std::time::Duration;

use gateway_support::{config, RawClient, Seen};
use tessera::config::Config;
use tessera::core::geom::Vec3;
use tessera::server::EmbeddedServer;
use tessera::wire::client::{
    kind, ClientMsg, ErrorCode, RefuseReason, NAME_BYTES_MAX, PROTOCOL_VERSION, TEXT_BYTES_MAX,
    TOKEN_BYTES_MAX,
};

/// §2: kind, direction, message, body size (as written).
const KINDS: &[(u16, &str, &str, &str)] = &[
    (kind::HELLO, "C→S", "Hello", "8"),
    (kind::LOGIN, "C→S", "Login", "4 + name + token"),
    (kind::MOVE, "C→S", "Move", "44"),
    (kind::HIT, "C→S", "Hit", "32"),
    (kind::SET_PROP, "C→S", "SetProp", "20 + value"),
    (kind::PING, "C→S", "Ping", "16"),
    (kind::BYE, "C→S", "Bye", "0"),
    (kind::ENTER_SPACE, "C→S", "EnterSpace", "8"),
    (kind::WELCOME, "S→C", "Welcome", "104"),
    (kind::VIEW_BATCH, "S→C", "ViewBatch", "8 + batch"),
    (kind::INPUT_ACK, "S→C", "InputAck", "8"),
    (kind::CALL_RESULT, "S→C", "CallResult", "24"),
    (kind::ERROR, "S→C", "Error", "12 + text"),
    (kind::PONG, "S→C", "Pong", "24"),
    (kind::KICK, "S→C", "Kick", "4 + text"),
    (kind::SPACE_CHANGED, "S→C", "SpaceChanged", "32"),
];

/// §5.1 and §5.2: code and rule, in the document's order.
fn reasons() -> Vec<(u16, &'static str)> {
    RefuseReason::ALL
        .iter()
        .map(|r| (r.code(), r.rule()))
        .collect()
}

fn codes() -> Vec<(u16, &'static str)> {
    ErrorCode::ALL
        .iter()
        .map(|c| (c.code(), c.rule()))
        .collect()
}

/// §5.3: what, and the number the row must contain.
fn limits() -> Vec<(&'static str, u64)> {
    let c = Config::default();
    vec![
        ("client frame body", u64::from(c.gateway.frame_bytes_max)),
        ("server frame body", 4),
        ("Login name", NAME_BYTES_MAX as u64),
        ("Login token", TOKEN_BYTES_MAX as u64),
        (
            "handshake (connect to Login)",
            c.gateway.handshake_timeout_ms,
        ),
        ("silence of a live client", c.gateway.idle_timeout_ms),
        ("ticket lifetime", c.gateway.ticket_ttl_max_s),
        (
            "accounts logged in at once",
            u64::from(c.gateway.accounts_max),
        ),
        ("Hit damage", 1_000_000),
        ("Error / Kick text", TEXT_BYTES_MAX as u64),
        ("one view event's snapshot or delta", 16),
        (
            "a quantised coordinate (6.2)",
            tessera::core::view::codec::Q_MAX as u64,
        ),
        ("strings in entity values", 1024),
        ("array / map elements", 4096),
    ]
}

fn doc() -> String {
    std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/PROTOCOL.md")).expect("doc")
}

/// The cells of the table rows under `heading` (up to the next heading).
fn table(doc: &str, heading: &str) -> Vec<Vec<String>> {
    let start = doc.find(heading).unwrap_or_else(|| panic!("no {heading}"));
    let rest = &doc[start + heading.len()..];
    let end = rest.find("\n#").unwrap_or(rest.len());
    rest[..end]
        .lines()
        .filter(|l| l.starts_with('|') && !l.starts_with("|--") && !l.starts_with("| --"))
        .map(|l| {
            l.trim_matches('|')
                .split('|')
                .map(|c| c.trim().trim_matches('`').to_owned())
                .collect()
        })
        .collect()
}

#[test]
fn the_kinds_table_is_the_code() {
    let rows = table(&doc(), "Kinds: client-to-server");
    let doc_rows: Vec<(String, String, String, String)> = rows
        .iter()
        .filter(|r| r[0].starts_with("0x"))
        .map(|r| (r[0].clone(), r[1].clone(), r[2].clone(), r[3].clone()))
        .collect();
    let ours: Vec<(String, String, String, String)> = KINDS
        .iter()
        .map(|&(k, d, m, s)| (format!("0x{k:04x}"), d.into(), m.into(), s.into()))
        .collect();
    assert_eq!(doc_rows, ours);
    for &(k, _, name, size) in KINDS {
        let heading = format!("### {name} (`0x{k:04x}`, ");
        if let Ok(n) = size.parse::<u32>() {
            let d = doc();
            let at = d
                .find(&heading)
                .unwrap_or_else(|| panic!("no section {heading}"));
            assert!(
                d[at..].starts_with(&format!("{heading}{n} bytes")),
                "{name}: {n}"
            );
        }
    }
}

#[test]
fn the_reason_and_code_tables_are_the_code() {
    let d = doc();
    for (heading, ours) in [
        ("### 5.1 Refuse reasons", reasons()),
        ("### 5.2 Error codes", codes()),
    ] {
        let rows: Vec<(u16, String)> = table(&d, heading)
            .iter()
            .filter_map(|r| Some((r[0].parse().ok()?, r[1].clone())))
            .collect();
        let ours: Vec<(u16, String)> = ours.into_iter().map(|(c, r)| (c, r.to_owned())).collect();
        assert_eq!(rows, ours, "{heading}");
    }
}

#[test]
fn the_limits_table_is_the_code() {
    let rows = table(&doc(), "### 5.3 Limits");
    let rows: Vec<&Vec<String>> = rows.iter().filter(|r| r[0] != "what").collect();
    let ours = limits();
    assert_eq!(
        rows.iter().map(|r| r[0].as_str()).collect::<Vec<_>>(),
        ours.iter().map(|l| l.0).collect::<Vec<_>>(),
        "the rows"
    );
    for (row, (what, n)) in rows.iter().zip(&ours) {
        let digits: String = row[1].chars().filter(|c| c.is_ascii_digit()).collect();
        assert!(
            digits.contains(&n.to_string()),
            "{what}: {} lacks {n}",
            row[1]
        );
    }
}

/// Every code of §5.2, with the test of this file that provokes it over TCP.
const PROVOKED: &[(ErrorCode, &str)] = &[
    (ErrorCode::UnknownMessage, "live_codes_over_tcp"),
    (ErrorCode::FrameTooLarge, "live_codes_over_tcp"),
    (ErrorCode::MoveTooFast, "live_codes_over_tcp"),
    (ErrorCode::NotVisible, "not_visible_over_tcp"),
    (ErrorCode::PropNotSettable, "live_codes_over_tcp"),
    (ErrorCode::ProtocolViolation, "handshake_codes_over_tcp"),
    (ErrorCode::SlowReader, "slow_reader_over_tcp"),
    (ErrorCode::BadMagic, "handshake_codes_over_tcp"),
    (ErrorCode::VersionMismatch, "handshake_codes_over_tcp"),
    (ErrorCode::LoginRefused, "handshake_codes_over_tcp"),
    (ErrorCode::BadSequence, "live_codes_over_tcp"),
    (ErrorCode::BadValue, "live_codes_over_tcp"),
    (ErrorCode::RateLimited, "rate_limited_over_tcp"),
    (ErrorCode::ServerFull, "server_full_and_replaced_over_tcp"),
    (ErrorCode::Shutdown, "shutdown_over_tcp"),
    (ErrorCode::IdleTimeout, "handshake_codes_over_tcp"),
    (ErrorCode::Replaced, "server_full_and_replaced_over_tcp"),
    (ErrorCode::UnknownSpaceType, "space_codes_over_tcp"),
    (ErrorCode::UnknownSpace, "space_codes_over_tcp"),
    (ErrorCode::SpaceFull, "space_codes_over_tcp"),
    (ErrorCode::SpaceNotAllowed, "space_codes_over_tcp"),
];

#[test]
fn every_code_is_provoked_by_a_test_of_this_file() {
    let ours: Vec<u16> = PROVOKED.iter().map(|(c, _)| c.code()).collect();
    let all: Vec<u16> = ErrorCode::ALL.iter().map(|c| c.code()).collect();
    assert_eq!(ours, all, "PROVOKED lists every ErrorCode, in order");
    let this = include_str!("protocol_conformance.rs");
    for (code, test) in PROVOKED {
        assert!(
            this.contains(&format!("fn {test}()")),
            "{code}: no test {test}"
        );
    }
}

fn hello() -> ClientMsg<'static> {
    ClientMsg::Hello {
        version: PROTOCOL_VERSION,
    }
}

/// One connection per handshake code: the Error with the document's code,
/// then the close.
#[test]
fn handshake_codes_over_tcp() {
    let server =
        EmbeddedServer::start(&config(&["gateway.handshake_timeout_ms=300"])).expect("start");
    let addr = server.client_addr();
    let mut bad_magic = vec![8, 0, 0, 0, 1, 0, 0, 0];
    bad_magic.extend_from_slice(b"XSRA");
    bad_magic.extend_from_slice(&PROTOCOL_VERSION.to_le_bytes());
    bad_magic.extend_from_slice(&[0, 0]);
    let mut old = bad_magic.clone();
    old[8..12].copy_from_slice(b"TSRA");
    old[12] = 3;
    let mut early_move = Vec::new();
    hello().encode(&mut early_move);
    ClientMsg::Move {
        seq: 1,
        client_time_us: 0,
        pos: Vec3::ground(1.0, 1.0),
        yaw: 0.0,
    }
    .encode(&mut early_move);
    let mut bad_name = Vec::new();
    hello().encode(&mut bad_name);
    ClientMsg::Login {
        name: "a\u{7}b",
        token: None,
    }
    .encode(&mut bad_name);
    for (bytes, code) in [
        (bad_magic, ErrorCode::BadMagic),
        (old, ErrorCode::VersionMismatch),
        (early_move, ErrorCode::ProtocolViolation),
        (bad_name, ErrorCode::LoginRefused),
        (Vec::new(), ErrorCode::IdleTimeout),
    ] {
        let mut c = RawClient::connect(addr);
        c.send_bytes(&bytes);
        let seen = c.until(Duration::from_secs(3), |_| false);
        assert_eq!(seen, vec![Seen::Error(0, code)], "{code}");
        assert!(c.eof, "{code}: closed");
    }
}

/// One live connection provokes each gateway rule in turn and sees the
/// document's code; the last strike kicks.
#[test]
fn live_codes_over_tcp() {
    let server = EmbeddedServer::start(&config(&["gateway.abuse_strikes_max=20"])).expect("start");
    let mut c = RawClient::connect(server.client_addr());
    c.login("conformance");
    let mv = |seq, x: f64| ClientMsg::Move {
        seq,
        client_time_us: 0,
        pos: Vec3::ground(x, 60.0),
        yaw: 0.0,
    };
    let mut unknown = vec![0, 0, 0, 0, 0x7f, 0, 0, 0];
    let cases: Vec<(Vec<u8>, u64, ErrorCode)> = vec![
        (std::mem::take(&mut unknown), 0, ErrorCode::UnknownMessage),
        (enc(&mv(5, 120.0)), 5, ErrorCode::BadSequence),
        (enc(&mv(1, 1.0e9)), 1, ErrorCode::BadValue),
        (enc(&mv(2, 230.0)), 2, ErrorCode::MoveTooFast),
        (
            enc(&ClientMsg::SetProp {
                seq: 3,
                client_time_us: 0,
                prop: 0,
                value: b"\x02An",
            }),
            3,
            ErrorCode::PropNotSettable,
        ),
        (enc(&hello()), 0, ErrorCode::ProtocolViolation),
        (
            vec![8, 0, 0, 0, 8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0],
            0,
            ErrorCode::ProtocolViolation,
        ),
    ];
    for (bytes, seq, code) in cases {
        c.send_bytes(&bytes);
        let seen = c.until(Duration::from_secs(3), |s| matches!(s, Seen::Error(..)));
        assert_eq!(seen.last(), Some(&Seen::Error(seq, code)), "{code}");
    }
    let mut big = vec![0; 8];
    big[..4].copy_from_slice(&(1u32 << 20).to_le_bytes());
    big[4] = 3;
    c.send_bytes(&big);
    let seen = c.until(Duration::from_secs(3), |s| matches!(s, Seen::Kick(_)));
    assert_eq!(seen.last(), Some(&Seen::Kick(ErrorCode::FrameTooLarge)));
}

fn enc(m: &ClientMsg<'_>) -> Vec<u8> {
    let mut b = Vec::new();
    m.encode(&mut b);
    b
}

/// Waits (at most 5 s) until the server's published counters satisfy `ok`.
fn counted(server: &EmbeddedServer, ok: impl Fn(&tessera::server::ServerCounters) -> bool) -> bool {
    let until = std::time::Instant::now() + Duration::from_secs(5);
    while std::time::Instant::now() < until {
        if ok(&server.counters()) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

/// 4: a Hit on a handle the client does not see is refused at the real
/// (CallResult `Refused(not-visible)`) and counted under `not-visible`.
#[test]
fn not_visible_over_tcp() {
    let server = EmbeddedServer::start(&config(&[])).expect("start");
    let mut c = RawClient::connect(server.client_addr());
    c.login("hitter");
    c.send(&ClientMsg::Hit {
        seq: 1,
        client_time_us: 0,
        target: 4_000_000,
        damage: 1,
    });
    let seen = c.until(Duration::from_secs(3), |s| matches!(s, Seen::Refused(..)));
    assert_eq!(
        seen.last(),
        Some(&Seen::Refused(1, RefuseReason::NotVisible))
    );
    let rule = ErrorCode::NotVisible.rule();
    assert!(
        counted(&server, |k| k.refused.get(rule).copied().unwrap_or(0) >= 1),
        "counted under {rule}"
    );
}

/// 7: a client whose send queue would pass `gateway.send_queue_bytes_max`
/// (set to the smallest allowed, 64 bytes: less than a Welcome) is closed
/// without a frame and counted under `slow-reader`.
#[test]
fn slow_reader_over_tcp() {
    let server = EmbeddedServer::start(&config(&[
        "gateway.frame_bytes_max=64",
        "gateway.send_queue_bytes_max=64",
    ]))
    .expect("start");
    let mut c = RawClient::connect(server.client_addr());
    c.send(&hello());
    c.send(&ClientMsg::Login {
        name: "slow",
        token: None,
    });
    let seen = c.until(Duration::from_secs(3), |_| false);
    assert!(c.eof, "closed");
    assert!(seen.is_empty(), "without a frame: {seen:?}");
    let rule = ErrorCode::SlowReader.rule();
    assert!(
        counted(&server, |k| k.disconnects.get(rule).copied().unwrap_or(0)
            >= 1),
        "counted under {rule}"
    );
}

/// 13: more inputs on their way to the real than
/// `gateway.inputs_in_flight_max` (1 here) are refused.
#[test]
fn rate_limited_over_tcp() {
    let server =
        EmbeddedServer::start(&config(&["gateway.inputs_in_flight_max=1"])).expect("start");
    let mut c = RawClient::connect(server.client_addr());
    c.login("eager");
    let mut burst = Vec::new();
    for seq in 1..=4u64 {
        ClientMsg::Move {
            seq,
            client_time_us: seq * 1000,
            pos: Vec3::ground(120.0 + seq as f64 * 0.01, 60.0),
            yaw: 0.0,
        }
        .encode(&mut burst);
    }
    c.send_bytes(&burst);
    let seen = c.until(Duration::from_secs(3), |s| {
        matches!(s, Seen::Error(_, ErrorCode::RateLimited))
    });
    assert!(
        matches!(seen.last(), Some(Seen::Error(seq, ErrorCode::RateLimited)) if *seq >= 2),
        "{seen:?}"
    );
}

/// 14: a new account past `gateway.accounts_max` (1 here) is refused with
/// `server-full` and closed; 17: a second login of a seated account
/// replaces the first connection, which gets Kick `replaced`.
#[test]
fn server_full_and_replaced_over_tcp() {
    let server = EmbeddedServer::start(&config(&["gateway.accounts_max=1"])).expect("start");
    let addr = server.client_addr();
    let mut first = RawClient::connect(addr);
    let e = first.login("solo");
    let mut other = RawClient::connect(addr);
    let seen = other.login_with("other", None);
    assert_eq!(seen, vec![Seen::Error(0, ErrorCode::ServerFull)]);
    other.until(Duration::from_secs(2), |_| false);
    assert!(other.eof, "closed");
    let mut again = RawClient::connect(addr);
    let seen = again.login_with("solo", None);
    assert_eq!(seen.last(), Some(&Seen::Welcome(e)));
    let seen = first.until(Duration::from_secs(3), |_| false);
    assert_eq!(seen.last(), Some(&Seen::Kick(ErrorCode::Replaced)));
    assert!(first.eof, "closed after its last frame");
}

/// 15: a server that stops tells its clients with Kick `shutdown`.
#[test]
fn shutdown_over_tcp() {
    let server = EmbeddedServer::start(&config(&[])).expect("start");
    let mut c = RawClient::connect(server.client_addr());
    c.login("stays");
    server.stop().expect("stop");
    let seen = c.until(Duration::from_secs(3), |_| false);
    assert_eq!(seen.last(), Some(&Seen::Kick(ErrorCode::Shutdown)));
    assert!(c.eof, "closed");
}

/// 18 to 21: EnterSpace by a type that does not exist, by an id that does
/// not exist, of a type no instance of which can be created (one space at
/// most: `spaces.instances_max = 1`, the world), and into the space the
/// avatar is in; each answered with Error `seq` 0, the session goes on.
#[test]
fn space_codes_over_tcp() {
    let server = EmbeddedServer::start(&config(&["spaces.instances_max=1"])).expect("start");
    let mut c = RawClient::connect(server.client_addr());
    c.login("traveller");
    for (space, type_id, code) in [
        (0, 99, ErrorCode::UnknownSpaceType),
        (77_777, 0, ErrorCode::UnknownSpace),
        (0, 3, ErrorCode::SpaceFull),
        (1, 0, ErrorCode::SpaceNotAllowed),
    ] {
        c.send(&ClientMsg::EnterSpace { space, type_id });
        let seen = c.until(Duration::from_secs(3), |s| {
            matches!(s, Seen::Error(..) | Seen::Space(_))
        });
        assert_eq!(seen.last(), Some(&Seen::Error(0, code)), "{code}");
    }
    assert!(!c.eof, "not fatal");
}
