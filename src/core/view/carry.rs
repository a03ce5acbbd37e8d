//! The observer's migration blob: what travels in `Onload::observer`.
//!
//! Owns the byte form of an [`Observer`]'s durable state: the own version,
//! every shown entity with its client [`Handle`], its last delivered version
//! and whether a resync is due, and the handle counter. Because the handles
//! travel, the client's ids stay valid across the observer's migration with
//! no remap message at all (seed 000 sends `notify_aoi_reindex` and the
//! client rewrites its `aoi_index` map in three passes; here the ids are the
//! observer's, not the cell's, so there is nothing to rewrite). Entities not
//! yet shown (enter pending) and the batch are not carried: the new cell's
//! [`Observer::handle_view`] re-derives them.
//!
//! The blob crosses shards, so decoding is checked: a typed [`BlobError`],
//! never a panic.
//!
//! # Layout
//! `u8 format (3), varint owner, varint own_version + 1 (0: none)`, if an
//! own version: `3 x ivar own position (cm)`; then `varint next_handle,
//! varint n`, then `n` times `varint entity (ascending), u8 state (1 live,
//! 2 resync due), varint handle, varint last_version, 3 x ivar position (cm,
//! the base of the client's next movement delta), varint stale (the detail
//! properties the client may lack, bit per property index)`. The old cell sends every
//! coalesced movement before the blob, so the client has `last_version`.

use super::codec::DecodeError;
use super::event::Handle;
use super::observer::{Observer, ObserverParams, QPos, Slot, SlotCold, SlotState, NO_POSITION};
use super::slots::SlotMut;
use crate::core::entity::codec::{put_ivar, put_uvar, Reader};
use crate::core::ids::EntityId;

const BLOB_FORMAT: u8 = 3;
const STATE_LIVE: u8 = 1;
const STATE_RESYNC: u8 = 2;

/// Why an observer blob was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BlobError {
    /// The bytes broke the primitive encoding.
    #[error(transparent)]
    Decode(#[from] DecodeError),
    /// Unknown format byte.
    #[error("unknown observer blob format {0}")]
    Format(u8),
    /// The blob belongs to another entity.
    #[error("blob of {got} given to observer {want}")]
    Owner {
        /// In the blob.
        got: EntityId,
        /// Expected.
        want: EntityId,
    },
    /// Entities not strictly ascending.
    #[error("entities not strictly ascending at {0}")]
    Order(EntityId),
    /// A handle repeated or not below the handle counter.
    #[error("handle {0} repeated or out of range")]
    Handle(Handle),
    /// Unknown slot state byte.
    #[error("unknown slot state {0}")]
    State(u8),
    /// More entities than this cell's `view_entities_max`.
    #[error("{n} entities over view_entities_max {max}")]
    TooMany {
        /// In the blob.
        n: u64,
        /// The limit.
        max: usize,
    },
    /// A quantised coordinate beyond the 32 bits every position fits
    /// (`codec::quantise` clamps to them).
    #[error("quantised coordinate {0} beyond 32 bits")]
    Position(i64),
}

impl Observer {
    /// Appends the migration blob (call when the owner's real offloads; put
    /// the bytes in `Onload::observer`).
    ///
    /// # Panics
    /// If events were produced since the last [`Observer::flush`]: they
    /// would be lost while the blob says the client has them. Flush (and
    /// send) first.
    pub fn encode_blob(&self, out: &mut Vec<u8>) {
        assert!(!self.has_unflushed(), "flush the observer before its blob");
        out.push(BLOB_FORMAT);
        put_uvar(out, self.owner.0);
        put_uvar(out, self.own_version.map_or(0, |v| v + 1));
        if self.own_version.is_some() {
            for c in self.own_q.unwrap_or_default() {
                put_ivar(out, i64::from(c));
            }
        }
        put_uvar(out, u64::from(self.next_handle));
        // Ascending in the blob (the decoder checks it); the table itself
        // is in arrival order.
        let mut shown: Vec<_> = self
            .slots
            .iter_both()
            .filter(|(_, _, c)| c.handle.is_some())
            .collect();
        shown.sort_unstable_by_key(|&(e, _, _)| *e);
        put_uvar(out, shown.len() as u64);
        for (e, s, c) in shown {
            put_uvar(out, e.0);
            out.push(match s.state {
                SlotState::ResyncPending => STATE_RESYNC,
                _ => STATE_LIVE,
            });
            put_uvar(out, u64::from(c.handle.expect("shown")));
            debug_assert!(!s.has_pending(), "flushed before the blob");
            put_uvar(out, s.sent());
            for q in c.q() {
                put_ivar(out, q);
            }
            put_uvar(out, c.stale());
        }
    }

    /// The observer of `owner` arriving by migration, from its blob. Its
    /// [`Observer::needs_view`] is true: call [`Observer::handle_view`] with
    /// the new cell's interest set before its first flush.
    ///
    /// # Errors
    /// [`BlobError`] for bytes that are not a valid blob of `owner` within
    /// `params`.
    pub fn decode_blob(
        owner: EntityId,
        params: ObserverParams,
        blob: &[u8],
    ) -> Result<Observer, BlobError> {
        let mut r = Reader::new(blob);
        let format = r.u8()?;
        if format != BLOB_FORMAT {
            return Err(BlobError::Format(format));
        }
        let got = EntityId(r.uvar()?);
        if got != owner {
            return Err(BlobError::Owner { got, want: owner });
        }
        let mut o = Observer::from_parts(owner, params);
        o.own_version = r.uvar()?.checked_sub(1);
        if o.own_version.is_some() {
            o.own_q = Some(read_q(&mut r)?);
        }
        o.next_handle = r.len(params.view_entities_max.min(Handle::MAX as usize))? as Handle;
        let n = r.uvar()?;
        if n > params.view_entities_max as u64 {
            return Err(BlobError::TooMany {
                n,
                max: params.view_entities_max,
            });
        }
        let mut used = vec![false; o.next_handle as usize];
        for _ in 0..n {
            read_slot(&mut r, &mut o, &mut used)?;
        }
        r.finish()?;
        o.free = (0..o.next_handle)
            .rev()
            .filter(|&h| !used[h as usize])
            .collect();
        o.needs_view = true;
        o.verify();
        Ok(o)
    }
}

/// A quantised position: three signed varints, each within 32 bits.
fn read_q(r: &mut Reader<'_>) -> Result<QPos, BlobError> {
    let mut q = [0; 3];
    for c in &mut q {
        let v = r.ivar()?;
        *c = i32::try_from(v).map_err(|_| BlobError::Position(v))?;
    }
    Ok(q)
}

fn read_slot(r: &mut Reader<'_>, o: &mut Observer, used: &mut [bool]) -> Result<(), BlobError> {
    let e = EntityId(r.uvar()?);
    if o.slots.last_key().is_some_and(|k| k >= e) {
        return Err(BlobError::Order(e));
    }
    let state = match r.u8()? {
        STATE_LIVE => SlotState::Live,
        STATE_RESYNC => SlotState::ResyncPending,
        s => return Err(BlobError::State(s)),
    };
    let h = r.uvar()?;
    let handle = Handle::try_from(h).map_err(|_| BlobError::Handle(Handle::MAX))?;
    match used.get_mut(handle as usize) {
        Some(u) if !*u => *u = true,
        _ => return Err(BlobError::Handle(handle)),
    }
    let last = r.uvar()?;
    let (mut hot, mut cold) = (Slot::new(state, last), SlotCold::new(Some(handle)));
    let mut slot = SlotMut {
        hot: &mut hot,
        cold: &mut cold,
    };
    slot.set_qpos(read_q(r)?);
    slot.set_stale(r.uvar()?);
    o.slots.insert(e, hot, cold);
    if state == SlotState::ResyncPending {
        o.queue.push_back((e, NO_POSITION));
    }
    Ok(())
}
