//! Starting one shard's executor, and binding its client listener on it.
//!
//! Shard 0 binds `gateway.listen_addr` (port 0 allowed) and reports the
//! address it resolved; the runtime then starts the other shards on that same
//! address (glommio sets SO_REUSEPORT, so the kernel spreads connections over
//! the shards' listeners). An address already in use by anything else is
//! refused before any shard starts.
//!
//! Owns the spawn and the bind handshake; it must not run the tick loop.

use super::gateway_io;
use super::mesh::ShardLinks;
use super::metrics::ShardStats;
use super::shard::{self, ShardParams, Shared};
use super::RuntimeError;
use crate::config::Config;
use crate::shard::{ShardApp, ShardContext};
use glommio::{LocalExecutorBuilder, Placement};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

/// How long `start` waits for a shard to bind its client listener.
pub(crate) const BIND_WAIT_MAX: Duration = Duration::from_secs(10);

/// What one shard's executor is started with.
pub(crate) struct Launch {
    pub(crate) placement: Placement,
    pub(crate) links: ShardLinks,
    pub(crate) stats: Arc<ShardStats>,
    pub(crate) shared: Arc<Shared>,
    /// The client address to listen on, if the gateway is on.
    pub(crate) bind: Option<SocketAddr>,
}

type BindReply = std::io::Result<SocketAddr>;

impl Launch {
    /// Spawns the executor: it binds its listener first (reporting the bound
    /// address, or the error, on the returned receiver), then builds the
    /// application and runs the shard.
    pub(crate) fn spawn<A, F>(
        self,
        p: ShardParams,
        factory: Arc<F>,
    ) -> (
        glommio::Result<glommio::ExecutorJoinHandle<A>, ()>,
        std::sync::mpsc::Receiver<BindReply>,
    )
    where
        A: ShardApp,
        F: Fn(ShardContext) -> A + Send + Sync + 'static,
    {
        let (bind_tx, bind_rx) = std::sync::mpsc::channel::<BindReply>();
        let Launch {
            placement,
            links,
            stats,
            shared,
            bind,
        } = self;
        let index = p.ctx.shard.index;
        let spawned = LocalExecutorBuilder::new(placement)
            .name(&format!("shard-{index}"))
            .spawn(move || async move {
                let listener = bind.and_then(|addr| {
                    let bound = gateway_io::bind(addr);
                    let reply = bound.as_ref().map(|(_, a)| *a).map_err(clone_io);
                    let _ = bind_tx.send(reply);
                    bound.ok().map(|(l, _)| l)
                });
                drop(bind_tx);
                let mut app = factory(p.ctx);
                // The one clock the application stamps its work with.
                app.set_cost_clock(Box::new(super::clock::MonotonicClock::new()));
                shard::run(p, app, links, stats, shared, listener).await
            });
        (spawned, bind_rx)
    }
}

/// The gateway address to bind, if the gateway is on; an address already in
/// use is refused here (glommio's listeners set SO_REUSEPORT, which would
/// otherwise silently share the port with another server).
pub(crate) fn gateway_addr(config: &Config) -> Result<Option<SocketAddr>, RuntimeError> {
    if !config.gateway.enabled {
        return Ok(None);
    }
    let text = config.gateway.listen_addr.as_str();
    let err = |source| RuntimeError::Gateway {
        addr: text.to_owned(),
        source,
    };
    let addr: SocketAddr = text
        .parse()
        .map_err(|e| err(std::io::Error::new(std::io::ErrorKind::InvalidInput, e)))?;
    if addr.port() != 0 {
        drop(std::net::TcpListener::bind(addr).map_err(err)?);
    }
    Ok(Some(addr))
}

fn clone_io(e: &std::io::Error) -> std::io::Error {
    std::io::Error::new(e.kind(), e.to_string())
}
