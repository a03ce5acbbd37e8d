//! [`GridAoi::verify`]: the whole-structure check of the grid index, for
//! the property tests and the `verify` feature. Reads everything, changes
//! nothing.

use super::grid::GridAoi;
use super::types::AreaId;

impl GridAoi {
    /// Checks the whole structure (slots, layout, id map, areas, watch
    /// lists); costly, for tests and the `verify` feature. Call it right after
    /// an update. Areas the update processed must hold live members only;
    /// the ones it skipped may still hold entities removed since they were
    /// last processed, whose slots must then still be dead and unreused.
    ///
    /// # Panics
    /// On any broken invariant.
    pub fn verify(&self) {
        use std::collections::BTreeSet;
        let l = &self.layout;
        assert!(
            !l.dirty && l.relocated.is_empty(),
            "layout rebuilt at update"
        );
        assert_eq!(
            *l.cell_start.last().expect("sentinel") as usize,
            l.sslot.len()
        );
        for c in 0..self.cols * self.rows {
            for k in l.cell_start[c] as usize..l.cell_start[c + 1] as usize {
                let s = l.sslot[k] as usize;
                assert!(self.alive[s], "dead entity in the layout");
                assert_eq!((self.cell_of[s] as usize, self.arr_pos[s] as usize), (c, k));
                assert_eq!(self.cell_index(self.pos[s]), c, "entity in the wrong cell");
                assert_eq!(
                    (l.sx[k], l.sz[k], l.sflags[k]),
                    (self.pos[s].x, self.pos[s].z, self.flags[s])
                );
                assert_eq!(self.ids.get(self.ent_id[s]), Some(s as u32));
            }
        }
        assert_eq!(l.sslot.len(), self.live_ents);
        assert_eq!(self.ids.len(), self.live_ents);
        assert!(self.dead_areas.is_empty());
        // A dead slot waits only for an area that has not seen its removal.
        let min_seen = self.order.iter().map(|&a| self.areas[a as usize].seen);
        let min_seen = min_seen.min().unwrap_or(u64::MAX);
        for &(s, died) in &self.dead_ents {
            assert!(!self.alive[s as usize] && died > min_seen, "dead slot kept");
            assert!(!self.free_ents.contains(&s), "dead slot free twice");
        }
        let mut forced_by = vec![0u32; self.pos.len()];
        let mut last = AreaId(0);
        for &a in &self.order {
            let area = &self.areas[a as usize];
            assert!(area.alive && area.id > last, "order broken");
            last = area.id;
            assert_eq!(self.area_slot.get(&area.id), Some(&a));
            let owner = area.owner as usize;
            assert!(self.alive[owner] && self.owned[owner].contains(&a));
            let members: BTreeSet<u32> = area.members.iter().copied().collect();
            assert_eq!(members.len(), area.members.len(), "duplicate member");
            assert!(!members.contains(&area.owner), "an area sees its owner");
            // Processed this update: up to date. Skipped: forcing, spec
            // changes and removals since wait for its next processing (the
            // removed members hold their dead, unreused slots).
            assert!(area.seen <= self.tick);
            let processed = area.seen + 1 == self.tick;
            for &f in &area.forced {
                assert!(!processed || members.contains(&f), "forced not in set");
                forced_by[f as usize] += 1;
            }
            if processed {
                assert!(area.members.len() <= area.cap.max(area.forced.len()));
            }
            for &m in &area.members {
                let dead_since = self.dead_ents.iter().find(|d| d.0 == m).map(|d| d.1);
                match dead_since {
                    _ if self.alive[m as usize] => {}
                    Some(died) => assert!(!processed && died > area.seen, "dead member"),
                    None => panic!("member slot freed while the area held it"),
                }
            }
            if area.kinetic_ok && processed {
                // Every plain member is watched as a member, nothing else is
                // (a skipped area was checked when processed; forcing since
                // changes which members are plain).
                let watched: BTreeSet<u32> = area
                    .watch
                    .iter()
                    .filter(|w| w.member())
                    .map(|w| w.slot())
                    .collect();
                let forced: BTreeSet<u32> = area.forced.iter().copied().collect();
                let plain: BTreeSet<u32> = members.difference(&forced).copied().collect();
                assert_eq!(watched, plain, "watch list out of step with the set");
                let min = area
                    .watch
                    .iter()
                    .take(area.live as usize)
                    .map(|w| w.rel as f64)
                    .fold(f64::INFINITY, f64::min);
                assert!(area.min_rel <= min, "stale min deadline");
            }
        }
        assert_eq!(self.order.len(), self.area_slot.len());
        assert_eq!(forced_by, self.forced_by);
    }
}
