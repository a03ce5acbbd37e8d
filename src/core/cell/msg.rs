//! The messages cells and proxies exchange, and the addressing of outputs.
//!
//! Plain enums with rkyv derives (the wire layer archives them later). Two
//! families:
//!
//! - **ghost-bound** (`CreateGhost`, `DeleteGhost`, `Sync`, `SetNextReal`):
//!   sent by a real to one of its haunts (a resync is a `Sync` carrying a
//!   snapshot); every one carries the
//!   sender real's `epoch` so a haunt can tell stale control messages from an
//!   older real (sent on another FIFO channel) from current ones.
//! - **real-bound** ([`ToReal`]: inputs, calls, ghost acks, resync requests):
//!   addressed to wherever the sender believes the real is, forwarded from
//!   ghosts and forwarding entries until they reach it (`hops` counts).
//!
//! Owns only message shapes; no behaviour beyond constructors.

use std::sync::Arc;

use crate::core::ids::{CellId, EntityId};
use crate::core::time::Time;

use crate::core::entity::{EntityTypeId, SyncCache, SyncMsg};
use crate::core::payload::Payload;

/// Where an output goes. The runtime maps a cell to its shard through the
/// space tree and a proxy to the shard that accepted its client.
#[derive(
    Clone,
    Copy,
    Debug,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    rkyv::Archive,
    rkyv::Serialize,
    rkyv::Deserialize,
)]
pub enum Dest {
    /// A cell.
    Cell(CellId),
    /// The proxy (client anchor) of an entity.
    Proxy(EntityId),
}

/// Who sent an input to a cell.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Source {
    /// Another cell (or this one).
    Cell(CellId),
    /// The proxy of an entity.
    Proxy(EntityId),
    /// Game code or the runtime itself.
    Local,
}

/// A message on its way out of a cell or a proxy.
#[derive(Clone, Debug, PartialEq)]
pub struct Outgoing {
    /// The addressee; `Dest::Cell` always carries a [`Msg::Cell`] and
    /// `Dest::Proxy` a [`Msg::Proxy`].
    pub to: Dest,
    /// The message.
    pub msg: Msg,
}

impl Outgoing {
    /// A message for cell `to`.
    pub fn cell(to: CellId, msg: CellMsg) -> Self {
        Outgoing {
            to: Dest::Cell(to),
            msg: Msg::Cell(msg),
        }
    }

    /// A message for the proxy of `entity`.
    pub fn proxy(entity: EntityId, msg: ProxyMsg) -> Self {
        Outgoing {
            to: Dest::Proxy(entity),
            msg: Msg::Proxy(msg),
        }
    }
}

/// Either kind of message.
#[derive(Clone, Debug, PartialEq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
pub enum Msg {
    /// For a cell.
    Cell(CellMsg),
    /// For a proxy.
    Proxy(ProxyMsg),
}

/// One client input, stamped by the proxy.
#[derive(Clone, Debug, PartialEq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
pub struct Input {
    /// Consecutive from 1 per entity, for the entity's whole life.
    pub seq: u64,
    /// Encoded input (inline when small: no allocation per input).
    pub data: Payload,
}

/// Who handles a call at the real.
#[derive(Clone, Copy, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
pub enum CallKind {
    /// Game code: surfaced as [`super::CellEvent::CallRun`].
    Game,
    /// The combat flow (`core::combat`): run by the cell itself.
    Combat,
}

/// A call from another entity or service, to run on the real.
#[derive(Clone, Debug, PartialEq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
pub struct Call {
    /// Who handles it. Dispatch never looks inside `data`, so a game
    /// payload can hold any bytes.
    pub kind: CallKind,
    /// Chosen by the caller, echoed in events (for replies and tests).
    pub id: u64,
    /// Encoded call.
    pub data: Arc<[u8]>,
}

/// What a real-bound message asks.
#[derive(Clone, Debug, PartialEq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
pub enum ToRealBody {
    /// A client input.
    Input(Input),
    /// A call.
    Call(Call),
    /// A ghost now exists at `cell`, at `version`.
    GhostCreated {
        /// The haunt.
        cell: CellId,
        /// The creating real's epoch.
        epoch: u64,
        /// The snapshot version the ghost started from.
        version: u64,
    },
    /// The ghost at `cell` has an unfillable gap after `applied` (or, with
    /// `full`, needs a snapshot whatever the cache holds).
    ResyncRequest {
        /// The haunt.
        cell: CellId,
        /// Its last applied version.
        applied: u64,
        /// A snapshot is needed (the ghost's state is damaged).
        full: bool,
    },
    /// Destroy the real (its client left): sent by the proxy after its
    /// last input, on the same path, so it follows them.
    Destroy,
}

/// A message for an entity's real, wherever it is.
#[derive(Clone, Debug, PartialEq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
pub struct ToReal {
    /// The entity.
    pub entity: EntityId,
    /// Times forwarded so far.
    pub hops: u8,
    /// The request.
    pub body: ToRealBody,
}

/// Whether a haunt's ghost is confirmed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
pub enum HauntState {
    /// `CreateGhost` was sent by `sent_by` at `sent_at`; no ack yet.
    Creating {
        /// When it was sent.
        sent_at: Time,
        /// Which cell sent it (its FIFO channel to the haunt).
        sent_by: CellId,
    },
    /// The ghost acknowledged its creation.
    Created,
}

/// One cell where the real keeps a ghost.
#[derive(Clone, Copy, Debug, PartialEq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
pub struct Haunt {
    /// The haunt.
    pub cell: CellId,
    /// Confirmed or not.
    pub state: HauntState,
    /// When the ghost was first asked for (minimum lifetime counts from it).
    pub since: Time,
}

/// Everything a real carries when it migrates.
#[derive(Clone, Debug, PartialEq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
pub struct Onload {
    /// The entity.
    pub entity: EntityId,
    /// The real's epoch at the destination (old epoch + 1).
    pub epoch: u64,
    /// The entity's type.
    pub type_id: EntityTypeId,
    /// The whole state (every property), encoded for `Audience::Real`.
    pub state: Vec<u8>,
    /// The sync version `state` is at.
    pub version: u64,
    /// Recent sync messages, to catch up ghosts.
    pub sync_cache: SyncCache,
    /// The haunts (created and creating), excluding the destination.
    pub haunts: Vec<Haunt>,
    /// Next client input sequence expected.
    pub next_input: u64,
    /// Inputs received ahead of `next_input`.
    pub early_inputs: Vec<Input>,
    /// Calls received but not yet run.
    pub pending_calls: Vec<Call>,
    /// Next downstream (to-client) sequence number.
    pub next_downstream: u64,
    /// Whether a client proxy follows this entity.
    pub has_proxy: bool,
    /// The observer's migration blob (`core::view::carry`; empty: none).
    pub observer: Vec<u8>,
    /// The combat state (`Combat::encode`; empty: none).
    pub combat: Vec<u8>,
    /// The layout version the sender decided the migration under: the
    /// destination migrates the real on only once its own layout is at
    /// least this new (a replica that lags would hand it straight back).
    pub layout_version: u64,
    /// False for a move between spaces ([`Cell::transfer`](super::Cell::transfer)):
    /// the source kept no ghost, so it is not a haunt of the new real.
    pub source_ghost: bool,
}

/// Messages a cell handles.
#[derive(Clone, Debug, PartialEq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
pub enum CellMsg {
    /// Create (or re-create) a ghost from `snapshot`; the real is at the
    /// sender.
    CreateGhost {
        /// The entity.
        entity: EntityId,
        /// Sender real's epoch.
        epoch: u64,
        /// The entity's type.
        type_id: EntityTypeId,
        /// Starting state: a ghost snapshot at the real's current version.
        snapshot: SyncMsg,
    },
    /// Delete the ghost.
    DeleteGhost {
        /// The entity.
        entity: EntityId,
        /// Sender real's epoch.
        epoch: u64,
    },
    /// One versioned change set, or a snapshot answering a resync (one
    /// allocation shared by every haunt).
    Sync {
        /// Sender real's epoch.
        epoch: u64,
        /// The change.
        msg: Arc<SyncMsg>,
    },
    /// The real moved to `next` at `epoch` (BigWorld's ghostSetNextReal).
    SetNextReal {
        /// The entity.
        entity: EntityId,
        /// The new real's epoch.
        epoch: u64,
        /// The new real's cell.
        next: CellId,
    },
    /// Become the real (boxed: large).
    Onload(Box<Onload>),
    /// For the real, wherever it is.
    ToReal(ToReal),
}

impl CellMsg {
    /// The entity the message is about.
    pub fn entity(&self) -> EntityId {
        match self {
            CellMsg::CreateGhost { entity, .. }
            | CellMsg::DeleteGhost { entity, .. }
            | CellMsg::SetNextReal { entity, .. } => *entity,
            CellMsg::Sync { msg, .. } => msg.entity,
            CellMsg::Onload(o) => o.entity,
            CellMsg::ToReal(t) => t.entity,
        }
    }
}

/// Messages a proxy handles.
#[derive(Clone, Debug, PartialEq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
pub enum ProxyMsg {
    /// The real is now at `cell`, at `epoch` (newest epoch wins).
    RealMoved {
        /// The entity.
        entity: EntityId,
        /// Its cell.
        cell: CellId,
        /// Its epoch.
        epoch: u64,
    },
    /// Data for the client, numbered per entity across migrations.
    Downstream {
        /// The entity.
        entity: EntityId,
        /// Sending real's cell.
        cell: CellId,
        /// Sending real's epoch.
        epoch: u64,
        /// Consecutive from 1.
        seq: u64,
        /// Encoded client data (its kind byte first), owned: one reader.
        data: crate::core::down::DownBody,
    },
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::entity::SyncKind;

    #[test]
    fn messages_round_trip_through_rkyv() {
        let sync = SyncMsg::new(EntityId(9), 4, SyncKind::Props, Time(5), b"ab", b"c");
        let msg = CellMsg::Sync {
            epoch: 3,
            msg: Arc::new(sync),
        };
        let bytes = rkyv::to_bytes::<rkyv::rancor::Error>(&msg).expect("serialise");
        let back: CellMsg =
            rkyv::from_bytes::<CellMsg, rkyv::rancor::Error>(&bytes).expect("deserialise");
        assert_eq!(back, msg);
        assert_eq!(back.entity(), EntityId(9));
    }

    #[test]
    fn constructors_pair_dest_and_kind() {
        let o = Outgoing::proxy(
            EntityId(1),
            ProxyMsg::RealMoved {
                entity: EntityId(1),
                cell: CellId(2),
                epoch: 1,
            },
        );
        assert_eq!(o.to, Dest::Proxy(EntityId(1)));
        assert!(matches!(o.msg, Msg::Proxy(_)));
    }
}
