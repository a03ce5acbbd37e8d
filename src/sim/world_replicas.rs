//! Tree mode: every shard's own replica of the space tree, as on a server.
//!
//! Shard 0 hosts the space service, so its replica is the world's layout
//! and takes each change at once. Every other shard receives the changes
//! over the simulated network (one FIFO link from shard 0, with the net's
//! delays, spikes and stalls) and applies them in version order when they
//! arrive. For that while, cells on different shards disagree about
//! borders: a real may be handed to a cell that is already merging, a
//! ghost created in a cell its host has not heard of. That window is where
//! seamlessness bugs hide, so the simulator keeps it open instead of
//! applying every change everywhere in the same instant.
//!
//! A message for a cell its shard's replica does not know yet (the new cell
//! of a split another shard applied first) is parked here until the split
//! arrives, exactly as `server::balance` parks it; parked messages for one
//! cell keep their order. A cell that finished merging keeps ticking while
//! stragglers (reals sent by shards that had not heard of the merge yet)
//! pass through it; the world checks it empties within
//! [`RETIRED_DRAIN_MS`].
//!
//! Owns the replicas of shards `1..` and the parked messages; knows nothing
//! of entities, proxies or clients. Grid mode has no replicas (every shard
//! reads the one grid).

use std::collections::VecDeque;

use crate::core::cell::{CellMsg, Layout, Source};
use crate::core::ids::{CellId, ShardId};
use crate::core::space::SpaceChange;
use crate::sim::world_balance::WorldLayout;

/// Most messages parked at once (a bound, asserted: the simulator's cells
/// send far fewer).
pub const PARKED_MAX: usize = 1 << 16;

/// Longest a retired cell may still hold a real (stragglers from shards
/// that had not applied the merge yet), in simulated milliseconds.
pub const RETIRED_DRAIN_MS: u64 = 5_000;

/// A cell message waiting for its cell to exist at its shard.
#[derive(Clone, Debug)]
pub struct Parked {
    /// The shard hosting `to`.
    pub shard: ShardId,
    /// Sender.
    pub from: Source,
    /// Receiving cell.
    pub to: CellId,
    /// The message.
    pub msg: CellMsg,
}

/// What the replicas saw in a run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReplicaStats {
    /// Changes applied by shards other than shard 0.
    pub changes_applied: u64,
    /// Messages parked for a cell their shard did not know yet.
    pub parked: u64,
    /// Most messages parked at once.
    pub parked_peak: u64,
    /// Most versions a replica was behind shard 0 when a change reached it
    /// (1: only that change).
    pub lag_versions_max: u64,
    /// Longest a change took from the service to a replica, in µs.
    pub lag_us_max: u64,
}

/// The replicas of shards `1..` and the parked messages (see the module doc).
#[derive(Clone, Debug, Default)]
pub struct Replicas {
    /// Index `s - 1` is shard `s`'s replica.
    trees: Vec<WorldLayout>,
    parked: VecDeque<Parked>,
    stats: ReplicaStats,
}

impl Replicas {
    /// Replicas of `layout` for shards `1..shards` in tree mode, none in
    /// grid mode.
    pub fn new(layout: &WorldLayout, shards: u16) -> Self {
        let trees = match layout {
            WorldLayout::Tree(_) => (1..shards).map(|_| layout.clone()).collect(),
            WorldLayout::Grid(_) => Vec::new(),
        };
        Replicas {
            trees,
            ..Replicas::default()
        }
    }

    /// True in tree mode with more than one shard (changes travel).
    pub fn is_active(&self) -> bool {
        !self.trees.is_empty()
    }

    /// The counters so far.
    pub fn stats(&self) -> ReplicaStats {
        self.stats
    }

    /// Messages parked now.
    pub fn parked_len(&self) -> usize {
        self.parked.len()
    }

    /// The layout `shard`'s cells tick against: its replica, or
    /// `authority` (shard 0's, and every shard's in grid mode).
    pub fn layout<'a>(&'a self, authority: &'a WorldLayout, shard: ShardId) -> &'a WorldLayout {
        match usize::from(shard.index).checked_sub(1) {
            Some(i) if i < self.trees.len() => &self.trees[i],
            _ => authority,
        }
    }

    /// Whether `shard`'s replica knows cell `c` (it applied the split that
    /// made it, or `c` is from the start).
    pub fn knows(&self, authority: &WorldLayout, shard: ShardId, c: CellId) -> bool {
        c.0 < self.layout(authority, shard).cell_count()
    }

    /// Shard `shard` applies `change`, sent `sent_us` µs ago;
    /// `authority_version` is shard 0's version now (for the lag counters).
    ///
    /// # Panics
    /// If the change does not apply: the link from shard 0 is FIFO, so a
    /// replica always gets the next version (a broken link is a sim bug).
    pub fn apply(
        &mut self,
        shard: ShardId,
        change: &SpaceChange,
        authority_version: u64,
        sent_us: u64,
    ) {
        let i = usize::from(shard.index)
            .checked_sub(1)
            .expect("shard 0 applies changes at once");
        let WorldLayout::Tree(tree) = &mut self.trees[i] else {
            unreachable!("replicas exist in tree mode only")
        };
        let lag = authority_version.saturating_sub(Layout::version(tree));
        tree.apply(change)
            .unwrap_or_else(|e| panic!("shard {shard} applies {change:?}: {e}"));
        self.stats.changes_applied += 1;
        self.stats.lag_versions_max = self.stats.lag_versions_max.max(lag);
        self.stats.lag_us_max = self.stats.lag_us_max.max(sent_us);
    }

    /// Parks `p` until its cell exists at its shard.
    ///
    /// # Panics
    /// Past [`PARKED_MAX`] (a cell that never appears: a sim bug).
    pub fn park(&mut self, p: Parked) {
        assert!(self.parked.len() < PARKED_MAX, "parked messages pile up");
        self.parked.push_back(p);
        self.stats.parked += 1;
        self.stats.parked_peak = self.stats.parked_peak.max(self.parked.len() as u64);
    }

    /// Moves to `out`, in arrival order, the parked messages of `shard`
    /// whose cell its replica now knows.
    pub fn unpark(&mut self, authority: &WorldLayout, shard: ShardId, out: &mut Vec<Parked>) {
        let mut kept = VecDeque::with_capacity(self.parked.len());
        while let Some(p) = self.parked.pop_front() {
            if p.shard == shard && self.knows(authority, shard, p.to) {
                out.push(p);
            } else {
                kept.push_back(p);
            }
        }
        self.parked = kept;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::geom::Rect;
    use crate::core::space::{initial_tree, ChangeOp, SpaceParams, SplitDirection};

    fn world() -> WorldLayout {
        let rect = Rect {
            min_x: 0.0,
            min_z: 0.0,
            max_x: 1_000.0,
            max_z: 1_000.0,
        };
        let tree = initial_tree(rect, SpaceParams::for_ghost_radius(30.0), 1, 2).expect("tree");
        WorldLayout::Tree(tree)
    }

    fn split(layout: &WorldLayout) -> SpaceChange {
        let WorldLayout::Tree(t) = layout else {
            unreachable!()
        };
        SpaceChange {
            version: t.version(),
            op: ChangeOp::Split {
                cell: CellId(0),
                direction: SplitDirection::MinX,
                new_cell: t.next_cell_id(),
                new_shard: ShardId::local(1),
            },
        }
    }

    #[test]
    fn a_message_for_an_unknown_cell_waits_for_the_split() {
        let mut authority = world();
        let mut r = Replicas::new(&authority, 2);
        assert!(r.is_active());
        let change = split(&authority);
        let WorldLayout::Tree(t) = &mut authority else {
            unreachable!()
        };
        t.apply(&change).expect("split");
        let fresh = CellId(1);
        let s1 = ShardId::local(1);
        assert!(r.knows(&authority, ShardId::local(0), fresh));
        assert!(!r.knows(&authority, s1, fresh));
        for n in 0..3 {
            r.park(Parked {
                shard: s1,
                from: Source::Cell(CellId(0)),
                to: fresh,
                msg: CellMsg::DeleteGhost {
                    entity: crate::core::ids::EntityId(n),
                    epoch: 0,
                },
            });
        }
        let mut out = Vec::new();
        r.unpark(&authority, s1, &mut out);
        assert!(out.is_empty(), "still unknown at shard 1");
        r.apply(s1, &change, authority.version(), 1_000);
        assert_eq!(r.stats().lag_versions_max, 1);
        assert_eq!(r.stats().lag_us_max, 1_000);
        r.unpark(&authority, s1, &mut out);
        let order: Vec<u64> = out
            .iter()
            .map(|p| match p.msg {
                CellMsg::DeleteGhost { entity, .. } => entity.0,
                _ => unreachable!(),
            })
            .collect();
        assert_eq!(order, vec![0, 1, 2], "parked order kept");
        assert_eq!(r.parked_len(), 0);
        assert_eq!(r.stats().parked_peak, 3);
    }

    #[test]
    fn grid_mode_has_no_replicas() {
        let grid = crate::sim::world_layout::SimLayout::new(2, 1, 300.0);
        let r = Replicas::new(&WorldLayout::Grid(grid), 4);
        assert!(!r.is_active());
    }
}
