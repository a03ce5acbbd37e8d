//! The live viewer's board: what the shards publish for `/api/space`,
//! `/api/entities` and `/api/events` (docs/viewer.md), and how the admin
//! side reads it without ever making a shard wait.
//!
//! # Who writes, who reads
//!
//! - Every `admin.viewer_publish_ticks` ticks a shard asks its application
//!   to fill a shard-local [`ViewSink`] ([`crate::shard::ShardApp::export_view`]):
//!   the cells it hosts, their entities (at most `admin.viewer_entities_max`
//!   per cell, sampled evenly above), and the events since the last time
//!   (migrations, balancer decisions). The sink's vectors are reused: the
//!   publish swaps them with the published ones, so a steady state allocates
//!   nothing.
//! - The shard then publishes with `try_lock` only: if an admin thread holds
//!   the lock at that instant, the snapshot is skipped (the next one comes
//!   `viewer_publish_ticks` later) and the events stay in the sink for the
//!   next publish. At most `admin.viewer_events_max` wait there; beyond, new
//!   events are dropped and counted ([`ViewBoard::events_dropped`]).
//! - Events go into one ring for all shards (`admin.viewer_events_max`
//!   entries), numbered in the order they were handed over. A reader keeps a
//!   cursor; one that fell behind the ring's oldest entry is told how many it
//!   lost ([`EventLog::since`]). Readers copy under the lock and write to
//!   their sockets after releasing it, so a slow client never holds it.
//!
//! The records and the sink are the shard contract's
//! ([`crate::shard::view_sink`]): plain display data the runtime never looks
//! inside.
//!
//! Runs on: shards (publish) and admin threads (read). Owns: the published
//! snapshots and the event ring.

use crate::shard::view_sink::{ShardView, ViewEvent, ViewSink};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};

/// The event ring shared by all shards.
#[derive(Debug)]
pub struct EventLog {
    ring: Mutex<Ring>,
}

#[derive(Debug)]
struct Ring {
    /// Sequence number of `events[0]`.
    first: u64,
    events: VecDeque<ViewEvent>,
    max: usize,
}

/// What a reader got from [`EventLog::since`].
#[derive(Debug, Default, PartialEq)]
pub struct Fetched {
    /// Events lost between the cursor and the oldest one still held.
    pub lost: u64,
    /// The cursor to pass next time.
    pub next: u64,
}

impl EventLog {
    /// An empty ring of `max` events.
    pub fn new(max: usize) -> EventLog {
        EventLog {
            ring: Mutex::new(Ring {
                first: 0,
                events: VecDeque::with_capacity(max),
                max,
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Ring> {
        // A poisoned lock only means a panic elsewhere; the data is plain.
        self.ring.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Appends `events` (drained) if the lock is free now; never blocks.
    /// Returns false (events kept) when busy.
    pub fn try_append(&self, events: &mut Vec<ViewEvent>) -> bool {
        let Ok(mut ring) = self.ring.try_lock() else {
            return false;
        };
        for e in events.drain(..) {
            if ring.events.len() == ring.max {
                ring.events.pop_front();
                ring.first += 1;
            }
            ring.events.push_back(e);
        }
        true
    }

    /// The cursor of the next event to be appended (a new reader starts
    /// there: it sees only what happens from now on).
    pub fn head(&self) -> u64 {
        let ring = self.lock();
        ring.first + ring.events.len() as u64
    }

    /// Copies into `out` the events from `cursor` on, at most `limit`.
    pub fn since(&self, cursor: u64, limit: usize, out: &mut Vec<(u64, ViewEvent)>) -> Fetched {
        let ring = self.lock();
        let lost = ring.first.saturating_sub(cursor);
        let start = cursor.max(ring.first);
        let skip = usize::try_from(start - ring.first).unwrap_or(usize::MAX);
        let mut next = start;
        for e in ring.events.iter().skip(skip).take(limit) {
            out.push((next, e.clone()));
            next += 1;
        }
        Fetched { lost, next }
    }
}

/// Everything the viewer reads: one published snapshot per shard and the
/// event ring.
#[derive(Debug)]
pub struct ViewBoard {
    shards: Vec<Mutex<ShardView>>,
    /// The event ring.
    pub events: EventLog,
    dropped: AtomicU64,
    entities_max: usize,
    events_max: usize,
}

impl ViewBoard {
    /// A board for `shards` shards.
    pub fn new(shards: usize, entities_max: usize, events_max: usize) -> ViewBoard {
        ViewBoard {
            shards: (0..shards)
                .map(|_| Mutex::new(ShardView::new(entities_max)))
                .collect(),
            events: EventLog::new(events_max),
            dropped: AtomicU64::new(0),
            entities_max,
            events_max,
        }
    }

    /// A sink for one shard, with the board's bounds.
    pub fn sink(&self) -> ViewSink {
        ViewSink::new(self.entities_max, self.events_max)
    }

    /// Entities per cell published at most.
    pub fn entities_max(&self) -> usize {
        self.entities_max
    }

    /// Events dropped before they reached the ring (a shard's waiting
    /// events were at the bound).
    pub fn events_dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    /// Publishes `sink` as shard `index`'s snapshot and hands its events to
    /// the ring, each only if its lock is free now (never blocks). The sink
    /// is left empty for the next fill (events it could not hand over stay).
    /// Returns whether the snapshot was published.
    pub fn try_publish(&self, index: usize, sink: &mut ViewSink) -> bool {
        let published = match self.shards.get(index).map(Mutex::try_lock) {
            Some(Ok(mut shared)) => {
                let serial = shared.serial + 1;
                sink.swap_view(&mut shared);
                shared.serial = serial;
                true
            }
            _ => false,
        };
        sink.clear_view();
        self.events.try_append(sink.events_mut());
        let dropped = sink.take_dropped();
        if dropped > 0 {
            self.dropped.fetch_add(dropped, Ordering::Relaxed);
        }
        published
    }

    /// A copy of every shard's snapshot, in shard order.
    pub fn snapshots(&self) -> Vec<ShardView> {
        self.shards
            .iter()
            .map(|m| m.lock().unwrap_or_else(|p| p.into_inner()).clone())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shard::view_sink::EntityView;
    use std::sync::Arc;

    fn migration(entity: u64) -> ViewEvent {
        ViewEvent::Migration {
            t_ms: 1,
            entity,
            from_cell: 1,
            to_cell: 2,
            x: 0.0,
            z: 0.0,
        }
    }

    fn entity(id: u64) -> EntityView {
        EntityView {
            id,
            cell: 1,
            kind: Arc::from("npc"),
            x: 1.0,
            z: 2.0,
            yaw: 0.0,
            real: true,
            version: 3,
            real_at: None,
            haunts: (0, 0),
        }
    }

    #[test]
    fn a_reader_behind_the_ring_is_told_what_it_lost() {
        let log = EventLog::new(4);
        let mut batch: Vec<ViewEvent> = (0..6).map(migration).collect();
        assert!(log.try_append(&mut batch));
        assert!(batch.is_empty());
        let mut out = Vec::new();
        let f = log.since(0, 100, &mut out);
        assert_eq!(f.lost, 2, "events 0 and 1 were overwritten");
        assert_eq!(f.next, 6);
        assert_eq!(out.first().map(|e| e.0), Some(2));
        assert_eq!(out.len(), 4);
        out.clear();
        let f = log.since(6, 100, &mut out);
        assert_eq!((f.lost, f.next, out.len()), (0, 6, 0));
        assert_eq!(log.head(), 6);
    }

    #[test]
    fn a_busy_board_never_blocks_the_shard_and_keeps_its_events() {
        let board = ViewBoard::new(1, 2, 3);
        let mut sink = board.sink();
        sink.entity(entity(7), [4u32, 5].into_iter());
        assert!(sink.event(migration(1)));
        let held = board.shards[0].lock().expect("lock");
        let ring = board.events.ring.lock().expect("ring");
        assert!(!board.try_publish(0, &mut sink), "busy: skipped");
        assert_eq!(
            sink.events_mut().len(),
            1,
            "the event waits for the next publish"
        );
        drop((held, ring));
        sink.entity(entity(7), [4u32, 5].into_iter());
        assert!(board.try_publish(0, &mut sink));
        let snaps = board.snapshots();
        assert_eq!(snaps[0].serial, 1);
        assert_eq!(snaps[0].entities.len(), 1);
        assert_eq!(snaps[0].haunts_of(&snaps[0].entities[0]), &[4, 5]);
        assert_eq!(board.events.head(), 1);
    }

    #[test]
    fn waiting_events_are_bounded_and_the_excess_counted() {
        let board = ViewBoard::new(1, 2, 16);
        let mut sink = board.sink();
        for i in 0..20 {
            sink.event(migration(i));
        }
        assert_eq!(sink.events_room(), 0);
        board.try_publish(0, &mut sink);
        assert_eq!(board.events_dropped(), 4);
        assert_eq!(board.events.head(), 16);
    }
}
