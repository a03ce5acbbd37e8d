//! Wire formats: what crosses a queue between shards, a link between hosts,
//! or a socket to a client.
//!
//! - [`envelope`]: the shard message envelope (fixed header + rkyv body,
//!   serialised once, shared for fan-out, read in place, validated when the
//!   bytes come from outside the process).
//! - [`client`]: the framed client protocol (zerocopy fixed headers, a
//!   streaming decoder that turns bad bytes into a typed error). Documented
//!   byte by byte in PROTOCOL.md.
//!
//! Nothing here touches queues, sockets, threads or clocks.

pub mod client;
pub mod envelope;

pub use envelope::{Body, DecodeError, Envelope, Frame, Header, HEADER_LEN, WIRE_VERSION};
