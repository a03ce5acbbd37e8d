//! What an observer reads from the cell that hosts its real.
//!
//! Owns the [`ObserverHost`] trait (the observer's only window on the cell:
//! the local copy, real or ghost, of each entity it may show) and
//! [`LocalCopy`], a plain implementation over a map of copies used by the
//! tests and the simulator. The cell implements the trait over its own
//! entity table; nothing here mutates a copy.

use super::observer::Pending;
use crate::core::entity::{Audience, CacheHead, Entity, RunBounds, SyncCache, SyncCacheParams};
use crate::core::geom::Vec3;
use crate::core::ids::EntityId;
use std::collections::BTreeMap;

/// The local copies (reals and ghosts) of the cell hosting an observer.
///
/// # Contract
/// For each entity, `copy_version`, `copy_cache` and `copy_snapshot` must
/// describe one consistent state: the snapshot reflects exactly every change
/// set up to `copy_version` (so call the observer after the cell flushed its
/// reals' change sets and applied the ghosts' released messages), and the
/// cache holds versions ending at `copy_version` (or is empty).
pub trait ObserverHost {
    /// The last version the local copy of `entity` applied (a real: its last
    /// change set), or `None` if the cell holds no copy.
    fn copy_version(&self, entity: EntityId) -> Option<u64>;

    /// The local copy's recent messages, if it keeps any.
    fn copy_cache(&self, entity: EntityId) -> Option<&SyncCache>;

    /// Appends the copy's snapshot for `audience` (as
    /// [`Entity::encode_snapshot`] writes it) and returns its version, or
    /// `None` (nothing appended) if there is no copy.
    fn copy_snapshot(&self, entity: EntityId, audience: Audience, out: &mut Vec<u8>)
        -> Option<u64>;

    /// Where the local copy of `entity` stands (the observer's own entity
    /// included: distances for the budget's bands are measured from it).
    fn copy_position(&self, entity: EntityId) -> Option<Vec3>;

    /// [`ObserverHost::copy_position`] with a guess of where the copy sits
    /// in the host's dense table (as [`ObserverHost::copy_entity_hinted`]):
    /// an observer keeps one for its own entity, whose position every
    /// flush reads, so a flush costs no hash probe of the host's index.
    #[inline]
    fn copy_position_hinted(&self, entity: EntityId, hint: &mut u32) -> Option<Vec3> {
        let _ = hint;
        self.copy_position(entity)
    }

    /// The local copy of `entity` and its version (levels of detail read
    /// its type, encode snapshots without some properties and catch-ups of
    /// whole values from it).
    fn copy_entity(&self, entity: EntityId) -> Option<(&Entity, u64)>;

    /// [`ObserverHost::copy_entity`] with a guess of where the copy sits in
    /// the host's dense table (as [`ObserverHost::copy_head_hinted`]: the
    /// slot's hint, which the pull just checked): a host that has one tries
    /// `*hint` first and stores where it found the copy. A catch-up or a
    /// snapshot then costs no hash probe of the host's index.
    #[inline]
    fn copy_entity_hinted(&self, entity: EntityId, hint: &mut u32) -> Option<(&Entity, u64)> {
        let _ = hint;
        self.copy_entity(entity)
    }

    /// Everything the flush's pull reads of one copy, found once: its state,
    /// version and cache (a host that finds a copy with one lookup should
    /// say so here; the pull calls this for every shown entity).
    fn copy_ref(&self, entity: EntityId) -> Option<CopyRef<'_>> {
        let (entity_ref, version) = self.copy_entity(entity)?;
        Some(CopyRef {
            entity: entity_ref,
            version,
            cache: self.copy_cache(entity),
        })
    }

    /// The copy's version and cache head: the first (and for a shown
    /// entity that only moved, the only) thing a pull reads. A host may
    /// keep these dense (the cell does, refreshed once per tick).
    fn copy_head(&self, entity: EntityId) -> Option<CopyHeadRef> {
        Some(CopyHeadRef {
            version: self.copy_version(entity)?,
            run: self.copy_cache(entity).map(|c| RunHead::of(&c.head())),
        })
    }

    /// A hint that the head at `hint` (see [`ObserverHost::copy_head_hinted`])
    /// is read soon: a host with a dense table may start fetching it.
    #[inline]
    fn prefetch_head(&self, hint: u32) {
        let _ = hint;
    }

    /// The epoch of the host's dense heads while they hold still (see
    /// [`ObserverHost::head_unchanged_since`]); `None` (the default) where
    /// the host keeps no such record: every pull then reads every head.
    #[inline]
    fn heads_epoch(&self) -> Option<u32> {
        None
    }

    /// True if the head at `hint` (see [`ObserverHost::copy_head_hinted`])
    /// is, id and content, the one it held at the host's epoch `since`: a
    /// pull that then found its slot quiet may pass it by unread. False
    /// (the default) when the host cannot tell.
    #[inline]
    fn head_unchanged_since(&self, hint: u32, since: u32) -> bool {
        let _ = (hint, since);
        false
    }

    /// [`ObserverHost::copy_head`] with a guess of where the copy sits in
    /// the host's dense table: a host that has one checks `*hint` first and
    /// stores where it found the copy (each observer slot keeps its hint, so
    /// the usual pull costs no hash probe).
    ///
    /// The head is read in place where the host keeps one (`scratch` holds
    /// it otherwise): the pull's hot loop copies nothing but what it uses.
    #[inline]
    fn copy_head_hinted<'a>(
        &'a self,
        entity: EntityId,
        hint: &mut u32,
        scratch: &'a mut RunHead,
    ) -> Option<HeadRef<'a>> {
        let _ = hint;
        Some(HeadRef::kept_in(self.copy_head(entity)?, scratch))
    }
}

/// A copy's head where the host keeps it ([`ObserverHost::copy_head_hinted`]).
#[derive(Clone, Copy, Debug)]
pub struct HeadRef<'a> {
    /// The copy's version (`copy_version`).
    pub version: u64,
    /// Its cache's head, if it keeps a cache.
    pub run: Option<&'a RunHead>,
}

impl<'a> HeadRef<'a> {
    /// `head`, its cache's head kept in `scratch` (a host that builds heads
    /// on the fly rather than keeping them).
    pub fn kept_in(head: CopyHeadRef, scratch: &'a mut RunHead) -> HeadRef<'a> {
        HeadRef {
            version: head.version,
            run: head.run.map(|r| {
                *scratch = r;
                &*scratch
            }),
        }
    }
}

/// What a pull reads first of a copy ([`ObserverHost::copy_head`]).
#[derive(Clone, Copy, Debug)]
pub struct CopyHeadRef {
    /// The copy's version (`copy_version`).
    pub version: u64,
    /// Its cache's head, if it keeps a cache.
    pub run: Option<RunHead>,
}

/// A cache's head ([`CacheHead`]) with its closing run's newest movement in
/// the wire's units: quantised once per copy (a cell does it once a tick for
/// all its observers), not once per observer that sends it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RunHead {
    bounds: RunBounds,
    moved: Pending,
}

impl RunHead {
    /// `head` with its newest movement quantised.
    pub fn of(head: &CacheHead) -> RunHead {
        let (pos, yaw) = head.newest_move();
        RunHead {
            bounds: head.bounds(),
            moved: Pending::of(pos, yaw),
        }
    }

    /// The newest version the cache knows.
    pub fn last_version(&self) -> u64 {
        self.bounds.last_version
    }

    /// As [`CacheHead::moves_after`], quantised.
    #[inline]
    pub(super) fn moves_after(&self, have: u64) -> Option<Pending> {
        self.bounds.covers_after(have).then_some(self.moved)
    }

    /// True when everything after version `have` is the closing run of bare
    /// movements ([`RunBounds::covers_after`]).
    #[inline]
    pub fn moves_only_after(&self, have: u64) -> bool {
        self.bounds.covers_after(have)
    }
}

/// One local copy as [`ObserverHost::copy_ref`] finds it.
#[derive(Clone, Copy, Debug)]
pub struct CopyRef<'a> {
    /// The copy.
    pub entity: &'a Entity,
    /// Its version (`copy_version`).
    pub version: u64,
    /// Its cache (`copy_cache`).
    pub cache: Option<&'a SyncCache>,
}

/// One local copy: state, version and cache (tests and simulator).
#[derive(Clone, Debug)]
pub struct LocalCopy {
    /// The copy (a ghost replica, or a real).
    pub entity: Entity,
    /// The last version applied.
    pub version: u64,
    /// Recent messages, ending at `version`.
    pub cache: SyncCache,
}

impl LocalCopy {
    /// A copy at `version` with an empty cache.
    pub fn new(entity: Entity, version: u64, cache: SyncCacheParams) -> Self {
        LocalCopy {
            entity,
            version,
            cache: SyncCache::new(cache, version),
        }
    }
}

impl ObserverHost for BTreeMap<EntityId, LocalCopy> {
    fn copy_version(&self, entity: EntityId) -> Option<u64> {
        self.get(&entity).map(|c| c.version)
    }

    fn copy_cache(&self, entity: EntityId) -> Option<&SyncCache> {
        self.get(&entity).map(|c| &c.cache)
    }

    fn copy_snapshot(
        &self,
        entity: EntityId,
        audience: Audience,
        out: &mut Vec<u8>,
    ) -> Option<u64> {
        let c = self.get(&entity)?;
        c.entity.encode_snapshot(audience, out);
        Some(c.version)
    }

    fn copy_position(&self, entity: EntityId) -> Option<Vec3> {
        self.get(&entity).map(|c| c.entity.core().pos)
    }

    fn copy_entity(&self, entity: EntityId) -> Option<(&Entity, u64)> {
        self.get(&entity).map(|c| (&c.entity, c.version))
    }
}
