//! The wire layer: byte formats between processes.

pub mod client;
