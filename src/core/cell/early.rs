//! Real-bound messages that reach a cell before the entity does.
//!
//! A real may migrate on from a cell it has just arrived in, to a cell whose
//! ghost it has only just asked for: that is allowed, because the
//! `CreateGhost` precedes the `Onload` on the same channel. But its other
//! haunts learn the new home from `SetNextReal` on their own channels, so a
//! message one of them forwards can reach the new cell before its
//! `CreateGhost` does. Dropping it would lose an input or a call; the cell
//! holds it instead (at most `early_msgs_max`, each for at most
//! `ghost_create_timeout_ms`) and handles it again once the entity's ghost
//! or real is here. One that waits out its time is dropped as
//! `UnknownEntity`, as before.
//!
//! The simulator found this once each shard applied tree changes when they
//! reached it (a lagging replica makes "arrive, then migrate on at once"
//! common); it can happen with one layout too, e.g. after a teleport.
//!
//! Owns the held messages; the handlers in `real.rs`, `ghost.rs` and
//! `offload.rs` decide when to hold and when to release.

use std::collections::VecDeque;

use crate::core::ids::EntityId;
use crate::core::time::Time;

use super::counters::DropReason;
use super::machine::Cell;
use super::msg::{Source, ToReal};

/// One held message.
#[derive(Clone, Debug)]
pub(super) struct Early {
    since: Time,
    from: Source,
    msg: ToReal,
}

/// The held messages, oldest first.
#[derive(Clone, Debug, Default)]
pub(super) struct EarlyMsgs {
    q: VecDeque<Early>,
}

impl EarlyMsgs {
    /// Messages held now.
    pub(super) fn len(&self) -> usize {
        self.q.len()
    }
}

impl Cell {
    /// Holds `msg` for an entity this cell does not know (yet); drops it as
    /// `UnknownEntity` when the buffer is full.
    pub(super) fn hold_early(&mut self, now: Time, from: Source, msg: ToReal) {
        if self.early.q.len() >= self.params.early_msgs_max {
            self.drop_msg(msg.entity, DropReason::UnknownEntity);
            return;
        }
        self.counters.early_held += 1;
        self.early.q.push_back(Early {
            since: now,
            from,
            msg,
        });
    }

    /// The entity `e` is here now (a ghost or a real): its held messages are
    /// handled, in arrival order.
    pub(super) fn release_early(&mut self, now: Time, e: EntityId) {
        if self.early.q.is_empty() || self.entities.get(e).is_none() {
            return;
        }
        let mut kept = VecDeque::with_capacity(self.early.q.len());
        let mut mine = Vec::new();
        for x in self.early.q.drain(..) {
            if x.msg.entity == e {
                mine.push(x);
            } else {
                kept.push_back(x);
            }
        }
        self.early.q = kept;
        for x in mine {
            self.on_to_real(now, x.from, x.msg);
        }
    }

    /// Drops held messages older than `ghost_create_timeout_ms`.
    pub(super) fn expire_early(&mut self, now: Time) {
        let ttl = std::time::Duration::from_millis(self.params.ghost_create_timeout_ms);
        while let Some(x) = self.early.q.front() {
            if now.saturating_since(x.since) < ttl {
                break;
            }
            let e = x.msg.entity;
            self.early.q.pop_front();
            self.drop_msg(e, DropReason::UnknownEntity);
        }
        debug_assert!(self.early.q.len() <= self.params.early_msgs_max);
    }
}
