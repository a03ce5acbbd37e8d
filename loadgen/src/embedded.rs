//! The server embedded in this process: `tessera::server::EmbeddedServer`
//! started from the run's config, its counters as the report's `server`.
//!
//! Owns the adapter only (start, address, counters, stop).

use std::net::SocketAddr;

use serde_json::json;
use tessera::config::Config;
use tessera::server::balance::TreeSnapshot;
use tessera::server::{EmbeddedServer, ServerCounters};

use crate::server::ServerStatus;

/// A server running in this process.
pub struct Embedded {
    server: EmbeddedServer,
}

impl std::fmt::Debug for Embedded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Embedded")
            .field("client_addr", &self.server.client_addr())
            .finish_non_exhaustive()
    }
}

impl Embedded {
    /// Starts the server on `config`.
    ///
    /// # Errors
    /// If the runtime, the gateway or the admin endpoint cannot start.
    pub fn start(config: &Config) -> anyhow::Result<Embedded> {
        let server = EmbeddedServer::start(config)
            .map_err(|e| anyhow::anyhow!("starting the embedded server: {e}"))?;
        Ok(Embedded { server })
    }

    /// Where clients connect.
    pub fn client_addr(&self) -> SocketAddr {
        self.server.client_addr()
    }

    fn status_of(&self, c: &ServerCounters) -> ServerStatus {
        let admin = self.server.admin_addr().map(|a| a.to_string());
        ServerStatus {
            migrations: Some(c.migrations),
            tick_p99_window_ms: ms(&c.tick_p99_window_us),
            value: json!({"source": "embedded", "available": true, "admin": admin, "counters": c}),
        }
    }

    /// The tree's history so far: `(seconds since the server started,
    /// snapshot)`, one per balancing period (empty with balancing off).
    pub fn tree(&self) -> Vec<(f64, TreeSnapshot)> {
        let log = self.server.tree_log();
        let log = log.lock().map(|l| l.entries.clone()).unwrap_or_default();
        let t0 = log.front().map_or(0, |(t, _)| t.0);
        log.into_iter()
            .map(|(t, s)| (t.0.saturating_sub(t0) as f64 / 1e6, s))
            .collect()
    }

    /// Counters now (they may lag one metrics publish period).
    pub fn status(&self) -> ServerStatus {
        self.status_of(&self.server.counters())
    }

    /// Stops the server and joins its shards; the final counters.
    ///
    /// # Errors
    /// If a shard failed.
    pub fn stop(self) -> anyhow::Result<ServerStatus> {
        let admin = self.server.admin_addr().map(|a| a.to_string());
        let c = self
            .server
            .stop()
            .map_err(|e| anyhow::anyhow!("stopping the embedded server: {e}"))?;
        Ok(ServerStatus {
            migrations: Some(c.migrations),
            tick_p99_window_ms: ms(&c.tick_p99_window_us),
            value: json!({"source": "embedded", "available": true, "admin": admin, "counters": c}),
        })
    }
}

/// Microseconds to milliseconds.
fn ms(us: &[u64]) -> Vec<f64> {
    us.iter().map(|&u| u as f64 / 1000.0).collect()
}
