//! Wire formats: what crosses a queue between shards, a link between hosts,
//! or a client socket.
//!
//! - [`envelope`]: the shard message envelope (fixed header + rkyv body,
//!   serialised once, shared for fan-out, read in place, validated when the
//!   bytes come from outside the process).
//! - [`client`]: the framed client protocol (see PROTOCOL.md).
//!
//! Nothing here touches queues, sockets, threads or clocks.

pub mod client;
pub mod envelope;

pub use envelope::{Body, DecodeError, Envelope, Frame, Header, HEADER_LEN, WIRE_VERSION};
