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
//! The host glue (requests from sessions, answers to them, routing) is in
//! `spaces_host.rs`. Owns no sessions or proxies; must not touch sockets.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use crate::config::Config;
use crate::core::cell::{Cell, CellParams, SoloLayout, ViewParams};
use crate::core::entity::TypeRegistry;
use crate::core::geom::Rect;
use crate::core::ids::{CellId, EntityId, ShardId, SpaceId};
use crate::core::space::{
    EnterTarget, InstanceError, InstanceEvent, Instances, Placement, ShardLoad, SpaceKind,
};
use crate::core::time::Time;
use crate::runtime::ShardContext;
use crate::server::balance::WORLD_SPACE;
use crate::server::host::Routed;

/// The envelope kind of a [`SpaceMsg`].
pub const KIND_SPACES: u16 = 3;
/// The first instance cell id.
pub const INSTANCE_CELL_BASE: u32 = 1 << 24;
/// The first instance space id.
pub const INSTANCE_SPACE_BASE: u32 = 1000;
/// Most messages parked for instance cells not known yet.
const PARKED_MAX: usize = 16_384;
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
struct Known {
    shard: ShardId,
}

/// The spaces state of one shard (see the module doc).
pub struct HostSpaces {
    pub(super) ctx: ShardContext,
    pub(super) world_type: u32,
    directory: Option<Instances>,
    round: Duration,
    next_round: Time,
    next_version: u64,
    applied: u64,
    received: Vec<DirEvent>,
    known: BTreeMap<CellId, Known>,
    newest: Option<CellId>,
    layouts: BTreeMap<CellId, SoloLayout>,
    retired: Vec<(CellId, Time)>,
    pub(super) parked: Vec<Routed>,
    /// Requests to the directory (shard 0); answers go to the proxy's
    /// shard (encoded in the entity id).
    pub(super) requests: Vec<SpaceMsg>,
    /// Answers for this shard's sessions.
    pub(super) answers: Vec<(EntityId, Result<Target, u16>)>,
    /// To send at the end of the tick.
    pub(super) outgoing: Vec<(ShardId, SpaceMsg)>,
    bounds: Rect,
    cell_params: CellParams,
    views: ViewParams,
    types: Arc<TypeRegistry>,
    pub(super) counters: SpaceCounters,
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
            requests: Vec::new(),
            answers: Vec::new(),
            outgoing: Vec::new(),
            bounds: config.world.bounds(),
            cell_params: config.cell_params(),
            views: super::host::view_params(config),
            types,
            counters: SpaceCounters::default(),
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
        if self.parked.len() >= PARKED_MAX {
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
        let cell = Cell::with_views(
            e.cell,
            self.cell_params.clone(),
            self.views.clone(),
            self.types.clone(),
        )
        .expect("validated cell params");
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
                cells.remove(&c);
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

    /// Shard 0: places every request, runs a round when due, and numbers
    /// the directory's events (applied here, broadcast to the others).
    /// `arrival` is where the world's tree puts a point (for the way back).
    pub fn run_directory(&mut self, now: Time, arrival: &dyn Fn(f64, f64) -> CellId) {
        let Some(mut d) = self.directory.take() else {
            self.requests.clear();
            return;
        };
        let loads = self.shard_loads();
        for req in std::mem::take(&mut self.requests) {
            match req {
                SpaceMsg::Enter {
                    entity,
                    from,
                    by_type,
                    id,
                    world_exit,
                } => {
                    let target = if by_type {
                        EnterTarget::Type(id)
                    } else {
                        EnterTarget::Id(SpaceId(id))
                    };
                    let result = self.place(&mut d, now, from, target, world_exit, &loads, arrival);
                    let to = ShardId {
                        node: self.ctx.shard.node,
                        index: super::host::entity_shard(entity),
                    };
                    self.answer(to, entity, result);
                }
                SpaceMsg::Left { space } => {
                    let _ = d.leave(now, space);
                }
                _ => {}
            }
        }
        if now >= self.next_round {
            self.next_round = now + self.round;
            d.handle_timeout(now, &loads);
        }
        let mut events = Vec::new();
        while let Some(ev) = d.poll_event() {
            events.push(self.number(ev));
        }
        self.directory = Some(d);
        if !events.is_empty() {
            for s in self.ctx.all_shards().filter(|s| *s != self.ctx.shard) {
                self.outgoing.push((s, SpaceMsg::Directory(events.clone())));
            }
            self.received.extend(events);
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn place(
        &mut self,
        d: &mut Instances,
        now: Time,
        from: SpaceId,
        target: EnterTarget,
        world_exit: Option<(f64, f64)>,
        loads: &[ShardLoad],
        arrival: &dyn Fn(f64, f64) -> CellId,
    ) -> Result<Target, u16> {
        use crate::wire::client::ErrorCode as C;
        let p: Placement = d.enter(now, target, loads).map_err(|e| {
            self.counters.space_refused += 1;
            match e {
                InstanceError::UnknownType(_) | InstanceError::DuplicateType(_) => {
                    C::UnknownSpaceType
                }
                InstanceError::UnknownSpace(_) => C::UnknownSpace,
                InstanceError::Full(_)
                | InstanceError::InstanceFull(_)
                | InstanceError::NoShard => C::SpaceFull,
            }
            .code()
        })?;
        if p.space == from {
            let _ = d.leave(now, p.space);
            self.counters.space_refused += 1;
            return Err(C::SpaceNotAllowed.code());
        }
        let _ = d.leave(now, from);
        self.counters.space_enters += 1;
        let type_id = d.type_of(p.space).unwrap_or(0);
        let (x, z, cell) = if p.space == WORLD_SPACE {
            let c = self.bounds.center();
            let (x, z) = world_exit.unwrap_or((c.x, c.z));
            (x, z, arrival(x, z))
        } else {
            let c = self.bounds.center();
            (c.x, c.z, p.cell)
        };
        Ok(Target {
            space: p.space,
            type_id,
            cell,
            x,
            z,
        })
    }

    fn answer(&mut self, to: ShardId, entity: EntityId, result: Result<Target, u16>) {
        if to == self.ctx.shard {
            self.answers.push((entity, result));
        } else {
            self.outgoing
                .push((to, SpaceMsg::Placed { entity, result }));
        }
    }

    fn number(&mut self, ev: InstanceEvent) -> DirEvent {
        let version = self.next_version;
        self.next_version += 1;
        match ev {
            InstanceEvent::Created {
                space,
                type_id,
                cell,
                shard,
            } => {
                self.counters.instances_created += 1;
                DirEvent {
                    version,
                    created: true,
                    space,
                    type_id,
                    cell,
                    shard,
                }
            }
            InstanceEvent::Destroyed { space, cell, shard } => {
                self.counters.instances_reclaimed += 1;
                DirEvent {
                    version,
                    created: false,
                    space,
                    type_id: 0,
                    cell,
                    shard,
                }
            }
        }
    }

    /// Shard loads for placing instances: instance cells hosted by each
    /// shard (spreads them round-robin-like).
    fn shard_loads(&self) -> Vec<ShardLoad> {
        self.ctx
            .all_shards()
            .map(|s| ShardLoad {
                shard: s,
                load: self.known.values().filter(|k| k.shard == s).count() as f64,
            })
            .collect()
    }
}
