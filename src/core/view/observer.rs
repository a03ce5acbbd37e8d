//! One avatar's client view, sans-IO: what its client sees and in which order.
//!
//! Owns [`Observer`]: the handle map (entity id <-> client [`Handle`]), an
//! the last version delivered per entity (in the slot, with the handle, so
//! the hot path looks one map up; the rule is
//! [`ObserverTracker`](crate::core::entity::ObserverTracker)'s), the queue of
//! snapshots still to send, the own-entity stream and the batch buffer of
//! the current tick. It reads the cell only through [`ObserverHost`] and
//! must not touch the AOI index, the cell or the network; the cell feeds it
//! (see the `view` module doc for the exact calls per tick).
//!
//! # Rules it keeps (DESIGN.md invariants)
//!
//! - Enter before any update; no double enter; leave ends updates.
//! - Per entity, updates carry consecutive versions since the last snapshot
//!   (enter or resync): each version goes through the slot's offer rule;
//!   a stale one is dropped, a gap is filled from the local copy's
//!   [`SyncCache`](crate::core::entity::SyncCache) or healed by a resync,
//!   never skipped.
//! - Snapshots (enter, resync) are built at [`Observer::flush`], after every
//!   change of the tick was applied to the copies, so a snapshot and the
//!   stream agree; while one is pending the entity's updates are dropped
//!   (the snapshot will contain them).
//! - The observer's own migration needs no remap: handles and tracker travel
//!   in the blob (`carry`), and [`Observer::handle_view`] re-derives the view
//!   in the new cell. A copy *behind* what the client saw (a lagging ghost)
//!   is held: its versions stay stale until it passes the client's version.
//!
//! # Pull at the flush
//!
//! The cell does not push each released message to every observer that
//! sees the entity: that touched one observer's slot per message, in no
//! order, and the clients benchmark's profile put a fifth of the server in
//! those cache misses. Instead each flush first walks the observer's own
//! slots (one dense array, in order) and compares each with its local copy
//! (a hashed lookup in a table every observer shares, so it stays in
//! cache); the few that moved take what the copy's cache holds
//! after the client's version, in order, under the same offer rule. Bare
//! movements coalesce in place; property changes are emitted in version
//! order, merged with the pending movement. An observer that flushes every
//! N ticks (`view.client_update_hz`) also pulls every N ticks, so its work
//! follows its update rate, not the movement rate. What the pull reads
//! first is a copy's *head* ([`ObserverHost::copy_head`]: version and the
//! cache's summary of the bare movements that end its stream, dense in the
//! cell): behind by movements only, the slot takes the newest position from
//! it without reading a message. [`Observer::handle_sync`]
//! stays for hosts that push (the same rules; a pushed version is simply
//! up to date at the pull). While the client's budget binds, a paced
//! flush skips the slots it cannot send and whose copies took nothing but
//! bare movements (band-rate visits: the `visits` module; the pull is in
//! `observer/pull.rs`). A paced flush ranks each slot for its budget as the
//! pull leaves it (`observer/walk.rs`): one pass over the slots, not a pull
//! and then a walk. A slot the last pull found quiet ([`QUIET`]) whose
//! copy's head the host says held still since
//! ([`ObserverHost::head_unchanged_since`]) is passed by without a read of
//! the head: in a standing crowd most are.
//!
//! # Levels of detail (properties declared with a [`Detail`])
//!
//! A property with a level of detail *reaches* a distance (its band's
//! `to_m`, or its metres; the last band reaches the whole view). For each
//! entity shown, the slot keeps `stale`: the detail properties whose value
//! the client may lack. The rules:
//!
//! - A delta entry of a detail property is cut from what this client is
//!   sent when the client is more than `detail_hysteresis_m` beyond its
//!   reach (measured from the observer's real to the entity's position as
//!   of that version), or when the property is already stale; the property
//!   is then stale. Nothing else changes: the event goes as it would have
//!   (Props or MoveProps, never deferred), its delta without the cut
//!   entries (possibly empty), so the budget and the coalescing of
//!   movements see the same events as without levels of detail.
//! - Enter and Resync snapshots carry the detail properties beyond reach
//!   at their defaults (the same layout); those start stale.
//! - At each flush, a stale property whose entity is now within reach is
//!   caught up once: a [`ClientEvent::Detail`] with its whole current value,
//!   at the version the client shows (a pending movement is sent first, and
//!   only when the local copy is at exactly that version; otherwise it waits).
//! - So a client beyond reach keeps the last value it was sent (or the
//!   default from a snapshot taken beyond reach); one within reach converges.
//!   Versions stay exact: the client's checks are the same, plus "a Detail
//!   is at the version shown". `stale` travels in the migration blob.

use super::budget::{BudgetParams, Pacer, Ranks, BANDS_MAX};
use super::codec::{
    encode_event, encode_move, quantise, read_movement, snapshot_header, yaw_byte, UNITS_PER_M,
};
use super::event::{ClientEvent, Handle, Movement, STEP_MAX};
use super::host::ObserverHost;
use super::slots::{SlotMut, Slots};
use super::visits::{due_age, Visits};
use crate::core::aoi::EventKind;
use crate::core::entity::codec::Reader;
use crate::core::entity::detail::filter_delta;
#[cfg(doc)]
use crate::core::entity::Detail;
use crate::core::entity::{Audience, Delivery, Fill, SyncKind, SyncMsg};
use crate::core::fault::Fault;
use crate::core::geom::Vec3;
use crate::core::ids::EntityId;
use std::collections::VecDeque;

mod pull;
mod walk;

use walk::{Ranked, Walk};

/// Versions a pending movement may cover before it is sent whatever the
/// budget (well inside the wire's step of at most 127).
const COALESCE_VERSIONS_MAX: u64 = 100;

/// Most entities marked important at once per observer.
pub const IMPORTANT_MAX: usize = 64;

/// An `OtherClients` property delta that changes nothing (no property).
const EMPTY_DELTA: [u8; 1] = [0];

/// A delta larger than this (centimetres, any axis) goes as a key frame.
const DELTA_MAX_CM: i64 = 1 << 24;

/// Bounds of an [`Observer`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ObserverParams {
    /// Most entities in view (handles in use, tracker size, snapshot queue).
    /// Default 1024 (match the AOI area's `max_interest`).
    pub view_entities_max: usize,
    /// Soft size of one tick's batch: once it is reached, further enters and
    /// resyncs wait for the next tick (at least one snapshot is sent per
    /// tick so none starves); updates are never deferred. Default 64 KiB.
    pub batch_bytes_max: usize,
    /// The client's downstream budget and distance bands (config `[view]`),
    /// applied by [`Observer::flush_paced`].
    pub budget: BudgetParams,
    /// A fault to inject on purpose (config `testing.fault`): `DropLeave`
    /// sends no Leave events, `StaleVersion` sends each update with the
    /// previous version; the others are not the observer's. Default none.
    pub fault: Fault,
    /// Band-rate visits (see `visits`): a paced flush may skip a slot it
    /// cannot send, but visits each at least every this many flushes since
    /// its last send (the host derives it from its copies' caches; 0 or 1:
    /// every slot at every flush). Default 0.
    pub visit_span_max: u16,
}

impl Default for ObserverParams {
    fn default() -> Self {
        ObserverParams {
            view_entities_max: 1024,
            batch_bytes_max: 64 * 1024,
            budget: BudgetParams::default(),
            fault: Fault::None,
            visit_span_max: 0,
        }
    }
}

/// A quantised position as an observer keeps it: 32 bits an axis, which
/// holds every position [`quantise`] makes (it clamps to that range,
/// PROTOCOL.md 6.2). Half the bytes of the wire's `i64`s in every slot,
/// both parts (see [`Slot`]).
pub(super) type QPos = [i32; 3];

/// `q` (from [`quantise`], so within the 32-bit range) as an observer keeps it.
#[inline]
fn narrow(q: [i64; 3]) -> QPos {
    debug_assert!(
        q.iter().all(|c| i32::try_from(*c).is_ok()),
        "quantise keeps positions within 32 bits"
    );
    q.map(|c| c.clamp(i64::from(i32::MIN), i64::from(i32::MAX)) as i32)
}

/// A kept position in the wire's integers.
#[inline]
fn widen(q: QPos) -> [i64; 3] {
    q.map(i64::from)
}

/// The newest movement of an entity not yet sent to the client, in the
/// wire's units (quantised once where it is taken: a cell's heads hold it
/// quantised per entity and tick, so the observers of a mover share that work).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Pending {
    /// The position, quantised ([`quantise`]).
    pub(super) q: QPos,
    /// The heading byte ([`yaw_byte`]).
    pub(super) yaw: u8,
}

impl Pending {
    /// The movement to `pos` facing `yaw`, quantised.
    pub(super) fn of(pos: Vec3, yaw: f32) -> Pending {
        Pending {
            q: narrow(quantise(pos)),
            yaw: yaw_byte(yaw),
        }
    }
}

/// Where one entity of the view stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum SlotState {
    /// In the AOI, no snapshot sent yet (no handle, not tracked).
    EnterPending,
    /// Shown; updates flow through the tracker.
    Live,
    /// Shown; a resync snapshot is due (updates are dropped until then).
    ResyncPending,
}

/// One entity of the view: the hot part, read by every pull and every
/// budget walk of a flush (40 bytes: with the entity id before it,
/// [`Slots`] stores the pair in 48, four to three cache lines). What only
/// a send, snapshot or catch-up reads is the slot's [`SlotCold`] part, kept
/// apart (see [`Slots`]'s module doc for why). The fields are ordered by
/// size, so `repr(C)` leaves no padding.
#[derive(Clone, Copy, Debug, PartialEq)]
#[repr(C)]
pub(super) struct Slot {
    /// The last version taken from the entity's stream (meaningful once it
    /// has a handle): the client has it, or a coalesced movement holds it.
    pub(super) last: u64,
    /// The newest position taken from the stream, quantised: the pending
    /// movement's while `has_pending`, else the cold part's `q` (kept so by
    /// [`SlotMut::set_q`] and [`SlotMut::take_pending`]).
    newest_q: QPos,
    /// Where the host last found the entity's copy
    /// ([`ObserverHost::copy_head_hinted`]; a guess it checks).
    pub(super) hint: u32,
    /// Movement priority, grown at each of the client's flushes (see
    /// `budget`).
    pub(super) prio: f32,
    /// The low 16 bits of the version the client shows ([`Slot::sent`]:
    /// `<= last`, below it only while a movement is pending, and within a
    /// coalescing step of it, at most [`STEP_MAX`] on the wire, so `last`
    /// restores the high bits; kept short so the visit fields fit).
    sent_low: u16,
    /// Ticks since a movement of this entity was last sent.
    pub(super) age: u16,
    /// The farthest reach of the stale properties in whole metres, rounded
    /// up: while the entity is farther, none of them can be due (the pull
    /// skips the check). [`REACH_UNKNOWN`] until worked out for the current
    /// stale bits (and when too far to hold).
    reach_m: u16,
    /// The movement priority gained a flush, as of the last budget walk
    /// that saw a pending movement ([`super::visits::weight_q`]): what a skipped
    /// visit adds.
    pub(super) w_q: u16,
    pub(super) state: SlotState,
    /// The pending movement's heading byte.
    pending_yaw: u8,
    /// [`PENDING`]: a movement taken from the stream and not sent yet (the
    /// newest); [`ANY_STALE`]: the cold part's `stale != 0` (kept with it
    /// by [`SlotMut::set_stale`]): the pull reads the levels of detail only
    /// for such slots.
    flags: u8,
    /// The age ([`Slot::age`]) at which a flush must visit the slot
    /// whatever else (`visits::due_age`: its band's refresh interval or
    /// the visit span, as of that walk; 0 until then, and in the nearest
    /// band: always).
    pub(super) due_age: u8,
}

/// [`Slot::flags`]: a movement is pending.
const PENDING: u8 = 1;
/// [`Slot::flags`]: some detail property is stale.
const ANY_STALE: u8 = 2;
/// [`Slot::flags`]: at the observer's last pull (`Observer::pulled_at`)
/// the slot was live and quiet: its copy had nothing the client lacks
/// (the head's version at most `last`), no movement pending, and no
/// stale detail within reach (none, or all of it beyond its reach from
/// where the observer stood then). Written for every slot by each pull
/// that keeps track of quiet slots, and trusted only by the pull right
/// after one (see `pull`); cleared when the stale detail changes.
pub(super) const QUIET: u8 = 4;

const _: () = assert!(
    std::mem::size_of::<Slot>() == 40,
    "a slot's hot part is 40 bytes: 48 with its entity id"
);

/// The part of a slot read only when it sends, snapshots or catches up
/// (see [`Slot`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct SlotCold {
    /// The last position given to the client, quantised (the base of the
    /// next movement delta).
    q: QPos,
    /// Detail properties whose current value the client may lack (see the
    /// module doc; bit `i` = property `i`).
    stale: u64,
    pub(super) handle: Option<Handle>,
    /// Movements sent since the last key frame.
    pub(super) since_key: u16,
}

/// [`Slot::reach_m`] not worked out (or beyond what it holds): never skip.
const REACH_UNKNOWN: u16 = u16::MAX;

impl Slot {
    pub(super) fn new(state: SlotState, last: u64) -> Slot {
        Slot {
            last,
            sent_low: last as u16,
            newest_q: [0; 3],
            hint: u32::MAX,
            prio: 0.0,
            state,
            pending_yaw: 0,
            flags: 0,
            age: 0,
            reach_m: REACH_UNKNOWN,
            w_q: 0,
            due_age: 0,
        }
    }

    /// The version the client shows (`<= last`).
    #[inline]
    pub(super) fn sent(&self) -> u64 {
        self.last - u64::from((self.last as u16).wrapping_sub(self.sent_low))
    }

    /// Sets the version the client shows: at most `last`, within 2^16 of
    /// it (a step on the wire is at most [`STEP_MAX`]; a pending movement
    /// goes out whatever the budget once it covers
    /// [`COALESCE_VERSIONS_MAX`] versions).
    #[inline]
    pub(super) fn set_sent(&mut self, version: u64) {
        debug_assert!(
            version <= self.last && self.last - version <= u64::from(u16::MAX),
            "the version shown is within reach of the last taken"
        );
        self.sent_low = version as u16;
    }

    /// The movement taken from the stream and not sent yet, if any.
    #[inline]
    pub(super) fn pending(&self) -> Option<Pending> {
        self.has_pending().then_some(Pending {
            q: self.newest_q,
            yaw: self.pending_yaw,
        })
    }

    /// True once the client has the entity (it has a handle: the cold
    /// part's `handle` is set exactly when the slot is not `EnterPending`).
    #[inline]
    pub(super) fn shown(&self) -> bool {
        self.state != SlotState::EnterPending
    }

    /// True while a movement is pending.
    #[inline]
    pub(super) fn has_pending(&self) -> bool {
        self.flags & PENDING != 0
    }

    /// True while some detail property may be stale (the cold part's
    /// `stale != 0`).
    #[inline]
    pub(super) fn any_stale(&self) -> bool {
        self.flags & ANY_STALE != 0
    }

    /// True if the last pull found the slot quiet and nothing since gave
    /// it a pending movement or took it out of `Live` ([`QUIET`]; whether
    /// its copy's head changed is the host's to say). Stale detail (beyond
    /// reach at the last pull) keeps it quiet only if the observer `stood`
    /// where it did then.
    #[inline(always)]
    pub(super) fn still_quiet(&self, stood: bool) -> bool {
        let mask = QUIET | PENDING | if stood { 0 } else { ANY_STALE };
        (self.flags & mask == QUIET) & (self.state == SlotState::Live)
    }

    /// Records whether the pull found the slot quiet ([`QUIET`]).
    #[inline(always)]
    pub(super) fn set_quiet(&mut self, quiet: bool) {
        self.flags = (self.flags & !QUIET) | if quiet { QUIET } else { 0 };
    }

    /// Makes `p` the pending movement; returns the one it replaces.
    #[inline]
    pub(super) fn replace_pending(&mut self, p: Pending) -> Option<Pending> {
        let was = self.pending();
        self.newest_q = p.q;
        self.pending_yaw = p.yaw;
        self.flags |= PENDING;
        was
    }

    /// The squared ground distance from `me` (x and z in the wire's units)
    /// to [`Slot::pos`], in the wire's units squared.
    #[inline]
    fn dist2_xz_units(&self, me: [f64; 2]) -> f64 {
        let dx = me[0] - f64::from(self.newest_q[0]);
        let dz = me[1] - f64::from(self.newest_q[2]);
        dx * dx + dz * dz
    }

    /// Where the client will show the entity once its pending movement is
    /// sent (the newest position the observer took from the stream).
    fn pos(&self) -> Vec3 {
        super::codec::dequantise(widen(self.newest_q))
    }
}

impl SlotCold {
    pub(super) fn new(handle: Option<Handle>) -> SlotCold {
        SlotCold {
            q: [0; 3],
            stale: 0,
            handle,
            since_key: 0,
        }
    }

    /// The last position given to the client, quantised.
    #[inline]
    pub(super) fn q(&self) -> [i64; 3] {
        widen(self.q)
    }

    /// The detail properties the client may lack.
    #[inline]
    pub(super) fn stale(&self) -> u64 {
        self.stale
    }
}

impl SlotMut<'_> {
    /// Takes the pending movement out (the newest position is the client's
    /// again).
    #[inline]
    pub(super) fn take_pending(&mut self) -> Option<Pending> {
        let was = self.hot.pending();
        self.hot.flags &= !PENDING;
        self.hot.newest_q = self.cold.q;
        was
    }

    /// Sets the last position given to the client (quantised, so within
    /// the 32 bits it is kept in).
    #[inline]
    pub(super) fn set_q(&mut self, q: [i64; 3]) {
        self.set_qpos(narrow(q));
    }

    /// [`SlotMut::set_q`], as kept.
    #[inline]
    pub(super) fn set_qpos(&mut self, q: QPos) {
        self.cold.q = q;
        if !self.hot.has_pending() {
            self.hot.newest_q = q;
        }
    }

    /// Sets the detail properties the client may lack (their reach is
    /// worked out again at the next pull).
    #[inline]
    pub(super) fn set_stale(&mut self, stale: u64) {
        if stale != self.cold.stale {
            self.hot.reach_m = REACH_UNKNOWN;
            // Quiet was judged against the old detail's reach.
            self.hot.set_quiet(false);
        }
        self.cold.stale = stale;
        if stale != 0 {
            self.hot.flags |= ANY_STALE;
        } else {
            self.hot.flags &= !ANY_STALE;
        }
    }

    /// Where the client will show the entity once its pending movement is
    /// sent ([`Slot::pos`]).
    fn pos(&self) -> Vec3 {
        debug_assert!(
            self.hot.has_pending() || self.hot.newest_q == self.cold.q,
            "newest_q tracks q"
        );
        self.hot.pos()
    }
}

/// Counters of what the observer did (monotonic).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ObserverStats {
    /// Enter events sent.
    pub enters: u64,
    /// Leave events sent.
    pub leaves: u64,
    /// Update events sent (a coalesced movement counts once).
    pub delivered: u64,
    /// Versions dropped as already delivered (duplicates, lagging copies).
    pub stale: u64,
    /// Versions delivered from a copy's cache to fill a gap.
    pub filled: u64,
    /// Resync snapshots sent.
    pub resyncs: u64,
    /// Times a lagging copy was held (behind the client after a migration).
    pub held: u64,
    /// Snapshots deferred to a later tick by `batch_bytes_max`.
    pub deferred: u64,
    /// Payloads from a copy that did not decode (healed by a resync).
    pub bad_payloads: u64,
    /// Enters refused because `view_entities_max` entities are in view.
    pub refused: u64,
    /// Movement versions replaced by a newer one before they were sent.
    pub coalesced: u64,
    /// Times the client was told it is degraded.
    pub degraded: u64,
    /// Delta entries of detail properties cut for a client beyond their
    /// reach (or already stale).
    pub detail_cut: u64,
    /// Detail catch-ups sent (Detail events).
    pub details: u64,
    /// Slots the pulls went over (every entity in view at each flush,
    /// less the skipped ones).
    pub visits: u64,
    /// Shown entities a paced flush skipped (band-rate visits).
    pub skips: u64,
    /// Of the visits, slots a pull passed by unread: quiet at the last
    /// pull, their copies' heads unchanged since (counted in `visits`
    /// too: the same step, done without reading the copy).
    pub quiet: u64,
}

/// One avatar's client view (see the module doc).
#[derive(Clone, Debug)]
pub struct Observer {
    pub(super) owner: EntityId,
    pub(super) params: ObserverParams,
    pub(super) slots: Slots,
    /// Entities whose snapshot (enter or resync) is due, oldest first,
    /// each with where its slot was in the table when queued (a guess the
    /// snapshot checks, `Slots::find_at`: a removal since may have moved
    /// it; [`NO_POSITION`] when not known), so the flush finds the slot
    /// without a probe of the cold index.
    pub(super) queue: VecDeque<(EntityId, u32)>,
    pub(super) next_handle: Handle,
    pub(super) free: Vec<Handle>,
    /// Last own version sent to the client (`None`: own snapshot due).
    pub(super) own_version: Option<u64>,
    /// True from a migration until [`Observer::handle_view`].
    pub(super) needs_view: bool,
    pub(super) stats: ObserverStats,
    /// The last own position given to the client (`None` until its own
    /// snapshot).
    pub(super) own_q: Option<QPos>,
    pub(super) own_since_key: u16,
    pacer: Pacer,
    /// Entities the game marked important, with the ticks left.
    important: Vec<(EntityId, u16)>,
    /// Whether the own entity changed this tick (an acknowledgement is due).
    own_changed: bool,
    batch: Vec<u8>,
    flushed: bool,
    /// The buffers a flush works in: its own, or lent by the caller for
    /// the flush ([`Observer::swap_scratch`]).
    work: FlushScratch,
    /// What the band-rate visits remember between flushes (not carried:
    /// an observer that arrives visits everything at its first flush).
    visits: Visits,
    /// Where the host's dense table last held the owner's copy
    /// ([`ObserverHost::copy_position_hinted`]; not carried: a guess).
    owner_hint: u32,
    /// The host's heads epoch at the last pull, if it keeps one
    /// ([`ObserverHost::heads_epoch`]; not carried): a slot found quiet
    /// then ([`QUIET`]) whose head is unchanged since is quiet still, and
    /// the next pull passes it by unread (see `pull`).
    pub(super) pulled_at: Option<u32>,
    /// Where the owner stood at that pull (its ground position in the
    /// wire's units): slots quiet with stale detail beyond reach stay so
    /// only while it stands there.
    pub(super) pulled_me: Option<[f64; 2]>,
    /// How many slots the last pull left quiet, if it kept track
    /// (`untracked == 0`): the next one passes quiet slots by only if
    /// enough were (a view of walkers has none, and the look would cost
    /// each of its slots a test).
    pub(super) quiet_seen: u32,
    /// Pulls since the last that kept track of quiet slots (wrote
    /// [`QUIET`] for every slot): an observer with few quiet slots keeps
    /// no track, and looks again every few pulls (see `pull`).
    pub(super) untracked: u8,
}

/// The buffers an observer's flush works in, empty between flushes (what
/// they hold matters only within one call): a host that flushes many
/// observers one after another lends each the same set
/// ([`Observer::swap_scratch`]), so they stay in the core's first-level
/// cache instead of each observer touching buffers of its own, cold since
/// its last flush.
#[derive(Clone, Debug, Default)]
pub struct FlushScratch {
    /// A snapshot being sent (reused).
    snap: Vec<u8>,
    /// Slot positions of this flush's movements that must go, in table
    /// order (reused).
    due: Vec<u32>,
    /// The movements that may wait, as [`walk::prio_key`]s: sorted, they run by
    /// priority, highest first, then by slot position (reused).
    by_prio: Vec<u64>,
    /// The movements due by their band's minimum rate if the budget's debt
    /// stays shallow, as [`walk::prio_key`]s (reused; see [`Ranked`]).
    timely: Vec<u64>,
    /// The level-of-detail filter's output (reused).
    lod_buf: Vec<u8>,
    /// Entities with stale detail properties, at a flush, with their slots'
    /// table positions when listed (checked before use: a leave in between
    /// moves a slot) (reused).
    lod_due: Vec<(EntityId, u32)>,
    /// The table positions of the slots a pull steps after passing the
    /// quiet ones by (reused).
    busy: Vec<u32>,
}

impl Observer {
    /// A new observer for `owner` with an empty view (its own snapshot is
    /// sent at the first flush).
    pub fn new(owner: EntityId, params: ObserverParams) -> Self {
        Self::from_parts(owner, params)
    }

    pub(super) fn from_parts(owner: EntityId, params: ObserverParams) -> Self {
        Observer {
            owner,
            params,
            slots: Slots::default(),
            queue: VecDeque::new(),
            next_handle: 0,
            free: Vec::new(),
            own_version: None,
            needs_view: false,
            stats: ObserverStats::default(),
            own_q: None,
            own_since_key: 0,
            pacer: Pacer::default(),
            important: Vec::new(),
            own_changed: false,
            batch: Vec::new(),
            flushed: false,
            work: FlushScratch::default(),
            visits: Visits::default(),
            owner_hint: u32::MAX,
            pulled_at: None,
            pulled_me: None,
            quiet_seen: 0,
            untracked: u8::MAX,
        }
    }

    /// Forgets what the client was sent (a new client took the owner
    /// over): the next flush sends the own snapshot, and the next view
    /// step (`needs_view`) an Enter for everything in the interest set,
    /// under new handles. Counters are kept.
    pub fn restart(&mut self) {
        let stats = std::mem::take(&mut self.stats);
        *self = Observer::from_parts(self.owner, self.params);
        self.stats = stats;
        self.needs_view = true;
    }

    /// The observing entity.
    pub fn owner(&self) -> EntityId {
        self.owner
    }

    /// The counters.
    pub fn stats(&self) -> &ObserverStats {
        &self.stats
    }

    /// True after a migration until [`Observer::handle_view`] was called.
    pub fn needs_view(&self) -> bool {
        self.needs_view
    }

    /// The client handle of `entity`, if the client has it.
    pub fn handle_of(&self, entity: EntityId) -> Option<Handle> {
        self.slots.cold(&entity).and_then(|c| c.handle)
    }

    /// True if `entity` is in the view (shown or about to be).
    pub fn sees(&self, entity: EntityId) -> bool {
        self.slots.contains_key(&entity)
    }

    /// The last version of `entity` the client has.
    pub fn client_version(&self, entity: EntityId) -> Option<u64> {
        self.slots
            .get(&entity)
            .and_then(|s| s.shown().then_some(s.last))
    }

    /// Per-entity delivery rule: only `last + 1` is delivered (and
    /// advances); older is stale; newer is a gap.
    fn offer(&mut self, entity: EntityId, version: u64) -> Delivery {
        let Some(slot) = self.slots.get_mut(&entity).filter(|s| s.shown()) else {
            return Delivery::NotTracked;
        };
        if version <= slot.last {
            Delivery::Stale
        } else if version == slot.last + 1 {
            slot.last = version;
            Delivery::Deliver
        } else {
            Delivery::Gap {
                last: slot.last,
                got: version,
            }
        }
    }

    /// Entities in the view, in the slot table's order (the order they
    /// came in, as moved by removals: deterministic, not sorted).
    pub fn entities(&self) -> impl Iterator<Item = EntityId> + '_ {
        self.slots.keys().copied()
    }

    /// Starts fetching what the next flush reads first (the first slots'
    /// hot parts): a cell calls it for the observer it flushes next while
    /// it flushes this one, so the next pull does not begin with a stall.
    #[inline]
    pub fn prefetch_flush(&self) {
        for i in 0..2 * PULL_PREFETCH_AHEAD {
            self.slots.prefetch(i);
        }
    }

    /// Swaps the observer's flush buffers with `scratch`: a host lends its
    /// set before a flush and takes it back after (a second swap), so every
    /// observer it flushes works in the same warm buffers. Nothing carries
    /// over between flushes in them; each call leaves them as reusable as
    /// it found them.
    #[inline]
    pub fn swap_scratch(&mut self, scratch: &mut FlushScratch) {
        std::mem::swap(&mut self.work, scratch);
    }

    /// True if events were produced since the last [`Observer::flush`].
    pub fn has_unflushed(&self) -> bool {
        !self.flushed && !self.batch.is_empty()
    }

    fn start(&mut self) {
        if self.flushed {
            self.batch.clear();
            self.flushed = false;
        }
    }

    /// An AOI change of the observer's area.
    ///
    /// An enter of an entity already in view keeps its handle and heals it
    /// from the copy (idempotent); a leave of an unknown entity is ignored.
    pub fn handle_aoi<H: ObserverHost + ?Sized>(
        &mut self,
        host: &H,
        entity: EntityId,
        kind: EventKind,
    ) {
        self.start();
        match kind {
            EventKind::Enter => self.enter(host, entity),
            EventKind::Leave => self.leave(entity),
        }
    }

    /// The whole current interest set of the observer's area (ascending):
    /// everything not in it leaves, everything in it is entered or healed.
    /// Mandatory after a migration (see [`Observer::needs_view`]); harmless
    /// at any other time.
    pub fn handle_view<H: ObserverHost + ?Sized>(&mut self, host: &H, interest: &[EntityId]) {
        self.start();
        debug_assert!(interest.windows(2).all(|w| w[0] < w[1]), "ascending");
        let gone: Vec<EntityId> = self
            .slots
            .keys()
            .filter(|e| interest.binary_search(e).is_err())
            .copied()
            .collect();
        for e in gone {
            self.leave(e);
        }
        for &e in interest {
            self.enter(host, e);
        }
        self.needs_view = false;
    }

    fn enter<H: ObserverHost + ?Sized>(&mut self, host: &H, entity: EntityId) {
        if entity == self.owner {
            return;
        }
        if self.slots.contains_key(&entity) {
            self.heal(host, entity);
            return;
        }
        if self.slots.len() >= self.params.view_entities_max {
            self.stats.refused += 1;
            return;
        }
        // A new slot goes last in the table.
        let at = u32::try_from(self.slots.len()).unwrap_or(NO_POSITION);
        self.slots.insert(
            entity,
            Slot::new(SlotState::EnterPending, 0),
            SlotCold::new(None),
        );
        self.queue.push_back((entity, at));
    }

    fn leave(&mut self, entity: EntityId) {
        let Some((slot, cold)) = self.slots.remove(&entity) else {
            return;
        };
        if slot.state != SlotState::Live {
            self.queue.retain(|&(e, _)| e != entity);
        }
        if let Some(handle) = cold.handle {
            if self.params.fault != Fault::DropLeave {
                encode_event(&mut self.batch, &ClientEvent::Leave { handle });
            }
            self.free.push(handle);
            self.stats.leaves += 1;
        }
    }

    /// Brings a shown entity up to its local copy: fill from the cache or
    /// resync if the copy is ahead; hold if it is behind.
    fn heal<H: ObserverHost + ?Sized>(&mut self, host: &H, entity: EntityId) {
        let live = self.slots.get(&entity).map(|s| s.state) == Some(SlotState::Live);
        let (Some(last), Some(copy)) = (self.client_version(entity), host.copy_version(entity))
        else {
            return;
        };
        if !live {
            return;
        }
        if copy < last {
            self.stats.held += 1;
        } else if copy > last {
            self.fill(host, entity);
        }
    }

    /// Delivers what the copy's cache has after the client's version, or
    /// schedules a resync.
    fn fill<H: ObserverHost + ?Sized>(&mut self, host: &H, entity: EntityId) {
        let Some(last) = self.client_version(entity) else {
            return;
        };
        let Some(cache) = host.copy_cache(entity) else {
            self.want_resync(entity);
            return;
        };
        match cache.fill(last) {
            Fill::UpToDate => {}
            Fill::ResyncNeeded => self.want_resync(entity),
            Fill::Msgs(msgs) => {
                for m in msgs {
                    if !self.deliver_msg(host, entity, m) {
                        return;
                    }
                    self.stats.filled += 1;
                }
            }
        }
    }

    /// Offers one cached message; false if the entity needs a resync now.
    fn deliver_msg<H: ObserverHost + ?Sized>(
        &mut self,
        host: &H,
        entity: EntityId,
        m: &SyncMsg,
    ) -> bool {
        if m.kind == SyncKind::Snapshot {
            self.want_resync(entity);
            return false;
        }
        match self.offer(entity, m.version) {
            Delivery::Deliver => {
                self.emit_update(host, entity, m.version, m.kind, m.others_payload())
            }
            Delivery::Stale => {
                self.stats.stale += 1;
                true
            }
            Delivery::Gap { .. } | Delivery::NotTracked => {
                self.want_resync(entity);
                false
            }
        }
    }

    fn want_resync(&mut self, entity: EntityId) {
        if let Some(mut slot) = self.slots.both_mut(&entity) {
            if slot.hot.state == SlotState::Live {
                slot.hot.state = SlotState::ResyncPending;
                if slot.take_pending().is_some() {
                    self.stats.coalesced += 1;
                }
                self.queue.push_back((entity, NO_POSITION));
            }
        }
    }

    /// One released sync message of an entity, from the local copy (a real's
    /// change set, or a message a ghost's reorder buffer released), with its
    /// `OtherClients` payload. Feed it after the copy applied it.
    pub fn handle_sync<H: ObserverHost + ?Sized>(
        &mut self,
        host: &H,
        entity: EntityId,
        version: u64,
        kind: SyncKind,
        others: &[u8],
    ) {
        self.start();
        // One lookup on the hot path: the slot holds handle and version.
        let slot = match self.slots.get_mut(&entity) {
            Some(s) if s.state == SlotState::Live => s,
            _ => return,
        };
        let last = slot.last;
        if kind == SyncKind::Snapshot {
            if version > last {
                self.want_resync(entity);
            } else {
                self.stats.stale += 1;
            }
            return;
        }
        if version == last + 1 {
            slot.last = version;
            // The common case, a bare movement: held in the slot already
            // found (no second lookup); anything else goes the long way.
            if kind == SyncKind::Movement {
                let mut r = Reader::new(others);
                if let Ok((pos, yaw)) = read_movement(&mut r).and_then(|m| r.finish().map(|()| m)) {
                    debug_assert!(slot.shown(), "live slots have handles");
                    if slot.replace_pending(Pending::of(pos, yaw)).is_some() {
                        self.stats.coalesced += 1;
                    }
                    return;
                }
            }
            self.emit_update(host, entity, version, kind, others);
        } else if version <= last {
            self.stats.stale += 1;
        } else {
            // A gap: fill it from the copy's cache, then deliver this one.
            self.fill(host, entity);
            if self.slots.get(&entity).map(|s| s.state) == Some(SlotState::Live) {
                match self.offer(entity, version) {
                    Delivery::Deliver => {
                        self.emit_update(host, entity, version, kind, others);
                    }
                    Delivery::Stale => {}
                    _ => self.want_resync(entity),
                }
            }
        }
    }

    /// Takes one delivered version (already the slot's `last`): a movement
    /// is held as the pending one (sent at the flush, coalesced with any
    /// newer), a property change goes out now (cut by the levels of detail,
    /// see the module doc), merged with the pending movement if any. On a
    /// bad payload, schedules a resync and returns false.
    fn emit_update<H: ObserverHost + ?Sized>(
        &mut self,
        host: &H,
        entity: EntityId,
        version: u64,
        kind: SyncKind,
        p: &[u8],
    ) -> bool {
        let mut r = Reader::new(p);
        let moved = match kind {
            SyncKind::Movement => read_movement(&mut r).and_then(|m| r.finish().map(|()| m)),
            SyncKind::MovementAndProps => read_movement(&mut r),
            SyncKind::Props => Ok((Vec3::default(), 0.0)),
            SyncKind::Snapshot => unreachable!("snapshots are resyncs"),
        };
        let Ok((pos, yaw)) = moved else {
            self.stats.bad_payloads += 1;
            self.want_resync(entity);
            return false;
        };
        let delta = match kind {
            SyncKind::Props => p,
            SyncKind::MovementAndProps => &p[super::codec::MOVEMENT_BYTES..],
            _ => &[],
        };
        let mut buf = std::mem::take(&mut self.work.lod_buf);
        buf.clear();
        let at = kind.has_movement().then_some(pos);
        let cut = match self.cut_detail(host, entity, at, delta, &mut buf) {
            Ok(cut) => cut,
            Err(()) => {
                self.work.lod_buf = buf;
                self.stats.bad_payloads += 1;
                self.want_resync(entity);
                return false;
            }
        };
        let delta = if cut { &buf[..] } else { delta };
        self.emit_delta(entity, version, kind, (pos, yaw), delta, cut);
        self.work.lod_buf = buf;
        true
    }

    /// Writes to `out` the delta this client may be sent if the levels of
    /// detail cut anything from `delta` (true), marking the cut properties
    /// stale; false if `delta` goes as it is. `at`: the entity's position
    /// at this version, if the version moved it.
    fn cut_detail<H: ObserverHost + ?Sized>(
        &mut self,
        host: &H,
        entity: EntityId,
        at: Option<Vec3>,
        delta: &[u8],
        out: &mut Vec<u8>,
    ) -> Result<bool, ()> {
        if delta.first().is_none_or(|&n| n == 0) {
            return Ok(false);
        }
        let Some((copy, _)) = host.copy_entity(entity) else {
            return Ok(false);
        };
        let ty = copy.props().entity_type();
        if ty.detail_mask() == 0 {
            return Ok(false);
        }
        let me = self.my_position(host);
        let mut slot = self.slots.both_mut(&entity).expect("delivered to a slot");
        let dist = me.map_or(0.0, |m| m.dist_xz(at.unwrap_or_else(|| slot.pos())));
        let slack = f64::from(self.params.budget.detail_hysteresis_m);
        let drop = self.params.budget.beyond(ty, dist, slack) | slot.cold.stale();
        if drop == 0 {
            return Ok(false);
        }
        let present = filter_delta(ty, Audience::OtherClients, delta, drop, out).map_err(|_| ())?;
        let cut = present & drop;
        slot.set_stale(slot.cold.stale() | cut);
        self.stats.detail_cut += u64::from(cut.count_ones());
        Ok(cut != 0)
    }

    /// Sends (or holds, for a movement) one delivered version whose delta
    /// for this client is `delta` (`cut`: the levels of detail cut it).
    fn emit_delta(
        &mut self,
        entity: EntityId,
        version: u64,
        kind: SyncKind,
        (pos, yaw): (Vec3, f32),
        delta: &[u8],
        cut: bool,
    ) {
        // A property change this client cannot see (an empty delta) moves
        // nothing on this client: it coalesces like a movement. One the
        // levels of detail cut still goes as the event it was (with what
        // is left of its delta): the event flow is the same as without
        // levels of detail, only the delta is smaller.
        let empty = delta == EMPTY_DELTA;
        let kind = if kind == SyncKind::MovementAndProps && empty && !cut {
            SyncKind::Movement
        } else {
            kind
        };
        let mut slot = self.slots.both_mut(&entity).expect("delivered to a slot");
        let handle = slot.cold.handle.expect("live slots have handles");
        if kind == SyncKind::Movement {
            if slot.hot.replace_pending(Pending::of(pos, yaw)).is_some() {
                self.stats.coalesced += 1;
            }
            return;
        }
        self.stats.delivered += 1;
        debug_assert!(
            version - slot.hot.sent() <= STEP_MAX,
            "a step the wire cannot carry"
        );
        let version_low = wire_version(self.params.fault, version);
        let mv = match (kind, slot.take_pending()) {
            (SyncKind::MovementAndProps, _) => Some(movement_to(
                &mut slot,
                &self.params.budget,
                Pending::of(pos, yaw),
            )),
            (_, Some(pd)) => Some(movement_to(&mut slot, &self.params.budget, pd)),
            _ => None,
        };
        slot.hot.set_sent(version);
        let ev = match mv {
            Some(mv) => {
                slot.hot.prio = 0.0;
                slot.hot.age = 0;
                ClientEvent::MoveProps {
                    handle,
                    version_low,
                    mv,
                    delta,
                }
            }
            None => ClientEvent::Props {
                handle,
                version_low,
                delta,
            },
        };
        encode_event(&mut self.batch, &ev);
    }

    /// Catches up every stale detail property now within reach (see the
    /// module doc): one Detail event per entity, at the version shown.
    ///
    /// Reads only the slots the pull listed (stale and near enough), so a
    /// flush with nothing to catch up costs nothing here.
    fn catch_up<H: ObserverHost + ?Sized>(&mut self, host: &H, me: Option<Vec3>) {
        let due = std::mem::take(&mut self.work.lod_due);
        for &(e, listed) in &due {
            // Where the pull listed it, unless a leave since moved it.
            let Some(i) = self.slots.find_at(e, listed as usize) else {
                continue;
            };
            let slot = *self.slots.at(i).1;
            let mut hint = slot.hint;
            let Some((copy, version)) = host.copy_entity_hinted(e, &mut hint) else {
                continue;
            };
            if version != slot.last || slot.state != SlotState::Live {
                continue; // the copy is not at the client's stream: wait
            }
            let dist = me.map_or(0.0, |m| m.dist_xz(copy.core().pos));
            let ty = copy.props().entity_type();
            let near = self.slots.cold_at(i).stale() & !self.params.budget.beyond(ty, dist, 0.0);
            if near == 0 {
                continue;
            }
            if slot.has_pending() {
                self.send_pending_at(i);
            }
            self.work.snap.clear();
            copy.props()
                .encode_whole(Audience::OtherClients, near, &mut self.work.snap);
            let mut s = self.slots.both_at(i);
            s.set_stale(s.cold.stale() & !near);
            debug_assert_eq!(s.hot.sent(), s.hot.last, "a catch-up at the version shown");
            let ev = ClientEvent::Detail {
                handle: s.cold.handle.expect("live slots have handles"),
                version_low: s.hot.last as u8,
                delta: &self.work.snap,
            };
            encode_event(&mut self.batch, &ev);
            self.stats.details += 1;
        }
        self.work.lod_due = due;
        self.work.lod_due.clear();
    }

    /// Sends the pending movement of the slot at table position `i` now (a
    /// flush walks positions: no lookup by id).
    #[inline]
    fn send_pending_at(&mut self, i: usize) {
        // `take_pending` then `movement_to`, without their copies of the
        // position between the parts: the slot's newest position is the
        // pending one, and becomes the client's.
        let SlotMut { hot, cold } = self.slots.both_at(i);
        if !hot.has_pending() {
            return;
        }
        hot.flags &= !PENDING;
        let Some(handle) = cold.handle else {
            hot.newest_q = cold.q;
            return;
        };
        let step = hot.last - hot.sent();
        debug_assert!(
            (1..=STEP_MAX).contains(&step),
            "a pending movement is ahead of the client, within a step"
        );
        let version_low = wire_version(self.params.fault, hot.last);
        let to = Pending {
            q: hot.newest_q,
            yaw: hot.pending_yaw,
        };
        let (mv, q) = movement_from(cold.q, &mut cold.since_key, &self.params.budget, to);
        cold.q = q;
        hot.set_sent(hot.last);
        hot.prio = 0.0;
        hot.age = 0;
        encode_move(&mut self.batch, handle, version_low, &mv);
        self.stats.delivered += 1;
    }

    /// Marks `entity` important for `ms` milliseconds (the client's target,
    /// an attacker): its movements gain priority `important_factor` times
    /// as fast. Counted in this client's flushes, so the time holds at any
    /// update rate.
    pub fn mark_important(&mut self, entity: EntityId, ms: u32) {
        let ticks = self.params.budget.flushes_in(ms);
        match self.important.iter().position(|(e, _)| *e == entity) {
            Some(i) => self.important[i].1 = self.important[i].1.max(ticks),
            None if self.important.len() < IMPORTANT_MAX => self.important.push((entity, ticks)),
            None => {}
        }
    }

    /// One own change set (the owner's [`crate::core::entity::ChangeSet::own`]
    /// payload and version). Out of order or after a gap, an own snapshot is
    /// sent at the next flush instead.
    pub fn handle_own(&mut self, version: u64, kind: SyncKind, payload: &[u8]) {
        self.start();
        match self.own_version {
            Some(v) if version == v + 1 && kind != SyncKind::Snapshot => {
                self.own_changed = true;
                if !self.emit_own(version, kind, payload) {
                    self.own_version = None;
                    return;
                }
                self.own_version = Some(version);
            }
            Some(v) if version <= v => self.stats.stale += 1,
            _ => self.own_version = None,
        }
    }

    /// Pulls every shown entity up to its local copy (cache fill or resync)
    /// now, as every flush does first (see "Pull at the flush"): for a host
    /// that wants the batch to hold the updates before its flush.
    pub fn refresh<H: ObserverHost + ?Sized>(&mut self, host: &H) {
        self.start();
        let me = self.my_position(host);
        self.pull(host, me, None, None);
    }

    /// Where the owner's copy stands: what every distance of a flush is
    /// measured from (found by the owner's hint, so no probe of the host's
    /// index per flush).
    #[inline]
    fn my_position<H: ObserverHost + ?Sized>(&mut self, host: &H) -> Option<Vec3> {
        host.copy_position_hinted(self.owner, &mut self.owner_hint)
    }

    /// Where the host's dense table last held the owner's copy: a host may
    /// start fetching its position before the flush reads it.
    #[inline]
    pub fn owner_hint(&self) -> u32 {
        self.owner_hint
    }

    /// Ends the tick without a budget: the own snapshot if due, due enters
    /// and resyncs (oldest first, within `batch_bytes_max`), then every
    /// pending movement; returns the batch for the client (empty if nothing
    /// happened). Used where everything must leave now (before the
    /// observer's migration blob) and when the budget is off. The next
    /// `handle_*` starts a new batch (the buffer is reused).
    pub fn flush<H: ObserverHost + ?Sized>(&mut self, host: &H) -> &[u8] {
        self.start();
        let me = self.my_position(host);
        self.pull(host, me, None, None);
        self.flush_snapshots(host, f64::INFINITY, me);
        self.catch_up(host, me);
        let mut pending = std::mem::take(&mut self.work.due);
        pending.clear();
        pending.extend(
            (self.slots.iter().enumerate())
                .filter(|(_, (_, s))| s.has_pending())
                .map(|(i, _)| i as u32),
        );
        for &i in &pending {
            self.send_pending_at(i as usize);
        }
        self.work.due = pending;
        // Nothing waited: the next flush visits every slot.
        self.visits.flushed(0.0);
        self.end_flush()
    }

    /// Ends the tick within the client's budget (`params.budget`; without a
    /// limit this is [`Observer::flush`]): what never bends goes out and is
    /// charged, then pending movements by band minimum rate and priority
    /// while the budget lasts (see `budget`). Call once per tick.
    pub fn flush_paced<H: ObserverHost + ?Sized>(&mut self, host: &H) -> &[u8] {
        let p = self.params.budget;
        if !p.limited() {
            return self.flush(host);
        }
        self.start();
        let plan = (self.visits).plan(&p, self.params.visit_span_max, self.pacer.degraded());
        let me = self.my_position(host);
        let me_u = me.map(|m| [m.x * UNITS_PER_M, m.z * UNITS_PER_M]);
        // Each band's refresh interval, worked out once per flush.
        let intervals: [u16; BANDS_MAX] = std::array::from_fn(|b| p.interval_ticks(b));
        let walk = Walk {
            me_u,
            ranks: Ranks::new(&p, UNITS_PER_M),
            intervals,
            due_ages: std::array::from_fn(|b| due_age(b, intervals[b], self.params.visit_span_max)),
            degraded: self.pacer.degraded(),
            // Usually none: the per-slot search is skipped outright.
            important_factor: (!self.important.is_empty()).then_some(p.important_factor),
            cold: self.slots.cold_prefetcher(),
        };
        let mut ranked = Ranked::take(&mut self.work, self.slots.len());
        // The budget walk runs inside the pull: each slot is ranked as it
        // is brought up to date, in one pass over the table.
        self.pull(host, me, plan.as_ref(), Some((&walk, &mut ranked)));
        self.pacer.refill(&p);
        let room = self.pacer.tokens();
        self.flush_snapshots(host, room, me);
        self.catch_up(host, me);
        let fixed = self.batch.len()
            + if self.own_changed {
                usize::from(p.ack_bytes)
            } else {
                0
            };
        self.pacer.charge(&p, fixed);
        // Band minimum rates beyond the nearest band hold only while the
        // debt is shallow: they must not push the client into degradation
        // (which would cost the nearest band its guarantee).
        let shallow = self.pacer.tokens() > -f64::from(p.burst_bytes) / 2.0;
        let (due, mut rest, timely) = ranked.settle(shallow);
        let cut = self.send_paced(&p, &due, &mut rest);
        self.visits.flushed(cut);
        self.work.due = due;
        self.work.by_prio = rest;
        self.work.timely = timely;
        if !self.batch.is_empty() {
            self.pacer.charge(&p, usize::from(p.frame_bytes));
        }
        if let Some(on) = self.pacer.end_tick(&p) {
            if on {
                self.stats.degraded += 1;
            }
            encode_event(&mut self.batch, &ClientEvent::Degraded { on });
        }
        self.important.retain_mut(|(_, t)| {
            *t = t.saturating_sub(1);
            *t > 0
        });
        self.end_flush()
    }

    /// True while the client is told it is degraded.
    pub fn degraded(&self) -> bool {
        self.pacer.degraded()
    }

    /// The own snapshot if due, then due enters and resyncs, oldest first,
    /// while the batch stays within `batch_bytes_max` and `room` bytes (the
    /// budget's balance); at least one per tick, so none starves.
    fn flush_snapshots<H: ObserverHost + ?Sized>(&mut self, host: &H, room: f64, me: Option<Vec3>) {
        self.start();
        if self.own_version.is_none() {
            self.work.snap.clear();
            if let Some(v) =
                host.copy_snapshot(self.owner, Audience::OwnClient, &mut self.work.snap)
            {
                let ev = ClientEvent::Own {
                    version: v,
                    kind: SyncKind::Snapshot,
                    payload: &self.work.snap,
                };
                encode_event(&mut self.batch, &ev);
                self.own_version = Some(v);
                self.own_q = snapshot_header(&self.work.snap)
                    .ok()
                    .map(|(_, p, _)| narrow(quantise(p)));
                self.own_since_key = 0;
            }
        }
        let mut sent = 0usize;
        for _ in 0..self.queue.len() {
            let full =
                self.batch.len() >= self.params.batch_bytes_max || self.batch.len() as f64 >= room;
            if sent > 0 && full {
                self.stats.deferred += self.queue.len() as u64;
                break;
            }
            let Some((e, at)) = self.queue.pop_front() else {
                break;
            };
            sent += usize::from(self.send_snapshot(host, e, at, me));
        }
    }

    fn end_flush(&mut self) -> &[u8] {
        self.flushed = true;
        self.own_changed = false;
        #[cfg(any(test, feature = "verify"))]
        self.verify();
        &self.batch
    }

    /// Encodes one own change (not a snapshot); false if the payload is bad
    /// (an own snapshot is then sent instead).
    fn emit_own(&mut self, version: u64, kind: SyncKind, payload: &[u8]) -> bool {
        let mut r = Reader::new(payload);
        // An own change of properties the client cannot see (an empty delta)
        // is a movement for it.
        let kind = if kind == SyncKind::MovementAndProps
            && payload.get(super::codec::MOVEMENT_BYTES..) == Some(&EMPTY_DELTA[..])
        {
            SyncKind::Movement
        } else {
            kind
        };
        match kind {
            SyncKind::Movement => {
                let Ok((pos, yaw)) = read_movement(&mut r) else {
                    return false;
                };
                let Some(last) = self.own_q else {
                    return false;
                };
                let to = Pending::of(pos, yaw);
                let (mv, q) = movement_from(last, &mut self.own_since_key, &self.params.budget, to);
                self.own_q = Some(q);
                let version_low = version as u8;
                encode_event(&mut self.batch, &ClientEvent::OwnMove { version_low, mv });
            }
            _ => {
                if kind == SyncKind::MovementAndProps {
                    let Ok((pos, _)) = read_movement(&mut r) else {
                        return false;
                    };
                    self.own_q = Some(narrow(quantise(pos)));
                }
                let ev = ClientEvent::Own {
                    version,
                    kind,
                    payload,
                };
                encode_event(&mut self.batch, &ev);
            }
        }
        true
    }

    /// Sends the due snapshot of `entity` (`me`: the observer's position);
    /// true if one was sent. The slot is found once: everything after reads
    /// it by table position, and the copy by the slot's hint.
    fn send_snapshot<H: ObserverHost + ?Sized>(
        &mut self,
        host: &H,
        entity: EntityId,
        at: u32,
        me: Option<Vec3>,
    ) -> bool {
        let Some(i) = self.slots.find_at(entity, at as usize) else {
            return false;
        };
        let slot = *self.slots.at(i).1;
        let mut hint = slot.hint;
        let found = host.copy_entity_hinted(entity, &mut hint);
        self.slots.at_mut(i).hint = hint;
        let last = slot.shown().then_some(slot.last);
        if slot.state == SlotState::ResyncPending && found.is_some_and(|(_, v)| Some(v) < last) {
            // The copy is behind what the client saw: wait for it.
            self.stats.held += 1;
            self.queue.push_back((entity, i as u32));
            return false;
        }
        self.work.snap.clear();
        let Some((copy, version)) = found else {
            // No copy here although the AOI has it: not shown.
            self.leave(entity);
            return false;
        };
        // Detail properties beyond reach go at their defaults (stale).
        let ty = copy.props().entity_type();
        let omit = match me {
            Some(me) if ty.detail_mask() != 0 => {
                let dist = me.dist_xz(copy.core().pos);
                self.params.budget.beyond(ty, dist, 0.0)
            }
            _ => 0,
        };
        copy.encode_snapshot_except(Audience::OtherClients, omit, &mut self.work.snap);
        self.slots.both_at(i).set_stale(omit);
        match slot.state {
            SlotState::EnterPending => self.send_enter(i, entity, version),
            SlotState::ResyncPending => {
                let handle = self.slots.cold_at(i).handle.expect("shown");
                let ev = ClientEvent::Resync {
                    handle,
                    version,
                    snapshot: &self.work.snap,
                };
                encode_event(&mut self.batch, &ev);
                let q = snapshot_header(&self.work.snap).map_or([0; 3], |(_, p, _)| quantise(p));
                let mut s = self.slots.both_at(i);
                s.hot.last = version;
                s.hot.set_sent(version);
                s.set_q(q);
                s.take_pending();
                s.cold.since_key = 0;
                self.stats.resyncs += 1;
            }
            SlotState::Live => return false,
        }
        self.slots.at_mut(i).state = SlotState::Live;
        true
    }

    /// The enter of `entity`, whose slot is at table position `i`.
    fn send_enter(&mut self, i: usize, entity: EntityId, version: u64) {
        let Ok((type_id, pos, yaw)) = super::codec::snapshot_header(&self.work.snap) else {
            unreachable!("encode_snapshot writes a header");
        };
        let handle = self.free.pop().unwrap_or_else(|| {
            self.next_handle += 1;
            self.next_handle - 1
        });
        let mut slot = self.slots.both_at(i);
        slot.cold.handle = Some(handle);
        slot.hot.last = version;
        slot.hot.set_sent(version);
        slot.set_q(quantise(pos));
        slot.cold.since_key = 0;
        let ev = ClientEvent::Enter {
            handle,
            entity,
            type_id,
            pos,
            yaw,
            version,
            snapshot: &self.work.snap,
        };
        encode_event(&mut self.batch, &ev);
        self.stats.enters += 1;
    }

    /// Checks the observer's invariants.
    ///
    /// # Panics
    /// If handles are not unique, or the queue and the pending states
    /// disagree.
    pub fn verify(&self) {
        let mut handles: Vec<Handle> = (self.slots.iter_both())
            .filter_map(|(_, _, c)| c.handle)
            .collect();
        let shown = handles.len();
        handles.extend_from_slice(&self.free);
        handles.sort_unstable();
        handles.dedup();
        assert_eq!(handles.len(), shown + self.free.len(), "handles unique");
        assert!(handles.iter().all(|&h| h < self.next_handle));
        for (e, s, c) in self.slots.iter_both() {
            assert_eq!(c.handle.is_some(), s.state != SlotState::EnterPending);
            assert_eq!(
                s.shown(),
                c.handle.is_some(),
                "{e}: shown as it has a handle"
            );
            assert!(
                c.handle.is_some() || c.stale == 0,
                "{e}: stale before enter"
            );
            assert_eq!(s.any_stale(), c.stale != 0, "{e}: the hot stale flag");
            assert!(
                s.has_pending() || s.newest_q == c.q,
                "{e}: the newest position is the client's when nothing is pending"
            );
            assert!(s.sent() <= s.last, "{e}: client ahead of the stream");
            assert_eq!(
                s.has_pending(),
                s.sent() < s.last && s.state == SlotState::Live,
                "{e}: a pending movement is exactly what the client lacks"
            );
            let queued = self.queue.iter().filter(|&&(q, _)| q == *e).count();
            assert_eq!(queued, usize::from(s.state != SlotState::Live), "{e} queue");
        }
        assert_eq!(
            self.queue.len(),
            self.slots
                .values()
                .filter(|s| s.state != SlotState::Live)
                .count()
        );
        assert!(self.slots.len() <= self.params.view_entities_max);
        self.slots.verify();
    }
}

/// The low byte an update of `version` carries (the previous version's
/// under the `stale-version` fault).
fn wire_version(fault: Fault, version: u64) -> u8 {
    match fault {
        Fault::StaleVersion => version.saturating_sub(1) as u8,
        _ => version as u8,
    }
}

/// A snapshot queue entry's table position when it is not known (the
/// snapshot then finds the slot through the index).
pub(super) const NO_POSITION: u32 = u32::MAX;

/// How many slots ahead the pull asks the host to prefetch a head.
const PULL_PREFETCH_AHEAD: usize = 6;

/// How far the slot's position may be from its copy's when the pull skips
/// the stale-property check: the quantisation (half a centimetre a axis),
/// with room to spare.
const STALE_REACH_MARGIN_M: f64 = 0.05;

/// The wire movement to `pos` for the client of `slot` (a delta from its
/// last position, or a key frame every `keyframe_every` movements and for
/// jumps too large for a delta); updates the slot's base.
fn movement_to(slot: &mut SlotMut<'_>, p: &BudgetParams, to: Pending) -> Movement {
    let (mv, q) = movement_from(slot.cold.q, &mut slot.cold.since_key, p, to);
    slot.set_qpos(q);
    mv
}

/// The wire movement from the client's `last` position to `to` (see
/// [`movement_to`]), and the client's position after it (`to`'s).
fn movement_from(
    last: QPos,
    since_key: &mut u16,
    p: &BudgetParams,
    to: Pending,
) -> (Movement, QPos) {
    let (q, last) = (widen(to.q), widen(last));
    let d = [
        q[0].wrapping_sub(last[0]),
        q[1].wrapping_sub(last[1]),
        q[2].wrapping_sub(last[2]),
    ];
    *since_key = since_key.saturating_add(1);
    let absolute = *since_key >= p.keyframe_every || d.iter().any(|c| c.abs() > DELTA_MAX_CM);
    if absolute {
        *since_key = 0;
    }
    let mv = Movement {
        absolute,
        d: if absolute { q } else { d },
        yaw: to.yaw,
    };
    (mv, to.q)
}

#[cfg(test)]
mod important_tests {
    use super::{Observer, ObserverParams};
    use crate::core::ids::EntityId;
    use crate::core::view::budget::BudgetParams;

    /// An important entity stays so for the same time at any update rate:
    /// its count is of this client's flushes (5 s is 100 flushes at 20 Hz,
    /// 50 at 10 Hz), and a second mark keeps the longer.
    #[test]
    fn importance_lasts_its_time_at_any_update_rate() {
        for (flush_ms, flushes) in [(50u32, 100u16), (100, 50), (30, 167)] {
            let params = ObserverParams {
                budget: BudgetParams {
                    tick_ms: flush_ms,
                    ..BudgetParams::default()
                },
                ..ObserverParams::default()
            };
            let mut o = Observer::new(EntityId(1), params);
            o.mark_important(EntityId(2), 5_000);
            assert_eq!(o.important, [(EntityId(2), flushes)], "{flush_ms} ms");
            o.mark_important(EntityId(2), 1_000);
            assert_eq!(o.important, [(EntityId(2), flushes)], "the longer kept");
        }
    }
}
