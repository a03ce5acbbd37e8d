//! The server a run talks to: embedded in this process, or remote.
//!
//! Owns the choice and the server's own figures: the embedded server's
//! [`crate::embedded`] counters, or a remote one's admin `/metrics`
//! (`--server-admin`), or "unavailable". The report stores them under
//! `server`.

use std::net::SocketAddr;
use std::time::Duration;

use serde_json::{json, Value};

use crate::embedded::Embedded;
use crate::remote;

/// The server's figures at one moment.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ServerStatus {
    /// Reals migrated so far (all shards), if known.
    pub migrations: Option<u64>,
    /// Each shard's tick work p99 over its last metrics window, ms (empty
    /// if unknown).
    pub tick_p99_window_ms: Vec<f64>,
    /// Every figure, for the JSON report.
    pub value: Value,
}

/// Where the bots connect.
#[derive(Debug)]
pub enum Server {
    /// Started in this process.
    Embedded(Embedded),
    /// Another process.
    Remote {
        /// Its client address.
        addr: SocketAddr,
        /// Its admin address (`host:port`), for `/metrics`.
        admin: Option<String>,
    },
}

/// Timeout of one `/metrics` scrape.
const SCRAPE_TIMEOUT: Duration = Duration::from_millis(500);

impl Server {
    /// The address bots connect to.
    pub fn client_addr(&self) -> SocketAddr {
        match self {
            Server::Embedded(e) => e.client_addr(),
            Server::Remote { addr, .. } => *addr,
        }
    }

    /// "embedded" or "remote".
    pub fn kind(&self) -> &'static str {
        match self {
            Server::Embedded(_) => "embedded",
            Server::Remote { .. } => "remote",
        }
    }

    /// The server's figures now.
    pub fn status(&self) -> ServerStatus {
        match self {
            Server::Embedded(e) => e.status(),
            Server::Remote { admin, .. } => remote_status(admin.as_deref()),
        }
    }

    /// The embedded server's tree history (see [`Embedded::tree`]); empty
    /// for a remote server.
    pub fn tree(&self) -> Vec<(f64, tessera::server::balance::TreeSnapshot)> {
        match self {
            Server::Embedded(e) => e.tree(),
            Server::Remote { .. } => Vec::new(),
        }
    }

    /// Stops an embedded server (joining its shards); the final figures.
    ///
    /// # Errors
    /// If the embedded server fails to stop cleanly.
    pub fn finish(self) -> anyhow::Result<ServerStatus> {
        match self {
            Server::Embedded(e) => e.stop(),
            Server::Remote { admin, .. } => Ok(remote_status(admin.as_deref())),
        }
    }
}

fn remote_status(admin: Option<&str>) -> ServerStatus {
    let Some(admin) = admin else {
        return ServerStatus {
            migrations: None,
            tick_p99_window_ms: Vec::new(),
            value: json!({"source": "remote", "available": false,
                          "why": "no --server-admin given"}),
        };
    };
    match remote::scrape_text(admin, SCRAPE_TIMEOUT) {
        Ok(text) => remote_figures(admin, &text),
        Err(e) => ServerStatus {
            migrations: None,
            tick_p99_window_ms: Vec::new(),
            value: json!({"source": "remote", "available": false, "admin": admin,
                          "why": e.to_string()}),
        },
    }
}

/// The figures of a remote server's `/metrics` text.
fn remote_figures(admin: &str, text: &str) -> ServerStatus {
    let m = remote::parse_metrics(text);
    let window_us = remote::samples(text, "tessera_shard_tick_p99_window_us");
    ServerStatus {
        migrations: remote::pick(
            &m,
            &[
                "tessera_app_host_migrations_total",
                "tessera_app_host_migrations",
                "host_migrations_total",
            ],
        ),
        tick_p99_window_ms: window_us.iter().map(|us| us / 1000.0).collect(),
        value: json!({"source": "remote", "available": true, "admin": admin, "metrics": m}),
    }
}
