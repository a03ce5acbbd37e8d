//! The server: the cell host every shard runs ([`host`]), its client side
//! ([`clients`], [`gateway`] sessions, [`game`] logic at the reals, the
//! [`relay`] formats between them, [`spawn`]), mono-space instances
//! ([`spaces`]), and the whole server
//! started in-process ([`embedded`]).
//!
//! Owns the application side of the runtime; it never touches executors,
//! queues or sockets directly (clients arrive through the runtime's
//! `ClientPort`).

pub mod balance;
pub mod cell_factory;
pub mod clients;
pub mod door;
pub mod embedded;
mod follow;
pub mod game;
pub mod gateway;
#[cfg(test)]
mod harness;
pub mod host;
mod npcs;
pub mod relay;
pub mod spaces;
mod spaces_directory;
mod spaces_host;
pub mod spawn;
#[cfg(test)]
mod tests_door;
#[cfg(test)]
mod tests_host;
#[cfg(test)]
mod tests_spaces;
mod viewer;

pub use embedded::{EmbeddedServer, ServerCounters, ServerError};
pub use host::{CellHost, HostBatch, HostCounters, HostError, Routed, KIND_HOST_BATCH};
