//! A shard's client socket loop: the one interface the shard's tick loop
//! drives ([`GatewayIo::pump`] right before each tick, right after it, and
//! every `gateway.io_poll_ms` between ticks), over one of two backends
//! chosen by `gateway.io_backend`:
//!
//! - `"io_uring"` (`gateway_uring`): one ring per shard (SINGLE_ISSUER,
//!   DEFER_TASKRUN), a multishot receive per connection into a provided
//!   buffer ring, and one `io_uring_enter` a pump that issues every send of
//!   the pump and reaps every completion; from Linux 6.13 the sockets are
//!   registered files. Needs Linux >= 6.1 with io_uring allowed (seccomp);
//!   [`probe`] checks it at start.
//! - `"epoll"` (`gateway_epoll`): one `epoll_wait` a pump, a `recv` per
//!   readable socket until drained, one `send` per client with queued output.
//! - `"auto"` (the default): io_uring if the start probe passes, else epoll
//!   with a warning ([`IoParams::resolve`]).
//!
//! Both keep the same behaviour towards the port: bounded input with TCP
//! back-pressure, slow readers cut off by the port, peer EOF/reset as
//! Closed{PeerClosed} (other errors IoError), app close and shutdown
//! lingering (write the queue, shut the write side, drain until the peer
//! closes or `gateway.linger_ms`), `connections_max` refusals, and hand-over
//! of a socket and its unread bytes to another shard (`runtime::handoff`).
//! The loopback tests (`tests/runtime_port.rs`) run every case on both.
//!
//! # Why io_uring where the kernel has it
//! The clients bench (`bench/src/clients`, rows `tessera` and
//! `tessera-epoll`, interleaved in one run) measured tessera at 2,000
//! clients, one write per client per 100 ms: 198 µs CPU per client-second
//! on io_uring against 228 on epoll (0.86-0.89 in each of five interleaved
//! rounds; 0.94 in a later run, 0.96-0.97 at 2,000 and 5,000 once the
//! per-message paths got cheaper). The sends of a pump cost one submission
//! instead of a syscall each, and receives are reaped in the same enter.
//! Saturated loadgen runs on io_uring once ended with goodbyes unanswered;
//! that was loadgen's read loop (a FIN behind a short read), fixed there.
//!
//! Owns the choice of backend, the listener's bind and the shared error
//! mapping; it must not call the application.

use super::gateway_epoll::EpollIo;
use super::gateway_uring::UringIo;
use super::handoff::Handoffs;
use crate::config::Config;
use crate::shard::port::{ClientPort, CloseReason};
use std::cell::RefCell;
use std::io;
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Instant;

pub(crate) use super::gateway_uring::probe;
use super::gateway_uring::UringError;

/// Which kernel interface serves the client sockets (`gateway.io_backend`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum IoBackend {
    /// epoll through `mio`.
    Epoll,
    /// io_uring (Linux >= 6.1).
    IoUring,
    /// io_uring if the start probe finds what it needs, else epoll (the
    /// default; [`IoParams::resolve`] decides once, at start).
    Auto,
}

/// The socket loop's own settings (the port's bounds are in `PortParams`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct IoParams {
    pub(crate) backend: IoBackend,
    /// io_uring: submission queue entries.
    pub(crate) uring_entries: u32,
    /// io_uring: provided buffers (a power of two, at most 32,768).
    pub(crate) uring_buffers: u16,
    /// io_uring: bytes per provided buffer.
    pub(crate) uring_buffer_bytes: u32,
    /// io_uring: entries of the registered file table the start probe
    /// checks (`gateway.connections_max`; a shard sizes its own from its
    /// port's bound).
    pub(crate) uring_files: u32,
}

impl IoParams {
    /// The settings of `[gateway]` (validated by the config).
    pub(crate) fn from_config(c: &Config) -> IoParams {
        let g = &c.gateway;
        IoParams {
            backend: match g.io_backend.as_str() {
                "io_uring" => IoBackend::IoUring,
                "epoll" => IoBackend::Epoll,
                _ => IoBackend::Auto,
            },
            uring_entries: g.io_uring_entries,
            uring_buffers: u16::try_from(g.io_uring_buffers).unwrap_or(1 << 15),
            uring_buffer_bytes: g.io_uring_buffer_bytes,
            uring_files: g.connections_max,
        }
    }
}

impl IoParams {
    /// Settles `Auto` (with a client listener: `serving`) by probing the
    /// kernel once: io_uring if it has everything the loop needs, else epoll,
    /// with a warning naming what is missing. An explicit `"io_uring"` is
    /// probed too and fails start with that reason instead.
    ///
    /// # Errors
    /// [`UringError`] if `io_uring` was asked for and the kernel lacks it.
    pub(crate) fn resolve(mut self, serving: bool) -> Result<IoParams, UringError> {
        match self.backend {
            IoBackend::IoUring if serving => probe(&self)?,
            IoBackend::Auto => {
                self.backend = match probe(&self) {
                    Ok(()) => IoBackend::IoUring,
                    Err(e) => {
                        tracing::warn!(
                            reason = %e,
                            "gateway: io_uring is unavailable, the client sockets run on epoll \
                             (gateway.io_backend = \"auto\")"
                        );
                        IoBackend::Epoll
                    }
                };
            }
            _ => {}
        }
        Ok(self)
    }
}

impl Default for IoParams {
    /// The `[gateway]` defaults of `defaults.toml` (before
    /// [`IoParams::resolve`]).
    fn default() -> IoParams {
        IoParams {
            backend: IoBackend::Auto,
            uring_entries: 4096,
            uring_buffers: 8192,
            uring_buffer_bytes: 2048,
            uring_files: 10_000,
        }
    }
}

/// A shard's client sockets, on the backend the config chose.
#[derive(Debug)]
pub(crate) enum GatewayIo {
    Epoll(Box<EpollIo>),
    Uring(Box<UringIo>),
}

impl GatewayIo {
    /// Serves `listener`'s connections into `port`, and the connections
    /// other shards hand to shard `me` through `handoffs`.
    ///
    /// # Errors
    /// If the kernel refuses the backend's resources (an epoll set, a ring).
    pub(crate) fn start(
        listener: std::net::TcpListener,
        port: Rc<RefCell<ClientPort>>,
        handoffs: (Arc<Handoffs>, u16),
        io: &IoParams,
    ) -> io::Result<GatewayIo> {
        Ok(match io.backend {
            IoBackend::Epoll => {
                GatewayIo::Epoll(Box::new(EpollIo::start(listener, port, handoffs)?))
            }
            // `Auto` is settled at start (`IoParams::resolve`); unsettled
            // (a shard started on its own, as in tests) it is io_uring.
            IoBackend::IoUring | IoBackend::Auto => GatewayIo::Uring(Box::new(
                UringIo::start(listener, port, handoffs, io).map_err(io::Error::other)?,
            )),
        })
    }

    /// Stops accepting and closes the listener.
    pub(crate) fn stop_accepting(&mut self) {
        match self {
            GatewayIo::Epoll(g) => g.stop_accepting(),
            GatewayIo::Uring(g) => g.stop_accepting(),
        }
    }

    /// Connections whose socket is still open.
    pub(crate) fn live(&self) -> usize {
        match self {
            GatewayIo::Epoll(g) => g.live(),
            GatewayIo::Uring(g) => g.live(),
        }
    }

    /// One pass over the sockets; `now` is the time linger deadlines are
    /// measured against.
    pub(crate) fn pump(&mut self, now: Instant) {
        match self {
            GatewayIo::Epoll(g) => g.pump(now),
            GatewayIo::Uring(g) => g.pump(now),
        }
    }
}

/// Accept failures (e.g. out of file descriptors; the accept is retried
/// at the next pump), logged at most once a second per socket loop.
#[derive(Debug, Default)]
pub(crate) struct AcceptLog {
    last: Option<Instant>,
}

impl AcceptLog {
    /// Logs `err` unless one was logged within the last second.
    pub(crate) fn failed(&mut self, err: &io::Error, now: Instant) {
        const INTERVAL: std::time::Duration = std::time::Duration::from_secs(1);
        if self
            .last
            .is_none_or(|t| now.saturating_duration_since(t) >= INTERVAL)
        {
            tracing::warn!(%err, "gateway: accept failed");
            self.last = Some(now);
        }
    }
}

/// How a socket error closes a connection.
pub(crate) fn failure(err: &io::Error) -> CloseReason {
    match err.kind() {
        io::ErrorKind::ConnectionReset
        | io::ErrorKind::ConnectionAborted
        | io::ErrorKind::BrokenPipe
        | io::ErrorKind::UnexpectedEof => CloseReason::PeerClosed,
        _ => CloseReason::IoError,
    }
}

/// Pending connections the kernel queues per listener (it clamps this to
/// `net.core.somaxconn`): a ramp of thousands of clients needs more than the
/// usual 128 or 1,024.
const LISTEN_BACKLOG: i32 = 4096;

/// Binds a non-blocking listener; returns it with the address it resolved
/// to. SO_REUSEPORT: every shard listens on the address and the kernel
/// spreads connections. SO_REUSEADDR: the connections accepted here inherit
/// it, so after a stop their TIME_WAIT remains do not fail a restarted
/// server's start-up check (`launch::gateway_addr`); a live listener still
/// fails that check.
pub(crate) fn bind(addr: SocketAddr) -> io::Result<(std::net::TcpListener, SocketAddr)> {
    use socket2::{Domain, Protocol, Socket, Type};
    let domain = if addr.is_ipv6() {
        Domain::IPV6
    } else {
        Domain::IPV4
    };
    let socket = Socket::new(domain, Type::STREAM, Some(Protocol::TCP))?;
    socket.set_reuse_address(true)?;
    socket.set_reuse_port(true)?;
    socket.bind(&addr.into())?;
    socket.listen(LISTEN_BACKLOG)?;
    socket.set_nonblocking(true)?;
    let local = socket
        .local_addr()?
        .as_socket()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "not an IP socket"))?;
    Ok((socket.into(), local))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    /// A ring the kernel refuses (more entries than its 32,768): how a
    /// kernel or sandbox without io_uring looks to the probe.
    fn refused() -> IoParams {
        IoParams {
            uring_entries: 1 << 20,
            ..IoParams::default()
        }
    }

    #[test]
    fn auto_takes_io_uring_where_the_probe_passes_and_falls_back_to_epoll() {
        assert_eq!(IoParams::default().backend, IoBackend::Auto);
        let auto = IoParams::default().resolve(true).expect("auto never fails");
        assert_eq!(auto.backend, IoBackend::IoUring, "this kernel has io_uring");
        let fallback = refused().resolve(true).expect("auto never fails");
        assert_eq!(fallback.backend, IoBackend::Epoll);
    }

    #[test]
    fn an_explicit_io_uring_the_kernel_refuses_fails_start_naming_the_key() {
        let asked = IoParams {
            backend: IoBackend::IoUring,
            ..refused()
        };
        let err = asked.clone().resolve(true).expect_err("refused ring");
        assert!(err.to_string().contains("gateway.io_backend"), "{err}");
        // Without a client listener there is nothing to serve: no probe.
        assert_eq!(
            asked.resolve(false).expect("no probe").backend,
            IoBackend::IoUring
        );
        let epoll = IoParams {
            backend: IoBackend::Epoll,
            ..refused()
        };
        assert_eq!(
            epoll.resolve(true).expect("no probe").backend,
            IoBackend::Epoll
        );
    }

    #[test]
    fn a_restarted_listener_binds_over_time_wait() {
        let (listener, addr) = bind("127.0.0.1:0".parse().expect("addr")).expect("bind");
        let mut client = std::net::TcpStream::connect(addr).expect("connect");
        listener.set_nonblocking(false).expect("blocking");
        let (accepted, _) = listener.accept().expect("accept");
        // The server closes first: its side of the connection goes to
        // TIME_WAIT on the listening port.
        drop(accepted);
        let mut buf = [0u8; 1];
        assert_eq!(client.read(&mut buf).expect("eof"), 0);
        drop(client);
        drop(listener);
        // A restart: the start-up check (`launch::gateway_addr`, a plain std
        // bind with SO_REUSEADDR) conflicts with TIME_WAIT sockets whose
        // listener lacked SO_REUSEADDR; then the shard's bind.
        let check = std::net::TcpListener::bind(addr);
        assert!(check.is_ok(), "start-up check after a restart: {check:?}");
        drop(check);
        let (_live, again) = bind(addr).expect("the port binds again at once");
        assert_eq!(again, addr);
        // A live listener still fails the check: no second server silently
        // shares the port through SO_REUSEPORT.
        assert!(std::net::TcpListener::bind(addr).is_err());
    }
}
