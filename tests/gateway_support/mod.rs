//! Shared by the `gateway_*` loopback tests: the small two-shard test
//! config, a game client (the client library's `ClientSession` over a
//! non-blocking `std::net::TcpStream`) and a raw client that writes any
//! bytes and reads server frames.

#![allow(dead_code)]

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use tessera::client::{ClientSession, ClientSessionParams, SessionState};
use tessera::config::Config;
use tessera::core::entity::TypeRegistry;
use tessera::core::ids::EntityId;
use tessera::core::time::Time;
use tessera::wire::client::{
    CallOutcome, ClientMsg, ErrorCode, FrameDecoder, RefuseReason, ServerMsg, PROTOCOL_VERSION,
};

/// Two shards, a 240 x 120 m world split at x = 120 (cell 0 on shard 0,
/// cell 1 on shard 1), ghost radius 30 m, AOI 15 m, avatars at the centre
/// (on the border), ephemeral client port, no admin endpoint.
pub fn config(extra: &[&str]) -> Config {
    let mut sets: Vec<String> = [
        "world.max_x_m=240.0",
        "world.max_z_m=120.0",
        "world.ghost_radius_m=30.0",
        "aoi.radius_m=15.0",
        "aoi.leave_radius_m=16.0",
        "server.initial_cells=2",
        "runtime.shards=2",
        "runtime.pin=false",
        "runtime.tick_ms=50",
        "gateway.spawn=\"center\"",
        "gateway.move_speed_max_mps=30.0",
        "gateway.listen_addr=\"127.0.0.1:0\"",
        "admin.enabled=false",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    sets.extend(extra.iter().map(|s| s.to_string()));
    Config::load(None, &sets).expect("valid test config")
}

/// Microseconds since the first call (the clients' clock).
pub fn now() -> Time {
    static START: OnceLock<Instant> = OnceLock::new();
    let start = START.get_or_init(Instant::now);
    Time(start.elapsed().as_micros() as u64)
}

/// A game client over TCP.
pub struct Client {
    pub stream: TcpStream,
    pub session: ClientSession,
    pub eof: bool,
}

impl Client {
    /// Connects and queues Hello + Login.
    pub fn connect(addr: SocketAddr, name: &str) -> Client {
        let stream = TcpStream::connect(addr).expect("connect");
        stream.set_nonblocking(true).expect("nonblocking");
        stream.set_nodelay(true).expect("nodelay");
        let reg = Arc::new(TypeRegistry::with_builtins());
        let mut session = ClientSession::new(ClientSessionParams::default(), reg);
        session.connect(name, None).expect("session");
        Client {
            stream,
            session,
            eof: false,
        }
    }

    /// Writes what is queued and reads what arrived (never blocks).
    pub fn pump(&mut self) {
        while !self.session.transmit().is_empty() {
            match self.stream.write(self.session.transmit()) {
                Ok(n) => self.session.advance_transmit(n),
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(_) => {
                    self.eof = true;
                    break;
                }
            }
        }
        while !self.eof {
            let buf = self.session.read_buf(64 << 10);
            match self.stream.read(buf) {
                Ok(0) => {
                    self.session.handle_read(now(), 0, &mut ());
                    self.session.handle_eof(now());
                    self.eof = true;
                }
                Ok(n) => self.session.handle_read(now(), n, &mut ()),
                Err(e) if e.kind() == ErrorKind::WouldBlock => {
                    self.session.handle_read(now(), 0, &mut ());
                    break;
                }
                Err(_) => {
                    self.session.handle_read(now(), 0, &mut ());
                    self.session.handle_eof(now());
                    self.eof = true;
                }
            }
        }
    }

    /// The own entity, once welcomed.
    pub fn entity(&self) -> Option<EntityId> {
        self.session.welcome().map(|w| w.entity)
    }

    /// The version of `e` this client shows.
    pub fn shown(&self, e: EntityId) -> Option<u64> {
        self.session.view()?.find(e).map(|s| s.version)
    }

    /// True once live.
    pub fn live(&self) -> bool {
        self.session.state() == SessionState::Live
    }
}

/// Pumps `clients` every 10 ms until `done` or `timeout`; returns `done`.
pub fn pump_until(
    clients: &mut [&mut Client],
    timeout: Duration,
    mut done: impl FnMut(&mut [&mut Client]) -> bool,
) -> bool {
    let until = Instant::now() + timeout;
    loop {
        for c in clients.iter_mut() {
            c.pump();
        }
        if done(clients) {
            return true;
        }
        if Instant::now() > until {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// What a raw client saw: one server frame, owned.
#[derive(Clone, Debug, PartialEq)]
pub enum Seen {
    Welcome(EntityId),
    Error(u64, ErrorCode),
    Kick(ErrorCode),
    Pong(u64),
    Ack(u64),
    /// A CallResult refusing the call of this seq.
    Refused(u64, RefuseReason),
    /// SpaceChanged to this space.
    Space(u32),
    Other(u16),
}

/// A client that writes any bytes (blocking socket, read timeout).
pub struct RawClient {
    pub stream: TcpStream,
    decoder: FrameDecoder,
    pub eof: bool,
    /// The `next_seq` of the last Welcome seen.
    pub next_seq: Option<u64>,
}

impl RawClient {
    /// Connects.
    pub fn connect(addr: SocketAddr) -> RawClient {
        let stream = TcpStream::connect(addr).expect("connect");
        stream
            .set_read_timeout(Some(Duration::from_millis(50)))
            .expect("timeout");
        RawClient {
            stream,
            decoder: FrameDecoder::new(4 << 20),
            eof: false,
            next_seq: None,
        }
    }

    /// Writes one message.
    pub fn send(&mut self, m: &ClientMsg<'_>) {
        let mut b = Vec::new();
        m.encode(&mut b);
        self.send_bytes(&b);
    }

    /// Writes raw bytes (errors ignored: the server may have closed).
    pub fn send_bytes(&mut self, b: &[u8]) {
        let _ = self.stream.write_all(b);
    }

    /// Hello + Login, then waits for Welcome.
    pub fn login(&mut self, name: &str) -> EntityId {
        self.send(&ClientMsg::Hello {
            version: PROTOCOL_VERSION,
        });
        self.send(&ClientMsg::Login { name, token: None });
        let seen = self.until(Duration::from_secs(5), |s| matches!(s, Seen::Welcome(_)));
        match seen.last() {
            Some(Seen::Welcome(e)) => *e,
            other => panic!("no welcome: {other:?}"),
        }
    }

    /// Hello + Login with `token`; what came until a Welcome, a Kick or
    /// EOF (at most 5 s).
    pub fn login_with(&mut self, name: &str, token: Option<&[u8]>) -> Vec<Seen> {
        self.send(&ClientMsg::Hello {
            version: PROTOCOL_VERSION,
        });
        self.send(&ClientMsg::Login { name, token });
        self.until(Duration::from_secs(5), |s| {
            matches!(s, Seen::Welcome(_) | Seen::Kick(_))
        })
    }

    /// Reads frames until one matches `stop` (included), EOF or `timeout`.
    pub fn until(&mut self, timeout: Duration, mut stop: impl FnMut(&Seen) -> bool) -> Vec<Seen> {
        let until = Instant::now() + timeout;
        let mut seen = Vec::new();
        while Instant::now() < until && !self.eof {
            while let Ok(Some(f)) = self.decoder.next_frame() {
                let s = match ServerMsg::decode(&f) {
                    Ok(ServerMsg::Welcome(w)) => {
                        self.next_seq = Some(w.next_seq);
                        Seen::Welcome(w.entity)
                    }
                    Ok(ServerMsg::Error { seq, code, .. }) => Seen::Error(seq, code),
                    Ok(ServerMsg::Kick { code, .. }) => Seen::Kick(code),
                    Ok(ServerMsg::Pong { nonce, .. }) => Seen::Pong(nonce),
                    Ok(ServerMsg::InputAck { last_seq }) => Seen::Ack(last_seq),
                    Ok(ServerMsg::CallResult {
                        seq,
                        outcome: CallOutcome::Refused(r),
                    }) => Seen::Refused(seq, r),
                    Ok(ServerMsg::SpaceChanged { space, .. }) => Seen::Space(space),
                    Ok(m) => Seen::Other(m.kind()),
                    Err(e) => panic!("bad server frame: {e}"),
                };
                let hit = stop(&s);
                seen.push(s);
                if hit {
                    return seen;
                }
            }
            let buf = self.decoder.read_buf(64 << 10);
            match self.stream.read(buf) {
                Ok(0) => {
                    self.decoder.commit(0);
                    self.eof = true;
                }
                Ok(n) => self.decoder.commit(n),
                Err(_) => self.decoder.commit(0),
            }
        }
        seen
    }
}
