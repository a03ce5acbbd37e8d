//! One bot thread's I/O: a single batched loop over all of its bots'
//! sockets, with no task, future or waker per bot.
//!
//! Owns the thread's sockets (one `mio` epoll set), its read buffer, the
//! schedule of due bot ticks, the ramp and the once-a-second report to the
//! main thread. Each round it:
//! 1. waits for readiness, at most until the next due tick, ramp slot or
//!    report (one `epoll_wait`, and more with no timeout while one comes
//!    back full: every ready socket is taken, see [`wait_all`]);
//! 2. drains every readable socket into its bot's session
//!    ([`Bot::on_bytes`]; reads until the socket is empty);
//! 3. connects the bots whose ramp slot has come;
//! 4. runs every bot whose tick is due ([`Bot::on_tick`]);
//! 5. writes each bot's queued output with one `send` (a partial write
//!    keeps the rest for the next round, after the socket says writable);
//! 6. closes the sockets of bots that ended, and reports if a second
//!    passed.
//!
//! Must not know the game: what a bot does is [`crate::bot`]'s.
//!
//! # Limits
//! - One read buffer of `Plan::read_bytes` per thread; at most
//!   `Plan::events_max` readiness events per wait (a bound on the buffer,
//!   not on the sockets a round serves).
//! - The schedule's bounds are [`crate::seats`]'.

use std::io::{self, Read, Write};
use std::sync::mpsc::Sender;
use std::time::Duration;

use mio::net::TcpStream;
use mio::{Events, Interest, Poll, Token};
use tessera::core::time::Time;

use crate::bot::{Bot, Phase};
use crate::driver::{Report, ThreadCtx};
use crate::seats::{report_due, Marks, Seat, Seats, REPORT_PERIOD};

/// Why a bot thread's loop stopped early.
#[derive(Debug, thiserror::Error)]
pub enum LoopError {
    /// The epoll set could not be created or waited on.
    #[error("bot thread {thread}: polling: {source}")]
    Poll {
        /// The thread.
        thread: usize,
        /// The OS error.
        source: io::Error,
    },
}

/// One bot and its socket.
struct Conn {
    stream: TcpStream,
    bot: Bot,
    /// The socket finished connecting (a writable event came).
    connected: bool,
    /// The last write would have blocked: wait for a writable event.
    blocked: bool,
    marks: Marks,
}

impl Seat for Conn {
    fn bot(&self) -> &Bot {
        &self.bot
    }

    fn bot_mut(&mut self) -> &mut Bot {
        &mut self.bot
    }

    fn marks(&mut self) -> &mut Marks {
        &mut self.marks
    }

    fn can_send(&self) -> bool {
        self.connected && !self.blocked
    }
}

/// Runs thread `thread`'s share of the bots (bot `i` where `i % threads ==
/// thread`) to the end of the run, sending a [`Report`] per second and a
/// last one when every bot has ended.
///
/// # Errors
/// If the epoll set cannot be created or waited on.
pub fn run(thread: usize, mut ctx: ThreadCtx, tx: Sender<Report>) -> Result<(), LoopError> {
    let plan = ctx.plan.clone();
    let mut bots: Seats<Conn> = Seats::new(&plan, thread);
    let n = bots.ids.len();
    let mut poll = Poll::new().map_err(|source| LoopError::Poll { thread, source })?;
    let mut events = Events::with_capacity(plan.events_max.max(1));
    let mut scratch = vec![0u8; plan.read_bytes.max(1)];
    let mut running = n;
    let mut next_report = ctx.clock.now() + REPORT_PERIOD;
    loop {
        let now = ctx.clock.now();
        let mut wake = next_report;
        if let Some(t) = bots.next_connect_at(&plan) {
            wake = wake.min(t);
        }
        if let Some(t) = bots.next_due() {
            wake = wake.min(t);
        }
        let timeout = wake.saturating_since(now);
        wait_all(&mut poll, &mut events, timeout, |events| {
            let now = ctx.clock.now();
            for ev in events.iter() {
                let slot = ev.token().0;
                if ev.is_writable() {
                    if let Some(c) = bots.slots[slot].as_mut() {
                        writable(c, &mut ctx);
                    }
                }
                if ev.is_readable() || ev.is_read_closed() || ev.is_error() {
                    if let Some(c) = bots.slots[slot].as_mut() {
                        let closed = ev.is_read_closed() || ev.is_error();
                        drain(c, &mut ctx, now, &mut scratch, closed);
                    }
                }
                bots.after(slot);
            }
        })
        .map_err(|source| LoopError::Poll { thread, source })?;
        let now = ctx.clock.now();
        while let Some(at) = bots.next_connect_at(&plan) {
            if at > now {
                break;
            }
            let slot = bots.next_connect;
            bots.next_connect += 1;
            match connect(&poll, &ctx, bots.ids[slot], slot, now) {
                Some(c) => {
                    bots.slots[slot] = Some(c);
                    bots.after(slot);
                }
                None => {
                    ctx.interval.counters.connect_failures += 1;
                    running -= 1;
                }
            }
        }
        bots.tick_due(&mut ctx, now);
        // One send per bot; one interrupted by a signal is queued again
        // (past `sends`) for the next round.
        let sends = bots.dirty.len();
        for k in 0..sends {
            let slot = bots.dirty[k];
            if let Some(c) = bots.slots[slot].as_mut() {
                c.marks.queued = false;
                send(c, &mut ctx, now);
            }
            bots.after(slot);
        }
        bots.dirty.drain(..sends);
        for k in 0..bots.ended.len() {
            let slot = bots.ended[k];
            if let Some(mut c) = bots.slots[slot].take() {
                let _ = poll.registry().deregister(&mut c.stream);
                running -= 1;
            }
        }
        bots.ended.clear();
        let done = running == 0 && bots.next_connect == n;
        if report_due(&tx, &mut ctx, (thread, now), &mut next_report, done) {
            return Ok(());
        }
    }
}

/// Waits at most `timeout` for readiness, hands each batch of events to
/// `batch`, and while a wait comes back full (`events`' capacity, the
/// `--events-max` bound) waits again with a zero timeout: the round takes
/// every socket that is ready, not the first `--events-max` of them.
///
/// epoll's ready list is first in, first out: with one wait a round and
/// more ready sockets than the bound, a socket waited behind all the
/// others, one round each (at 10,000 bots and 1,024 events a wait, about
/// ten rounds), while its bytes queued up unread, and the update latency
/// loadgen measured was mostly that queue.
///
/// # Errors
/// If a wait fails (other than by a signal).
fn wait_all(
    poll: &mut Poll,
    events: &mut Events,
    timeout: Duration,
    mut batch: impl FnMut(&Events),
) -> io::Result<()> {
    let mut timeout = Some(timeout);
    loop {
        match poll.poll(events, timeout) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => return Ok(()),
            Err(e) => return Err(e),
        }
        batch(events);
        if events.iter().count() < events.capacity() {
            return Ok(());
        }
        timeout = Some(Duration::ZERO);
    }
}

/// Opens bot `i`'s socket (non-blocking; the connection completes later)
/// in `slot`, with its Hello and Login queued.
fn connect(poll: &Poll, ctx: &ThreadCtx, i: u32, slot: usize, now: Time) -> Option<Conn> {
    let mut stream = TcpStream::connect(ctx.plan.addr).ok()?;
    stream.set_nodelay(true).ok()?;
    poll.registry()
        .register(
            &mut stream,
            Token(slot),
            Interest::READABLE | Interest::WRITABLE,
        )
        .ok()?;
    let bot = Bot::new(ctx, i, now).ok()?;
    Some(Conn {
        stream,
        bot,
        connected: false,
        blocked: false,
        marks: Marks::default(),
    })
}

/// A writable event: the connection is up (or failed), writes may go on.
fn writable(c: &mut Conn, ctx: &mut ThreadCtx) {
    if !c.connected {
        match c.stream.take_error() {
            Ok(None) => {}
            Ok(Some(_)) | Err(_) => return c.bot.connect_failed(ctx),
        }
        match c.stream.peer_addr() {
            Ok(_) => c.connected = true,
            Err(e) if e.kind() == io::ErrorKind::NotConnected => return,
            Err(_) => return c.bot.connect_failed(ctx),
        }
    }
    c.blocked = false;
}

/// Reads everything the socket holds into the bot's session; `closed`: the
/// event said the peer closed (or the socket failed).
fn drain(c: &mut Conn, ctx: &mut ThreadCtx, now: Time, scratch: &mut [u8], closed: bool) {
    if c.bot.phase() == Phase::Done {
        return;
    }
    let Conn {
        stream,
        bot,
        connected,
        ..
    } = c;
    let end = read_burst(stream, scratch, closed, |bytes| {
        *connected = true;
        bot.on_bytes(ctx, now, bytes);
        bot.phase() != Phase::Done
    });
    match (end, c.connected) {
        (Burst::Drained, _) => {}
        (Burst::Eof, true) => c.bot.on_eof(ctx, now),
        (Burst::Failed, true) => c.bot.io_error(ctx, now),
        (Burst::Eof | Burst::Failed, false) => c.bot.connect_failed(ctx),
    }
}

/// How a [`read_burst`] ended.
#[derive(Debug, PartialEq, Eq)]
enum Burst {
    /// Nothing more to read until the next edge (or the caller stopped).
    Drained,
    /// End of stream.
    Eof,
    /// The read failed.
    Failed,
}

/// Reads `stream` into `scratch` until it is drained, passing each read's
/// bytes to `bytes` (which returns false to stop). A read short of the
/// buffer emptied the receive queue, and epoll reports the next bytes as
/// a new edge: that saves the read that would only say WouldBlock. Not so
/// once the peer closed (`closed`, the event's RDHUP): its FIN may have
/// come in with the last bytes, and then the short read returns them and
/// consumes the FIN, no edge follows, and only a further read says EOF;
/// so then it reads on until EOF or WouldBlock.
fn read_burst(
    stream: &mut impl Read,
    scratch: &mut [u8],
    closed: bool,
    mut bytes: impl FnMut(&[u8]) -> bool,
) -> Burst {
    loop {
        match stream.read(scratch) {
            Ok(0) => return Burst::Eof,
            Ok(got) => {
                if !bytes(&scratch[..got]) || (got < scratch.len() && !closed) {
                    return Burst::Drained;
                }
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Burst::Drained,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return Burst::Failed,
        }
    }
}

/// One `send` of what the bot queued.
fn send(c: &mut Conn, ctx: &mut ThreadCtx, now: Time) {
    if !c.connected || c.blocked || c.bot.phase() == Phase::Done {
        return;
    }
    let out = c.bot.transmit();
    if out.is_empty() {
        return;
    }
    match c.stream.write(out) {
        Ok(0) => c.bot.io_error(ctx, now),
        Ok(n) => {
            c.bot.wrote(ctx, n);
            if !c.bot.transmit().is_empty() {
                // Partial: the socket buffer is full until it says writable.
                c.blocked = true;
            }
        }
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => c.blocked = true,
        Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
        Err(_) => c.bot.io_error(ctx, now),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Shutdown;

    /// The server's last bytes and its FIN both queued before the bot's
    /// poll (a server that sends its goodbye's answer, then shuts its write
    /// side, while the bot thread is busy): one edge, with RDHUP. The burst
    /// must reach the EOF; stopping at the short read that returned the
    /// bytes (it consumed the FIN) left the bot waiting for an edge that
    /// never comes (`bye-unanswered` at the end of saturated runs).
    #[test]
    fn a_fin_queued_behind_the_last_bytes_is_read_as_eof() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().expect("addr");
        let std_client = std::net::TcpStream::connect(addr).expect("connect");
        std_client.set_nonblocking(true).expect("nonblocking");
        let mut client = TcpStream::from_std(std_client);
        let (mut server, _) = listener.accept().expect("accept");
        let mut poll = Poll::new().expect("poll");
        poll.registry()
            .register(&mut client, Token(0), Interest::READABLE)
            .expect("register");
        let mut events = Events::with_capacity(4);
        server.write_all(b"answer").expect("write");
        server.shutdown(Shutdown::Write).expect("FIN");
        std::thread::sleep(Duration::from_millis(50));
        poll.poll(&mut events, Some(Duration::from_secs(5)))
            .expect("poll");
        let ev = events.iter().next().expect("one edge");
        assert!(ev.is_readable() && ev.is_read_closed(), "{ev:?}");
        let mut scratch = [0u8; 4096];
        let mut got = Vec::new();
        let end = read_burst(&mut client, &mut scratch, ev.is_read_closed(), |b| {
            got.extend_from_slice(b);
            true
        });
        assert_eq!(got, b"answer");
        assert_eq!(end, Burst::Eof, "the FIN is read as EOF in the same burst");
        // No edge follows: had the burst stopped at the short read, the bot
        // would never have learnt of the EOF.
        poll.poll(&mut events, Some(Duration::from_millis(100)))
            .expect("poll");
        assert!(events.is_empty(), "no further edge");
    }

    /// Three sockets ready and room for one event a wait: one round still
    /// takes all three (a wait that comes back full is followed by another
    /// with no timeout). With one wait a round, each socket waited a round
    /// per socket ahead of it, and at 10,000 bots its bytes queued for
    /// 0.4 s.
    #[test]
    fn a_round_takes_every_ready_socket_past_the_events_bound() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().expect("addr");
        let mut poll = Poll::new().expect("poll");
        let mut pairs = Vec::new();
        for k in 0..3 {
            let c = std::net::TcpStream::connect(addr).expect("connect");
            c.set_nonblocking(true).expect("nonblocking");
            let mut c = TcpStream::from_std(c);
            poll.registry()
                .register(&mut c, Token(k), Interest::READABLE)
                .expect("register");
            let (mut s, _) = listener.accept().expect("accept");
            s.write_all(b"x").expect("write");
            pairs.push((c, s));
        }
        std::thread::sleep(Duration::from_millis(50));
        let mut events = Events::with_capacity(1);
        let (mut seen, mut batches) = (Vec::new(), 0);
        wait_all(&mut poll, &mut events, Duration::from_secs(5), |evs| {
            batches += 1;
            seen.extend(evs.iter().map(|e| e.token().0));
        })
        .expect("wait");
        seen.sort_unstable();
        assert_eq!(seen, [0, 1, 2], "every ready socket in one round");
        assert_eq!(
            batches, 4,
            "three full waits, then one that came back short"
        );
    }

    #[test]
    fn a_short_read_of_an_open_socket_ends_the_burst_without_another_read() {
        struct Once(Vec<u8>, usize);
        impl Read for Once {
            fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
                self.1 += 1;
                assert_eq!(self.1, 1, "one read only");
                let n = self.0.len().min(buf.len());
                buf[..n].copy_from_slice(&self.0[..n]);
                Ok(n)
            }
        }
        let mut s = Once(b"abc".to_vec(), 0);
        let mut scratch = [0u8; 16];
        assert_eq!(
            read_burst(&mut s, &mut scratch, false, |_| true),
            Burst::Drained
        );
    }
}
