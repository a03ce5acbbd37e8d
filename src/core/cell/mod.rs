//! The cell state machine: reals and ghosts of one leaf of the space tree,
//! ghost upkeep, migration (offload/onload), versioned sync and forwarding.
//!
//! Sans-IO, quinn-shaped: [`Cell::handle`] feeds a message, [`Cell::tick`]
//! passes time (with the current [`Layout`]), [`Cell::poll_output`] drains
//! messages addressed to cells or proxies ([`Dest`]), [`Cell::poll_event`]
//! drains what game code must know. The runtime (or the simulator) maps a
//! cell to its shard through the space tree and must keep messages FIFO per
//! ordered pair of shards (hence per ordered pair of cells). Nothing here
//! reads a clock, a socket or a thread; this module must not touch the space
//! tree directly (only through [`Layout`]) or the wire format. It hosts, as
//! values it owns, one AOI index over its reals and ghosts, the observers
//! (client views) of its reals with clients and their combat states
//! (`views.rs`, `fight.rs`, bounds in [`ViewParams`]).
//!
//! # Model
//!
//! An entity is *real* in exactly one cell; the real keeps a list of
//! *haunts*, the cells that hold (or are being sent) a read-only *ghost* of
//! it. Every real has an *epoch*, the number of migrations so far (the
//! proxy's channel version); every change of a real has a *version*, one
//! sequence across migrations. Each cell knows each entity as a [`Residency`]:
//! `Real { epoch }`, `Ghost { real_at, epoch }` or `Gone { forward_to, epoch,
//! until }` (a forwarding entry and tombstone), with every transition checked.
//!
//! # Each tick
//!
//! 1. Forwarding entries past `forward_ttl_ms` expire.
//! 2. Each real runs its ready client inputs (in sequence order) and queued
//!    calls ([`CellEvent::InputApplied`], [`CellEvent::CallRun`]; combat
//!    calls run in the real's combat state instead). Then every real's
//!    combat ticks; its hit and feedback calls go to the addressee's real
//!    through the real-bound path, its events surface as
//!    [`CellEvent::Combat`] (`fight.rs`).
//! 3. Each real that changed builds **one** `SyncMsg` (the entity module's
//!    `SyncEmitter`: version + 1, each audience encoded once) and sends it,
//!    as one shared `Arc`, to every haunt that is created or being created
//!    on this cell's channel; it is also cached. Then the catch-ups owed to
//!    ghosts (resync requests, acks of inherited ghosts) run: cached
//!    messages, or a snapshot if the cache does not reach back.
//! 4. The views (`views.rs`): each observer (one per real with a client)
//!    gets its own change set and the AOI update's enters and leaves; when
//!    its client's update is due it pulls what the copies of the entities
//!    it shows applied (from their caches) and sends one batch to its
//!    client through the proxy.
//! 5. Every `check_period_ms`: ghosts with a version gap older than
//!    `resync_gap_timeout_ms` ask their real for a resync; then each real,
//!    in id order, gets ghost upkeep (`ghosting.rs`) and maybe migrates
//!    (`offload.rs`).
//!
//! # A migration, step by step (real `E` moves from cell A to cell B)
//!
//! 1. *Check at A.* `E` is outside A's rect inflated by `migrate_margin_m`
//!    (or A is merging); the destination B is the non-merging cell covering
//!    `E` (see `offload.rs`). This tick's sync already went out, so `E` has
//!    no unsynced change. Upkeep runs first: if B is not a haunt yet (or
//!    only an older real's `CreateGhost` to it is pending) it gets a
//!    `CreateGhost(epoch e)` now, the only ghost created for `E` this check;
//!    B's ghost is never deleted while it is the destination.
//! 2. *Ghost rule.* A offloads only if B's ghost is acked, or A itself sent
//!    the `CreateGhost` (so it precedes the `Onload` on the A→B channel). A
//!    haunt inherited as "creating" from an older real does not count.
//! 3. *Offload at A (atomic).* A sends `SetNextReal(E, e+1, B)` to every
//!    other haunt, then `Onload` to B carrying the whole real: its state
//!    (every property, encoded for `Audience::Real`) and version, the
//!    sync cache, the haunts
//!    (created and creating, without B), the input sequence state (next
//!    expected + early inputs), pending calls, the downstream sequence, the
//!    proxy flag, the observer (flushed, its last batch sent from A, then
//!    encoded) and the combat state. In the same step `E` becomes
//!    `Ghost { real_at: B, epoch: e+1 }` at A, keeping only ghost-visible
//!    state (a ghost replica rebuilt from the ghost snapshot). From now until
//!    B handles the `Onload`, `E`'s one real is in flight.
//! 4. *Onload at B.* B's ghost (or nothing) becomes `Real { epoch: e+1 }`
//!    with the carried state; B takes over the haunts, drops itself from
//!    them and adds A (whose ghost already exists). B tells the proxy
//!    (`RealMoved { cell: B, epoch: e+1 }`; the newest epoch wins there).
//! 5. *Other haunts* (C) learn of B either from A's `SetNextReal` or from
//!    B's first `Sync` (both carry epoch e+1; the newer epoch wins). Sync
//!    messages from A (v ≤ n) and B (v > n) may arrive at C in any order:
//!    C's reorder buffer applies them by version; a gap that outlives
//!    `resync_gap_timeout_ms` (or overflows `reorder_buffer_max`) is healed
//!    by a resync request (forwarded to wherever the real is) answered at the
//!    real's next tick from the carried cache, or with a snapshot (a `Sync`
//!    of kind `Snapshot`).
//! 6. *Haunts inherited as creating* (a `CreateGhost` from A still in
//!    flight): B holds its syncs back from them until the ghost's ack
//!    (`GhostCreated`, forwarded from A) arrives, then catches the ghost up
//!    from the cache.
//! 7. *Stragglers.* Real-bound messages (inputs, calls, acks, resync
//!    requests) reaching A are forwarded to B; A's `Onload` precedes them on
//!    A→B, so they find the real. Inputs carry the proxy's sequence numbers;
//!    B buffers early ones (`input_buffer_max`) and applies each exactly once
//!    in order. Stale control messages (older epoch) are dropped by the epoch
//!    rules in `ghost.rs`.
//! 8. *Later checks at B.* Upkeep deletes ghosts B does not need (A's
//!    included, once outside the keep margin), but not before
//!    `new_real_keep_ghosts_ms` nor any ghost younger than
//!    `ghost_min_lifetime_ms`.
//!
//! A teleport is the same path: `CreateGhost` (always anew) then `Onload` on
//! the same channel to the cell at the new position. A move to another
//! space ([`Cell::transfer`], `transfer.rs`) too, after deleting every ghost
//! of the old space, and leaving no ghost behind.
//!
//! # Limits
//!
//! Every table has a bound in [`CellParams`]. The output and event queues
//! are drained by the driver after every call; their size is bounded by the
//! work of one call (per tick at most one sync per real per haunt, one
//! migration's messages per migrating real, the catch-ups owed).

mod acks;
mod counters;
mod destroy;
mod early;
mod fight;
mod flush_phase;
mod forward;
mod ghost;
mod ghosting;
mod layout;
mod machine;
mod msg;
mod offload;
mod params;
mod real;
mod residency;
mod seq_buffer;
mod table;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_destroy;
#[cfg(test)]
mod tests_early;
#[cfg(test)]
mod tests_transfer;
mod transfer;
mod view_params;
mod views;

pub use counters::{CellEvent, Counters, DropReason};
pub use fight::HitError;
pub use layout::{GridLayout, Layout, SoloLayout};
pub use machine::{Cell, CellError, EntityView};
pub use msg::{
    Call, CallKind, CellMsg, Dest, Haunt, HauntState, Input, Msg, Onload, Outgoing, ProxyMsg,
    Source, ToReal, ToRealBody,
};
pub use params::{CellParams, CellParamsError};
pub use residency::{IllegalTransition, Residency, HISTORY_MAX};
pub use seq_buffer::{SeqBuffer, SeqPush};
pub use view_params::{FlushPhases, ViewParams};
