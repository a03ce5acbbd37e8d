//! What the simulated network carries and how the world batches it.
//!
//! Every message between two endpoints in one tick travels as one
//! [`Batch`] (the runtime flushes once per destination per tick). A link
//! that is full ([`SendError::Full`]) applies back-pressure: the batch waits
//! in a per-pair backlog and everything after it on that pair waits behind
//! it, so FIFO per ordered pair holds even under back-pressure.
//!
//! Owns the per-tick outbox and the backlog; knows nothing of cells beyond
//! the message types it carries.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

use crate::core::cell::{CellMsg, ProxyMsg, Source};
use crate::core::ids::{CellId, EntityId};
use crate::core::space::SpaceChange;
use crate::core::time::Time;
use crate::sim::net::{Endpoint, Net, SendError};

/// One message inside a batch.
#[derive(Clone, Debug)]
pub enum Packet {
    /// For cell `to`, from `from`.
    Cell {
        /// Sender (a cell, or the proxy of an entity).
        from: Source,
        /// Receiving cell.
        to: CellId,
        /// The message.
        msg: CellMsg,
    },
    /// For the proxy of the entity the message names.
    Proxy(ProxyMsg),
    /// A client's input, for its proxy.
    Input {
        /// Whose client.
        entity: EntityId,
        /// The encoded input.
        data: crate::core::payload::Payload,
    },
    /// Data the proxy delivers to its client, in order.
    Down {
        /// Whose client.
        entity: EntityId,
        /// The proxy's downstream sequence number.
        seq: u64,
        /// The bytes.
        data: Arc<[u8]>,
    },
    /// A space tree change from the service (shard 0) for another shard's
    /// replica (tree mode, `world_replicas.rs`).
    Change {
        /// The change.
        change: SpaceChange,
        /// When the service made it.
        sent: Time,
    },
}

/// Everything one endpoint sends another in one tick.
pub type Batch = Vec<Packet>;

/// The simulator's network type.
pub type SimNet = Net<Endpoint, Batch>;

/// Most empty batches kept for reuse.
pub const BATCH_POOL_MAX: usize = 8_192;

/// Per-tick outbox plus the back-pressure backlog.
///
/// The outbox keeps one (usually empty) batch per pair ever used, and
/// delivered batches come back through [`Router::recycle`], so a steady run
/// allocates no batch per tick.
#[derive(Default)]
pub struct Router {
    outbox: BTreeMap<(Endpoint, Endpoint), Batch>,
    backlog: BTreeMap<(Endpoint, Endpoint), VecDeque<Batch>>,
    pool: Vec<Batch>,
    backlogged: u64,
}

impl Router {
    /// Queues `packet` from `from` to `to` for this tick's flush.
    pub fn push(&mut self, from: Endpoint, to: Endpoint, packet: Packet) {
        let pool = &mut self.pool;
        self.outbox
            .entry((from, to))
            .or_insert_with(|| pool.pop().unwrap_or_default())
            .push(packet);
    }

    /// Takes back a delivered (drained) batch for reuse.
    pub fn recycle(&mut self, mut batch: Batch) {
        batch.clear();
        if self.pool.len() < BATCH_POOL_MAX {
            self.pool.push(batch);
        }
    }

    /// Sends this tick's batches (after any backlog on the same pair, in
    /// pair order); a refused batch joins its pair's backlog.
    pub fn flush(&mut self, now: Time, net: &mut SimNet) {
        self.retry(now, net);
        let Router {
            outbox,
            backlog,
            pool,
            backlogged,
        } = self;
        for (&(from, to), slot) in outbox.iter_mut() {
            if slot.is_empty() {
                continue;
            }
            let batch = std::mem::replace(slot, pool.pop().unwrap_or_default());
            let backlogged = &mut *backlogged;
            if let Some(q) = backlog.get_mut(&(from, to)) {
                q.push_back(batch);
                *backlogged += 1;
                continue;
            }
            if let Err(SendError::Full(batch)) = net.send(now, from, to, batch) {
                backlog.entry((from, to)).or_default().push_back(batch);
                *backlogged += 1;
            }
        }
    }

    fn retry(&mut self, now: Time, net: &mut SimNet) {
        let mut emptied = Vec::new();
        for (&(from, to), q) in self.backlog.iter_mut() {
            while let Some(batch) = q.pop_front() {
                if let Err(SendError::Full(batch)) = net.send(now, from, to, batch) {
                    q.push_front(batch);
                    break;
                }
            }
            if q.is_empty() {
                emptied.push((from, to));
            }
        }
        for k in emptied {
            self.backlog.remove(&k);
        }
    }

    /// Packets queued for this tick's flush (none between steps, unless a
    /// test injected one).
    pub fn outbox_len(&self) -> usize {
        self.outbox.values().map(|b| b.len()).sum()
    }

    /// Batches waiting in the backlog.
    pub fn backlog_len(&self) -> usize {
        self.backlog.values().map(VecDeque::len).sum()
    }

    /// The backlogged packets (for in-flight accounting), any order.
    pub fn backlog_packets(&self) -> impl Iterator<Item = &Packet> {
        self.backlog.values().flatten().flatten()
    }

    /// Batches that ever had to wait for a full link.
    pub fn backlogged(&self) -> u64 {
        self.backlogged
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::ids::ShardId;
    use crate::sim::net::{LatencyModel, NetParams};
    use crate::sim::rng::Rng;

    fn input(n: u8) -> Packet {
        Packet::Input {
            entity: EntityId(1),
            data: (&[n][..]).into(),
        }
    }

    #[test]
    fn backlog_keeps_fifo_under_back_pressure() {
        let params = NetParams {
            latency: LatencyModel {
                min_us: 10,
                max_us: 10,
                pair_skew_us_max: 0,
                burst_probability: 0.0,
                burst_us_max: 0,
            },
            in_flight_per_pair_max: 1,
        };
        let mut net = SimNet::new(params, Rng::new(1)).expect("valid");
        let (a, b) = (Endpoint::Client(0), Endpoint::Shard(ShardId::local(0)));
        let mut r = Router::default();
        for n in 0..3u8 {
            r.push(a, b, input(n));
            r.flush(Time(u64::from(n)), &mut net);
        }
        assert_eq!(r.backlog_len(), 2);
        let mut got = Vec::new();
        for t in 0..10u64 {
            let now = Time(100 * (t + 1));
            while let Some(d) = net.poll_delivery(now) {
                for p in d.msg {
                    let Packet::Input { data, .. } = p else {
                        panic!()
                    };
                    got.push(data[0]);
                }
            }
            r.flush(now, &mut net);
        }
        assert_eq!(got, vec![0, 1, 2]);
        assert_eq!(r.backlog_len(), 0);
        assert_eq!(r.backlogged(), 2);
    }
}
