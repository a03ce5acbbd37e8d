//! The live viewer's board: what the shards publish for `/api/space`,
//! `/api/entities` and `/api/events` (docs/viewer.md), and how the admin
//! side reads it without ever making a shard wait.
//!
//! # Who writes, who reads
//!
//! - Every `admin.viewer_publish_ticks` ticks a shard asks its application
//!   to fill a shard-local [`ViewSink`] ([`crate::runtime::ShardApp::export_view`]):
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
//! The records are plain display data: the runtime never looks inside them.
//!
//! Runs on: shards (publish) and admin threads (read). Owns: the published
//! snapshots and the event ring.

use serde::Serialize;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

/// One cell as the viewer shows it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CellView {
    /// The cell's id.
    pub id: u32,
    /// The space it belongs to.
    pub space: u32,
    /// `[min_x, min_z, max_x, max_z]`, metres.
    pub rect: [f64; 4],
    /// The shard hosting it (index on its node).
    pub shard: u16,
    /// The node of that shard.
    pub node: u16,
    /// Share of one core spent on the cell over the last balancing period
    /// (0 = idle, 1 = a whole core).
    pub load: f64,
    /// Reals held.
    pub reals: u32,
    /// Ghosts held.
    pub ghosts: u32,
    /// Being merged into its sibling.
    pub merging: bool,
}

/// One entity (a real or a ghost) as the viewer shows it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct EntityView {
    /// The entity's id.
    pub id: u64,
    /// The cell holding this copy.
    pub cell: u32,
    /// The entity type's name.
    #[serde(rename = "type", serialize_with = "name_str")]
    pub kind: Arc<str>,
    /// Position, metres.
    pub x: f64,
    /// Position, metres.
    pub z: f64,
    /// Heading, radians.
    pub yaw: f32,
    /// The real (true) or a ghost.
    pub real: bool,
    /// Sync version of this copy's state.
    pub version: u64,
    /// For a ghost: the cell its real is at, as this copy knows.
    pub real_at: Option<u32>,
    /// For a real: the cells holding its ghosts (index range into the
    /// snapshot's haunt list; expanded by [`ShardView::haunts_of`]).
    #[serde(skip)]
    pub haunts: (u32, u32),
}

fn name_str<S: serde::Serializer>(name: &Arc<str>, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(name)
}

/// A balancer decision's kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum BalanceOp {
    /// A cell gave a strip to a new cell.
    Split,
    /// A boundary moved.
    Rebalance,
    /// A cell started merging into its sibling.
    MergeStart,
    /// A merging cell was removed.
    Merge,
}

/// Something that happened, streamed on `/api/events`.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ViewEvent {
    /// A real migrated between cells.
    Migration {
        /// Milliseconds since the server started.
        t_ms: u64,
        /// The entity.
        entity: u64,
        /// The cell it left.
        from_cell: u32,
        /// The cell it went to.
        to_cell: u32,
        /// Where it was, metres.
        x: f64,
        /// Where it was, metres.
        z: f64,
    },
    /// The balancer changed the space tree.
    Balance {
        /// Milliseconds since the server started.
        t_ms: u64,
        /// What it did.
        op: BalanceOp,
        /// The cell split, merging or merged (a rebalance: none).
        cell: Option<u32>,
        /// A split's new cell.
        new_cell: Option<u32>,
        /// A split's new cell's shard.
        new_shard: Option<u16>,
        /// A rebalance's new boundary position, metres.
        at: Option<f64>,
        /// The tree version this change made.
        version: u64,
    },
}

/// What one shard fills every `admin.viewer_publish_ticks` ticks.
#[derive(Debug)]
pub struct ViewSink {
    view: ShardView,
    events: Vec<ViewEvent>,
    events_max: usize,
    dropped: u64,
}

impl ViewSink {
    pub(crate) fn new(entities_max: usize, events_max: usize) -> ViewSink {
        ViewSink {
            view: ShardView::new(entities_max),
            events: Vec::with_capacity(events_max),
            events_max,
            dropped: 0,
        }
    }

    /// Entities per cell to publish at most (`admin.viewer_entities_max`).
    pub fn entities_max(&self) -> usize {
        self.view.entities_max
    }

    /// Adds a cell (the totals, whatever is sampled).
    pub fn cell(&mut self, c: CellView) {
        self.view.cells.push(c);
    }

    /// Adds an entity; for a real, `haunts` are the cells with its ghosts.
    pub fn entity(&mut self, mut e: EntityView, haunts: impl Iterator<Item = u32>) {
        let start = self.view.haunts.len();
        self.view.haunts.extend(haunts);
        let end = self.view.haunts.len();
        e.haunts = (
            u32::try_from(start).unwrap_or(u32::MAX),
            u32::try_from(end).unwrap_or(u32::MAX),
        );
        self.view.entities.push(e);
    }

    /// Adds an event. At `admin.viewer_events_max` waiting events it is
    /// dropped and counted instead; returns whether it was kept.
    pub fn event(&mut self, e: ViewEvent) -> bool {
        if self.events.len() >= self.events_max {
            self.dropped += 1;
            return false;
        }
        self.events.push(e);
        true
    }

    /// Room for this many more events before they are dropped.
    pub fn events_room(&self) -> usize {
        self.events_max - self.events.len()
    }

    fn clear_view(&mut self) {
        self.view.cells.clear();
        self.view.entities.clear();
        self.view.haunts.clear();
    }
}

/// One shard's published snapshot.
#[derive(Clone, Debug, Default)]
pub struct ShardView {
    /// Publications so far (0: nothing published yet).
    pub serial: u64,
    /// The cells the shard hosts.
    pub cells: Vec<CellView>,
    /// Their entities (sampled per cell above `entities_max`).
    pub entities: Vec<EntityView>,
    haunts: Vec<u32>,
    entities_max: usize,
}

impl ShardView {
    fn new(entities_max: usize) -> ShardView {
        ShardView {
            entities_max,
            ..ShardView::default()
        }
    }

    /// The cells holding ghosts of `e` (a real; empty for a ghost).
    pub fn haunts_of(&self, e: &EntityView) -> &[u32] {
        let (a, b) = (e.haunts.0 as usize, e.haunts.1 as usize);
        self.haunts.get(a..b).unwrap_or(&[])
    }
}

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
                std::mem::swap(&mut *shared, &mut sink.view);
                shared.serial = serial;
                true
            }
            _ => false,
        };
        sink.clear_view();
        self.events.try_append(&mut sink.events);
        if sink.dropped > 0 {
            self.dropped
                .fetch_add(std::mem::take(&mut sink.dropped), Ordering::Relaxed);
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
        assert_eq!(sink.events.len(), 1, "the event waits for the next publish");
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
