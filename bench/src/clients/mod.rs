//! The `clients` benchmark: server CPU per client per second for tessera
//! next to the cheapest bare server (no game) doing the same client I/O, in
//! one run, on the same pinned core, with the same traffic (issue 21 §1).
//!
//! Every role runs in its own process, started by [`orchestrate`] from the
//! same executable (`clients child ROLE ...`): a server pinned to one CPU
//! ([`epoll_server`], [`uring_server`] or [`tessera_server`]) and the load
//! ([`driver`], one thread, one epoll loop) pinned to the other. The CPU
//! time of the server process comes from `/proc/PID/stat` over a steady
//! window after every client is moving.
//!
//! This module owns the bench's processes and figures; it must not reach
//! into tessera's internals: tessera is driven only over TCP (its start-up
//! goes through `EmbeddedServer` with loadgen's world settings).

pub mod cli;
pub mod driver;
pub mod epoll_server;
pub mod kernel_fns;
pub mod orchestrate;
pub mod perf_split;
pub mod stand_in;
pub mod sys;
pub mod tessera_server;
pub mod uring_server;
pub mod walk;

/// What a bare server did so far (printed in its `stat` lines).
#[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct BareStats {
    /// Clients connected now.
    pub clients: u64,
    /// Connections accepted.
    pub accepted: u64,
    /// Connections refused (beyond the planned clients).
    pub refused: u64,
    /// Connections ended by the peer or an error.
    pub closed: u64,
    /// Polls of the sockets.
    pub polls: u64,
    /// Write rounds: ticks that wrote to every client (with `phases` > 1,
    /// one phase's group each).
    pub ticks: u64,
    /// Ticks skipped because the loop was a whole tick late.
    pub ticks_lost: u64,
    /// Successful reads (receive completions).
    pub reads: u64,
    /// Bytes received and discarded.
    pub bytes_in: u64,
    /// Bytes written.
    pub bytes_out: u64,
    /// Sends that did not write the whole buffer (full socket, error).
    pub short_sends: u64,
    /// Multishot receives stopped for want of a provided buffer (io_uring).
    pub no_buffers: u64,
}
