//! Mono spaces on the running server: the instance directory on shard 0,
//! its replica on every shard, and the instance cells a shard hosts.
//!
//! - **Directory** (shard 0): a [`core::space::Instances`](Instances) over
//!   the config's `[[spaces.types]]`, the world registered as the one union
//!   space ([`WORLD_SPACE`]). Requests ([`SpaceMsg::Enter`], from the
//!   proxy's shard) are placed in arrival order; leaves
//!   ([`SpaceMsg::Left`], a disconnect) counted; every `spaces.round_ms`
//!   a round creates instances for heavy types and reclaims empty ones.
//! - **Replica** (every shard): instance creations and destructions are
//!   numbered (`version`, from 1) and broadcast in order
//!   ([`SpaceMsg::Directory`]); every shard applies them in version order
//!   on receipt, so it knows each instance's cell and shard (routing), and
//!   the hosting shard creates the instance's one cell (ticked against its
//!   own [`SoloLayout`]) or drops it once empty.
//! - **Ids**: instance cells start at [`INSTANCE_CELL_BASE`] (tree cells
//!   stay far below), instance spaces at [`INSTANCE_SPACE_BASE`]; both only
//!   grow, so a message for an instance cell past the newest known one is
//!   parked until its creation arrives.
//!
//! - **Bounds**: spaces (the world and live instances) at most
//!   `spaces.instances_max`; parked messages at most `spaces.parked_max`;
//!   requests per tick at most one per session (a session has one change
//!   under way at a time); a destroyed instance's cell is kept at most
//!   10 s waiting to empty.
//!
//! The host glue (requests from sessions, answers to them, routing) is in
//! `spaces_host.rs`, the directory's round in `spaces_directory.rs`. Owns no sessions or proxies; must not touch sockets.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use crate::config::Config;
use crate::core::cell::{Cell, Counters as CellCounters, SoloLayout};
use crate::core::entity::TypeRegistry;
use crate::core::geom::Rect;
use crate::core::ids::{CellId, EntityId, ShardId, SpaceId};
use crate::core::space::{Instances, SpaceKind};
use crate::core::time::Time;
use crate::server::balance::WORLD_SPACE;
use crate::server::cell_factory::CellFactory;
use crate::server::host::Routed;
use crate::shard::ShardContext;

/// The envelope kind of a [`SpaceMsg`].
pub const KIND_SPACES: u16 = 3;
/// The first instance cell id.
pub const INSTANCE_CELL_BASE: u32 = 1 << 24;
/// The first instance space id.
pub const INSTANCE_SPACE_BASE: u32 = 1000;
/// How long a destroyed instance's cell is kept at most, waiting to empty.
const RETIRED_KEEP: Duration = Duration::from_secs(10);

/// True if `c` is an instance cell id.
pub fn is_instance_cell(c: CellId) -> bool {
    c.0 >= INSTANCE_CELL_BASE
}

/// One change of the directory replica.
#[derive(Clone, Copy, Debug, PartialEq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
pub struct DirEvent {
    /// Its number (from 1, no gaps).
    pub version: u64,
    /// Created (else destroyed).
    pub created: bool,
    /// The instance.
    pub space: SpaceId,
    /// Its type.
    pub type_id: u32,
    /// Its one cell.
    pub cell: CellId,
    /// The cell's shard.
    pub shard: ShardId,
}

/// Space traffic between shards.
#[derive(Clone, Debug, PartialEq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
pub enum SpaceMsg {
    /// Place `entity` (to shard 0, from its proxy's shard).
    Enter {
        /// The player.
        entity: EntityId,
        /// The shard of its proxy, which the answer goes to (not always
        /// the entity id's: a proxy follows its real).
        reply_to: u16,
        /// The space it is counted in now.
        from: SpaceId,
        /// By type (else by space id).
        by_type: bool,
        /// The type or space id.
        id: u32,
        /// Where it left the world (the way back), if it did.
        world_exit: Option<(f64, f64)>,
    },
    /// A player counted in `space` is gone (to shard 0).
    Left {
        /// The space.
        space: SpaceId,
    },
    /// The answer to `Enter` (to the proxy's shard).
    Placed {
        /// The player.
        entity: EntityId,
        /// Placed here, or refused with this `ErrorCode` code.
        result: Result<Target, u16>,
    },
    /// Directory changes, in version order (from shard 0).
    Directory(Vec<DirEvent>),
}

/// Where a placed player goes.
#[derive(Clone, Copy, Debug, PartialEq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
pub struct Target {
    /// The space.
    pub space: SpaceId,
    /// Its type.
    pub type_id: u32,
    /// The cell at the arrival point.
    pub cell: CellId,
    /// Arrival point x.
    pub x: f64,
    /// Arrival point z.
    pub z: f64,
}

/// What the spaces did (exported as metrics; the directory's on shard 0).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct SpaceCounters {
    /// Instances live (the directory's, shard 0; 0 elsewhere).
    pub instances_live: u64,
    /// Instance cells hosted here.
    pub cells_hosted: u64,
    /// Instances created.
    pub instances_created: u64,
    /// Instances reclaimed.
    pub instances_reclaimed: u64,
    /// Players placed in a space.
    pub space_enters: u64,
    /// Requests refused.
    pub space_refused: u64,
    /// Instance cells created on this shard.
    pub cells_created: u64,
    /// Instance cells dropped on this shard.
    pub cells_dropped: u64,
    /// Messages parked for an instance cell not known yet.
    pub parked: u64,
    /// Messages dropped (parking bound, undecodable bodies).
    pub dropped: u64,
}

/// An instance as every shard knows it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct Known {
    pub(super) shard: ShardId,
}

/// The spaces state of one shard (see the module doc).
pub struct HostSpaces {
    pub(super) ctx: ShardContext,
    pub(super) world_type: u32,
    pub(super) directory: Option<Instances>,
    pub(super) round: Duration,
    pub(super) next_round: Time,
    pub(super) next_version: u64,
    pub(super) applied: u64,
    pub(super) received: Vec<DirEvent>,
    pub(super) known: BTreeMap<CellId, Known>,
    pub(super) newest: Option<CellId>,
    pub(super) layouts: BTreeMap<CellId, SoloLayout>,
    pub(super) retired: Vec<(CellId, Time)>,
    pub(super) parked: Vec<Routed>,
    pub(super) parked_max: usize,
    /// Requests to the directory (shard 0); answers go to the proxy's
    /// shard (encoded in the entity id).
    pub(super) requests: Vec<SpaceMsg>,
    /// Answers for this shard's sessions.
    pub(super) answers: Vec<(EntityId, Result<Target, u16>)>,
    /// To send at the end of the tick.
    pub(super) outgoing: Vec<(ShardId, SpaceMsg)>,
    pub(super) bounds: Rect,
    pub(super) cells: CellFactory,
    pub(super) counters: SpaceCounters,
    /// The summed counters of the instance cells this shard dropped.
    pub(super) dropped_cells: CellCounters,
}

impl std::fmt::Debug for HostSpaces {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostSpaces")
            .field("known", &self.known.len())
            .field("counters", &self.counters)
            .finish()
    }
}

impl HostSpaces {
    /// This shard's state; shard 0 also runs the directory.
    ///
    /// # Panics
    /// If the validated config's types are refused (a bug).
    pub fn new(
        config: &Config,
        ctx: ShardContext,
        world_cell: CellId,
        types: Arc<TypeRegistry>,
    ) -> Self {
        let t = &config.spaces.types;
        let world_type = t
            .iter()
            .find(|t| t.kind == SpaceKind::Union)
            .map_or(1, |t| t.type_id);
        let directory = (ctx.shard.index == 0 && !t.is_empty()).then(|| {
            let mut d = Instances::new(
                config.spaces.instance_params(),
                t,
                SpaceId(INSTANCE_SPACE_BASE),
                CellId(INSTANCE_CELL_BASE),
            )
            .expect("validated space types");
            d.add_union(WORLD_SPACE, world_type, world_cell, ShardId::local(0))
                .expect("the union type exists");
            d
        });
        let round = Duration::from_millis(config.spaces.round_ms);
        HostSpaces {
            ctx,
            world_type,
            directory,
            round,
            next_round: Time::ZERO + round,
            next_version: 1,
            applied: 0,
            received: Vec::new(),
            known: BTreeMap::new(),
            newest: None,
            layouts: BTreeMap::new(),
            retired: Vec::new(),
            parked: Vec::new(),
            parked_max: config.spaces.parked_max,
            requests: Vec::new(),
            answers: Vec::new(),
            outgoing: Vec::new(),
            bounds: config.world.bounds(),
            cells: CellFactory::new(config, types),
            counters: SpaceCounters::default(),
            dropped_cells: CellCounters::default(),
        }
    }

    /// Counters (instances live: the directory's on shard 0).
    pub fn counters(&self) -> SpaceCounters {
        let mut c = self.counters;
        c.instances_live = self
            .directory
            .as_ref()
            .map_or(0, |d| d.len().saturating_sub(1) as u64);
        c.cells_hosted = self.layouts.len() as u64;
        c
    }

    /// The layout of an instance cell hosted here.
    pub fn layout(&self, c: CellId) -> Option<&SoloLayout> {
        self.layouts.get(&c)
    }

    /// The shard of instance cell `c`, if known.
    pub fn shard_of(&self, c: CellId) -> Option<ShardId> {
        self.known.get(&c).map(|k| k.shard)
    }

    /// True if `c` is an instance cell whose creation has not arrived yet.
    pub fn awaits(&self, c: CellId) -> bool {
        is_instance_cell(c) && !self.known.contains_key(&c) && self.newest.is_none_or(|n| c > n)
    }

    /// Parks `item` until its instance cell is known (bounded).
    pub fn park(&mut self, item: Routed) {
        if self.parked.len() >= self.parked_max {
            self.counters.dropped += 1;
            return;
        }
        self.counters.parked += 1;
        self.parked.push(item);
    }

    /// Takes directory changes (applied in version order by `apply`).
    pub fn receive(&mut self, events: Vec<DirEvent>) {
        self.received.extend(events);
    }

    /// Applies the received changes in version order: creates or drops
    /// the instance cells of this shard.
    pub fn apply(&mut self, now: Time, cells: &mut BTreeMap<CellId, Cell>) {
        self.received.sort_by_key(|e| e.version);
        let mut i = 0;
        while i < self.received.len() {
            let e = self.received[i];
            if e.version <= self.applied {
                i += 1;
                continue;
            }
            if e.version > self.applied + 1 {
                break;
            }
            self.applied = e.version;
            self.apply_one(now, e, cells);
            i += 1;
        }
        self.received.drain(..i);
    }

    fn apply_one(&mut self, now: Time, e: DirEvent, cells: &mut BTreeMap<CellId, Cell>) {
        if !e.created {
            if e.shard == self.ctx.shard {
                self.retired.push((e.cell, now));
            } else {
                self.known.remove(&e.cell);
            }
            return;
        }
        self.known.insert(e.cell, Known { shard: e.shard });
        self.newest = self.newest.max(Some(e.cell));
        if e.shard != self.ctx.shard {
            return;
        }
        let cell = self.cells.build(e.cell).expect("validated cell params");
        cells.insert(e.cell, cell);
        let layout = SoloLayout {
            cell: e.cell,
            rect: self.bounds,
        };
        self.layouts.insert(e.cell, layout);
        self.counters.cells_created += 1;
    }

    /// Drops destroyed instance cells of this shard once empty (or kept
    /// too long).
    pub fn drop_retired(&mut self, now: Time, cells: &mut BTreeMap<CellId, Cell>) {
        let mut i = 0;
        while i < self.retired.len() {
            let (c, since) = self.retired[i];
            let empty = cells.get(&c).is_none_or(|x| x.is_empty());
            if empty || now >= since + RETIRED_KEEP {
                if let Some(cell) = cells.remove(&c) {
                    self.dropped_cells.absorb(cell.counters());
                }
                self.layouts.remove(&c);
                self.known.remove(&c);
                self.counters.cells_dropped += 1;
                self.retired.swap_remove(i);
            } else {
                i += 1;
            }
        }
    }

    /// Parked messages whose instance cell is now known (or never will be).
    pub fn unpark(&mut self) -> Vec<Routed> {
        if self.parked.is_empty() {
            return Vec::new();
        }
        let parked = std::mem::take(&mut self.parked);
        let (ready, wait): (Vec<Routed>, Vec<Routed>) =
            parked.into_iter().partition(|r| match r.to {
                crate::core::cell::Dest::Cell(c) => !self.awaits(c),
                crate::core::cell::Dest::Proxy(_) => true,
            });
        self.parked = wait;
        ready
    }
}
