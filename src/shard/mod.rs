//! The shard contract: what a shard application sees of its shard.
//!
//! # Model
//!
//! ```text
//!   driver (runtime, or a sans-IO test harness)
//!     │  drain queues ─> InboxBuf      sockets ─> ClientPort (io_* calls)
//!     ▼
//!   ShardApp::on_tick(now, Inbox, &mut Outbox, &mut ClientPort)
//!     │  export_metrics(&mut MetricSink), export_view(&mut ViewSink)
//!     ▼
//!   driver: Outbox::flush_with(push into queues), port output ─> sockets
//! ```
//!
//! - [`ShardApp`] is the application a shard drives (the cell host of
//!   `crate::server`); [`ShardContext`] says where it runs.
//! - [`Inbox`] hands out what arrived since the last tick, FIFO per source;
//!   [`Outbox`] batches what it sends, per destination, with the
//!   back-pressure policy of [`outbox`].
//! - [`ClientPort`] is the shard's table of client connections as bytes, with
//!   its bounds, events and counters ([`port`]); the socket side feeds it
//!   through `pub(crate)` `io_*` calls.
//! - [`MetricSink`] and [`ViewSink`] collect what the application reports for
//!   `/metrics` and the live viewer; [`Count`] and [`Level`] name the figures
//!   every shard keeps.
//!
//! Everything here is sans-IO data and logic: no executor, queue, socket,
//! thread, lock or OS clock (`tests/tidy.rs` enforces it), and nothing above
//! it (`runtime`, `server`, `sim`, `game`). The IO side of each piece (the
//! mesh's queues and flush, the socket loop, the published stats, the viewer
//! board, the monotonic clock) lives in `crate::runtime`, which programs
//! against this module like the application does.

pub mod app;
pub mod counters;
pub mod inbox;
pub mod metric_sink;
pub mod outbox;
pub mod port;
pub mod view_sink;

pub use app::{ShardApp, ShardContext};
pub use counters::{Count, Level};
pub use inbox::Inbox;
pub use metric_sink::{AppMetric, MetricSink};
pub use outbox::{Batch, Outbox, SendError};
pub use port::{ClientPort, CloseReason, ConnId, PortCounters, PortError, PortEvent, PortParams};
pub use view_sink::{BalanceOp, CellView, EntityView, ShardView, ViewEvent, ViewSink};
