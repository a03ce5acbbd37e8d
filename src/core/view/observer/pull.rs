//! The pull of a flush: each shown entity brought up to its local copy
//! (see the observer's module doc, "Pull at the flush"), but the ones a
//! band-rate plan skips (`visits`).
//!
//! Part of [`Observer`]; reads the cell only through [`ObserverHost`].

use super::walk::{Ranked, Walk};
use super::{
    Observer, Pending, Slot, SlotState, PULL_PREFETCH_AHEAD, REACH_UNKNOWN, STALE_REACH_MARGIN_M,
};
use crate::core::entity::{Fill, SyncMsg};
use crate::core::geom::Vec3;
use crate::core::ids::EntityId;
use crate::core::view::codec::UNITS_PER_M;
use crate::core::view::host::{ObserverHost, RunHead};
use crate::core::view::visits::VisitPlan;

impl Observer {
    /// Brings every live slot up to its local copy, from the copy's cache:
    /// the first step of every flush (see the module doc's "Pull at the
    /// flush"). A bare movement is taken in place (coalesced into the
    /// slot's pending one); anything else goes through the per-message
    /// rules (`deliver_msg`), in version order. A copy behind the client
    /// is held; a cache that no longer reaches the client's version, or a
    /// snapshot in it, schedules a resync.
    ///
    /// Each copy's head is read first ([`ObserverHost::copy_head`], dense in
    /// the cell). A copy whose cache says everything missing is bare
    /// movements hands over its newest position without a read of the
    /// messages. A slot with detail properties to catch up, now near
    /// enough, is listed for `catch_up`.
    ///
    /// The usual slot (live, no stale detail within reach, its copy up to
    /// date or only moved since the client's version) is done in one step
    /// with one lookup of the slot (`pull_slot`): at 2,000 clients the
    /// pull runs at about three instructions a cycle, so what it costs is
    /// its instructions more than its misses (`bench/README.md`, thirtieth
    /// round). The rest, about 3 % of the slots in the cost probe (cached
    /// messages to take, stale detail to check, a missing copy), goes on in
    /// `pull_rest`.
    ///
    /// With a `walk` (a paced flush), each slot is ranked for the budget as
    /// soon as it is pulled (`Walk::rank`, into the `Ranked` lists): one
    /// pass over the table. Under a band-rate `plan` a live slot it skips is
    /// only aged and its priority grown (see `visits`): nothing of its copy
    /// but the head is read. `me`: where the owner's copy stands (the
    /// flush found it once).
    pub(super) fn pull<H: ObserverHost + ?Sized>(
        &mut self,
        host: &H,
        me: Option<Vec3>,
        plan: Option<&VisitPlan>,
        walk: Option<(&Walk, &mut Ranked)>,
    ) {
        self.work.lod_due.clear();
        // The observer's ground position in the wire's units: the far check
        // compares squared distances there (no division per slot).
        let me_u = me.map(|m| [m.x * UNITS_PER_M, m.z * UNITS_PER_M]);
        let before = self.stats.skips;
        // A copy of the loop for each case: no test per slot of what the
        // flush does not use. A plan skips only where a walk ranks (what a
        // skipped slot waits for is the next walk).
        debug_assert!(plan.is_none() || walk.is_some(), "a plan without a walk");
        match (plan, walk) {
            (Some(plan), Some(walk)) => {
                self.pull_loop::<H, true, true>(host, Some(plan), Some(walk), (me, me_u))
            }
            (None, Some(walk)) => {
                self.pull_loop::<H, false, true>(host, None, Some(walk), (me, me_u))
            }
            (_, None) => self.pull_loop::<H, false, false>(host, None, None, (me, me_u)),
        }
        let skipped = self.stats.skips - before;
        self.stats.visits += self.slots.len() as u64 - skipped;
    }

    /// `pull`'s walk over the slots; `PLANNED`: `plan` is `Some`;
    /// `RANKED`: `walk` is.
    ///
    /// Quiet slots (see [`super::QUIET`]) are passed by unread when the
    /// last pull kept track of them and found enough
    /// ([`QUIET_SHARE_MIN_DIV`]), the host can tell their heads held still
    /// since, and there is no plan (whose skip grows a priority a quiet
    /// step would not). A pull keeps track when the last found enough, or
    /// every [`QUIET_RETRY_PULLS`] pulls otherwise: a view of walkers has
    /// no quiet slot, and the bookkeeping would cost each of its slots.
    #[inline(always)]
    fn pull_loop<H: ObserverHost + ?Sized, const PLANNED: bool, const RANKED: bool>(
        &mut self,
        host: &H,
        plan: Option<&VisitPlan>,
        walk: Option<(&Walk, &mut Ranked)>,
        (me, me_u): (Option<Vec3>, Option<[f64; 2]>),
    ) {
        let epoch = host.heads_epoch();
        let worth = self.untracked == 0
            && self.quiet_seen as usize * QUIET_SHARE_MIN_DIV >= self.slots.len();
        let track = epoch.is_some() && (worth || self.untracked >= QUIET_RETRY_PULLS);
        // `pulled_at` is set only by a pull that kept track.
        let since = self.pulled_at.filter(|_| worth && track && !PLANNED);
        // The distances a quiet slot's stale detail was judged at hold.
        let stood = me_u.is_some() && me_u == self.pulled_me;
        self.quiet_seen = 0;
        self.untracked = if track {
            0
        } else {
            self.untracked.saturating_add(1)
        };
        let at = (me, me_u);
        match (since, track) {
            (Some(since), _) => {
                self.pull_busy::<H, PLANNED, RANKED>(host, plan, walk, at, since, stood)
            }
            (None, true) => self.pull_all::<H, PLANNED, RANKED, true>(host, plan, walk, at),
            (None, false) => self.pull_all::<H, PLANNED, RANKED, false>(host, plan, walk, at),
        }
        self.pulled_at = epoch.filter(|_| track);
        self.pulled_me = me_u;
    }

    /// The pull's step for every slot, in table order; `TRACK`: each slot's
    /// [`super::QUIET`] written.
    #[inline(always)]
    fn pull_all<
        H: ObserverHost + ?Sized,
        const PLANNED: bool,
        const RANKED: bool,
        const TRACK: bool,
    >(
        &mut self,
        host: &H,
        plan: Option<&VisitPlan>,
        mut walk: Option<(&Walk, &mut Ranked)>,
        (me, me_u): (Option<Vec3>, Option<[f64; 2]>),
    ) {
        let mut scratch = RunHead::default();
        self.prefetch_flush();
        for i in 0..self.slots.len() {
            // The heads a few slots on are fetched while this one is read
            // (shown entities sit anywhere in the cell's table). The slots
            // further on are fetched first (their hints are read to find
            // those heads), both parts: the cold one is what a send reads,
            // later in this flush.
            self.slots.prefetch_whole(i + 2 * PULL_PREFETCH_AHEAD);
            if let Some(ahead) = self.slots.hint_at(i + PULL_PREFETCH_AHEAD) {
                host.prefetch_head(ahead);
            }
            let ranking = walk.as_mut().map(|(w, r)| (&**w, &mut **r));
            let rest = self.pull_slot::<H, PLANNED, RANKED, TRACK>(
                host,
                i,
                plan,
                ranking,
                me_u,
                &mut scratch,
            );
            if rest != Rest::Done {
                let ranking = walk.as_mut().map(|(w, r)| (&**w, &mut **r));
                self.pull_rest::<H, RANKED>(host, i, rest, ranking, (me, me_u));
            }
        }
    }

    /// The pull's step for the slots not quiet since the host's epoch
    /// `since`: the quiet ones passed by first, in one pass over the hot
    /// parts that reads no head (`pass_quiet`) and asks for the heads and
    /// cold parts of the others as it meets them, then the others stepped
    /// in table order.
    #[inline(always)]
    fn pull_busy<H: ObserverHost + ?Sized, const PLANNED: bool, const RANKED: bool>(
        &mut self,
        host: &H,
        plan: Option<&VisitPlan>,
        mut walk: Option<(&Walk, &mut Ranked)>,
        (me, me_u): (Option<Vec3>, Option<[f64; 2]>),
        since: u32,
        stood: bool,
    ) {
        let mut scratch = RunHead::default();
        let mut busy = std::mem::take(&mut self.work.busy);
        busy.clear();
        self.prefetch_flush();
        for i in 0..self.slots.len() {
            self.slots.prefetch(i + 2 * PULL_PREFETCH_AHEAD);
            if !self.pass_quiet::<H, RANKED>(host, i, since, stood) {
                // What its step reads (its copy's head, its cold part) is
                // fetched now, a whole pass ahead.
                if let Some(hint) = self.slots.hint_at(i) {
                    host.prefetch_head(hint);
                }
                self.slots.prefetch_cold(i);
                busy.push(i as u32);
            }
        }
        // (The step's lines repeat `pull_all`'s: a shared helper taking the
        // walk by value cost 2.3 % more host instructions all walking,
        // bench/README.md's thirty-second round.)
        for &i in &busy {
            let i = i as usize;
            let ranking = walk.as_mut().map(|(w, r)| (&**w, &mut **r));
            let rest = self.pull_slot::<H, PLANNED, RANKED, true>(
                host,
                i,
                plan,
                ranking,
                me_u,
                &mut scratch,
            );
            if rest != Rest::Done {
                let ranking = walk.as_mut().map(|(w, r)| (&**w, &mut **r));
                self.pull_rest::<H, RANKED>(host, i, rest, ranking, (me, me_u));
            }
        }
        self.work.busy = busy;
    }

    /// The step of a slot found quiet at the last pull (at the host's
    /// epoch `since`) whose copy's head is unchanged since: the step
    /// `pull_slot` would take (no version to take, nothing pending, no
    /// stale detail within reach, so with a walk only the age grows),
    /// without a read of the head. `stood`: the observer stands where it
    /// did at the last pull (so stale detail beyond reach then still is).
    /// False, having done nothing, for any other slot.
    #[inline(always)]
    fn pass_quiet<H: ObserverHost + ?Sized, const RANKED: bool>(
        &mut self,
        host: &H,
        i: usize,
        since: u32,
        stood: bool,
    ) -> bool {
        let (e, slot) = self.slots.entry_mut(i);
        if !(slot.still_quiet(stood) && host.head_unchanged_since(slot.hint, since)) {
            return false;
        }
        if cfg!(debug_assertions) || crate::INVARIANT_CHECKS {
            let mut hint = slot.hint;
            let mut scratch = RunHead::default();
            let head = host.copy_head_hinted(e, &mut hint, &mut scratch);
            assert!(
                hint == slot.hint && head.is_some_and(|h| h.version <= slot.last),
                "a slot passed by as quiet has news: {e}"
            );
        }
        if RANKED {
            // As `Walk::rank` ages a live slot with nothing pending.
            slot.age = slot.age.saturating_add(1);
        }
        self.stats.quiet += 1;
        self.quiet_seen += 1;
        true
    }

    /// The step of the walk for the slot at table position `i`, with one
    /// lookup of the slot: the plan's skip; then, for a live slot, its
    /// copy's head, a bare movement run since the client's version
    /// coalesced in place; and for a slot with nothing more to do (no
    /// stale detail, no other message to take) its rank. What is left, if
    /// anything, is for `pull_rest` ([`Rest`]).
    #[inline(always)]
    fn pull_slot<
        H: ObserverHost + ?Sized,
        const PLANNED: bool,
        const RANKED: bool,
        const TRACK: bool,
    >(
        &mut self,
        host: &H,
        i: usize,
        plan: Option<&VisitPlan>,
        walk: Option<(&Walk, &mut Ranked)>,
        me_u: Option<[f64; 2]>,
        scratch: &mut RunHead,
    ) -> Rest {
        let Observer {
            slots,
            important,
            stats,
            quiet_seen,
            ..
        } = self;
        let (e, slot) = slots.entry_mut(i);
        // Every way out says whether the slot is quiet now (`QUIET`: the
        // next pull may pass it by while its head holds still).
        if slot.state != SlotState::Live {
            // Not skipped, nothing to pull, and the rank passes it by.
            if TRACK {
                slot.set_quiet(false);
            }
            return Rest::Done;
        }
        if let (true, Some(plan)) = (PLANNED, plan) {
            if plan.skips(host, e, slot, scratch) && !important.iter().any(|(x, _)| *x == e) {
                Walk::rest_skipped(slot);
                stats.skips += 1;
                if TRACK {
                    slot.set_quiet(false);
                }
                return Rest::Done;
            }
        }
        let last = slot.last;
        let Some(head) = host.copy_head_hinted(e, &mut slot.hint, scratch) else {
            if TRACK {
                slot.set_quiet(false);
            }
            return Rest::NoCopy;
        };
        let version = head.version;
        // Up to date, or a copy behind the client (held: counted once,
        // where the observer met it, not at every pull).
        if version > last {
            match head.run.and_then(|r| Some((r.moves_after(last)?, r))) {
                Some((pending, run)) => {
                    let taken = run.last_version() - last;
                    let had = u64::from(slot.has_pending());
                    stats.coalesced += taken - 1 + had;
                    slot.last = run.last_version();
                    slot.replace_pending(pending);
                }
                None => {
                    if TRACK {
                        slot.set_quiet(false);
                    }
                    return Rest::Messages { last, version };
                }
            }
        }
        // Squared, in the wire's units: no square root per slot. The slot's
        // position is the copy's (this version's movement, quantised:
        // within a centimetre). Worked out for every slot: the budget
        // walk's rank takes it too.
        let d2 = me_u.map_or(0.0, |m| slot.dist2_xz_units(m));
        // Stale detail is checked only within reach (`near_stale`).
        if slot.any_stale() && near_stale(slot, d2, version) {
            if TRACK {
                slot.set_quiet(false);
            }
            return Rest::Stale { version };
        }
        // Nothing to take and nothing held: quiet. (Stale detail here is
        // beyond reach: `near_stale` said so.)
        if TRACK {
            let quiet = (version <= last) & !slot.has_pending();
            slot.set_quiet(quiet);
            *quiet_seen += u32::from(quiet);
        }
        if let (true, Some((walk, ranked))) = (RANKED, walk) {
            walk.rank(i as u32, e, slot, Some(d2), important, ranked);
        }
        Rest::Done
    }

    /// The rest of the step for the slot at position `i` (see `pull_slot`):
    /// the copy's cached messages taken (a resync scheduled if the cache no
    /// longer reaches the client), stale detail checked (listing the slot
    /// for `catch_up` if some is due), and the rank.
    fn pull_rest<H: ObserverHost + ?Sized, const RANKED: bool>(
        &mut self,
        host: &H,
        i: usize,
        rest: Rest,
        walk: Option<(&Walk, &mut Ranked)>,
        (me, me_u): (Option<Vec3>, Option<[f64; 2]>),
    ) {
        let e = self.slots.at(i).0;
        if let Rest::Messages { last, .. } = rest {
            match host.copy_cache(e).map(|c| c.fill(last)) {
                Some(Fill::Msgs(msgs)) => {
                    for m in msgs {
                        if !self.take_msg(host, i, e, m) {
                            break;
                        }
                    }
                }
                Some(Fill::UpToDate) => {}
                Some(Fill::ResyncNeeded) | None => self.want_resync(e),
            }
        }
        let d2 = match rest {
            Rest::Done | Rest::NoCopy => None,
            Rest::Messages { version, .. } | Rest::Stale { version } => {
                Some(self.check_stale(host, i, version, (me, me_u)))
            }
        };
        if let (true, Some((walk, ranked))) = (RANKED, walk) {
            let (e, slot) = self.slots.entry_mut(i);
            // A slot just listed for `catch_up`: its movement goes there
            // (`Walk::age`).
            if self.work.lod_due.last().map(|&(x, _)| x) == Some(e) {
                Walk::age(slot);
            } else {
                walk.rank(i as u32, e, slot, d2, &self.important, ranked);
            }
        }
    }

    /// The stale detail of the slot at position `i`, whose copy is at
    /// `version`: listed for `catch_up` if some is due at the distance the
    /// slot now stands (`me`: the observer's position, and its ground
    /// position in the wire's units). Returns the slot's squared ground
    /// distance from `me` in the wire's units (0 without `me`), as the
    /// budget walk's rank wants it.
    fn check_stale<H: ObserverHost + ?Sized>(
        &mut self,
        host: &H,
        i: usize,
        version: u64,
        (me, me_u): (Option<Vec3>, Option<[f64; 2]>),
    ) -> f64 {
        let (e, slot) = self.slots.at(i);
        let d2 = me_u.map_or(0.0, |m| slot.dist2_xz_units(m));
        let far = beyond_stale_reach(slot, d2);
        let stale_here =
            slot.any_stale() & (slot.state == SlotState::Live) & (slot.last == version);
        if cfg!(debug_assertions) && stale_here && far {
            let stale = self.slots.cold_at(i).stale();
            assert!(
                host.copy_ref(e).is_none_or(|c| {
                    let d = me.map_or(0.0, |m| m.dist_xz(c.entity.core().pos));
                    let ty = c.entity.props().entity_type();
                    stale & !self.params.budget.beyond(ty, d, 0.0) == 0
                }),
                "a stale property skipped within reach"
            );
        }
        if stale_here & !far {
            let stale = self.slots.cold_at(i).stale();
            // Where the head was just found: no probe of the cell's index.
            let mut hint = slot.hint;
            let Some((copy, _)) = host.copy_entity_hinted(e, &mut hint) else {
                return d2;
            };
            let dist = me.map_or(0.0, |m| m.dist_xz(copy.core().pos));
            let ty = copy.props().entity_type();
            if slot.reach_m == REACH_UNKNOWN {
                let reach = self.params.budget.reach_of(ty, stale).max(0.0).ceil();
                // Rounded up, so the skip stays on the safe side; a reach
                // too far to hold stays unknown (never skipped).
                if reach < f64::from(REACH_UNKNOWN) {
                    self.slots.at_mut(i).reach_m = reach as u16;
                }
            }
            if stale & !self.params.budget.beyond(ty, dist, 0.0) != 0 {
                self.work.lod_due.push((e, i as u32));
            }
        }
        d2
    }

    /// Takes the cached message `m` of the slot at position `i` (entity
    /// `e`); false if the entity needs a resync now.
    fn take_msg<H: ObserverHost + ?Sized>(
        &mut self,
        host: &H,
        i: usize,
        e: EntityId,
        m: &SyncMsg,
    ) -> bool {
        let slot = self.slots.at_mut(i);
        // A movement whose property change other clients cannot see (an
        // empty delta) coalesces like a bare one (as in `emit_update`).
        if m.version == slot.last + 1 {
            if let Some((pos, yaw)) = m.others_bare_movement() {
                slot.last = m.version;
                if slot.replace_pending(Pending::of(pos, yaw)).is_some() {
                    self.stats.coalesced += 1;
                }
                return true;
            }
        }
        self.deliver_msg(host, e, m)
    }
}

/// True if `slot` (live, at `d2` squared wire units from the observer)
/// has stale detail to check against its copy at `version`: the copy is
/// where the client is (a slot still behind is checked once it caught
/// up), and the slot is not farther than every stale property's reach
/// (then nothing can be due and the copy need not be read; the reach is
/// worked out at the first check, unknown until then).
#[inline(always)]
fn near_stale(slot: &Slot, d2: f64, version: u64) -> bool {
    // Slots beyond reach are left in release builds; a debug build checks
    // them too (`check_stale`'s assertion).
    (slot.last == version) & (!beyond_stale_reach(slot, d2) | cfg!(debug_assertions))
}

/// True if `slot`, `d2` squared wire units from the observer, is farther
/// than the reach of every stale property it has (known: worked out at
/// its first stale check).
#[inline(always)]
fn beyond_stale_reach(slot: &Slot, d2: f64) -> bool {
    let reach = (f64::from(slot.reach_m) + STALE_REACH_MARGIN_M) * UNITS_PER_M;
    (slot.reach_m != REACH_UNKNOWN) & (d2 > reach * reach)
}

/// A pull passes quiet slots by when at least one in this many of the
/// observer's slots were quiet at its last pull: below that, the look (a
/// test of each slot, and a second walk over those it does not pass)
/// costs more than it saves (at 2,000 clients all walking, keeping track
/// at every pull cost the host 1.4 % more instructions; bench/README.md,
/// thirty-second round).
const QUIET_SHARE_MIN_DIV: usize = 4;

/// An observer that keeps no track of quiet slots (too few at its last
/// look) looks again after this many pulls (0.8 s at 10 Hz updates).
const QUIET_RETRY_PULLS: u8 = 8;

/// What is left of a slot's pull step after `Observer::pull_slot`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Rest {
    /// Nothing: pulled (or skipped) and ranked.
    Done,
    /// Its copy is missing: only the rank.
    NoCopy,
    /// Messages other than bare movements after the client's version
    /// `last`, up to the copy's `version`, to take from the copy's cache.
    Messages { last: u64, version: u64 },
    /// Stale detail to check within reach (the copy at `version`; in a
    /// debug build, beyond reach too, to assert that none is due).
    Stale { version: u64 },
}
