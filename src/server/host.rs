//! The cell host: the [`ShardApp`] every shard of the server runs.
//!
//! At start every shard builds the same [`SpaceTree`] (world bounds and space
//! params from the config; `server.initial_cells` leaves made by the tree's
//! own `Split` changes, assigned round-robin to shards) and creates the cells
//! it hosts (views and AOI from `[aoi]`).
//!
//! # Each tick
//! 1. Deliver what arrived: local messages left from last tick, then the
//!    inbox (one [`HostBatch`] per source shard per tick: its avatar spawns
//!    first, then its cell and proxy messages in order).
//! 2. The client side (`clients.rs`): port events, frames from readable
//!    connections (logins spawn avatars, inputs go to the proxies).
//! 3. NPC wanderers walk (`npcs.rs`); proxies' outputs are routed and the
//!    local ones delivered, so an input whose real is here is queued there
//!    before the cells tick.
//! 4. Each cell runs its inputs, the game logic (`game.rs`) applies what
//!    its clients asked, then the cell publishes (syncs, views, ghost
//!    upkeep, migrations) against the tree: a move goes out in the tick it
//!    was applied. Its outputs are routed.
//! 5. Local messages are delivered (view batches reach this shard's
//!    proxies); proxies' outputs are routed; their client data goes to the
//!    sessions, and every session's frames of the tick are written to the
//!    port.
//!
//! Downstream bodies come from the shard's [`DownPool`]
//! (`server.down_pool_bytes_max`): lent to each cell for its tick (step 4:
//! its view batches and replies are made in recycled buffers), given back
//! by the sessions (step 5: the body's buffer, or the session's former
//! output when the batch became the output in place, `Session::take_down`)
//! and by the flush (bodies serialised for another shard). So a batch
//! whose proxy is on its cell's shard costs no allocation and one copy (the
//! observer's bytes into the body) before the port.
//! 6. Routing: same shard -> local FIFO queue, delivered at the next phase
//!    boundary (steps 3 and 5, or the next tick), but a cell's output for
//!    a proxy on this shard is handed to the proxy as the cell is polled
//!    (`hand_to_local_proxy`: the proxy orders its downstream by sequence and
//!    takes its real's newest epoch, so it needs no queue); other shard -> one batch
//!    per destination per tick, serialised once, read at the destination's
//!    next tick (shards tick staggered, so a round trip takes one tick:
//!    `runtime::tick_offset`).
//!
//! A proxy starts on the shard whose index is encoded in the entity id
//! ([`entity_id`]): the shard that accepted its client's connection. It
//! follows its real to the real's shard (`follow.rs`); every shard then
//! routes `Dest::Proxy` to a proxy it hosts, else to the shard its newest
//! [`ProxyAt`] notice names, else to the id's shard, and a shard that
//! receives a message for a proxy that left passes it on to where it went.
//!
//! Owns: cells, proxies, client sessions and NPC state of one shard. Must
//! not touch sockets, clocks or executors (the runtime and its port do;
//! the clock that stamps work is injected, `ShardApp::set_cost_clock`).

use crate::config::Config;
use crate::core::cell::{Cell, Dest, Msg, Outgoing, ProxyMsg, Source};
use crate::core::down::DownPool;
use crate::core::entity::{TypeRegistry, AVATAR};
use crate::core::ids::{CellId, EntityId, ShardId};
use crate::core::proxy::{Proxy, ProxyParams};
use crate::core::space::SpaceTree;
use crate::core::time::Time;
use crate::shard::{ClientPort, Inbox, MetricSink, Outbox, ShardApp, ShardContext, ViewSink};
use crate::wire::Body;
use rustc_hash::FxHashMap; // tidy: allow(HashMap): no random seed; proxies are looked up, iterated only by an order-free check
use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

use super::balance::{HostBalance, SnapshotSink, TreeSnapshot};
use super::cell_factory::CellFactory;
use super::clients::{Auth, Clients};
use super::door::Door;
use super::follow::Follow;
use super::gateway::GatewayParams;
use super::npcs::Npc;
use super::spaces::{is_instance_cell, HostSpaces, SpaceCounters};
use super::spawn::SpawnRule;
use super::viewer::HostViewer;
use crate::game::Game;

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

/// A new avatar to create in `cell` (a login on another shard).
#[derive(Clone, Debug, PartialEq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
pub struct Spawn {
    /// The avatar (its proxy is on the sending shard).
    pub entity: EntityId,
    /// The cell at the spawn point.
    pub cell: CellId,
    /// Spawn point, x.
    pub x: f64,
    /// Spawn point, z.
    pub z: f64,
    /// The player name.
    pub name: String,
}

/// A client's proxy now lives on `shard` (sent to every other shard by the
/// shard that adopted it, `follow.rs`); the newest `moves` wins.
#[derive(Clone, Copy, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
pub struct ProxyAt {
    /// The avatar.
    pub entity: EntityId,
    /// The proxy's shard (the id's own shard: the notice is withdrawn).
    pub shard: u16,
    /// The hand-over's number (node-wide, increasing: `Door::next_move`).
    pub moves: u64,
}

/// Everything one shard sends another in one tick (one body, serialised once).
#[derive(Clone, Debug, Default, PartialEq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
pub struct HostBatch {
    /// Avatars to create, handled before `items` (their proxies' first
    /// inputs may follow in `items` of the same batch).
    pub spawns: Vec<Spawn>,
    /// Proxies that moved, handled before `items`.
    pub proxies: Vec<ProxyAt>,
    /// In send order.
    pub items: Vec<Routed>,
}

impl HostBatch {
    /// True with nothing to send.
    pub fn is_empty(&self) -> bool {
        self.spawns.is_empty() && self.proxies.is_empty() && self.items.is_empty()
    }
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

/// Builds the initial tree: `cells` leaves by repeated splits of the largest
/// leaf (alternating axes), leaf `i` on shard `i % shards`. `cells` 0
/// (`server.initial_cells`' default) is one cell per shard, as many as the
/// world has room for: cells of one space on one shard only add borders
/// (ghosts, their syncs, migrations) to the shard's work.
///
/// # Errors
/// [`HostError::Space`] if the tree refuses a split (world too small for
/// the `cells` asked for).
pub fn initial_tree(config: &Config, cells: u32, shards: u16) -> Result<SpaceTree, HostError> {
    let (world, params) = (config.world.bounds(), config.space_params());
    match cells {
        0 => crate::core::space::fitting_tree(world, params, u32::from(shards.max(1)), shards),
        n => crate::core::space::initial_tree(world, params, n, shards),
    }
    .map_err(|e| HostError::Space(e.to_string()))
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
    /// Downstream messages for a proxy that is gone (its client left).
    pub orphaned: u64,
    /// Spawns from other shards that failed in their cell.
    pub spawn_failed: u64,
    /// Messages for a proxy that left this shard, passed on to its shard.
    pub proxy_forwards: u64,
    /// Messages delivered locally.
    pub local: u64,
    /// Messages sent to other shards.
    pub remote: u64,
}

/// The per-shard cell host.
pub struct CellHost {
    pub(super) ctx: ShardContext,
    pub(super) tree: SpaceTree,
    pub(super) cells: BTreeMap<CellId, Cell>,
    /// Looked up per routed message (never iterated in an order that shows).
    pub(super) proxies: FxHashMap<EntityId, Proxy>, // tidy: allow(HashMap): no random seed; lookups, order-free checks
    /// Proxies given work since their outputs and client data were last
    /// taken (`drain_proxies`, `downstream`): only these are visited, not
    /// every proxy every tick. Every call that can give a proxy output or
    /// client data (`send_input`, `send_destroy`, `handle`, an insert)
    /// pushes its entity unless it is listed already (`Proxy::list`:
    /// each at most once, in the order given work, so the list needs no
    /// sort); `downstream` takes it and unlists them.
    pub(super) busy_proxies: Vec<EntityId>,
    /// Where proxies that left their id's shard are, with their hand-over
    /// count (`follow.rs`); only moved proxies have an entry.
    pub(super) proxy_at: BTreeMap<EntityId, (u16, u64)>,
    pub(super) npcs: Vec<Npc>,
    pub(super) local: VecDeque<Routed>,
    pub(super) lanes: Vec<HostBatch>,
    pub(super) speed_mps: f64,
    pub(super) counters: HostCounters,
    pub(super) clients: Clients,
    pub(super) game: Game,
    /// Ticks run (the tick number of view batches).
    pub(super) tick: u64,
    /// The port's byte counters (in, out) as of the last tick.
    port_bytes: (u64, u64),
    /// Load measurement, reports and tree changes (`balance.rs`).
    pub(super) balance: HostBalance,
    /// Mono-space instances (`spaces.rs`, `spaces_host.rs`).
    pub(super) spaces: HostSpaces,
    /// Reused by `tick_cells`: the cell ids of the tick, a cell's outputs.
    scratch_cells: Vec<CellId>,
    scratch_outs: Vec<Outgoing>,
    /// What the live viewer is shown (`viewer.rs`).
    pub(super) viewer: HostViewer,
    /// Proxies following their reals (`follow.rs`).
    pub(super) follow: Follow,
    /// Downstream body buffers for reuse (see the module doc).
    pub(super) down_pool: DownPool,
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
        CellHost::with_door(config, ctx, Arc::new(Door::from_config(config)))
    }

    /// Builds this shard's host from `config`, its gateway sharing `door`
    /// (the node's accounts and used tickets) with the other shards'.
    ///
    /// # Errors
    /// [`HostError`] for a tree or parameter the config cannot produce.
    pub fn with_door(
        config: &Config,
        ctx: ShardContext,
        door: Arc<Door>,
    ) -> Result<CellHost, HostError> {
        let tree = initial_tree(config, config.server.initial_cells, ctx.shards)?;
        let types = Arc::new(TypeRegistry::with_builtins());
        let mut cells = BTreeMap::new();
        let factory = CellFactory::new(config, types.clone());
        for leaf in tree.leaves().filter(|l| l.shard == ctx.shard) {
            let cell = factory
                .build(leaf.cell)
                .map_err(|e| HostError::Params(e.to_string()))?;
            cells.insert(leaf.cell, cell);
        }
        let balance = HostBalance::new(config, ctx, &tree, types.clone());
        let world_cell = tree.cell_at(config.world.bounds().center());
        let spaces = HostSpaces::new(config, ctx, world_cell, types.clone());
        let avatar = types.get(AVATAR).expect("built-in avatar").clone();
        let g = &config.gateway;
        let key = g
            .ticket_key()
            .map_err(|e| HostError::Params(e.to_string()))?;
        let auth = Auth {
            key,
            ttl_max_s: g.ticket_ttl_max_s,
            unix_at_start_s: ctx.unix_at_start_s,
        };
        let clients = Clients::new(
            GatewayParams::from_config(config),
            avatar,
            SpawnRule::new(&g.spawn, g.spawn_seed, ctx.shard.index),
            u64::from(config.server.npcs),
            auth,
            g.connections_max as usize,
            door,
        );
        let mut host = CellHost {
            ctx,
            tree,
            cells,
            proxies: FxHashMap::default(), // tidy: allow(HashMap): see the field
            busy_proxies: Vec::new(),
            proxy_at: BTreeMap::new(),
            npcs: Vec::new(),
            local: VecDeque::new(),
            lanes: (0..ctx.shards).map(|_| HostBatch::default()).collect(),
            speed_mps: config.server.npc_speed_mps,
            counters: HostCounters::default(),
            clients,
            game: Game::new(&types),
            tick: 0,
            port_bytes: (0, 0),
            balance,
            spaces,
            scratch_cells: Vec::new(),
            scratch_outs: Vec::new(),
            viewer: HostViewer::new(config, types.clone()),
            follow: Follow::default(),
            down_pool: DownPool::new(
                usize::try_from(config.server.down_pool_bytes_max).unwrap_or(usize::MAX),
            ),
        };
        host.spawn_npcs(config.server.npcs, &types);
        Ok(host)
    }

    /// What this shard's gateway counted (logins, takeovers, hand-offs,
    /// refusals by reason).
    pub fn client_counters(&self) -> &super::clients::ClientCounters {
        self.clients.counters()
    }

    /// What this shard's game logic counted (inputs applied at reals).
    pub fn game_counters(&self) -> &crate::game::GameCounters {
        self.game.counters()
    }

    /// Balancing on this shard (counters, the tree snapshot for plots).
    pub fn balance(&self) -> &HostBalance {
        &self.balance
    }

    /// Shard 0 publishes a tree snapshot into `sink` every balancing period
    /// (for plots of the tree over time).
    pub fn set_snapshot_sink(&mut self, sink: SnapshotSink) {
        self.balance.set_snapshot_sink(sink);
    }

    /// The tree's leaves with their rects, shards and last known loads.
    pub fn tree_snapshot(&self) -> TreeSnapshot {
        self.balance.snapshot(&self.tree)
    }

    /// The spaces' counters (the directory's on shard 0).
    pub fn space_counters(&self) -> SpaceCounters {
        self.spaces.counters()
    }

    /// This host's counters.
    pub fn counters(&self) -> HostCounters {
        self.counters
    }

    /// The space tree (same on every shard).
    pub fn tree(&self) -> &SpaceTree {
        &self.tree
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
        self.cell_counters().migrations_out
    }

    /// The counters of every cell this shard hosts or hosted: the live
    /// cells' and those of cells dropped after a merge or an instance's
    /// end, so the host's exported counters never run backwards.
    pub fn cell_counters(&self) -> crate::core::cell::Counters {
        let mut total = self.balance.dropped_cell_counters().clone();
        total.absorb(&self.spaces.dropped_cells);
        for c in self.cells.values() {
            total.absorb(c.counters());
        }
        total
    }

    pub(super) fn shard_of(&self, to: Dest) -> Option<ShardId> {
        match to {
            Dest::Cell(c) => self
                .tree
                .shard_of(c)
                .or_else(|| self.balance.retired_shard(c))
                .or_else(|| self.spaces.shard_of(c)),
            Dest::Proxy(e) => Some(ShardId::local(self.proxy_shard(e))),
        }
    }

    /// The shard of `e`'s proxy as this shard knows it: here, where the
    /// newest notice says, or the id's shard.
    fn proxy_shard(&self, e: EntityId) -> u16 {
        let me = self.ctx.shard.index;
        // The usual case, without a look at the proxies: no notice names
        // `e` and its id names this shard, so it is here either way.
        if entity_shard(e) == me && !self.proxy_at.contains_key(&e) {
            return me;
        }
        if self.proxies.contains_key(&e) {
            return me;
        }
        match self.proxy_at.get(&e) {
            Some(&(s, _)) => s,
            None => entity_shard(e),
        }
    }

    /// Routes one output: local queue or this tick's lane to its shard.
    pub(super) fn route(&mut self, from: WireSource, out: Outgoing) {
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

    /// Delivers the same-shard messages routed so far, in order. Called at
    /// the phase boundaries of a tick, so a client's input, the view batch
    /// that shows it and its way back to a proxy on this shard take one
    /// tick, not one per hop; what a delivery makes waits for the next
    /// boundary (deliveries never recurse).
    fn deliver_local(&mut self, now: Time) {
        let mut local = std::mem::take(&mut self.local);
        for item in local.drain(..) {
            self.deliver(now, item);
        }
        // Keep the queue's allocation; anything routed meanwhile goes after.
        local.append(&mut self.local);
        self.local = local;
    }

    /// Step 4: every cell runs its inputs, the game logic applies them, and
    /// the cell publishes (syncs, views, ghost upkeep, migrations); the game
    /// runs again for what the second half reported. Outputs are routed.
    fn tick_cells(&mut self, now: Time) {
        let mut ids = std::mem::take(&mut self.scratch_cells);
        ids.clear();
        ids.extend(self.cells.keys().copied());
        let mut outs = std::mem::take(&mut self.scratch_outs);
        for &id in &ids {
            let cell = self.cells.get_mut(&id).expect("listed");
            let started = self.balance.stamp();
            // The shard's pool, lent for the cell's tick.
            std::mem::swap(cell.down_pool_mut(), &mut self.down_pool);
            cell.run_inputs(now);
            match self.spaces.layout(id) {
                Some(solo) => {
                    self.game.run(now, cell, solo);
                    cell.publish(now, solo);
                    self.game.run(now, cell, solo);
                }
                None => {
                    self.game.run(now, cell, &self.tree);
                    cell.publish(now, &self.tree);
                    self.game.run(now, cell, &self.tree);
                }
            }
            std::mem::swap(cell.down_pool_mut(), &mut self.down_pool);
            self.balance.cell_done(id, started);
            outs.extend(std::iter::from_fn(|| cell.poll_output()));
            self.note_outputs(now, id, &outs);
            for o in outs.drain(..) {
                // A cell's view batches and results for a proxy on this
                // shard go to it now, not through the local queue: the
                // proxy puts its downstream in order by sequence numbers
                // and takes the newest epoch of its real whatever the
                // order, and nothing reads proxies until the tick's
                // deliveries are done, so only the queue's round trip is
                // saved (a 112-byte item written and read back per batch).
                let Outgoing {
                    to: Dest::Proxy(e),
                    msg: Msg::Proxy(m),
                } = o
                else {
                    self.route(WireSource::Cell(id), o);
                    continue;
                };
                match self.hand_to_local_proxy(now, e, m) {
                    Ok(()) => self.counters.local += 1,
                    Err(m) => {
                        let back = Outgoing {
                            to: Dest::Proxy(e),
                            msg: Msg::Proxy(m),
                        };
                        self.route(WireSource::Cell(id), back);
                    }
                }
            }
        }
        self.scratch_cells = ids;
        self.scratch_outs = outs;
    }

    fn deliver(&mut self, now: Time, item: Routed) {
        // A cell not (yet) here: parked if it is on its way (one presence
        // check in the usual case, the cell here, before the lookup below).
        if let Dest::Cell(c) = item.to {
            if !self.cells.contains_key(&c) {
                if is_instance_cell(c) {
                    if self.spaces.awaits(c) {
                        self.spaces.park(item);
                        return;
                    }
                } else if self.balance.awaits(c, &self.tree) {
                    self.balance.park(item);
                    return;
                }
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
            (Dest::Proxy(e), Msg::Proxy(m)) => match self.hand_to_local_proxy(now, e, m) {
                Ok(()) => {}
                // Its proxy followed its real: passed on (the proxy puts
                // downstream back in order by its sequence numbers).
                Err(m)
                    if self
                        .proxy_at
                        .get(&e)
                        .is_some_and(|&(s, _)| s != self.ctx.shard.index) =>
                {
                    self.counters.proxy_forwards += 1;
                    let out = Outgoing {
                        to: Dest::Proxy(e),
                        msg: Msg::Proxy(m),
                    };
                    self.route(item.from, out);
                }
                // On its way here (following its real): held until it
                // arrives; else its client left (here, or after its proxy
                // followed its real here).
                Err(m) => {
                    if self.proxy_incoming(e) {
                        let item = Routed {
                            from: item.from,
                            to: Dest::Proxy(e),
                            msg: Msg::Proxy(m),
                        };
                        self.park_for_proxy(item);
                    } else {
                        self.counters.orphaned += 1;
                    }
                }
            },
            _ => self.counters.misrouted += 1,
        }
    }

    /// Hands `m` to `e`'s proxy if it is on this shard (marked busy, and
    /// noted if it learnt its real moved); else gives `m` back.
    fn hand_to_local_proxy(&mut self, now: Time, e: EntityId, m: ProxyMsg) -> Result<(), ProxyMsg> {
        let Some(p) = self.proxies.get_mut(&e) else {
            return Err(m);
        };
        let epoch = p.epoch();
        let _ = p.handle(now, m);
        if p.list() {
            self.busy_proxies.push(e);
        }
        if p.epoch() != epoch {
            self.follow.moved.push(e);
        }
        Ok(())
    }

    fn drain_inbox(&mut self, now: Time, inbox: Inbox<'_>) {
        for env in inbox {
            if self.balance.handle_envelope(now, &env) || self.space_envelope(now, &env) {
                continue;
            }
            // Read in place: the batch is validated once, then each spawn
            // and item is taken out of the archive on its own (no owned
            // copy of the whole batch first). Each item must be owned
            // after all: a ghost's reorder buffer and cache keep it.
            let Ok(batch) = env.access::<HostBatch>(KIND_HOST_BATCH) else {
                self.counters.bad_envelopes += 1;
                continue;
            };
            for s in batch.spawns.iter() {
                match rkyv::deserialize::<Spawn, rkyv::rancor::Error>(s) {
                    Ok(s) if self.spawn_here(now, &s).is_ok() => {}
                    Ok(_) => self.counters.spawn_failed += 1,
                    Err(_) => self.counters.bad_envelopes += 1,
                }
            }
            for at in batch.proxies.iter() {
                match rkyv::deserialize::<ProxyAt, rkyv::rancor::Error>(at) {
                    Ok(at) => self.proxy_moved(at),
                    Err(_) => self.counters.bad_envelopes += 1,
                }
            }
            for item in batch.items.iter() {
                match rkyv::deserialize::<Routed, rkyv::rancor::Error>(item) {
                    Ok(item) => self.deliver(now, item),
                    Err(_) => self.counters.bad_envelopes += 1,
                }
            }
        }
    }

    /// Downstream's metrics: orphaned messages and the pool's.
    fn export_down_metrics(&self, sink: &mut MetricSink) {
        sink.counter(
            "host_orphaned",
            "downstream messages for a proxy whose client left",
            self.counters.orphaned,
        );
        let p = self.down_pool.counters();
        sink.counter(
            "host_down_buffers_made",
            "downstream bodies made in a new buffer (the pool was empty)",
            p.made,
        );
        sink.counter(
            "host_down_buffers_reused",
            "downstream bodies made in a recycled buffer",
            p.reused,
        );
        sink.counter(
            "host_down_buffers_freed",
            "downstream buffers freed at server.down_pool_bytes_max",
            p.freed,
        );
        sink.gauge(
            "host_down_pool_bytes",
            "bytes of downstream buffers kept for reuse",
            self.down_pool.held_bytes() as u64,
        );
    }

    /// Queues `item` for local delivery next tick.
    pub(super) fn requeue(&mut self, item: Routed) {
        self.local.push_back(item);
    }

    fn flush(&mut self, out: &mut Outbox) {
        for (i, lane) in self.lanes.iter_mut().enumerate() {
            if lane.is_empty() {
                continue;
            }
            let body = Body::encode(&*lane);
            // Downstream bodies are copied into the envelope: their
            // buffers go back to the pool.
            for item in lane.items.drain(..) {
                if let Msg::Proxy(ProxyMsg::Downstream { data, .. }) = item.msg {
                    self.down_pool.give(data.into_buffer());
                }
            }
            lane.spawns.clear();
            lane.proxies.clear();
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
    /// Stamps this shard's work (the balancer's load measurement) with
    /// `clock` (the runtime gives its `MonotonicClock`; without one no work
    /// is measured: the host reads no clock itself).
    fn set_cost_clock(&mut self, clock: Box<dyn crate::core::load::CostClock + Send>) {
        self.balance.set_cost_clock(clock);
    }

    fn on_tick(&mut self, now: Time, inbox: Inbox<'_>, out: &mut Outbox, port: &mut ClientPort) {
        self.tick += 1;
        let tick_start = self.balance.stamp();
        self.deliver_local(now);
        self.drain_inbox(now, inbox);
        self.port_events(now, port);
        self.follow_reals(now, port);
        self.read_clients(now, port);
        self.spaces_step(now, out);
        self.npc_logic(self.ctx.tick.as_secs_f64());
        // Inputs whose real is on this shard reach it before the cells tick.
        self.drain_proxies();
        self.deliver_local(now);
        self.tick_cells(now);
        // View batches and results for this shard's proxies reach their
        // sockets in this tick.
        self.deliver_local(now);
        self.drain_proxies();
        self.downstream();
        self.write_clients(now, port);
        let pc = port.counters();
        self.port_bytes = (pc.bytes_in, pc.bytes_out);
        self.follow_npcs();
        self.flush(out);
        let (tree, cells) = (&mut self.tree, &mut self.cells);
        self.balance.after_tick(now, tick_start, tree, cells, out);
        for item in self.balance.unpark(&self.tree) {
            self.local.push_back(item);
        }
        self.spaces_after_tick(now);
    }

    fn on_shutdown(&mut self, _now: Time, port: &mut ClientPort) {
        self.kick_all(port);
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

    fn export_view(&mut self, _now: Time, sink: &mut ViewSink) {
        self.fill_view(sink);
    }

    fn export_metrics(&self, sink: &mut MetricSink) {
        let k = self.cell_counters();
        let cells = [
            (
                "host_migrations",
                "reals migrated out of this shard's cells",
                k.migrations_out,
            ),
            (
                "host_forwards",
                "messages forwarded to a moved real",
                k.forwards,
            ),
            (
                "host_migrations_held",
                "checks that held a real handed over under a newer tree than this shard's",
                k.migrations_held,
            ),
            (
                "host_early_held",
                "real-bound messages held until their entity arrived",
                k.early_held,
            ),
            ("host_ghosts_created", "CreateGhost sent", k.ghosts_created),
            ("host_ghosts_deleted", "DeleteGhost sent", k.ghosts_deleted),
        ];
        for (name, help, value) in cells {
            sink.counter(name, help, value);
        }
        export_view_metrics(&k, sink);
        sink.gauge("host_reals", "reals hosted", self.reals() as u64);
        sink.gauge("host_ghosts", "ghosts hosted", self.ghosts() as u64);
        sink.counter(
            "host_misrouted",
            "messages for an unknown cell or proxy",
            self.counters.misrouted,
        );
        sink.counter(
            "host_bad_envelopes",
            "envelopes that failed to decode",
            self.counters.bad_envelopes,
        );
        self.export_down_metrics(sink);
        sink.counter(
            "host_remote_messages",
            "cell and proxy messages sent to other shards",
            self.counters.remote,
        );
        sink.counter(
            "gateway_bytes_in",
            "bytes received from clients",
            self.port_bytes.0,
        );
        sink.counter(
            "gateway_bytes_out",
            "bytes written to clients",
            self.port_bytes.1,
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
            "host_viewer_events_dropped",
            "viewer events not kept (admin.viewer_events_max waiting between publishes)",
            self.viewer.dropped,
        );
        self.export_client_metrics(sink);
        self.export_follow_metrics(sink);
        self.export_space_metrics(sink);
    }
}

/// The cells' client-view counters (`k`: this shard's cells together).
fn export_view_metrics(k: &crate::core::cell::Counters, sink: &mut MetricSink) {
    let views = [
        (
            "host_aoi_enters",
            "AOI enters sent to clients",
            k.view_enters,
        ),
        (
            "host_aoi_leaves",
            "AOI leaves sent to clients",
            k.view_leaves,
        ),
        (
            "host_view_updates",
            "entity versions sent to clients as updates",
            k.view_updates,
        ),
        (
            "host_view_resyncs",
            "resync snapshots sent to clients",
            k.view_resyncs,
        ),
        (
            "host_view_detail_cut",
            "detail property changes not sent to clients beyond their reach",
            k.view_detail_cut,
        ),
        (
            "host_view_details",
            "level-of-detail catch-ups sent to clients",
            k.view_details,
        ),
        (
            "host_view_visits",
            "shown entities the clients' updates brought up to their copies",
            k.view_visits,
        ),
        (
            "host_view_skips",
            "shown entities the clients' updates skipped (view.band_rate_visits)",
            k.view_skips,
        ),
        (
            "host_view_quiet",
            "of the visits, shown entities passed by unread (quiet since the last update)",
            k.view_quiet,
        ),
        (
            "host_aoi_areas_updated",
            "observer areas brought up to date (aoi.update_every_flushes divides it)",
            k.aoi_areas_updated,
        ),
        (
            "host_view_batches",
            "client view batches (one per observer per tick with news)",
            k.view_batches,
        ),
        (
            "host_view_bytes",
            "bytes in client view batches",
            k.view_bytes,
        ),
        (
            "host_acks_carried",
            "input acknowledgements that rode a view batch (no downstream message of their own)",
            k.acks_carried,
        ),
    ];
    for (name, help, value) in views {
        sink.counter(name, help, value);
    }
}

/// Proxy parameters the host gives its proxies.
pub fn proxy_params() -> ProxyParams {
    ProxyParams::default()
}

/// Holds `proxy` as `e`'s in `proxies`, listed in `busy` as given work (a
/// proxy handed over from another shard may still be marked as listed
/// there).
pub(super) fn list_new_proxy(
    proxies: &mut FxHashMap<EntityId, Proxy>, // tidy: allow(HashMap): the host's table
    busy: &mut Vec<EntityId>,
    e: EntityId,
    mut proxy: Proxy,
) {
    proxy.unlist();
    proxy.list();
    busy.push(e);
    let old = proxies.insert(e, proxy);
    debug_assert!(old.is_none(), "one proxy per avatar");
}
