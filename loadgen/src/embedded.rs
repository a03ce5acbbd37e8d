//! The embedded server (placeholder until `tessera::server::EmbeddedServer`
//! exists): starting it fails with a clear message.

use std::net::SocketAddr;

use tessera::config::Config;

use crate::server::ServerStatus;

/// A server running in this process.
#[derive(Debug)]
pub struct Embedded {
    addr: SocketAddr,
}

impl Embedded {
    /// Starts the server on `config`.
    ///
    /// # Errors
    /// Always, for now.
    pub fn start(_config: &Config) -> anyhow::Result<Embedded> {
        anyhow::bail!("the embedded server is not built yet: pass --server HOST:PORT")
    }

    /// Where clients connect.
    pub fn client_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Counters now.
    pub fn status(&self) -> ServerStatus {
        ServerStatus::default()
    }

    /// Stops the server.
    ///
    /// # Errors
    /// Never, for now.
    pub fn stop(self) -> anyhow::Result<ServerStatus> {
        Ok(ServerStatus::default())
    }
}
