//! One bot thread's I/O on io_uring (`--io io-uring`, and `auto`'s choice
//! where the kernel gives it): the
//! rounds of the epoll loop ([`crate::event_loop`]) with every socket
//! operation a submission to one ring, the batched I/O of the server's
//! client port (`tessera::runtime`'s io_uring gateway).
//!
//! # Why
//! At 10,000 bots on one core the epoll loop pays a `send` syscall per
//! move and a `recv` per arrival (with an `epoll_wait` per thousand
//! sockets). Reading every socket as soon as it is ready costs a tenth
//! of its core in `recv` alone, which it does not have; reading late
//! instead left 0.4 s of updates queued per bot, and that queue was most
//! of the update latency it measured. Here one enter a round submits every
//! send and runs every pending receive.
//!
//! # The ring
//! One ring per bot thread, created on it with SINGLE_ISSUER and
//! DEFER_TASKRUN (Linux >= 6.1): the kernel runs a socket's receive work
//! only when this thread enters the ring. A connect is the plain
//! non-blocking connect and a poll for writability; once up, the socket is
//! made blocking (the ring then waits for room or bytes itself) and gets
//! one multishot receive into a provided buffer ring (Linux >= 5.19) of
//! `--uring-buffers` buffers of `--uring-buffer-bytes`. A send is one
//! submission of a copy of the bot's queued bytes (the bot may queue more
//! while it is in flight); at most one is in flight per bot.
//!
//! # One round
//! 1. One enter submits what the last round queued, sleeps until the next
//!    due tick, ramp slot or report (rounded up to whole milliseconds) but
//!    at most [`WAIT_MAX`], and runs the receive work of every socket that
//!    has bytes: it asks for more completions than can come, so it returns
//!    at its timeout (under DEFER_TASKRUN an enter that waits for one
//!    completion runs at most 20 sockets' receive work, and a second enter
//!    a round to run the rest cost 1.4 x the epoll loop's CPU per bot at
//!    1,000 bots; the server's `MACHINE.md`: a small minimum ran a
//!    fraction of 1,000 pending receives). A byte that arrives mid-round
//!    waits at most [`WAIT_MAX`] to be read.
//! 2. Every completion: bytes to their bot ([`Bot::on_bytes`]), a send's
//!    bytes marked written, a connect finished.
//! 3. The bots whose ramp slot came connect; the due bots tick; every bot
//!    with output gets a send queued; the bots that ended have what is in
//!    flight cancelled.
//! 4. A report if a second passed.
//!
//! # Ending a bot
//! Its receive (and a send or connect in flight) is cancelled; its socket
//! closes, and its seat empties, once their last completions are in, so
//! the ring never names a closed socket.
//!
//! Must not know the game: what a bot does is [`crate::bot`]'s.
//!
//! # Limits
//! - `--uring-buffers` x `--uring-buffer-bytes` of receive buffers per
//!   thread; a multishot receive that finds none ends and is armed again
//!   the next round.
//! - A submission queue of [`SQ_ENTRIES`] (submitted early when full); a
//!   completion queue with room for every buffer and four completions per
//!   bot (a receive's end, a send, a connect, a cancel), rounded up to a
//!   power of two, at most the kernel's 65,536.
//! - The schedule's bounds are [`crate::seats`]'.

use std::io;
use std::mem::ManuallyDrop;
use std::os::fd::AsRawFd;
use std::sync::mpsc::Sender;
use std::time::Duration;

use io_uring::types::{Fd, SubmitArgs, Timespec};
use io_uring::{cqueue, opcode, squeue, IoUring};
use mio::net::TcpStream;
use tessera::core::time::Time;
use tessera::runtime::buf_ring::BufRing;

use crate::bot::{Bot, Phase};
use crate::driver::{Plan, Report, ThreadCtx};
use crate::seats::{report_due, Marks, Seat, Seats, REPORT_PERIOD};

/// The buffer group of the provided buffer ring.
const BGID: u16 = 0;
/// The operation kind in a completion's user data (the low 32 bits are the
/// seat).
const CANCEL: u64 = 0;
const RECV: u64 = 1 << 62;
const SEND: u64 = 2 << 62;
const CONNECT: u64 = 3 << 62;
const KIND: u64 = 3 << 62;
/// "Wait for this many completions" with a zero timeout: the kernel runs
/// all pending receive work in the one enter, then returns.
const WANT_ALL: usize = 1 << 20;
/// The longest a round sleeps in its enter: what a receive may wait
/// before its bot reads it, when no tick is due sooner.
const WAIT_MAX: Duration = Duration::from_millis(1);
/// The submission queue's entries.
pub const SQ_ENTRIES: u32 = 4096;
/// The kernel's most completion queue entries (`IORING_MAX_CQ_ENTRIES`).
const CQ_ENTRIES_MAX: u32 = 65_536;

/// Why a bot thread's io_uring loop stopped.
#[derive(Debug, thiserror::Error)]
pub enum UringLoopError {
    /// The kernel refused the ring or its buffers.
    #[error(
        "bot thread {thread}: --io io-uring: {feature} is not available ({source}); it needs \
         Linux >= 6.1 with io_uring allowed (container seccomp profiles, Docker's default \
         among them, block io_uring_setup/io_uring_enter/io_uring_register); or run with \
         --io epoll"
    )]
    Setup {
        /// The thread.
        thread: usize,
        /// What was refused.
        feature: &'static str,
        /// What the kernel said.
        source: io::Error,
    },
    /// An enter failed.
    #[error("bot thread {thread}: io_uring_enter: {source}")]
    Enter {
        /// The thread.
        thread: usize,
        /// The OS error.
        source: io::Error,
    },
}

/// One bot, its socket and what of it is in flight.
struct Conn {
    stream: TcpStream,
    bot: Bot,
    marks: Marks,
    /// The connection is up (its poll said writable, with no error).
    connected: bool,
    /// The connect's poll is in flight.
    connecting: bool,
    /// A multishot receive is armed (until a completion without MORE).
    recv_armed: bool,
    /// Its cancel was queued.
    recv_cancelled: bool,
    /// A send of `out` is in flight.
    sending: bool,
    /// The bytes of the send in flight (a copy: the bot may queue more,
    /// moving its buffer, meanwhile).
    out: Vec<u8>,
    /// The bot ended: the socket closes once nothing is in flight.
    ending: bool,
}

impl Conn {
    fn busy(&self) -> bool {
        self.connecting || self.recv_armed || self.sending
    }
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
        self.connected && !self.sending && !self.ending
    }
}

/// The thread's ring, buffers and bots.
struct Loop {
    /// Dropped first, by hand (see Drop): then nothing reads or writes the
    /// buffers below any more.
    ring: ManuallyDrop<IoUring>,
    bufs: ManuallyDrop<BufRing>,
    bots: Seats<Conn>,
    /// The completions of one round (kept for its capacity).
    cqes: Vec<(u64, i32, u32)>,
    /// Seats whose receive ended for want of buffers: armed again this
    /// round, once the buffers are back.
    rearm: Vec<usize>,
    /// Bots whose socket is not closed yet (or not yet opened).
    running: usize,
    /// A submit failed for good (the loop stops with it).
    failed: Option<io::Error>,
}

/// Runs thread `thread`'s share of the bots (bot `i` where `i % threads ==
/// thread`) to the end of the run, sending a [`Report`] per second and a
/// last one when every bot has ended.
///
/// # Errors
/// If the kernel refuses the ring or its buffers, or an enter fails.
pub fn run(thread: usize, mut ctx: ThreadCtx, tx: Sender<Report>) -> Result<(), UringLoopError> {
    let plan = ctx.plan.clone();
    let mut lp = Loop::new(&plan, thread)?;
    let n = lp.bots.ids.len();
    let mut next_report = ctx.clock.now() + REPORT_PERIOD;
    loop {
        let now = ctx.clock.now();
        let mut wake = next_report;
        if let Some(t) = lp.bots.next_connect_at(&plan) {
            wake = wake.min(t);
        }
        if let Some(t) = lp.bots.next_due() {
            wake = wake.min(t);
        }
        if let Some(source) = lp.failed.take() {
            return Err(UringLoopError::Enter { thread, source });
        }
        lp.enter(wake.saturating_since(now))
            .map_err(|source| UringLoopError::Enter { thread, source })?;
        let now = ctx.clock.now();
        lp.reap(&mut ctx, now);
        while let Some(at) = lp.bots.next_connect_at(&plan) {
            if at > now {
                break;
            }
            let slot = lp.bots.next_connect;
            lp.bots.next_connect += 1;
            lp.connect(&mut ctx, slot, now);
        }
        lp.bots.tick_due(&mut ctx, now);
        for k in 0..lp.bots.dirty.len() {
            let slot = lp.bots.dirty[k];
            lp.send(slot);
        }
        lp.bots.dirty.clear();
        for k in 0..lp.rearm.len() {
            let slot = lp.rearm[k];
            lp.arm_recv(slot);
        }
        lp.rearm.clear();
        for k in 0..lp.bots.ended.len() {
            let slot = lp.bots.ended[k];
            lp.end(slot);
        }
        lp.bots.ended.clear();
        let done = lp.running == 0 && lp.bots.next_connect == n;
        if report_due(&tx, &mut ctx, (thread, now), &mut next_report, done) {
            return Ok(());
        }
    }
}

/// The completion queue's size for `bots` bots and `buffers` receive
/// buffers (see the module doc's limits).
fn cq_entries(bots: usize, buffers: u16) -> u32 {
    let want = (bots as u64)
        .saturating_mul(4)
        .saturating_add(u64::from(buffers) + u64::from(SQ_ENTRIES));
    want.checked_next_power_of_two()
        .and_then(|n| u32::try_from(n).ok())
        .unwrap_or(CQ_ENTRIES_MAX)
        .clamp(2 * SQ_ENTRIES, CQ_ENTRIES_MAX)
}

/// Checks, on the calling thread, that this kernel gives the loop its
/// ring (SINGLE_ISSUER, DEFER_TASKRUN) and a provided buffer ring of
/// `buffers` x `buffer_bytes`; then lets both go.
///
/// # Errors
/// [`UringLoopError::Setup`] (thread 0) naming what was refused.
pub fn probe(buffers: u16, buffer_bytes: u32) -> Result<(), UringLoopError> {
    let (ring, bufs) = ring_and_buffers(0, 1, buffers, buffer_bytes)?;
    // The ring first: then nothing refers to the buffers.
    drop(ring);
    drop(bufs);
    Ok(())
}

/// A bot thread's ring for `bots` bots, and its buffer ring (drop the
/// ring first).
fn ring_and_buffers(
    thread: usize,
    bots: usize,
    buffers: u16,
    buffer_bytes: u32,
) -> Result<(IoUring, BufRing), UringLoopError> {
    let ring = IoUring::builder()
        .setup_single_issuer()
        .setup_defer_taskrun()
        .setup_cqsize(cq_entries(bots, buffers))
        .build(SQ_ENTRIES)
        .map_err(|source| UringLoopError::Setup {
            thread,
            feature: "io_uring_setup with SINGLE_ISSUER and DEFER_TASKRUN",
            source,
        })?;
    let bufs = BufRing::new(&ring, buffers, buffer_bytes as usize, BGID).map_err(|e| {
        UringLoopError::Setup {
            thread,
            feature: e.feature,
            source: e.source,
        }
    })?;
    Ok((ring, bufs))
}

impl Loop {
    fn new(plan: &Plan, thread: usize) -> Result<Loop, UringLoopError> {
        let bots: Seats<Conn> = Seats::new(plan, thread);
        let n = bots.ids.len();
        let (ring, bufs) =
            ring_and_buffers(thread, n, plan.uring_buffers, plan.uring_buffer_bytes)?;
        Ok(Loop {
            ring: ManuallyDrop::new(ring),
            bufs: ManuallyDrop::new(bufs),
            bots,
            cqes: Vec::with_capacity(2 * SQ_ENTRIES as usize),
            rearm: Vec::with_capacity(n),
            running: n,
            failed: None,
        })
    }

    /// Queues `e`; a full submission queue is submitted first.
    ///
    /// # Safety
    /// Every buffer `e` refers to must stay valid and untouched until its
    /// completion: a send points into its seat's `out`, which is neither
    /// written nor freed while `sending` (nor before the ring is gone, see
    /// Drop); receives use the provided buffers, owned alongside the ring.
    unsafe fn push(&mut self, e: &squeue::Entry) {
        // SAFETY: the caller's contract, passed on.
        while unsafe { self.ring.submission().push(e) }.is_err() {
            match self.ring.submit() {
                Err(err) if !retry(&err) => {
                    // Not queued; the round ends the loop with this error.
                    self.failed.get_or_insert(err);
                    return;
                }
                _ => {}
            }
        }
    }

    /// The round's one enter: submits what was queued, sleeps at most
    /// `timeout` rounded up to whole milliseconds and at most
    /// [`WAIT_MAX`], and runs every pending receive (it asks for more
    /// completions than can come, so it returns at the timeout, having run
    /// all the receive work queued by then).
    fn enter(&mut self, timeout: Duration) -> io::Result<()> {
        let ts = Timespec::from(whole_ms(timeout).min(WAIT_MAX));
        let args = SubmitArgs::new().timespec(&ts);
        match self.ring.submitter().submit_with_args(WANT_ALL, &args) {
            Err(e) if !retry(&e) => Err(e),
            _ => Ok(()),
        }
    }

    /// Handles every completion in the queue.
    fn reap(&mut self, ctx: &mut ThreadCtx, now: Time) {
        self.cqes.clear();
        self.cqes.extend(
            self.ring
                .completion()
                .map(|c| (c.user_data(), c.result(), c.flags())),
        );
        let cqes = std::mem::take(&mut self.cqes);
        for &(ud, res, flags) in &cqes {
            let slot = (ud & u64::from(u32::MAX)) as usize;
            match ud & KIND {
                RECV => self.received(ctx, now, slot, res, flags),
                SEND => self.sent(ctx, now, slot, res),
                CONNECT => self.connected(ctx, slot, res),
                _ => continue, // a cancel's own completion: the target's tells
            }
            self.settle(slot);
        }
        self.cqes = cqes;
    }

    /// After a completion of `slot`: an ended bot's socket closes once
    /// nothing of it is in flight; a running one is scheduled and its
    /// output queued.
    fn settle(&mut self, slot: usize) {
        match self.bots.slots[slot].as_ref() {
            Some(c) if c.ending && !c.busy() => {
                self.bots.slots[slot] = None;
                self.running -= 1;
            }
            Some(c) if c.ending => {} // waiting for its last completions
            Some(_) => self.bots.after(slot),
            None => {}
        }
    }

    /// Opens bot `slot`'s socket (the connect completes later: a poll for
    /// writability is queued), with its Hello and Login queued. A socket
    /// that cannot be opened, or a bot that cannot be made, is a connect
    /// failure.
    fn connect(&mut self, ctx: &mut ThreadCtx, slot: usize, now: Time) {
        let bot_id = self.bots.ids[slot];
        let opened = TcpStream::connect(ctx.plan.addr)
            .and_then(|s| s.set_nodelay(true).map(|()| s))
            .ok()
            .and_then(|s| Some((s, Bot::new(ctx, bot_id, now).ok()?)));
        let Some((stream, bot)) = opened else {
            ctx.interval.counters.connect_failures += 1;
            self.running -= 1;
            return;
        };
        let fd = stream.as_raw_fd();
        self.bots.slots[slot] = Some(Conn {
            stream,
            bot,
            marks: Marks::default(),
            connected: false,
            connecting: true,
            recv_armed: false,
            recv_cancelled: false,
            sending: false,
            out: Vec::new(),
            ending: false,
        });
        let e = opcode::PollAdd::new(Fd(fd), libc::POLLOUT as u32)
            .build()
            .user_data(CONNECT | slot as u64);
        // SAFETY: a poll refers to no buffer.
        unsafe { self.push(&e) };
        self.bots.after(slot);
    }

    /// The connect's poll completed: up (receive armed, output queued by
    /// `settle`), or failed.
    fn connected(&mut self, ctx: &mut ThreadCtx, slot: usize, res: i32) {
        let Some(c) = self.bots.slots[slot].as_mut() else {
            return;
        };
        c.connecting = false;
        if c.ending {
            return;
        }
        let up = res >= 0
            && matches!(c.stream.take_error(), Ok(None))
            && c.stream.peer_addr().is_ok()
            && set_blocking(&c.stream).is_ok();
        if !up {
            return c.bot.connect_failed(ctx);
        }
        c.connected = true;
        self.arm_recv(slot);
    }

    /// Arms `slot`'s multishot receive (unless armed, ended or not up).
    fn arm_recv(&mut self, slot: usize) {
        let Some(c) = self.bots.slots[slot].as_mut() else {
            return;
        };
        if c.recv_armed || c.ending || !c.connected {
            return;
        }
        c.recv_armed = true;
        c.recv_cancelled = false;
        let e = opcode::RecvMulti::new(Fd(c.stream.as_raw_fd()), BGID)
            .build()
            .user_data(RECV | slot as u64);
        // SAFETY: a receive refers only to the provided buffers, which live
        // until the ring is gone.
        unsafe { self.push(&e) };
    }

    /// A receive's completion: bytes to the bot, EOF, an error, or the end
    /// of the multishot receive (armed again).
    fn received(&mut self, ctx: &mut ThreadCtx, now: Time, slot: usize, res: i32, flags: u32) {
        let Loop {
            bots, bufs, rearm, ..
        } = self;
        let bid = cqueue::buffer_select(flags);
        let Some(c) = bots.slots[slot].as_mut() else {
            debug_assert!(false, "a receive completed for an empty seat");
            if let Some(bid) = bid {
                bufs.give_back(bid);
            }
            return;
        };
        if !cqueue::more(flags) {
            c.recv_armed = false;
            c.recv_cancelled = false;
        }
        if let Some(bid) = bid {
            if res > 0 && !c.ending {
                c.bot.on_bytes(ctx, now, bufs.bytes(bid, res as usize));
            }
            // Also a buffer picked for an empty or failed receive (current
            // kernels recycle it themselves and set no flag).
            bufs.give_back(bid);
        }
        if c.ending || c.bot.phase() == Phase::Done {
            return;
        }
        match res {
            0 => c.bot.on_eof(ctx, now),
            n if n > 0 || n == -libc::ENOBUFS => {
                if !c.recv_armed {
                    ctx.interval.counters.recv_rearms += u64::from(n < 0);
                    rearm.push(slot);
                }
            }
            _ => c.bot.io_error(ctx, now),
        }
    }

    /// A send's completion: bytes written; the rest (and what the bot
    /// queued meanwhile) is sent next round.
    fn sent(&mut self, ctx: &mut ThreadCtx, now: Time, slot: usize, res: i32) {
        let Some(c) = self.bots.slots[slot].as_mut() else {
            debug_assert!(false, "a send completed for an empty seat");
            return;
        };
        c.sending = false;
        if c.ending || c.bot.phase() == Phase::Done {
            return;
        }
        match res {
            n if n > 0 => c.bot.wrote(ctx, n as usize),
            e if e == -libc::EAGAIN || e == -libc::EINTR => {} // again next round
            _ => c.bot.io_error(ctx, now),
        }
    }

    /// Queues one send of what bot `slot` queued (none if a send is in
    /// flight: its completion brings the bot back).
    fn send(&mut self, slot: usize) {
        let Some(c) = self.bots.slots[slot].as_mut() else {
            return;
        };
        c.marks.queued = false;
        if !c.can_send() || c.bot.phase() == Phase::Done || c.bot.transmit().is_empty() {
            return;
        }
        c.out.clear();
        c.out.extend_from_slice(c.bot.transmit());
        c.sending = true;
        let len = u32::try_from(c.out.len()).unwrap_or(u32::MAX);
        let e = opcode::Send::new(Fd(c.stream.as_raw_fd()), c.out.as_ptr(), len)
            .flags(libc::MSG_NOSIGNAL)
            .build()
            .user_data(SEND | slot as u64);
        // SAFETY: `out` is neither written nor freed while `sending` (`send`
        // returns above, `settle` keeps the seat until the completion, Drop
        // leaks it if the ring closes with the send in flight).
        unsafe { self.push(&e) };
    }

    /// Bot `slot` ended: what is in flight is cancelled; the socket closes
    /// once the last completion is in (at once if none is).
    fn end(&mut self, slot: usize) {
        let Some(c) = self.bots.slots[slot].as_mut() else {
            return;
        };
        if c.ending {
            return;
        }
        c.ending = true;
        let mut cancels = [None; 3];
        if c.sending {
            cancels[0] = Some(SEND);
        }
        if c.recv_armed && !c.recv_cancelled {
            c.recv_cancelled = true;
            cancels[1] = Some(RECV);
        }
        if c.connecting {
            cancels[2] = Some(CONNECT);
        }
        for kind in cancels.into_iter().flatten() {
            let e = opcode::AsyncCancel::new(kind | slot as u64)
                .build()
                .user_data(CANCEL | slot as u64);
            // SAFETY: a cancel refers to no buffer.
            unsafe { self.push(&e) };
        }
        self.settle(slot);
    }
}

impl Drop for Loop {
    fn drop(&mut self) {
        let busy = self.bots.slots.iter().flatten().any(Conn::busy);
        // SAFETY: dropped once, here, and not used after.
        unsafe { ManuallyDrop::drop(&mut self.ring) };
        if busy {
            // Operations were in flight when the ring closed: the kernel
            // cancels them in its own time, so their buffers are leaked
            // rather than freed under them (a run stopped early only).
            for c in self.bots.slots.iter_mut().flatten() {
                std::mem::forget(std::mem::take(&mut c.out));
            }
        } else {
            // SAFETY: the ring is gone and nothing was in flight: nothing
            // refers to the buffers; dropped once.
            unsafe { ManuallyDrop::drop(&mut self.bufs) };
        }
    }
}

/// `timeout` rounded up to whole milliseconds, as `epoll_wait` takes it.
/// A bot's tick then comes up to a millisecond late, and the ticks due
/// within a millisecond share a round: waking at each tick's nanosecond
/// (2,000 rounds a second at 200 bots) cost this loop two and a half
/// times the epoll loop's CPU, most of it arming and taking the wait's
/// timer.
fn whole_ms(timeout: Duration) -> Duration {
    let ms = timeout.as_nanos().div_ceil(1_000_000);
    Duration::from_millis(u64::try_from(ms).unwrap_or(u64::MAX))
}

/// An enter or submit error that only asks to try again.
fn retry(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::ETIME | libc::EINTR | libc::EBUSY | libc::EAGAIN)
    )
}

/// Clears `O_NONBLOCK`: the ring then waits for room or bytes itself (a
/// non-blocking socket's send would fail with EAGAIN instead).
fn set_blocking(stream: &TcpStream) -> io::Result<()> {
    let fd = stream.as_raw_fd();
    // SAFETY: fcntl on an fd this stream owns and keeps open; F_GETFL and
    // F_SETFL read and write only the file's status flags.
    let ok = unsafe {
        let flags = libc::fcntl(fd, libc::F_GETFL);
        flags >= 0 && libc::fcntl(fd, libc::F_SETFL, flags & !libc::O_NONBLOCK) == 0
    };
    if ok {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wait_is_rounded_up_to_whole_milliseconds() {
        assert_eq!(whole_ms(Duration::ZERO), Duration::ZERO);
        assert_eq!(whole_ms(Duration::from_nanos(1)), Duration::from_millis(1));
        assert_eq!(whole_ms(Duration::from_millis(3)), Duration::from_millis(3));
        assert_eq!(
            whole_ms(Duration::from_micros(3_001)),
            Duration::from_millis(4)
        );
    }

    #[test]
    fn the_completion_queue_has_room_for_a_round_within_the_kernel_limit() {
        // Every buffer, four per bot and the submission queue, rounded up.
        assert_eq!(cq_entries(1_000, 8_192), 16_384);
        // Never below twice the submission queue ...
        assert_eq!(cq_entries(1, 1), 2 * SQ_ENTRIES);
        // ... nor above the kernel's limit.
        assert_eq!(cq_entries(10_000, 32_768), CQ_ENTRIES_MAX);
        assert_eq!(cq_entries(usize::MAX / 8, 1), CQ_ENTRIES_MAX);
    }
}
