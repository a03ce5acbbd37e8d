//! What a shard's application shows the live viewer: [`ViewSink`] and its
//! plain display records ([`CellView`], [`EntityView`], [`ViewEvent`]).
//!
//! Every `admin.viewer_publish_ticks` ticks the driver asks the application
//! to fill its shard-local sink (`ShardApp::export_view`): the cells it
//! hosts, their entities (at most `admin.viewer_entities_max` per cell,
//! sampled evenly above), and the events since the last time (migrations,
//! balancer decisions). The sink bounds what waits: at most
//! `admin.viewer_events_max` events, beyond which new ones are dropped and
//! counted. The runtime publishes the sink to its board
//! (`runtime::viewer::ViewBoard`, docs/viewer.md) by swapping vectors, so a
//! steady state allocates nothing.
//!
//! Runs on: the shard's thread. Owns the records until published; it must
//! not touch locks, sockets or clocks (the board does the sharing).

use serde::Serialize;
use std::sync::Arc;

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

    /// Swaps the filled view with `published` (the driver's publish).
    pub(crate) fn swap_view(&mut self, published: &mut ShardView) {
        std::mem::swap(published, &mut self.view);
    }

    /// Empties the view for the next fill.
    pub(crate) fn clear_view(&mut self) {
        self.view.cells.clear();
        self.view.entities.clear();
        self.view.haunts.clear();
    }

    /// The events waiting to be handed over, oldest first.
    pub(crate) fn events_mut(&mut self) -> &mut Vec<ViewEvent> {
        &mut self.events
    }

    /// Takes the count of events dropped since the last call.
    pub(crate) fn take_dropped(&mut self) -> u64 {
        std::mem::take(&mut self.dropped)
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
    /// An empty snapshot for `entities_max` entities per cell.
    pub(crate) fn new(entities_max: usize) -> ShardView {
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
