//! The load: N clients in ONE thread with one epoll loop (mio), no task per
//! connection. Every client connects, sends a real Hello + Login, and then a
//! valid Move 10 times a second (a small random walk), reading and
//! discarding everything it receives.
//!
//! Against tessera a client first waits for its own snapshot (decoded by a
//! [`ClientSession`], dropped once the avatar is placed) so that its walk
//! starts where the server spawned it and every move is within the speed
//! limit; against a bare server it starts at a random point at once.
//!
//! Owns the client sockets and their walks; prints a `stat` line a second.

use std::io::{ErrorKind, Read, Write};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use mio::net::TcpStream;
use mio::{Events, Interest, Poll, Token};
use serde_json::json;
use tessera::client::{ClientSession, ClientSessionParams, SessionState};
use tessera::core::entity::TypeRegistry;
use tessera::core::geom::Vec3;
use tessera::core::time::Time;
use tessera::wire::client::ClientMsg;

use super::sys;
use super::walk::{Bounds, Walk};
use crate::SplitMix64;

/// What the clients expect of the server.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Peer {
    /// tessera: wait for the own snapshot before moving.
    Tessera,
    /// A bare server: it never answers the login; move at once.
    Bare,
}

/// The load's settings.
#[derive(Clone, Debug)]
pub struct LoadPlan {
    /// The server.
    pub addr: SocketAddr,
    /// Clients.
    pub clients: usize,
    /// Moves per client per second.
    pub move_hz: f64,
    /// Ground distance per move, metres (speed = step x rate).
    pub step_m: f64,
    /// Where bare-server clients start (tessera's clients start where spawned).
    pub world: Bounds,
    /// What the server is.
    pub peer: Peer,
    /// Connections connecting or waiting for their spawn at once (the
    /// server's listen backlog is 1,024: ramp below it).
    pub handshakes_max: usize,
    /// Connections opened per second at most (the bare servers accept once
    /// per poll, and a listen backlog of 1,024 overflows if a poll's worth
    /// of connections arrives faster).
    pub connects_per_s: f64,
    /// Bytes a client may hold unsent before it is counted as stuck.
    pub unsent_bytes_max: usize,
    /// Seed of the walks.
    pub seed: u64,
    /// How the load waits for the server's bytes.
    pub wait: LoadWait,
}

/// How the load waits between its rounds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LoadWait {
    /// Blocks in `epoll_wait` (at most [`WAKE_MS`]): a server's send that
    /// finds the load asleep wakes it, and on loopback that wake-up (an
    /// interrupt to the load's CPU) is charged to the sending server.
    Epoll,
    /// Never blocks in `epoll_wait`: polls with a zero timeout and, when
    /// nothing is ready, sleeps [`SLEEP_US`] on a timer of its own CPU. The
    /// server's sends then wake no one, as on a real network, where the
    /// clients' wake-ups are their own machines' cost.
    Sleep,
}

/// [`LoadWait::Sleep`]: the load's nap when nothing is ready.
pub const SLEEP_US: u64 = 500;

/// Events taken by one poll.
pub const EVENTS_MAX: usize = 16_384;
/// One read call reads at most this much.
pub const READ_BYTES: usize = 64 * 1024;
/// The loop wakes at least this often to send the moves due.
pub const WAKE_MS: u64 = 2;

enum Phase {
    Connecting,
    Spawning(Box<ClientSession>),
    Moving,
    Closed,
}

struct Client {
    stream: TcpStream,
    phase: Phase,
    walk: Walk,
    seq: u64,
    unsent: Vec<u8>,
    writable_wanted: bool,
}

/// Counters of the load, printed each second.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct LoadStats {
    /// Connections opened.
    pub opened: u64,
    /// Connections established.
    pub connected: u64,
    /// Clients sending moves now.
    pub moving: u64,
    /// Connections ended (server close, error).
    pub closed: u64,
    /// Moves written (or queued behind a full socket).
    pub moves: u64,
    /// Moves not sent because the client's unsent bytes passed the bound.
    pub moves_dropped: u64,
    /// Rounds of moves skipped because the loop fell a whole period behind.
    pub rounds_behind: u64,
    /// Bytes received.
    pub bytes_in: u64,
    /// Bytes written.
    pub bytes_out: u64,
    /// Sessions that failed before their spawn (error, kick, bad frame).
    pub spawn_failed: u64,
    /// Seconds since the load started, when the line was made.
    pub t_s: f64,
}

/// Runs the load until the process is killed.
///
/// # Errors
/// If the poll cannot be created or the file limit cannot be raised.
pub fn run(plan: &LoadPlan) -> anyhow::Result<()> {
    sys::raise_nofile(sys::files_for(plan.clients))?;
    let mut poll = Poll::new()?;
    let mut events = Events::with_capacity(EVENTS_MAX);
    let registry = Arc::new(TypeRegistry::with_builtins());
    let mut rng = SplitMix64::new(plan.seed);
    let mut clients: Vec<Client> = Vec::with_capacity(plan.clients);
    let mut st = LoadStats::default();
    let mut buf = vec![0u8; READ_BYTES];
    let mut frame = Vec::with_capacity(64);
    let start = Instant::now();
    let mut handshaking = 0usize;
    let mut moves_due_done: u64 = 0;
    let mut next_stat = start + Duration::from_secs(1);
    let period_ns = 1e9 / plan.move_hz;
    loop {
        // Ramp: keep up to handshakes_max connections on their way in.
        let allowed = (start.elapsed().as_secs_f64() * plan.connects_per_s) as usize + 1;
        while clients.len() < plan.clients.min(allowed) && handshaking < plan.handshakes_max {
            let i = clients.len();
            let mut stream = TcpStream::connect(plan.addr)?;
            poll.registry()
                .register(&mut stream, Token(i), Interest::WRITABLE)?;
            let walk = Walk::random(&plan.world, &mut rng);
            clients.push(Client {
                stream,
                phase: Phase::Connecting,
                walk,
                seq: 0,
                unsent: Vec::new(),
                writable_wanted: true,
            });
            handshaking += 1;
            st.opened += 1;
        }
        match plan.wait {
            LoadWait::Epoll => poll.poll(&mut events, Some(Duration::from_millis(WAKE_MS)))?,
            LoadWait::Sleep => {
                poll.poll(&mut events, Some(Duration::ZERO))?;
                if events.is_empty() {
                    std::thread::sleep(Duration::from_micros(SLEEP_US));
                }
            }
        }
        let now = Time(start.elapsed().as_micros() as u64);
        for ev in events.iter() {
            let i = ev.token().0;
            let Some(c) = clients.get_mut(i) else {
                continue;
            };
            if matches!(c.phase, Phase::Connecting) && (ev.is_writable() || ev.is_error()) {
                if ev.is_error() || c.stream.peer_addr().is_err() {
                    c.phase = Phase::Closed;
                    handshaking -= 1;
                    st.closed += 1;
                    st.spawn_failed += 1;
                    let _ = poll.registry().deregister(&mut c.stream);
                    continue;
                }
                st.connected += 1;
                let _ = c.stream.set_nodelay(true);
                on_connected(c, plan, &registry, &mut frame, &mut st, &mut handshaking);
                let want = interest(c);
                c.writable_wanted = !c.unsent.is_empty();
                poll.registry().reregister(&mut c.stream, Token(i), want)?;
            }
            if ev.is_writable() && !c.unsent.is_empty() {
                flush(c, &mut st);
                if c.unsent.is_empty() && c.writable_wanted {
                    c.writable_wanted = false;
                    poll.registry()
                        .reregister(&mut c.stream, Token(i), Interest::READABLE)?;
                }
            }
            if ev.is_readable() || ev.is_read_closed() {
                read_all(c, now, &mut buf, &mut st, &mut handshaking);
                if matches!(c.phase, Phase::Closed) {
                    let _ = poll.registry().deregister(&mut c.stream);
                }
            }
        }
        let due = moves_due(start, period_ns, plan.clients);
        let mut ctx = MoveCtx {
            poll: &poll,
            rng: &mut rng,
            frame: &mut frame,
            st: &mut st,
            now,
        };
        send_moves(&mut clients, plan, due, &mut moves_due_done, &mut ctx)?;
        if Instant::now() >= next_stat {
            next_stat += Duration::from_secs(1);
            st.moving = clients
                .iter()
                .filter(|c| matches!(c.phase, Phase::Moving))
                .count() as u64;
            st.t_s = start.elapsed().as_secs_f64();
            sys::emit("stat", &json!(st));
        }
    }
}

/// Moves due since the start: client k's n-th move is due at (n + k / N)
/// periods.
fn moves_due(start: Instant, period_ns: f64, clients: usize) -> u64 {
    (start.elapsed().as_nanos() as f64 / period_ns * clients.max(1) as f64) as u64
}

struct MoveCtx<'a> {
    poll: &'a Poll,
    rng: &'a mut SplitMix64,
    frame: &'a mut Vec<u8>,
    st: &'a mut LoadStats,
    now: Time,
}

/// Sends the moves due up to `due` (one a client, round robin), skipping
/// ahead if the loop fell more than a whole round behind.
fn send_moves(
    clients: &mut [Client],
    plan: &LoadPlan,
    due: u64,
    done: &mut u64,
    cx: &mut MoveCtx<'_>,
) -> std::io::Result<()> {
    let n = plan.clients.max(1) as u64;
    if due > *done + n {
        cx.st.rounds_behind += 1;
        *done = due - n;
    }
    while *done < due {
        let k = (*done % n) as usize;
        *done += 1;
        let Some(c) = clients.get_mut(k) else {
            continue;
        };
        if !matches!(c.phase, Phase::Moving) {
            continue;
        }
        if c.unsent.len() > plan.unsent_bytes_max {
            cx.st.moves_dropped += 1;
            continue;
        }
        c.walk.step(plan.step_m, &plan.world, cx.rng);
        c.seq += 1;
        cx.frame.clear();
        ClientMsg::Move {
            seq: c.seq,
            client_time_us: cx.now.0,
            pos: Vec3::ground(c.walk.x, c.walk.z),
            yaw: c.walk.yaw as f32,
        }
        .encode(cx.frame);
        c.unsent.extend_from_slice(cx.frame);
        cx.st.moves += 1;
        flush(c, cx.st);
        if !c.unsent.is_empty() && !c.writable_wanted {
            c.writable_wanted = true;
            cx.poll.registry().reregister(
                &mut c.stream,
                Token(k),
                Interest::READABLE | Interest::WRITABLE,
            )?;
        }
    }
    Ok(())
}

fn interest(c: &Client) -> Interest {
    if c.unsent.is_empty() {
        Interest::READABLE
    } else {
        Interest::READABLE | Interest::WRITABLE
    }
}

/// The connection is up: queue Hello + Login (through a session against
/// tessera, by hand against a bare server) and write them.
fn on_connected(
    c: &mut Client,
    plan: &LoadPlan,
    registry: &Arc<TypeRegistry>,
    frame: &mut Vec<u8>,
    st: &mut LoadStats,
    handshaking: &mut usize,
) {
    let name = format!("c{}", st.connected);
    match plan.peer {
        Peer::Tessera => {
            let mut s = Box::new(ClientSession::new(
                ClientSessionParams::default(),
                registry.clone(),
            ));
            if s.connect(&name, None).is_err() {
                c.phase = Phase::Closed;
                *handshaking -= 1;
                st.spawn_failed += 1;
                return;
            }
            c.unsent.extend_from_slice(s.transmit());
            let n = s.transmit().len();
            s.advance_transmit(n);
            c.phase = Phase::Spawning(s);
        }
        Peer::Bare => {
            frame.clear();
            ClientMsg::Hello {
                version: tessera::wire::client::PROTOCOL_VERSION,
            }
            .encode(frame);
            ClientMsg::Login {
                name: &name,
                token: None,
            }
            .encode(frame);
            c.unsent.extend_from_slice(frame);
            c.phase = Phase::Moving;
            *handshaking -= 1;
        }
    }
    flush(c, st);
}

/// Writes what is unsent, as far as the socket takes it.
fn flush(c: &mut Client, st: &mut LoadStats) {
    while !c.unsent.is_empty() {
        match c.stream.write(&c.unsent) {
            Ok(0) => break,
            Ok(n) => {
                st.bytes_out += n as u64;
                c.unsent.drain(..n);
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(_) => break,
        }
    }
}

/// Reads until the socket is drained (mio is edge-triggered); feeds the
/// session while the client waits for its spawn.
fn read_all(
    c: &mut Client,
    now: Time,
    buf: &mut [u8],
    st: &mut LoadStats,
    handshaking: &mut usize,
) {
    loop {
        match c.stream.read(buf) {
            Ok(0) => {
                close(c, st, handshaking);
                return;
            }
            Ok(n) => {
                st.bytes_in += n as u64;
                if let Phase::Spawning(s) = &mut c.phase {
                    s.handle_bytes(now, &buf[..n], &mut ());
                    if let Some(own) = s.view().and_then(|v| v.own()) {
                        let p = own.replica.core().pos;
                        let yaw = c.walk.yaw;
                        c.walk = Walk {
                            x: p.x,
                            z: p.z,
                            yaw,
                        };
                        c.phase = Phase::Moving;
                        *handshaking -= 1;
                    } else if s.state() == SessionState::Closed {
                        st.spawn_failed += 1;
                        close(c, st, handshaking);
                        return;
                    }
                }
                if n < buf.len() {
                    return;
                }
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => return,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(_) => {
                close(c, st, handshaking);
                return;
            }
        }
    }
}

fn close(c: &mut Client, st: &mut LoadStats, handshaking: &mut usize) {
    if matches!(c.phase, Phase::Spawning(_) | Phase::Connecting) {
        *handshaking -= 1;
    }
    if !matches!(c.phase, Phase::Closed) {
        st.closed += 1;
    }
    c.phase = Phase::Closed;
}
