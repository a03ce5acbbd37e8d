//! The cell host: the [`ShardApp`] every shard of the server runs.
//!
//! At start every shard builds the same [`SpaceTree`] (world bounds and space
//! params from the config; `server.initial_cells` leaves made by the tree's
//! own `Split` changes, assigned round-robin to shards) and creates the cells
//! it hosts. Each tick it drains the inbox (one [`HostBatch`] per source shard
//! per tick), feeds cells and proxies, applies entity logic (move inputs on
//! the real, NPC wanderers), ticks the cells against the tree, and routes
//! every output: same shard -> local queue delivered next tick (FIFO), other
//! shard -> one batch per destination per tick, serialised once.
//!
//! Proxies live on the shard whose index is encoded in the entity id
//! ([`entity_id`]), so any shard can route `Dest::Proxy` without a directory.
//!
//! Owns: cells, proxies and NPC state of one shard. Must not touch sockets,
//! clocks or executors (the runtime and the gateway do).

use crate::config::Config;
use crate::core::cell::{Cell, CellEvent, Dest, Msg, Outgoing, Residency, Source};
use crate::core::entity::{Entity, TypeRegistry, NPC};
use crate::core::geom::Vec3;
use crate::core::ids::{CellId, EntityId, ShardId};
use crate::core::input::decode_move;
use crate::core::proxy::{Proxy, ProxyParams};
use crate::core::space::SpaceTree;
use crate::core::time::Time;
use crate::runtime::{Inbox, MetricSink, Outbox, ShardApp, ShardContext};
use crate::server::balance::{HostBalance, TreeSnapshot};
use crate::wire::Body;
use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

/// The envelope kind of a [`HostBatch`].
pub const KIND_HOST_BATCH: u16 = 1;

/// Who sent a routed message (the archivable form of [`Source`]).
#[derive(Clone, Copy, Debug, PartialEq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
pub enum WireSource {
    /// A cell.
    Cell(CellId),
    /// The proxy of an entity.
    Proxy(EntityId),
}

/// One cell or proxy message between shards.
#[derive(Clone, Debug, PartialEq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
pub struct Routed {
    /// Sender.
    pub from: WireSource,
    /// Addressee.
    pub to: Dest,
    /// The message.
    pub msg: Msg,
}

/// Everything one shard sends another in one tick (one body, serialised once).
#[derive(Clone, Debug, Default, PartialEq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
pub struct HostBatch {
    /// In send order.
    pub items: Vec<Routed>,
}

/// Why the host could not be built.
#[derive(Debug, thiserror::Error)]
pub enum HostError {
    /// The space tree refused the configuration.
    #[error("space tree: {0}")]
    Space(String),
    /// Cell or proxy parameters are invalid.
    #[error("cell params: {0}")]
    Params(String),
}

/// The entity id of the `n`th entity whose proxy lives on shard `shard`
/// (NPCs use the same scheme with their creating shard).
pub fn entity_id(shard: u16, n: u64) -> EntityId {
    EntityId((u64::from(shard) << 48) | (n & ((1 << 48) - 1)))
}

/// The shard index encoded in an entity id by [`entity_id`].
pub fn entity_shard(e: EntityId) -> u16 {
    (e.0 >> 48) as u16
}

/// Builds the initial tree: `cells` leaves by halving the largest leaf
/// (alternating axes; [`crate::core::space::initial_tree`]), leaf `i` on
/// shard `i % shards`.
///
/// # Errors
/// [`HostError::Space`] if the tree refuses a split (world too small).
pub fn initial_tree(config: &Config, cells: u32, shards: u16) -> Result<SpaceTree, HostError> {
    crate::core::space::initial_tree(config.world.bounds(), config.space_params(), cells, shards)
        .map_err(|e| HostError::Space(e.to_string()))
}

/// A wandering NPC real owned by this shard's logic.
#[derive(Clone, Copy, Debug)]
struct Npc {
    id: EntityId,
    cell: CellId,
    pos: Vec3,
    heading: f64,
}

/// Host counters (exported as metrics).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HostCounters {
    /// Envelopes whose body failed to decode.
    pub bad_envelopes: u64,
    /// Messages for a cell or proxy not on this shard.
    pub misrouted: u64,
    /// Bodies refused by a full outbox (dropped).
    pub outbox_refused: u64,
    /// Messages delivered locally.
    pub local: u64,
    /// Messages sent to other shards.
    pub remote: u64,
}

/// The per-shard cell host.
pub struct CellHost {
    ctx: ShardContext,
    tree: SpaceTree,
    cells: BTreeMap<CellId, Cell>,
    proxies: BTreeMap<EntityId, Proxy>,
    npcs: Vec<Npc>,
    local: VecDeque<Routed>,
    lanes: Vec<HostBatch>,
    speed_mps: f64,
    counters: HostCounters,
    balance: HostBalance,
}

impl std::fmt::Debug for CellHost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CellHost")
            .field("shard", &self.ctx.shard)
            .field("cells", &self.cells.len())
            .finish()
    }
}

impl CellHost {
    /// Builds this shard's host from `config`.
    ///
    /// # Errors
    /// [`HostError`] for a tree or parameter the config cannot produce.
    pub fn new(config: &Config, ctx: ShardContext) -> Result<CellHost, HostError> {
        let tree = initial_tree(config, config.server.initial_cells, ctx.shards)?;
        let types = Arc::new(TypeRegistry::with_builtins());
        let balance = HostBalance::new(config, ctx, &tree, types.clone());
        let mut cells = BTreeMap::new();
        for leaf in tree.leaves().filter(|l| l.shard == ctx.shard) {
            let cell = Cell::new(leaf.cell, config.cell_params(), types.clone())
                .map_err(|e| HostError::Params(e.to_string()))?;
            cells.insert(leaf.cell, cell);
        }
        let mut host = CellHost {
            ctx,
            tree,
            cells,
            proxies: BTreeMap::new(),
            npcs: Vec::new(),
            local: VecDeque::new(),
            lanes: (0..ctx.shards).map(|_| HostBatch::default()).collect(),
            speed_mps: config.server.npc_speed_mps,
            counters: HostCounters::default(),
            balance,
        };
        host.spawn_npcs(config.server.npcs, &types);
        Ok(host)
    }

    /// NPCs are spread over the world; each shard creates those whose spawn
    /// point falls in one of its cells.
    fn spawn_npcs(&mut self, n: u32, types: &TypeRegistry) {
        let w = self.tree.world();
        let ty = types.get(NPC).expect("built-in npc").clone();
        for i in 0..n {
            let f = (f64::from(i) + 0.5) / f64::from(n);
            let g = (f64::from(i) * 0.618_033_988_7).fract();
            let pos = Vec3 {
                x: w.min_x + f * w.width(),
                y: 0.0,
                z: w.min_z + g * w.depth(),
            };
            let cell = self.tree.cell_at(pos);
            let Some(c) = self.cells.get_mut(&cell) else {
                continue;
            };
            let id = entity_id(self.ctx.shard.index, u64::from(i));
            let entity = Entity::new_real(id, ty.clone(), pos, 0.0);
            if c.create_real(Time::ZERO, entity, false, 0).is_ok() {
                let heading = g * std::f64::consts::TAU;
                self.npcs.push(Npc {
                    id,
                    cell,
                    pos,
                    heading,
                });
            }
        }
    }

    /// This host's counters.
    pub fn counters(&self) -> HostCounters {
        self.counters
    }

    /// The space tree (same on every shard).
    pub fn tree(&self) -> &SpaceTree {
        &self.tree
    }

    /// Balancing on this shard (counters, the tree snapshot for plots).
    pub fn balance(&self) -> &HostBalance {
        &self.balance
    }

    /// Shard 0 publishes a tree snapshot into `sink` every balancing period
    /// (for plots of the tree over time).
    pub fn set_snapshot_sink(&mut self, sink: crate::server::balance::SnapshotSink) {
        self.balance.set_snapshot_sink(sink);
    }

    /// The tree's leaves with their rects, shards and last known loads.
    pub fn tree_snapshot(&self) -> TreeSnapshot {
        self.balance.snapshot(&self.tree)
    }

    /// The cells this shard hosts.
    pub fn cells(&self) -> impl Iterator<Item = &Cell> {
        self.cells.values()
    }

    /// Reals hosted on this shard.
    pub fn reals(&self) -> usize {
        self.cells.values().map(|c| c.reals().len()).sum()
    }

    /// Ghosts hosted on this shard.
    pub fn ghosts(&self) -> usize {
        self.cells.values().map(|c| c.ghosts().count()).sum()
    }

    /// Migrations out of this shard's cells so far.
    pub fn migrations(&self) -> u64 {
        self.cells
            .values()
            .map(|c| c.counters().migrations_out)
            .sum()
    }

    fn shard_of(&self, to: Dest) -> Option<ShardId> {
        match to {
            Dest::Cell(c) => self
                .tree
                .shard_of(c)
                .or_else(|| self.balance.retired_shard(c)),
            Dest::Proxy(e) => Some(ShardId::local(entity_shard(e))),
        }
    }

    /// Routes one output: local queue or this tick's lane to its shard.
    fn route(&mut self, from: WireSource, out: Outgoing) {
        let item = Routed {
            from,
            to: out.to,
            msg: out.msg,
        };
        match self.shard_of(item.to) {
            Some(s) if s == self.ctx.shard => {
                self.counters.local += 1;
                self.local.push_back(item);
            }
            Some(s) if s.node == self.ctx.shard.node && s.index < self.ctx.shards => {
                self.counters.remote += 1;
                self.lanes[usize::from(s.index)].items.push(item);
            }
            _ => self.counters.misrouted += 1,
        }
    }

    fn deliver(&mut self, now: Time, item: Routed) {
        if let Dest::Cell(c) = item.to {
            if !self.cells.contains_key(&c) && self.balance.awaits(c, &self.tree) {
                self.balance.park(item);
                return;
            }
        }
        let from = match item.from {
            WireSource::Cell(c) => Source::Cell(c),
            WireSource::Proxy(e) => Source::Proxy(e),
        };
        match (item.to, item.msg) {
            (Dest::Cell(c), Msg::Cell(m)) => match self.cells.get_mut(&c) {
                Some(cell) => cell.handle(now, from, m),
                None => self.counters.misrouted += 1,
            },
            (Dest::Proxy(e), Msg::Proxy(m)) => match self.proxies.get_mut(&e) {
                Some(p) => {
                    let _ = p.handle(now, m);
                }
                None => self.counters.misrouted += 1,
            },
            _ => self.counters.misrouted += 1,
        }
    }

    fn drain_inbox(&mut self, now: Time, inbox: Inbox<'_>) {
        for env in inbox {
            if self.balance.handle_envelope(now, &env) {
                continue;
            }
            let items = match env.access::<HostBatch>(KIND_HOST_BATCH) {
                Ok(archived) => rkyv::deserialize::<HostBatch, rkyv::rancor::Error>(archived),
                Err(_) => {
                    self.counters.bad_envelopes += 1;
                    continue;
                }
            };
            match items {
                Ok(batch) => batch.items.into_iter().for_each(|i| self.deliver(now, i)),
                Err(_) => self.counters.bad_envelopes += 1,
            }
        }
    }

    /// Applies move inputs and wanders NPCs (the simulator's entity logic).
    fn entity_logic(&mut self, dt_s: f64) {
        for cell in self.cells.values_mut() {
            while let Some(ev) = cell.poll_event() {
                if let CellEvent::InputApplied { entity, data, .. } = ev {
                    let started = self.balance.stamp();
                    if let Some((pos, _)) = decode_move(&data) {
                        let _ = cell.move_real(entity, pos);
                    }
                    self.balance.entity_done(entity, started);
                }
            }
        }
        let w = self.tree.world();
        for npc in &mut self.npcs {
            let Some(cell) = self.cells.get_mut(&npc.cell) else {
                continue;
            };
            if cell
                .residency(npc.id)
                .is_none_or(|r| !matches!(r, Residency::Real { .. }))
            {
                continue;
            }
            let started = self.balance.stamp();
            npc.heading = self.balance.npc_heading(npc.pos, npc.heading);
            let step = self.speed_mps * dt_s;
            let mut p = Vec3 {
                x: npc.pos.x + step * npc.heading.cos(),
                y: 0.0,
                z: npc.pos.z + step * npc.heading.sin(),
            };
            if !w.contains(p) {
                npc.heading += std::f64::consts::FRAC_PI_2;
                p = npc.pos;
            }
            if cell.move_real(npc.id, p).is_ok() {
                npc.pos = p;
            }
            self.balance.entity_done(npc.id, started);
        }
    }

    /// Follows NPCs that migrated to another cell of this shard; NPCs that
    /// left the shard become ghosts here and stop being driven by it.
    fn follow_npcs(&mut self) {
        for npc in &mut self.npcs {
            if let Some(c) = self.cells.values().find(|c| {
                c.residency(npc.id)
                    .is_some_and(|r| matches!(r, Residency::Real { .. }))
            }) {
                npc.cell = c.id();
            }
        }
    }

    fn flush(&mut self, out: &mut Outbox) {
        for (i, lane) in self.lanes.iter_mut().enumerate() {
            if lane.items.is_empty() {
                continue;
            }
            let body = Body::encode(&*lane);
            lane.items.clear();
            let dest = ShardId::local(i as u16);
            match body {
                Ok(b) => {
                    if out.send(dest, KIND_HOST_BATCH, b).is_err() {
                        self.counters.outbox_refused += 1;
                    }
                }
                Err(_) => self.counters.bad_envelopes += 1,
            }
        }
    }
}

impl ShardApp for CellHost {
    fn on_tick(&mut self, now: Time, inbox: Inbox<'_>, out: &mut Outbox) {
        let tick_start = self.balance.stamp();
        let local = std::mem::take(&mut self.local);
        for item in local {
            self.deliver(now, item);
        }
        self.drain_inbox(now, inbox);
        self.entity_logic(self.ctx.tick.as_secs_f64());
        let ids: Vec<CellId> = self.cells.keys().copied().collect();
        for id in ids {
            let cell = self.cells.get_mut(&id).expect("listed");
            let started = self.balance.stamp();
            cell.tick(now, &self.tree);
            self.balance.cell_done(id, started);
            let mut outs = Vec::new();
            while let Some(o) = cell.poll_output() {
                outs.push(o);
            }
            for o in outs {
                self.route(WireSource::Cell(id), o);
            }
        }
        let pids: Vec<EntityId> = self.proxies.keys().copied().collect();
        for e in pids {
            while let Some(o) = self.proxies.get_mut(&e).and_then(Proxy::poll_output) {
                self.route(WireSource::Proxy(e), o);
            }
        }
        self.follow_npcs();
        self.flush(out);
        let (tree, cells) = (&mut self.tree, &mut self.cells);
        self.balance.after_tick(now, tick_start, tree, cells, out);
        for item in self.balance.unpark(&self.tree) {
            self.local.push_back(item);
        }
    }

    /// Delivers what was still in flight, so in-flight reals (Onloads) land
    /// in their cells and are counted; nothing can be sent any more.
    fn on_stop(&mut self, now: Time, inbox: Inbox<'_>) {
        let local = std::mem::take(&mut self.local);
        for item in local {
            self.deliver(now, item);
        }
        self.drain_inbox(now, inbox);
        self.balance.on_stop(now, &mut self.tree, &mut self.cells);
    }

    fn export_metrics(&self, sink: &mut MetricSink) {
        sink.counter(
            "host_migrations",
            "reals migrated out of this shard's cells",
            self.migrations(),
        );
        let forwards = self.cells.values().map(|c| c.counters().forwards).sum();
        sink.counter(
            "host_forwards",
            "messages forwarded to a moved real",
            forwards,
        );
        sink.gauge("host_reals", "reals hosted", self.reals() as u64);
        sink.gauge("host_ghosts", "ghosts hosted", self.ghosts() as u64);
        sink.counter(
            "host_misrouted",
            "messages for an unknown cell or proxy",
            self.counters.misrouted,
        );
        let sc = self.balance.service_counters().unwrap_or_default();
        sink.counter(
            "host_splits",
            "cell splits (space service, shard 0)",
            sc.splits,
        );
        sink.counter("host_merges", "cell merges finished (shard 0)", sc.merges);
        sink.counter("host_rebalances", "boundary moves (shard 0)", sc.rebalances);
        sink.gauge("host_cells", "cells hosted", self.cells.len() as u64);
        sink.counter(
            "host_bad_envelopes",
            "envelopes that failed to decode",
            self.counters.bad_envelopes,
        );
    }
}

/// Proxy parameters the host gives its proxies (gateway, later).
pub fn proxy_params() -> ProxyParams {
    ProxyParams::default()
}
