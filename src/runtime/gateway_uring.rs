//! The io_uring backend of a shard's client socket loop
//! (`gateway.io_backend = "io_uring"`, see `gateway_io`).
//!
//! # The ring
//! One ring per shard, created on the shard's thread with SINGLE_ISSUER
//! and DEFER_TASKRUN (Linux >= 6.1): the kernel runs completion work only
//! when this thread enters the ring, so frames arriving from the other
//! core cost no wake-up interrupt. Every connection has one multishot
//! receive (Linux >= 6.0) into a provided buffer ring (Linux >= 5.19) of
//! `gateway.io_uring_buffers` buffers of `gateway.io_uring_buffer_bytes`;
//! a completion's bytes are copied into the port at once and the buffer
//! given back.
//!
//! # One pump
//! 1. Accepts while the listener has connections (at most
//!    `io_events_max` a pump; the plain non-blocking accept, TCP_NODELAY),
//!    and takes up connections handed here.
//! 2. The port's due slots, the lingering ones and those a completion asked
//!    for are driven: a send of everything queued (one SQE per connection
//!    with output, its bytes copied to the connection's send buffer so the
//!    app may queue more while it is in flight), a receive armed where
//!    there is room, cancels for connections that end.
//! 3. ONE `io_uring_enter` submits all of that and asks for a huge minimum
//!    of completions with a zero timeout, so the kernel runs every pending
//!    receive and send in this call (`MACHINE.md`: a small minimum ran
//!    about 120 of 1,000 pending receives).
//! 4. The completions are handled: received bytes go to the port (what
//!    passes `inbound_bytes_max` waits in the connection's spill buffer and
//!    the receive is cancelled: TCP back-pressure until the app consumes);
//!    a send's bytes are marked written (a short send, or one that could
//!    not go, leaves the rest queued for the next pump).
//!
//! # Registered files
//! Where the kernel lets go of a file removed from the table at once
//! (Linux >= 6.13), the ring has a sparse registered file table of one
//! entry per port slot (the port's `connections_max`), and each socket is
//! installed at its slot when it is taken up: receives and sends name it as
//! `Fixed(slot)`, so the kernel looks the file up in the table instead of
//! paying `fget`/`fput` for every operation. The socket stays a
//! `TcpStream` owned here (the table holds a second reference). Before
//! 6.13 a removed file was put only once every request issued before the
//! removal had ended, and a connection's multishot receive lives as long as
//! it does: a closed socket would stay open (no FIN) behind any older
//! connection, so there the operations name the plain fd.
//!
//! # Ending a connection
//! A connection's socket is closed, and its slot released, only once no
//! operation of it is in flight: its receive (and a blocked send) are
//! cancelled and the final completions awaited (the next pump submits the
//! cancels if a completion decided it). A hand-over does the same, then
//! moves the socket with the port's unread bytes and the spill after them.
//! The table's entry is cleared (-1) right before the socket closes or
//! moves: no operation names the slot any more then (cancels name an
//! operation's user data, not the file), and none does again until the
//! slot's next connection is installed; so a reused slot never sends to, or
//! hears from, the socket it held before.
//! Lingering is the epoll loop's: write the queue, shut the write side,
//! read and discard until EOF, all within `gateway.linger_ms`.
//!
//! Owns the ring, the provided buffers, the sockets and their send
//! buffers; it must not call the application.

use super::buf_ring::{BufRing, BufRingError};
use super::gateway_io::{failure, AcceptLog, IoParams};
use super::handoff::{Handoff, Handoffs};
use crate::shard::port::{ClientPort, CloseReason};
use io_uring::types::{SubmitArgs, Timespec};
use io_uring::{cqueue, opcode, squeue, IoUring, Probe};
use std::cell::RefCell;
use std::io;
use std::mem::ManuallyDrop;
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::fd::{AsRawFd, RawFd};
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The buffer group of the provided buffer ring.
const BGID: u16 = 0;
/// The operation kind in a completion's user data (the low 32 bits are the
/// port slot).
const RECV: u64 = 1 << 62;
const SEND: u64 = 2 << 62;
const CANCEL: u64 = 3 << 62;
const KIND: u64 = 3 << 62;
/// "Wait for this many completions" with a zero timeout: the kernel runs
/// all pending task work in the one enter, then returns.
const WANT_ALL: usize = 1 << 20;

/// Why io_uring cannot serve the client sockets.
#[derive(Debug, thiserror::Error)]
#[error(
    "config key `gateway.io_backend` = \"io_uring\": {feature} is not available ({source}); \
     it needs Linux >= 6.1 with io_uring allowed (container seccomp profiles, Docker's and \
     containerd's defaults, block io_uring_setup/io_uring_enter/io_uring_register: ship a \
     profile that allows them) and enough RLIMIT_MEMLOCK; or set gateway.io_backend = \"epoll\""
)]
pub struct UringError {
    /// The missing feature.
    pub feature: &'static str,
    /// What the kernel said.
    #[source]
    pub source: io::Error,
}

fn unavailable(feature: &'static str) -> impl FnOnce(io::Error) -> UringError {
    move |source| UringError { feature, source }
}

/// The provided buffer ring's failure, as the backend names it.
fn unavailable_buf(e: BufRingError) -> UringError {
    UringError {
        feature: e.feature,
        source: e.source,
    }
}

/// Creates a shard's ring: SINGLE_ISSUER + DEFER_TASKRUN (the latter
/// implies Linux >= 6.1, hence multishot receives too).
fn ring(p: &IoParams) -> Result<IoUring, UringError> {
    IoUring::builder()
        .setup_single_issuer()
        .setup_defer_taskrun()
        .setup_cqsize(cq_entries(p))
        .build(p.uring_entries)
        .map_err(unavailable(
            "io_uring_setup with SINGLE_ISSUER and DEFER_TASKRUN",
        ))
}

/// The kernel's most completion queue entries (`IORING_MAX_CQ_ENTRIES`).
const CQ_ENTRIES_MAX: u32 = 65_536;

/// The completion queue's size: room for all one pump can complete, so the
/// queue never overflows. An overflowing queue parks completions in kernel
/// allocations and flushes them back one by one: at 10,000 clients with
/// twice the submission queue (8,192), the shard thread was caught in
/// `__io_cqring_overflow_flush` 50 times in 5 s (a `sched_switch` profile)
/// with a fifth of its core in iowait. A pump completes at most a receive
/// per provided buffer, one end per connection (a multishot receive out of
/// buffers, a cancel, a close) and one completion per submission (a send);
/// the queue is that rounded up to a power of two, at least twice the
/// submission queue, at most the kernel's limit (16 bytes an entry: 512 KiB
/// at the defaults).
fn cq_entries(p: &IoParams) -> u32 {
    let want = u64::from(p.uring_buffers) + u64::from(p.uring_files) + u64::from(p.uring_entries);
    let floor = p.uring_entries.saturating_mul(2).min(CQ_ENTRIES_MAX);
    u32::try_from(want.next_power_of_two())
        .unwrap_or(CQ_ENTRIES_MAX)
        .clamp(floor, CQ_ENTRIES_MAX)
}

/// Whether the kernel puts a file removed from the registered table at once
/// (Linux >= 6.13; see the module doc).
fn fixed_files_release_at_once() -> bool {
    // SAFETY: `uname` fills the zeroed struct it is given; its fields are
    // NUL-terminated strings.
    let release = unsafe {
        let mut u: libc::utsname = std::mem::zeroed();
        if libc::uname(&mut u) != 0 {
            return false;
        }
        std::ffi::CStr::from_ptr(u.release.as_ptr())
            .to_string_lossy()
            .into_owned()
    };
    release_at_least(&release, (6, 13))
}

/// Whether a kernel release string ("6.18.44-generic") is at least
/// `(major, minor)`.
fn release_at_least(release: &str, want: (u32, u32)) -> bool {
    let mut parts = release.split(|c: char| !c.is_ascii_digit());
    let mut next = || parts.next().and_then(|n| n.parse::<u32>().ok());
    matches!((next(), next()), (Some(major), Some(minor)) if (major, minor) >= want)
}

/// Registers a sparse file table of `entries` with `ring`, first raising
/// the soft RLIMIT_NOFILE to `entries` where it is lower (up to the hard
/// limit): the kernel refuses a larger table than that limit.
fn files_table(ring: &IoUring, entries: u32) -> Result<(), UringError> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `lim` is a valid rlimit for getrlimit to fill and setrlimit to
    // read; a refused setrlimit changes nothing (the registration says).
    unsafe {
        let want = libc::rlim_t::from(entries);
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) == 0 && lim.rlim_cur < want {
            lim.rlim_cur = want.min(lim.rlim_max);
            libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
        }
    }
    ring.submitter()
        .register_files_sparse(entries.max(1))
        .map_err(unavailable(
            "a registered file table of gateway.connections_max entries \
             (register_files_sparse; RLIMIT_NOFILE must allow as many files)",
        ))
}

/// Checks at start, on the calling thread, that this kernel gives the
/// io_uring backend what it needs: the ring with its flags, the opcodes
/// (probe), a provided buffer ring of the configured size, and (where it
/// is used, see the module doc) a registered file table of
/// `gateway.connections_max` entries that takes a socket in and lets it go.
///
/// # Errors
/// [`UringError`] naming `gateway.io_backend` and the missing feature.
pub(crate) fn probe(p: &IoParams) -> Result<(), UringError> {
    let ring = ring(p)?;
    let mut probe = Probe::new();
    ring.submitter()
        .register_probe(&mut probe)
        .map_err(unavailable("the io_uring opcode probe"))?;
    for (code, name) in [
        (opcode::RecvMulti::CODE, "IORING_OP_RECV"),
        (opcode::Send::CODE, "IORING_OP_SEND"),
        (opcode::AsyncCancel::CODE, "IORING_OP_ASYNC_CANCEL"),
    ] {
        if !probe.is_supported(code) {
            return Err(UringError {
                feature: name,
                source: io::Error::new(io::ErrorKind::Unsupported, "not in the kernel's probe"),
            });
        }
    }
    let bufs = BufRing::new(&ring, p.uring_buffers, p.uring_buffer_bytes as usize, BGID)
        .map_err(unavailable_buf)?;
    if fixed_files_release_at_once() {
        files_table(&ring, p.uring_files)?;
        let sock = std::os::unix::net::UnixDatagram::unbound()
            .map_err(unavailable("a socket to install in the file table"))?;
        for fd in [sock.as_raw_fd(), -1] {
            ring.submitter()
                .register_files_update(0, &[fd])
                .map_err(unavailable(
                    "updating the registered file table (register_files_update)",
                ))?;
        }
    }
    drop(ring);
    drop(bufs);
    Ok(())
}

/// One client socket and its operations in flight.
#[derive(Debug)]
struct Conn {
    stream: TcpStream,
    /// A multishot receive is armed (until a completion without MORE).
    recv_armed: bool,
    /// A cancel of the receive was queued (back-pressure or ending).
    recv_cancelled: bool,
    /// A send of `out` is in flight.
    sending: bool,
    /// The bytes of the send in flight (a copy of the port's queue: the
    /// app may queue more, moving the port's buffer, meanwhile).
    out: Vec<u8>,
    /// Received beyond the port's room (oldest first): taken up when the
    /// app consumes, or carried by a hand-over.
    spill: Vec<u8>,
    /// The peer's EOF was read.
    read_eof: bool,
    /// The write side was shut down (FIN sent) while lingering.
    write_shut: bool,
    /// When a lingering connection is closed regardless.
    linger_until: Option<Instant>,
    /// The connection is over: the socket closes (or moves) once nothing is
    /// in flight.
    ending: bool,
}

impl Conn {
    fn busy(&self) -> bool {
        self.recv_armed || self.sending
    }
}

/// A shard's client sockets on io_uring; see the module doc.
pub(crate) struct UringIo {
    /// Dropped first, by hand (see Drop): then nothing reads or writes the
    /// buffers below any more.
    ring: ManuallyDrop<IoUring>,
    bufs: ManuallyDrop<BufRing>,
    listener: Option<TcpListener>,
    /// Indexed by port slot.
    conns: Vec<Option<Conn>>,
    /// The sockets are in the ring's registered file table, each at its
    /// port slot (see the module doc).
    fixed: bool,
    /// Slots to drive in the next pump (a slot may appear twice: harmless).
    work: Vec<u32>,
    /// The port's due slots, taken each pump (kept for its capacity).
    due: Vec<u32>,
    /// Slots lingering (their deadline is checked each pump).
    lingering: Vec<u32>,
    /// The completions of one enter (kept for its capacity).
    cqes: Vec<(u64, i32, u32)>,
    port: Rc<RefCell<ClientPort>>,
    accepts_max: usize,
    linger: Duration,
    accept_log: AcceptLog,
    handoffs: Arc<Handoffs>,
    me: u16,
}

impl std::fmt::Debug for UringIo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UringIo")
            .field("conns", &self.conns.iter().flatten().count())
            .field("lingering", &self.lingering.len())
            .field("accepting", &self.listener.is_some())
            .finish_non_exhaustive()
    }
}

impl UringIo {
    /// Serves `listener`'s connections into `port`, and the connections
    /// other shards hand to shard `me` through `handoffs`.
    ///
    /// # Errors
    /// [`UringError`] if the kernel refuses the ring or its buffers.
    pub(crate) fn start(
        listener: TcpListener,
        port: Rc<RefCell<ClientPort>>,
        (handoffs, me): (Arc<Handoffs>, u16),
        io: &IoParams,
    ) -> Result<UringIo, UringError> {
        let (linger_ms, accepts_max, slots) = {
            let p = port.borrow();
            let q = p.params();
            (q.linger_ms, q.io_events_max, q.connections_max)
        };
        listener
            .set_nonblocking(true)
            .map_err(unavailable("a non-blocking listener"))?;
        let ring = ring(io)?;
        let bufs = BufRing::new(
            &ring,
            io.uring_buffers,
            io.uring_buffer_bytes as usize,
            BGID,
        )
        .map_err(unavailable_buf)?;
        let fixed = fixed_files_release_at_once();
        if fixed {
            files_table(&ring, u32::try_from(slots).unwrap_or(u32::MAX))?;
        }
        Ok(UringIo {
            ring: ManuallyDrop::new(ring),
            bufs: ManuallyDrop::new(bufs),
            listener: Some(listener),
            conns: Vec::new(),
            fixed,
            work: Vec::new(),
            due: Vec::new(),
            lingering: Vec::new(),
            cqes: Vec::with_capacity(io.uring_entries as usize * 2),
            port,
            accepts_max: accepts_max.max(1),
            linger: Duration::from_millis(linger_ms),
            accept_log: AcceptLog::default(),
            handoffs,
            me,
        })
    }

    /// Stops accepting and closes the listener.
    pub(crate) fn stop_accepting(&mut self) {
        self.listener = None;
    }

    /// Connections whose socket is still open.
    pub(crate) fn live(&self) -> usize {
        self.port.borrow().io_live()
    }

    /// One pass over the sockets (see the module doc); `now` is the time
    /// linger deadlines are measured against.
    pub(crate) fn pump(&mut self, now: Instant) {
        let port_rc = self.port.clone();
        let mut port = port_rc.borrow_mut();
        self.accept(&mut port, now);
        while let Some(h) = self.handoffs.pop(self.me) {
            self.adopt(&mut port, h);
        }
        port.io_take_due(&mut self.due);
        self.work.extend_from_slice(&self.due);
        self.work.extend_from_slice(&self.lingering);
        let mut work = std::mem::take(&mut self.work);
        for &index in &work {
            self.drive(&mut port, index, now);
        }
        work.clear();
        self.work = work;
        self.enter();
        self.reap(&mut port);
        let conns = &self.conns;
        self.lingering.retain(|&i| {
            conns[i as usize]
                .as_ref()
                .is_some_and(|c| c.linger_until.is_some() && !c.ending)
        });
    }

    /// Queues `e`; a full submission queue is submitted first.
    ///
    /// # Safety
    /// Every buffer `e` refers to must stay valid and untouched until its
    /// completion: sends point into a connection's `out`, which is neither
    /// written nor freed while `sending` (nor before the ring is gone, see
    /// Drop); receives use the provided buffers, owned alongside the ring.
    unsafe fn push(&mut self, e: &squeue::Entry) {
        // SAFETY: the caller's contract, passed on.
        while unsafe { self.ring.submission().push(e) }.is_err() {
            if let Err(err) = self.ring.submit() {
                tracing::warn!(%err, "gateway: io_uring submit failed");
            }
        }
    }

    /// The one enter of a pump: submits what was queued and runs every
    /// completion the kernel has (never blocks).
    fn enter(&mut self) {
        let ts = Timespec::new();
        let args = SubmitArgs::new().timespec(&ts);
        match self.ring.submitter().submit_with_args(WANT_ALL, &args) {
            Ok(_) => {}
            Err(e)
                if matches!(
                    e.raw_os_error(),
                    Some(libc::ETIME | libc::EINTR | libc::EBUSY | libc::EAGAIN)
                ) => {}
            Err(err) => tracing::warn!(%err, "gateway: io_uring enter failed"),
        }
    }

    /// Handles every completion in the queue.
    fn reap(&mut self, port: &mut ClientPort) {
        self.cqes.clear();
        self.cqes.extend(
            self.ring
                .completion()
                .map(|c| (c.user_data(), c.result(), c.flags())),
        );
        let cqes = std::mem::take(&mut self.cqes);
        for &(ud, res, flags) in &cqes {
            let index = ud as u32;
            match ud & KIND {
                RECV => self.received(port, index, res, flags),
                SEND => self.sent(port, index, res),
                _ => {} // a cancel's own completion: the target's tells
            }
            let done = matches!(
                self.conns.get(index as usize),
                Some(Some(c)) if c.ending && !c.busy()
            );
            if done && ud & KIND != CANCEL {
                self.finish(port, index);
            }
        }
        self.cqes = cqes;
    }

    /// Accepts what the listener holds, at most `io_events_max` a pump.
    fn accept(&mut self, port: &mut ClientPort, now: Instant) {
        for _ in 0..self.accepts_max {
            let Some(listener) = &self.listener else {
                return;
            };
            let (stream, peer) = match listener.accept() {
                Ok(x) => x,
                Err(err) if err.kind() == io::ErrorKind::WouldBlock => return,
                Err(err) if err.kind() == io::ErrorKind::Interrupted => continue,
                Err(err) => {
                    self.accept_log.failed(&err, now);
                    return;
                }
            };
            let Some(conn) = port.io_open(peer) else {
                drop(stream); // refused: counted by the port
                continue;
            };
            if let Err(err) = stream.set_nodelay(true) {
                tracing::debug!(%err, %peer, "gateway: cannot set TCP_NODELAY");
            }
            self.register(port, conn.slot(), stream);
        }
    }

    /// Takes a socket under port slot `index` (installed in the file table
    /// at `index`); it is driven in this pump. A socket the table refuses
    /// is closed (IoError).
    fn register(&mut self, port: &mut ClientPort, index: u32, stream: TcpStream) {
        if self.fixed {
            let fd = stream.as_raw_fd();
            if let Err(err) = self.ring.submitter().register_files_update(index, &[fd]) {
                tracing::warn!(%err, index, "gateway: io_uring refused a socket in its file table");
                port.io_failed(index, failure(&err));
                port.io_release(index);
                return;
            }
        }
        let i = index as usize;
        if self.conns.len() <= i {
            self.conns.resize_with(i + 1, || None);
        }
        debug_assert!(self.conns[i].is_none(), "a free slot has no socket");
        self.conns[i] = Some(Conn {
            stream,
            recv_armed: false,
            recv_cancelled: false,
            sending: false,
            out: Vec::new(),
            spill: Vec::new(),
            read_eof: false,
            write_shut: false,
            linger_until: None,
            ending: false,
        });
        self.work.push(index);
    }

    /// Takes up a connection another shard handed here (refused at
    /// `connections_max`: the socket is closed, counted by the port).
    fn adopt(&mut self, port: &mut ClientPort, h: Handoff) {
        let Handoff {
            stream,
            peer,
            input,
            note,
        } = h;
        if let Some(conn) = port.io_adopt(peer, &input, note) {
            self.register(port, conn.slot(), TcpStream::from(stream));
        }
    }
}

mod drive;

#[cfg(test)]
mod tests;

impl Drop for UringIo {
    fn drop(&mut self) {
        let busy = self.conns.iter().flatten().any(Conn::busy);
        // The table lets go of the sockets now (the ring's own teardown runs
        // later, in the kernel's time), so they close as they are dropped
        // below; an operation in flight holds its own reference.
        for index in 0..self.conns.len() {
            if self.conns[index].is_some() {
                self.unregister_file(index as u32);
            }
        }
        // SAFETY: dropped once, here, and not used after.
        unsafe { ManuallyDrop::drop(&mut self.ring) };
        if busy {
            // Operations were in flight when the ring closed: the kernel
            // cancels them in its own time, so their buffers are leaked
            // rather than freed under them (a stop with sockets past their
            // linger only).
            for c in self.conns.iter_mut().flatten() {
                std::mem::forget(std::mem::take(&mut c.out));
            }
        } else {
            // SAFETY: the ring is gone and nothing was in flight: nothing
            // refers to the buffers; dropped once.
            unsafe { ManuallyDrop::drop(&mut self.bufs) };
        }
    }
}

/// The peer address of a socket to hand over.
fn peer_of(stream: &TcpStream) -> Option<SocketAddr> {
    stream.peer_addr().ok()
}

/// How an operation names a connection's socket.
#[derive(Clone, Copy, Debug)]
enum Socket {
    /// Its entry in the registered file table (the port slot).
    Fixed(u32),
    /// Its fd (kernels before 6.13, see the module doc).
    Fd(RawFd),
}

impl UringIo {
    /// How the operations of slot `index` name its socket.
    fn socket(&self, index: u32) -> Option<Socket> {
        let conn = self.conns.get(index as usize)?.as_ref()?;
        Some(if self.fixed {
            Socket::Fixed(index)
        } else {
            Socket::Fd(conn.stream.as_raw_fd())
        })
    }

    /// Clears slot `index` in the file table, right before its socket closes
    /// or moves (nothing of it is in flight; see the module doc).
    fn unregister_file(&mut self, index: u32) {
        if !self.fixed {
            return;
        }
        if let Err(err) = self.ring.submitter().register_files_update(index, &[-1]) {
            // The table keeps the socket open until the slot's next
            // connection replaces it.
            tracing::warn!(%err, index, "gateway: io_uring cannot clear a file table entry");
        }
    }
}

/// Shuts a lingering socket's write side.
fn shut_write(stream: &TcpStream) -> io::Result<()> {
    stream.shutdown(Shutdown::Write)
}

/// How a failed operation's errno closes a connection.
fn errno_reason(res: i32) -> CloseReason {
    failure(&io::Error::from_raw_os_error(-res))
}

/// Whether a receive completion says more are coming.
fn more(flags: u32) -> bool {
    cqueue::more(flags)
}
