//! The client-facing view of one observer (an avatar with a client), sans-IO.
//!
//! Runs on the shard of the cell that holds the observer's real; owns that
//! client's view state and the bytes sent to it, never a cell, an AOI index
//! or a socket.
//!
//! - [`event`]: [`ClientEvent`], the server-to-client view messages.
//! - [`codec`]: their compact byte layout, the untrusted [`BatchReader`].
//! - [`host`]: [`ObserverHost`], what the observer reads from its cell.
//! - [`observer`]: [`Observer`], one client's view: handles, tracker,
//!   coalesced movements, per-tick batch.
//! - [`budget`]: the client's downstream budget, distance bands and
//!   movement priority.
//! - `slots`: the observer's dense slot table (entity -> slot).
//! - `visits`: which slots a paced flush visits (band-rate visits).
//! - [`carry`]: the observer's migration blob (`Onload::observer`).
//! - [`client`]: [`ClientView`], the client side that checks every rule.
//!
//! # Handles survive migration without a remap
//!
//! Seed 000 names entities to the client by the cell-local `aoi_index`, so
//! after the observer migrates it must send `notify_aoi_reindex` and the
//! client must rewrite its map. Here the handle is allocated by the
//! observer itself and the handle map travels in the blob: the new cell
//! keeps every handle, so there is nothing to remap and no window where
//! the client's ids are wrong.
//!
//! # Integration (what the cell calls, and when)
//!
//! Implemented by `core::cell` (`views.rs`); the cell's module doc has the
//! tick order. The contract:
//!
//! The cell keeps one [`Observer`] per real that has a client and an AOI
//! area, and implements [`ObserverHost`] over its entity table (the real
//! or ghost copy of each entity: `copy_version` = its last applied version,
//! `copy_cache` = its `SyncCache`, `copy_snapshot` = `Entity::encode_snapshot`
//! of the copy). Each tick, after the step that builds the reals' change
//! sets (step 3 of the cell's tick) and after every ghost message received
//! this tick was applied:
//!
//! 1. For every real `E` that changed: `observer(E).handle_own(version,
//!    kind, change_set.own)` (only if `E` has an observer).
//! 2. Run the AOI update; for each event of an observer's area:
//!    `handle_aoi(host, entity, kind)` (leaves before enters, as the AOI
//!    reports them).
//! 3. For an observer that arrived by migration this tick
//!    ([`Observer::needs_view`]): create its area, run the update, then
//!    `handle_view(host, &interest)` with the area's whole interest set
//!    (`AoiIndex::interest`); feeding that update's enter events as well is
//!    harmless (an enter of a shown entity only heals it).
//! 4. When the observer's update is due (every tick, or every N ticks for
//!    `view.client_update_hz`): `let batch = observer.flush_paced(host)`
//!    (`flush` sends everything, for the last batch before a migration); if
//!    not empty, `cell.send_to_client(E, pool.body(DownKind::View, batch))`
//!    (`crate::core::down`: a recycled buffer of the cell's `DownPool`;
//!    `down::with_kind` makes one without a pool). A flush first
//!    pulls every shown entity up to its local copy from the copy's cache
//!    (the observer's "Pull at the flush"), so the cell pushes nothing per
//!    released message: every copy must cache what it applies (at least
//!    the versions of one update period), ghosts included.
//!
//! While a client's budget binds, a paced flush skips the shown entities
//! it cannot send and whose copies' heads show nothing but bare movements
//! since the client's version (band-rate visits,
//! `ObserverParams::visit_span_max`; 0 visits every entity every flush).
//!
//! A host may also push each released message (`handle_sync(host, entity,
//! version, kind, msg.others_payload())`, in release order, after the copy
//! cached it): the same rules apply and the pull then finds it up to date.
//!
//! On offload of `E`: `observer.encode_blob(&mut onload.observer)` (after
//! the last flush at the old cell), drop the observer. On onload:
//! `Observer::decode_blob(E, params, &onload.observer)`; on
//! [`carry::BlobError`] count it and start a fresh `Observer::new` after
//! telling the client to drop its view (a new session). The copy in the new
//! cell may be behind the client (a lagging ghost): the observer holds that
//! entity (its versions stay stale) until the copy passes the client's
//! version; never resync backwards.

pub mod budget;
pub mod carry;
pub mod client;
pub mod codec;
pub mod event;
pub mod host;
pub mod observer;
pub mod shown;
mod slots;
mod visits;

pub use budget::{Band, BudgetParams};
pub use carry::BlobError;
pub use client::{ClientView, ClientViewParams, Rule, Shown, Violation};
pub use codec::{decode_event, encode_event, BatchReader, DecodeError, POSITION_RESOLUTION_M};
pub use event::{step_from, ClientEvent, Handle, Movement};
pub use host::{CopyHeadRef, CopyRef, HeadRef, LocalCopy, ObserverHost, RunHead};
pub use observer::{FlushScratch, Observer, ObserverParams, ObserverStats};
pub use shown::ShownMap;

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_detail;
#[cfg(test)]
mod tests_quiet;
