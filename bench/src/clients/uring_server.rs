//! The bare tick-batched io_uring server: no game. One ring created with
//! SINGLE_ISSUER and DEFER_TASKRUN; every accepted socket has one multishot
//! receive into a provided buffer ring (the bytes are discarded and the
//! buffer given back at once). Each poll (every `poll_ms`) accepts new
//! connections and makes ONE `io_uring_enter` that submits everything
//! queued and asks for a very large minimum of completions with a zero
//! timeout, so the kernel runs every pending receive in that one call
//! (MACHINE.md: a small minimum ran about 120 of 1,000). Every tick one
//! send of `bytes_per_tick` per client is queued, all in the same submission.
//!
//! Owns the ring, the buffer ring and the accepted sockets; prints `ready`
//! then a `stat` line a second.

use std::io::ErrorKind;
use std::net::{TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use io_uring::types::{Fd, SubmitArgs, Timespec};
use io_uring::{cqueue, opcode, squeue, IoUring};
use serde_json::json;
use tessera::runtime::buf_ring::{BufRing, BufRingError};

use super::epoll_server::BarePlan;
use super::stand_in::{OwnBuffers, WorkingSet};
use super::sys;
use super::BareStats;

/// Buffers in the provided ring (a power of two; every pending receive of
/// one poll may hold one).
pub const RING_BUFS: u16 = 16_384;
/// Bytes per provided buffer (a move is 52 bytes; a longer read spans
/// several buffers).
pub const BUF_BYTES: usize = 512;
/// Submission queue entries.
pub const SQ_ENTRIES: u32 = 16_384;
/// Completion queue entries.
pub const CQ_ENTRIES: u32 = 65_536;
/// The buffer group id of the ring.
const BGID: u16 = 0;
const RECV: u64 = 1 << 32;
const SEND: u64 = 2 << 32;
/// "Wait for this many completions" with a zero timeout: run all task work.
const WANT_ALL: usize = 1 << 20;

/// Why the io_uring server could not start.
#[derive(Debug, thiserror::Error)]
pub enum UringError {
    /// The kernel (or a seccomp profile) refused the ring or its features.
    #[error(
        "io_uring with SINGLE_ISSUER + DEFER_TASKRUN (kernel >= 6.1, io_uring not blocked \
         by seccomp) is not available: {0}"
    )]
    Setup(std::io::Error),
    /// The provided buffer ring could not be mapped or registered (kernel >= 5.19).
    #[error("provided buffer ring: {0}")]
    BufRing(#[from] BufRingError),
}

/// The server's state; [`UringServer::poll`] is one round of the loop.
pub struct UringServer {
    // Field order matters: the ring is dropped (and closed) before the
    // buffers it may write into.
    ring: IoUring,
    bufs: BufRing,
    listener: TcpListener,
    conns: Vec<Option<TcpStream>>,
    out: Vec<u8>,
    working_set: WorkingSet,
    own: OwnBuffers,
    cqes: Vec<(u64, i32, u32)>,
    plan: BarePlan,
    /// What it did so far.
    pub stats: BareStats,
}

impl UringServer {
    /// Binds `127.0.0.1:0` and sets up the ring.
    ///
    /// # Errors
    /// [`UringError`] (in the `anyhow` chain) if the kernel refuses the
    /// ring's features; bind errors.
    pub fn new(plan: BarePlan) -> anyhow::Result<UringServer> {
        let ring = IoUring::builder()
            .setup_single_issuer()
            .setup_defer_taskrun()
            .setup_cqsize(CQ_ENTRIES)
            .build(SQ_ENTRIES)
            .map_err(UringError::Setup)?;
        let bufs = BufRing::new(&ring, RING_BUFS, BUF_BYTES, BGID).map_err(UringError::from)?;
        let listener = TcpListener::bind("127.0.0.1:0")?;
        listener.set_nonblocking(true)?;
        Ok(UringServer {
            ring,
            bufs,
            listener,
            conns: Vec::with_capacity(plan.clients),
            out: vec![0x5a; plan.bytes_per_tick],
            working_set: WorkingSet::new(plan.touch_bytes),
            own: OwnBuffers::new(plan.own_buffers, plan.bytes_per_tick),
            cqes: Vec::with_capacity(CQ_ENTRIES as usize),
            plan,
            stats: BareStats::default(),
        })
    }

    /// Where clients connect.
    ///
    /// # Errors
    /// If the socket has no address.
    pub fn addr(&self) -> std::io::Result<std::net::SocketAddr> {
        self.listener.local_addr()
    }

    fn push(&mut self, e: &squeue::Entry) -> std::io::Result<()> {
        loop {
            // SAFETY: every buffer an entry refers to (`self.out` or a
            // client's own buffer, which never moves, for sends; the
            // provided ring for receives) lives as long as `self`, and
            // the ring is dropped first.
            if unsafe { self.ring.submission().push(e) }.is_ok() {
                return Ok(());
            }
            self.ring.submit()?;
        }
    }

    fn arm_recv(&mut self, i: usize, fd: i32) -> std::io::Result<()> {
        let e = opcode::RecvMulti::new(Fd(fd), BGID)
            .build()
            .user_data(RECV | i as u64);
        self.push(&e)
    }

    /// One round: accept, queue the tick's sends if `tick`, one enter that
    /// submits and reaps everything, then handle the completions.
    ///
    /// # Errors
    /// If the ring fails.
    pub fn poll(&mut self, tick: bool) -> std::io::Result<()> {
        self.stats.polls += 1;
        self.working_set.walk();
        loop {
            match self.listener.accept() {
                Ok((s, _)) => {
                    if self.conns.len() >= self.plan.clients {
                        self.stats.refused += 1;
                        continue;
                    }
                    let (i, fd) = (self.conns.len(), s.as_raw_fd());
                    self.conns.push(Some(s));
                    self.arm_recv(i, fd)?;
                    self.stats.clients += 1;
                    self.stats.accepted += 1;
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                // WouldBlock, or out of files / reset before accept: next poll.
                Err(_) => break,
            }
        }
        if tick {
            let round = self.stats.ticks;
            self.stats.ticks += 1;
            let (ptr, len) = (self.out.as_ptr(), self.out.len() as u32);
            for i in 0..self.conns.len() {
                let Some(fd) = self.conns[i].as_ref().map(|s| s.as_raw_fd()) else {
                    continue;
                };
                if !self.plan.writes(i, round) {
                    continue;
                }
                let ptr = if self.own.on() {
                    self.own.fill(i, self.stats.ticks).as_ptr()
                } else {
                    ptr
                };
                let e = opcode::Send::new(Fd(fd), ptr, len)
                    .build()
                    .user_data(SEND | i as u64);
                self.push(&e)?;
            }
        }
        let ts = Timespec::new();
        let args = SubmitArgs::new().timespec(&ts);
        match self.ring.submitter().submit_with_args(WANT_ALL, &args) {
            Ok(_) => {}
            Err(e) if e.raw_os_error() == Some(libc::ETIME) => {}
            Err(e) if e.raw_os_error() == Some(libc::EINTR) => {}
            Err(e) => return Err(e),
        }
        self.cqes.clear();
        self.cqes.extend(
            self.ring
                .completion()
                .map(|c| (c.user_data(), c.result(), c.flags())),
        );
        let cqes = std::mem::take(&mut self.cqes);
        for &(ud, res, flags) in &cqes {
            self.complete(ud, res, flags)?;
        }
        self.cqes = cqes;
        Ok(())
    }

    fn complete(&mut self, ud: u64, res: i32, flags: u32) -> std::io::Result<()> {
        let i = (ud & 0xffff_ffff) as usize;
        if ud & SEND != 0 {
            if res >= 0 {
                self.stats.bytes_out += res as u64;
            }
            if res < self.out.len() as i32 {
                self.stats.short_sends += 1;
            }
            return Ok(());
        }
        if let Some(bid) = cqueue::buffer_select(flags) {
            self.bufs.give_back(bid);
        }
        let more = cqueue::more(flags);
        match res {
            n if n > 0 => {
                self.stats.bytes_in += n as u64;
                self.stats.reads += 1;
            }
            n if n == -libc::ENOBUFS => self.stats.no_buffers += 1,
            _ => {
                // End of stream or an error: the receive is over; close.
                if let Some(s) = self.conns.get_mut(i).and_then(Option::take) {
                    drop(s);
                    self.stats.clients -= 1;
                    self.stats.closed += 1;
                }
                return Ok(());
            }
        }
        if !more {
            if let Some(fd) = self
                .conns
                .get(i)
                .and_then(|s| s.as_ref())
                .map(|s| s.as_raw_fd())
            {
                self.arm_recv(i, fd)?;
            }
        }
        Ok(())
    }
}

/// Runs the server until the process is killed.
///
/// # Errors
/// If the ring cannot be set up or fails, or the file limit cannot be raised.
pub fn run(plan: &BarePlan) -> anyhow::Result<()> {
    sys::raise_nofile(sys::files_for(plan.clients))?;
    let mut server = UringServer::new(*plan)?;
    sys::emit("ready", &json!({"addr": server.addr()?.to_string()}));
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
        let now = Instant::now();
        let tick = now >= next_tick;
        if tick {
            let late = (now - next_tick).as_nanos() / tick_every.as_nanos();
            server.stats.ticks_lost += late as u64;
            next_tick += tick_every * (late as u32 + 1);
        }
        server.poll(tick)?;
        if now >= next_stat {
            next_stat += Duration::from_secs(1);
            sys::emit("stat", &json!(server.stats));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::net::TcpStream;

    /// A server on `plan` with `n` clients connected and accepted.
    fn serving(plan: BarePlan, n: u64) -> (UringServer, Vec<TcpStream>) {
        let mut srv = UringServer::new(plan).unwrap();
        let addr = srv.addr().unwrap();
        let clients: Vec<_> = (0..n).map(|_| TcpStream::connect(addr).unwrap()).collect();
        for _ in 0..50 {
            srv.poll(false).unwrap();
            if srv.stats.clients == n {
                break;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        assert_eq!(srv.stats.clients, n);
        (srv, clients)
    }

    /// Exercises the unsafe parts: the buffer ring is filled, registered,
    /// consumed by multishot receives and refilled many times over (more
    /// receives than buffers), and sends come from the shared buffer.
    #[test]
    fn receives_recycle_the_buffer_ring_and_ticks_send_to_every_client() {
        let plan = BarePlan {
            clients: 4,
            poll_ms: 1,
            tick_ms: 1,
            bytes_per_tick: 100,
            touch_bytes: 0,
            own_buffers: false,
            phases: 1,
        };
        let (mut srv, mut clients) = serving(plan, 3);
        let rounds = usize::from(RING_BUFS) / 3 + 100;
        let mut sent = 0u64;
        for _ in 0..rounds {
            for c in &mut clients {
                c.write_all(&[7u8; 52]).unwrap();
                sent += 52;
            }
            srv.poll(false).unwrap();
        }
        for _ in 0..200 {
            if srv.stats.bytes_in == sent {
                break;
            }
            srv.poll(false).unwrap();
            std::thread::sleep(Duration::from_millis(1));
        }
        assert_eq!(srv.stats.bytes_in, sent);
        assert!(
            srv.stats.reads > u64::from(RING_BUFS),
            "the ring went round"
        );
        srv.poll(true).unwrap();
        for _ in 0..100 {
            if srv.stats.bytes_out == 300 {
                break;
            }
            srv.poll(false).unwrap();
        }
        let mut got = [0u8; 100];
        for c in &mut clients {
            c.read_exact(&mut got).unwrap();
            assert_eq!(got, [0x5a; 100]);
        }
        drop(clients.pop());
        for _ in 0..100 {
            srv.poll(false).unwrap();
            if srv.stats.closed == 1 {
                break;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        assert_eq!((srv.stats.closed, srv.stats.clients), (1, 2));
    }

    /// The experiment knobs: each client's own buffer (the unsafe send
    /// path from a buffer per client) and two phases: a tick writes half
    /// the clients, the next the other half, each from its own buffer.
    #[test]
    fn own_buffers_and_phases_write_each_client_once_per_period() {
        let plan = BarePlan {
            clients: 4,
            poll_ms: 1,
            tick_ms: 2,
            bytes_per_tick: 100,
            touch_bytes: 64 * 1024,
            own_buffers: true,
            phases: 2,
        };
        assert_eq!(plan.write_every(), Duration::from_millis(1));
        let (mut srv, mut clients) = serving(plan, 4);
        let mut got = [0u8; 100];
        for (round, byte) in [(0usize, 1u8), (1, 2)] {
            let before = srv.stats.bytes_out;
            srv.poll(true).unwrap();
            for _ in 0..100 {
                if srv.stats.bytes_out == before + 200 {
                    break;
                }
                srv.poll(false).unwrap();
            }
            assert_eq!(srv.stats.bytes_out, before + 200, "half the clients a tick");
            for (i, c) in clients.iter_mut().enumerate() {
                if i % 2 == round {
                    c.read_exact(&mut got).unwrap();
                    assert_eq!(
                        got, [byte; 100],
                        "client {i}: its own buffer of tick {byte}"
                    );
                } else {
                    c.set_nonblocking(true).unwrap();
                    let e = c.read(&mut got).expect_err("not this tick's");
                    assert_eq!(e.kind(), ErrorKind::WouldBlock, "client {i}");
                    c.set_nonblocking(false).unwrap();
                }
            }
        }
    }
}
