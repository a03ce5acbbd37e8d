//! What the world records in its trace: [`SimEvent`].
//!
//! Every event is hashed into the run's trace hash (same seed, same hash)
//! and kept in the bounded event log printed with a violation. Owns only the
//! event type, its hashing and its display.

use std::fmt;

use crate::core::cell::CellEvent;
use crate::core::ids::{CellId, EntityId};
use crate::core::time::Time;
use crate::sim::net::Endpoint;
use crate::sim::trace::{TraceHasher, Traceable};

/// One thing that happened in the simulated world.
#[derive(Clone, Debug)]
pub enum SimEvent {
    /// The network delivered a batch.
    Delivered {
        /// Sender.
        from: Endpoint,
        /// Receiver.
        to: Endpoint,
        /// The network's send sequence number.
        seq: u64,
        /// Messages in the batch.
        packets: u32,
    },
    /// A cell reported an event.
    Cell {
        /// The cell.
        cell: CellId,
        /// What it reported.
        event: CellEvent,
    },
    /// A shard stalls until `until`.
    Stall {
        /// The shard's index.
        shard: u16,
        /// When the stall ends.
        until: Time,
    },
    /// The layout changed (`what`: merge, retire, split) at `cell`.
    Layout {
        /// The new layout version.
        version: u64,
        /// What happened.
        what: &'static str,
        /// The cell concerned.
        cell: CellId,
    },
    /// The world issued call `id` from `from` to `target`.
    CallIssued {
        /// The call's id.
        id: u64,
        /// The cell the call was made in.
        from: CellId,
        /// The entity called.
        target: EntityId,
    },
    /// An input effect waits for the real to land (it migrated in the tick
    /// that applied the input).
    Deferred {
        /// The entity.
        entity: EntityId,
        /// The cell that applied the input.
        cell: CellId,
    },
}

impl SimEvent {
    /// The entity the event is about, if any.
    pub fn entity(&self) -> Option<EntityId> {
        match self {
            SimEvent::Cell { event, .. } => Some(cell_event_entity(event)),
            SimEvent::CallIssued { target, .. } => Some(*target),
            SimEvent::Deferred { entity, .. } => Some(*entity),
            _ => None,
        }
    }
}

/// The entity a cell event is about.
pub fn cell_event_entity(ev: &CellEvent) -> EntityId {
    match *ev {
        CellEvent::BecameReal { entity, .. }
        | CellEvent::BecameGhost { entity, .. }
        | CellEvent::GhostAdded { entity, .. }
        | CellEvent::GhostRemoved { entity }
        | CellEvent::GhostSynced { entity, .. }
        | CellEvent::GhostResynced { entity, .. }
        | CellEvent::InputApplied { entity, .. }
        | CellEvent::CallRun { entity, .. }
        | CellEvent::OwnChange { entity, .. }
        | CellEvent::Combat { entity, .. }
        | CellEvent::Destroyed { entity }
        | CellEvent::Dropped { entity, .. } => entity,
    }
}

fn trace_endpoint(e: &Endpoint, h: &mut TraceHasher) {
    match e {
        Endpoint::Shard(s) => {
            h.write_u8(0);
            s.trace(h);
        }
        Endpoint::Client(c) => {
            h.write_u8(1);
            h.write_u32(*c);
        }
    }
}

fn trace_cell_event(ev: &CellEvent, h: &mut TraceHasher) {
    h.write_u64(cell_event_entity(ev).0);
    match ev {
        CellEvent::BecameReal { from, .. } => {
            h.write_u8(0);
            h.write_u32(from.map_or(u32::MAX, |c| c.0));
        }
        CellEvent::BecameGhost { to, .. } => {
            h.write_u8(1);
            h.write_u32(to.0);
        }
        CellEvent::GhostAdded { version, .. } => {
            h.write_u8(2);
            h.write_u64(*version);
        }
        CellEvent::GhostRemoved { .. } => h.write_u8(3),
        CellEvent::GhostSynced { version, .. } => {
            h.write_u8(4);
            h.write_u64(*version);
        }
        CellEvent::GhostResynced { version, .. } => {
            h.write_u8(5);
            h.write_u64(*version);
        }
        CellEvent::InputApplied { seq, data, .. } => {
            h.write_u8(6);
            h.write_u64(*seq);
            h.write_bytes(data);
        }
        CellEvent::CallRun { id, .. } => {
            h.write_u8(7);
            h.write_u64(*id);
        }
        CellEvent::Dropped { reason, .. } => {
            h.write_u8(8);
            h.write_u8(reason.index() as u8);
        }
        CellEvent::OwnChange {
            version, payload, ..
        } => {
            h.write_u8(9);
            h.write_u64(*version);
            h.write_bytes(payload);
        }
        CellEvent::Destroyed { .. } => h.write_u8(11),
        CellEvent::Combat { event, .. } => {
            h.write_u8(10);
            h.write_str(&format!("{event:?}"));
        }
    }
}

impl Traceable for SimEvent {
    fn trace(&self, h: &mut TraceHasher) {
        match self {
            SimEvent::Delivered {
                from,
                to,
                seq,
                packets,
            } => {
                h.write_u8(0);
                trace_endpoint(from, h);
                trace_endpoint(to, h);
                h.write_u64(*seq);
                h.write_u32(*packets);
            }
            SimEvent::Cell { cell, event } => {
                h.write_u8(1);
                h.write_u32(cell.0);
                trace_cell_event(event, h);
            }
            SimEvent::Stall { shard, until } => {
                h.write_u8(2);
                h.write_u32(u32::from(*shard));
                h.write_u64(until.0);
            }
            SimEvent::Layout {
                version,
                what,
                cell,
            } => {
                h.write_u8(3);
                h.write_u64(*version);
                h.write_str(what);
                h.write_u32(cell.0);
            }
            SimEvent::CallIssued { id, from, target } => {
                h.write_u8(4);
                h.write_u64(*id);
                h.write_u32(from.0);
                h.write_u64(target.0);
            }
            SimEvent::Deferred { entity, cell } => {
                h.write_u8(5);
                h.write_u64(entity.0);
                h.write_u32(cell.0);
            }
        }
    }
}

impl fmt::Display for SimEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SimEvent::Delivered {
                from,
                to,
                seq,
                packets,
            } => write!(f, "net #{seq} {from:?} -> {to:?} ({packets} msgs)"),
            SimEvent::Cell { cell, event } => match event {
                CellEvent::InputApplied { entity, seq, .. } => {
                    write!(f, "{cell}: InputApplied {entity} seq {seq}")
                }
                CellEvent::CallRun { entity, id, .. } => {
                    write!(f, "{cell}: CallRun {entity} id {id}")
                }
                other => write!(f, "{cell}: {other:?}"),
            },
            SimEvent::Stall { shard, until } => write!(f, "shard {shard} stalls until {until:?}"),
            SimEvent::Layout {
                version,
                what,
                cell,
            } => {
                write!(f, "layout v{version}: {what} {cell}")
            }
            SimEvent::CallIssued { id, from, target } => {
                write!(f, "call {id} from {from} to {target}")
            }
            SimEvent::Deferred { entity, cell } => {
                write!(f, "{cell}: effect of {entity}'s input deferred (real left)")
            }
        }
    }
}
