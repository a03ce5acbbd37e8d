//! The bare tick-batched epoll server: no game. Each poll (every `poll_ms`)
//! is one `epoll_wait` with a zero timeout that takes every ready socket;
//! new connections are accepted, every readable socket is read once into a
//! scratch buffer and the bytes are discarded (edge-triggered: a read
//! shorter than the buffer drained it). Every tick (`tick_ms`) one buffer
//! of `bytes_per_tick` is written to every client, one `send` each.
//!
//! Owns the listener and the accepted sockets; prints `ready` then a `stat`
//! line a second.

use std::io::{ErrorKind, Read, Write};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use mio::net::{TcpListener, TcpStream};
use mio::{Events, Interest, Poll, Token};
use serde_json::json;

use super::stand_in::{OwnBuffers, WorkingSet};
use super::sys;
use super::BareStats;

/// A bare server's settings (shared with the io_uring one).
#[derive(Clone, Copy, Debug)]
pub struct BarePlan {
    /// Clients it must hold (sizes its tables; more are refused).
    pub clients: usize,
    /// Between two polls of the sockets, ms.
    pub poll_ms: u64,
    /// Between two writes to every client, ms.
    pub tick_ms: u64,
    /// Bytes written to each client each tick.
    pub bytes_per_tick: usize,
    /// Bytes of its own memory walked every poll (a game's working set;
    /// 0: none). See [`super::stand_in`].
    pub touch_bytes: usize,
    /// Each client's tick written from a buffer of its own, rewritten
    /// every tick (false: one shared buffer).
    pub own_buffers: bool,
    /// Each client is written once a tick, but the clients are split into
    /// this many groups written `tick_ms / phases` apart (tessera's
    /// staggered client phases; 1: every client at once).
    pub phases: usize,
}

impl BarePlan {
    /// Between two rounds of writes (to one phase's clients).
    pub fn write_every(&self) -> Duration {
        Duration::from_millis(self.tick_ms) / self.phases.max(1) as u32
    }

    /// Whether client `i` is written in round `round`.
    pub fn writes(&self, i: usize, round: u64) -> bool {
        let p = self.phases.max(1);
        i % p == (round % p as u64) as usize
    }
}

const LISTENER: Token = Token(usize::MAX - 1);
/// One read call reads at most this much.
pub const READ_BYTES: usize = 64 * 1024;

/// Runs the server on `127.0.0.1:0` until the process is killed.
///
/// # Errors
/// If it cannot bind, poll or raise the file limit.
pub fn run(plan: &BarePlan) -> anyhow::Result<()> {
    sys::raise_nofile(sys::files_for(plan.clients))?;
    let mut poll = Poll::new()?;
    let mut events = Events::with_capacity(plan.clients + 16);
    let addr: SocketAddr = "127.0.0.1:0".parse()?;
    let mut listener = TcpListener::bind(addr)?;
    poll.registry()
        .register(&mut listener, LISTENER, Interest::READABLE)?;
    sys::emit(
        "ready",
        &json!({"addr": listener.local_addr()?.to_string()}),
    );
    let mut conns: Vec<Option<TcpStream>> = Vec::with_capacity(plan.clients);
    let mut free: Vec<usize> = Vec::new();
    let mut st = BareStats::default();
    let mut buf = vec![0u8; READ_BYTES];
    let out = vec![0x5au8; plan.bytes_per_tick];
    let mut working_set = WorkingSet::new(plan.touch_bytes);
    let mut own = OwnBuffers::new(plan.own_buffers, plan.bytes_per_tick);
    let (poll_every, tick_every) = (Duration::from_millis(plan.poll_ms), plan.write_every());
    let start = Instant::now();
    let (mut next_poll, mut next_tick) = (start, start + tick_every);
    let mut next_stat = start + Duration::from_secs(1);
    loop {
        let now = Instant::now();
        if now < next_poll {
            std::thread::sleep(next_poll - now);
        }
        next_poll += poll_every;
        working_set.walk();
        poll.poll(&mut events, Some(Duration::ZERO))?;
        st.polls += 1;
        for ev in events.iter() {
            if ev.token() == LISTENER {
                accept_all(&listener, &poll, &mut conns, &mut free, plan, &mut st)?;
                continue;
            }
            let i = ev.token().0;
            let Some(Some(s)) = conns.get_mut(i) else {
                continue;
            };
            if !read_once(s, &mut buf, &mut st) {
                let _ = poll.registry().deregister(s);
                conns[i] = None;
                free.push(i);
                st.clients -= 1;
                st.closed += 1;
            }
        }
        let now = Instant::now();
        if now >= next_tick {
            let late = (now - next_tick).as_nanos() / tick_every.as_nanos();
            st.ticks_lost += late as u64;
            next_tick += tick_every * (late as u32 + 1);
            let round = st.ticks;
            st.ticks += 1;
            for (i, s) in conns.iter_mut().enumerate() {
                let Some(s) = s else { continue };
                if !plan.writes(i, round) {
                    continue;
                }
                let out = if own.on() {
                    own.fill(i, st.ticks)
                } else {
                    &out[..]
                };
                match s.write(out) {
                    Ok(n) if n == out.len() => st.bytes_out += n as u64,
                    Ok(n) => {
                        st.bytes_out += n as u64;
                        st.short_sends += 1;
                    }
                    Err(_) => st.short_sends += 1,
                }
            }
        }
        if now >= next_stat {
            next_stat += Duration::from_secs(1);
            sys::emit("stat", &json!(st));
        }
    }
}

fn accept_all(
    listener: &TcpListener,
    poll: &Poll,
    conns: &mut Vec<Option<TcpStream>>,
    free: &mut Vec<usize>,
    plan: &BarePlan,
    st: &mut BareStats,
) -> std::io::Result<()> {
    loop {
        match listener.accept() {
            Ok((mut s, _)) => {
                if st.clients as usize >= plan.clients {
                    st.refused += 1;
                    continue;
                }
                let i = free.pop().unwrap_or(conns.len());
                poll.registry()
                    .register(&mut s, Token(i), Interest::READABLE)?;
                if i == conns.len() {
                    conns.push(Some(s));
                } else {
                    conns[i] = Some(s);
                }
                st.clients += 1;
                st.accepted += 1;
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => return Ok(()),
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            // Out of files or a connection reset before accept: try next poll.
            Err(_) => return Ok(()),
        }
    }
}

/// One read per readable socket; false when the peer closed or failed.
fn read_once(s: &mut TcpStream, buf: &mut [u8], st: &mut BareStats) -> bool {
    loop {
        match s.read(buf) {
            Ok(0) => return false,
            Ok(n) => {
                st.bytes_in += n as u64;
                st.reads += 1;
                if n < buf.len() {
                    return true;
                }
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => return true,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(_) => return false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn phases_split_the_clients_and_the_period() {
        let plan = |phases| BarePlan {
            clients: 6,
            poll_ms: 50,
            tick_ms: 100,
            bytes_per_tick: 250,
            touch_bytes: 0,
            own_buffers: false,
            phases,
        };
        assert_eq!(plan(1).write_every(), Duration::from_millis(100));
        assert!((0..6).all(|i| plan(1).writes(i, 0) && plan(1).writes(i, 1)));
        let two = plan(2);
        assert_eq!(two.write_every(), Duration::from_millis(50));
        for i in 0..6 {
            // Once in every two rounds, whichever two.
            assert!(two.writes(i, 4) != two.writes(i, 5), "client {i}");
        }
        assert_eq!((0..6).filter(|&i| two.writes(i, 0)).count(), 3);
    }
}
