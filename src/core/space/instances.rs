//! Space types and the instance directory of the space service (seed
//! `space_type_info`, `mono_space_info`, `check_heavy_load_auto_create`).
//!
//! A *union* space type is one big world cut into cells (balanced by
//! `service.rs`; exactly one space per type, registered by the owner). A
//! *mono* type (town, dungeon, team dungeon, match) is instanced: each
//! instance is one cell on one shard. Players enter by space id or by type;
//! by type, the least loaded instance is chosen (seed
//! `auto_select_when_empty_id`), or a new one is created when there is none.
//! Every round ([`Instances::handle_timeout`]) a new instance is created for
//! each type with `auto_create_on_heavy_load` whose average players per
//! instance exceed `heavy_load_threshold x max_player_load`, and instances
//! empty for `reclaim_empty_after_ms` are destroyed (never the last one of a
//! type with `keep_one`).
//!
//! Outputs ([`InstanceEvent`]) tell the runtime which cells to create and
//! destroy; a teleport is a leave plus an enter, and the runtime moves the
//! real through the ordinary migration path. Owns only bookkeeping: must not
//! know about trees, entities or messages.

use super::balance::least_loaded;
use super::load::ShardLoad;
use crate::core::ids::{CellId, ShardId, SpaceId};
use crate::core::time::Time;
use std::collections::VecDeque;
use std::time::Duration;

/// What a space type is (seed flags `is_union_space`, `is_town_space`, ...).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SpaceKind {
    /// One seamless world, cut into cells and balanced.
    Union,
    /// An instanced town.
    Town,
    /// A single-player dungeon.
    Dungeon,
    /// A team dungeon.
    TeamDungeon,
    /// A match arena.
    Match,
}

/// One space type from the config (`[[spaces.types]]`).
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SpaceTypeConfig {
    /// The type number (seed `space_no`), unique.
    pub type_id: u32,
    /// A name for logs.
    pub name: String,
    /// What it is.
    pub kind: SpaceKind,
    /// Players one instance is meant for (seed `max_player_load`).
    pub max_player_load: u32,
    /// Entering by type picks the least loaded instance (else always a new
    /// one, as for a private dungeon).
    #[serde(default = "yes")]
    pub auto_select_when_empty_id: bool,
    /// Create an instance when the average load passes the threshold.
    #[serde(default)]
    pub auto_create_on_heavy_load: bool,
    /// Never reclaim the last instance.
    #[serde(default)]
    pub keep_one: bool,
}

fn yes() -> bool {
    true
}

/// Knobs of the instance directory.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct InstanceParams {
    /// A type gets a new instance when players / instances exceeds this
    /// fraction of `max_player_load`. Default 0.8 (seed `m_heavy_load_threshold`).
    pub heavy_load_threshold: f64,
    /// An instance empty this long is destroyed. Default 30 000 ms.
    pub reclaim_empty_after_ms: u64,
    /// Most instances in all. Default 4096.
    pub instances_max: usize,
    /// Most events queued. Default 4096.
    pub events_max: usize,
}

impl Default for InstanceParams {
    fn default() -> Self {
        InstanceParams {
            heavy_load_threshold: 0.8,
            reclaim_empty_after_ms: 30_000,
            instances_max: 4096,
            events_max: 4096,
        }
    }
}

/// How a player names where to go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EnterTarget {
    /// A given space.
    Id(SpaceId),
    /// Any space of a type (least loaded instance).
    Type(u32),
}

/// Where a player was placed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Placement {
    /// The space.
    pub space: SpaceId,
    /// Its cell (for a union space: its master cell; the tree says more).
    pub cell: CellId,
    /// The cell's shard.
    pub shard: ShardId,
}

/// What the runtime must do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InstanceEvent {
    /// Create the cell of a new instance.
    Created {
        /// The new space.
        space: SpaceId,
        /// Its type.
        type_id: u32,
        /// Its one cell.
        cell: CellId,
        /// Where.
        shard: ShardId,
    },
    /// Destroy an empty instance's cell.
    Destroyed {
        /// The space.
        space: SpaceId,
        /// Its cell.
        cell: CellId,
        /// Where it was.
        shard: ShardId,
    },
}

/// Why an enter or a leave was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum InstanceError {
    /// No such type in the config.
    #[error("unknown space type {0}")]
    UnknownType(u32),
    /// No such space.
    #[error("unknown space {0}")]
    UnknownSpace(SpaceId),
    /// `instances_max` reached.
    #[error("too many instances ({0})")]
    Full(usize),
    /// The instance has `max_player_load` players.
    #[error("space {0} is full")]
    InstanceFull(SpaceId),
    /// No shard to place an instance on.
    #[error("no shard")]
    NoShard,
    /// Two types share a type id.
    #[error("space type {0} defined twice")]
    DuplicateType(u32),
}

#[derive(Clone, Copy, Debug, PartialEq)]
struct Instance {
    space: SpaceId,
    type_id: u32,
    cell: CellId,
    shard: ShardId,
    players: u32,
    union: bool,
    empty_since: Option<Time>,
}

/// The directory of spaces by type (see the module doc).
#[derive(Clone, Debug)]
pub struct Instances {
    params: InstanceParams,
    types: Vec<SpaceTypeConfig>,
    spaces: Vec<Instance>,
    next_space: u32,
    next_cell: u32,
    events: VecDeque<InstanceEvent>,
}

impl Instances {
    /// A directory for `types`; new instance ids start at `first_space`,
    /// their cells at `first_cell` (keep that range apart from tree cells).
    ///
    /// # Errors
    /// [`InstanceError::DuplicateType`].
    pub fn new(
        params: InstanceParams,
        types: &[SpaceTypeConfig],
        first_space: SpaceId,
        first_cell: CellId,
    ) -> Result<Self, InstanceError> {
        let mut t = types.to_vec();
        t.sort_by_key(|t| t.type_id);
        if let Some(w) = t.windows(2).find(|w| w[0].type_id == w[1].type_id) {
            return Err(InstanceError::DuplicateType(w[0].type_id));
        }
        Ok(Instances {
            params,
            types: t,
            spaces: Vec::new(),
            next_space: first_space.0,
            next_cell: first_cell.0,
            events: VecDeque::new(),
        })
    }

    fn ty(&self, type_id: u32) -> Result<&SpaceTypeConfig, InstanceError> {
        self.types
            .binary_search_by_key(&type_id, |t| t.type_id)
            .map(|i| &self.types[i])
            .map_err(|_| InstanceError::UnknownType(type_id))
    }

    /// Registers union space `space` of type `type_id`, its master cell
    /// `cell` on `shard` (union spaces are never reclaimed).
    ///
    /// # Errors
    /// Unknown type.
    pub fn add_union(
        &mut self,
        space: SpaceId,
        type_id: u32,
        cell: CellId,
        shard: ShardId,
    ) -> Result<(), InstanceError> {
        self.ty(type_id)?;
        self.spaces.push(Instance {
            space,
            type_id,
            cell,
            shard,
            players: 0,
            union: true,
            empty_since: None,
        });
        self.spaces.sort_by_key(|s| s.space);
        Ok(())
    }

    /// Creates an instance of mono type `type_id` on the least loaded shard.
    ///
    /// # Errors
    /// Unknown type, `instances_max`, no shard.
    pub fn create(
        &mut self,
        now: Time,
        type_id: u32,
        shards: &[ShardLoad],
    ) -> Result<Placement, InstanceError> {
        self.ty(type_id)?;
        if self.spaces.len() >= self.params.instances_max {
            return Err(InstanceError::Full(self.params.instances_max));
        }
        let shard = least_loaded(shards).ok_or(InstanceError::NoShard)?;
        let (space, cell) = (SpaceId(self.next_space), CellId(self.next_cell));
        self.next_space += 1;
        self.next_cell += 1;
        self.spaces.push(Instance {
            space,
            type_id,
            cell,
            shard,
            players: 0,
            union: false,
            empty_since: Some(now),
        });
        self.spaces.sort_by_key(|s| s.space);
        if self.events.len() < self.params.events_max {
            self.events.push_back(InstanceEvent::Created {
                space,
                type_id,
                cell,
                shard,
            });
        }
        Ok(Placement { space, cell, shard })
    }

    /// Places one player (seed `enter_space`): by id, or by type on the
    /// least loaded instance (a new one when there is none, or when the
    /// type does not auto-select).
    ///
    /// # Errors
    /// Unknown space or type, or instance creation failing.
    pub fn enter(
        &mut self,
        now: Time,
        target: EnterTarget,
        shards: &[ShardLoad],
    ) -> Result<Placement, InstanceError> {
        let i = match target {
            EnterTarget::Id(space) => {
                let i = self
                    .spaces
                    .binary_search_by_key(&space, |s| s.space)
                    .map_err(|_| InstanceError::UnknownSpace(space))?;
                let s = self.spaces[i];
                let max = self.ty(s.type_id).map_or(u32::MAX, |t| t.max_player_load);
                if !s.union && s.players >= max {
                    return Err(InstanceError::InstanceFull(space));
                }
                i
            }
            EnterTarget::Type(type_id) => {
                let ty = self.ty(type_id)?;
                let (auto, max) = (ty.auto_select_when_empty_id, ty.max_player_load);
                let best = self
                    .spaces
                    .iter()
                    .enumerate()
                    .filter(|(_, s)| s.type_id == type_id && (s.union || s.players < max))
                    .min_by_key(|(_, s)| (s.players, s.space))
                    .map(|(i, _)| i);
                match best {
                    Some(i) if auto || self.spaces[i].union => i,
                    _ => {
                        let p = self.create(now, type_id, shards)?;
                        self.spaces
                            .binary_search_by_key(&p.space, |s| s.space)
                            .expect("just created")
                    }
                }
            }
        };
        let s = &mut self.spaces[i];
        s.players += 1;
        s.empty_since = None;
        Ok(Placement {
            space: s.space,
            cell: s.cell,
            shard: s.shard,
        })
    }

    /// One player left `space`.
    ///
    /// # Errors
    /// Unknown space.
    pub fn leave(&mut self, now: Time, space: SpaceId) -> Result<(), InstanceError> {
        let i = self
            .spaces
            .binary_search_by_key(&space, |s| s.space)
            .map_err(|_| InstanceError::UnknownSpace(space))?;
        let s = &mut self.spaces[i];
        s.players = s.players.saturating_sub(1);
        if s.players == 0 {
            s.empty_since = Some(now);
        }
        Ok(())
    }

    /// A teleport: leaves `from` and enters `to` (the runtime then moves the
    /// real through the migration path).
    ///
    /// # Errors
    /// As [`leave`](Self::leave) and [`enter`](Self::enter); on an error
    /// the player stays counted in `from`.
    pub fn teleport(
        &mut self,
        now: Time,
        from: SpaceId,
        to: EnterTarget,
        shards: &[ShardLoad],
    ) -> Result<Placement, InstanceError> {
        let p = self.enter(now, to, shards)?;
        self.leave(now, from)?;
        Ok(p)
    }

    /// A round: heavy-load creation, then reclaiming of empty instances.
    pub fn handle_timeout(&mut self, now: Time, shards: &[ShardLoad]) {
        let heavy: Vec<u32> = self
            .types
            .iter()
            .filter(|t| t.auto_create_on_heavy_load && t.kind != SpaceKind::Union)
            .filter(|t| {
                let (n, players) = self
                    .spaces
                    .iter()
                    .filter(|s| s.type_id == t.type_id)
                    .fold((0u64, 0u64), |(n, p), s| (n + 1, p + u64::from(s.players)));
                n > 0
                    && players as f64
                        > n as f64 * f64::from(t.max_player_load) * self.params.heavy_load_threshold
            })
            .map(|t| t.type_id)
            .collect();
        for type_id in heavy {
            let _ = self.create(now, type_id, shards);
        }
        self.reclaim(now);
    }

    fn reclaim(&mut self, now: Time) {
        let after = Duration::from_millis(self.params.reclaim_empty_after_ms);
        let mut i = 0;
        while i < self.spaces.len() {
            let s = self.spaces[i];
            let keep_one = self.ty(s.type_id).is_ok_and(|t| t.keep_one)
                && self
                    .spaces
                    .iter()
                    .filter(|o| o.type_id == s.type_id)
                    .count()
                    == 1;
            let idle = s.empty_since.is_some_and(|t| now >= t + after);
            if !s.union && idle && !keep_one {
                self.spaces.remove(i);
                if self.events.len() < self.params.events_max {
                    self.events.push_back(InstanceEvent::Destroyed {
                        space: s.space,
                        cell: s.cell,
                        shard: s.shard,
                    });
                }
            } else {
                i += 1;
            }
        }
    }

    /// The next cell to create or destroy.
    pub fn poll_event(&mut self) -> Option<InstanceEvent> {
        self.events.pop_front()
    }

    /// Players in `space`.
    pub fn players(&self, space: SpaceId) -> Option<u32> {
        self.spaces
            .binary_search_by_key(&space, |s| s.space)
            .ok()
            .map(|i| self.spaces[i].players)
    }

    /// The type of `space`, if it exists.
    pub fn type_of(&self, space: SpaceId) -> Option<u32> {
        self.spaces
            .binary_search_by_key(&space, |s| s.space)
            .ok()
            .map(|i| self.spaces[i].type_id)
    }

    /// Spaces known (union spaces and live instances).
    pub fn len(&self) -> usize {
        self.spaces.len()
    }

    /// True with no space at all.
    pub fn is_empty(&self) -> bool {
        self.spaces.is_empty()
    }

    /// The instances of `type_id`, by space id.
    pub fn instances_of(&self, type_id: u32) -> impl Iterator<Item = SpaceId> + '_ {
        self.spaces
            .iter()
            .filter(move |s| s.type_id == type_id)
            .map(|s| s.space)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn types() -> Vec<SpaceTypeConfig> {
        let t = |type_id, kind, max, auto_create| SpaceTypeConfig {
            type_id,
            name: format!("t{type_id}"),
            kind,
            max_player_load: max,
            auto_select_when_empty_id: kind != SpaceKind::Dungeon,
            auto_create_on_heavy_load: auto_create,
            keep_one: kind == SpaceKind::Town,
        };
        vec![
            t(1, SpaceKind::Union, 10_000, false),
            t(2, SpaceKind::Town, 10, true),
            t(3, SpaceKind::Dungeon, 1, false),
        ]
    }

    fn shards() -> Vec<ShardLoad> {
        (0..3)
            .map(|i| ShardLoad {
                shard: ShardId::local(i),
                load: 0.5 - 0.1 * f64::from(i),
            })
            .collect()
    }

    fn dir() -> Instances {
        let mut d = Instances::new(
            InstanceParams::default(),
            &types(),
            SpaceId(100),
            CellId(1 << 24),
        )
        .unwrap();
        d.add_union(SpaceId(1), 1, CellId(0), ShardId::local(0))
            .unwrap();
        d
    }

    #[test]
    fn enter_by_type_picks_the_least_loaded_instance() {
        let mut d = dir();
        let s = shards();
        let a = d.enter(Time::ZERO, EnterTarget::Type(2), &s).unwrap();
        assert_eq!(a.shard, ShardId::local(2), "least loaded shard");
        assert_eq!(
            d.poll_event()
                .map(|e| matches!(e, InstanceEvent::Created { .. })),
            Some(true)
        );
        let b = d.create(Time::ZERO, 2, &s).unwrap();
        let c = d.enter(Time::ZERO, EnterTarget::Type(2), &s).unwrap();
        assert_eq!(c.space, b.space, "the empty instance is less loaded");
        let u = d.enter(Time::ZERO, EnterTarget::Type(1), &s).unwrap();
        assert_eq!(u.space, SpaceId(1));
        assert_eq!(
            d.enter(Time::ZERO, EnterTarget::Id(a.space), &s).unwrap(),
            a
        );
        assert_eq!(d.players(a.space), Some(2));
        assert_eq!(
            d.enter(Time::ZERO, EnterTarget::Type(9), &s),
            Err(InstanceError::UnknownType(9))
        );
    }

    #[test]
    fn a_full_instance_is_refused_by_id_and_skipped_by_type() {
        let mut d = dir();
        let s = shards();
        let a = d.enter(Time::ZERO, EnterTarget::Type(3), &s).unwrap();
        assert_eq!(
            d.enter(Time::ZERO, EnterTarget::Id(a.space), &s),
            Err(InstanceError::InstanceFull(a.space)),
            "a dungeon holds one player"
        );
        for _ in 0..10 {
            d.enter(Time::ZERO, EnterTarget::Type(2), &s).unwrap();
        }
        let town = d.instances_of(2).next().unwrap();
        assert_eq!(d.players(town), Some(10));
        let next = d.enter(Time::ZERO, EnterTarget::Type(2), &s).unwrap();
        assert_ne!(next.space, town, "a full town is skipped");
        assert_eq!(d.type_of(next.space), Some(2));
    }

    #[test]
    fn dungeons_are_private_and_reclaimed_when_empty() {
        let mut d = dir();
        let s = shards();
        let a = d.enter(Time::ZERO, EnterTarget::Type(3), &s).unwrap();
        let b = d.enter(Time::ZERO, EnterTarget::Type(3), &s).unwrap();
        assert_ne!(a.space, b.space);
        d.leave(Time::from_millis(1000), a.space).unwrap();
        d.handle_timeout(Time::from_millis(20_000), &s);
        assert_eq!(d.instances_of(3).count(), 2, "not idle long enough");
        d.handle_timeout(Time::from_millis(31_000), &s);
        assert_eq!(d.instances_of(3).collect::<Vec<_>>(), vec![b.space]);
        let destroyed = std::iter::from_fn(|| d.poll_event())
            .filter(|e| matches!(e, InstanceEvent::Destroyed { space, .. } if *space == a.space))
            .count();
        assert_eq!(destroyed, 1);
    }

    #[test]
    fn heavy_load_creates_an_instance_and_teleport_moves_counts() {
        let mut d = dir();
        let s = shards();
        let mut first = None;
        for _ in 0..9 {
            first = Some(d.enter(Time::ZERO, EnterTarget::Type(2), &s).unwrap());
        }
        let first = first.unwrap();
        assert_eq!(d.instances_of(2).count(), 1);
        d.handle_timeout(Time::ZERO, &s);
        assert_eq!(d.instances_of(2).count(), 2, "9 > 0.8 x 10");
        d.handle_timeout(Time::ZERO, &s);
        assert_eq!(d.instances_of(2).count(), 2, "9 < 0.8 x 20");
        let p = d
            .teleport(Time::ZERO, first.space, EnterTarget::Type(1), &s)
            .unwrap();
        assert_eq!(p.space, SpaceId(1));
        assert_eq!(d.players(first.space), Some(8));
        assert_eq!(d.players(SpaceId(1)), Some(1));
        // The town keeps one instance forever.
        for _ in 0..8 {
            d.leave(Time::ZERO, first.space).unwrap();
        }
        d.handle_timeout(Time::from_millis(100_000), &s);
        assert_eq!(d.instances_of(2).count(), 1);
    }
}
