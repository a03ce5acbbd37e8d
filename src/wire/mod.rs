//! Wire formats: what crosses a queue between shards or a link between hosts.
//!
//! - [`envelope`]: the shard message envelope (fixed header + rkyv body,
//!   serialised once, shared for fan-out, read in place, validated when the
//!   bytes come from outside the process).
//!
//! The client protocol joins this layer in a later issue. Nothing here touches
//! queues, sockets, threads or clocks.

pub mod envelope;

pub use envelope::{Body, DecodeError, Envelope, Frame, Header, HEADER_LEN, WIRE_VERSION};
