//! Combat at the reals: seed 000's hit flow (try_hit, do_hit, on_hit, hit
//! feedback, timeouts) as sans-IO logic, wherever attacker and target live.
//!
//! Owns [`Combat`], the combat state of one real (the hits it started and
//! waits on, the hits it took recently), the call payloads [`CombatCall`]
//! with their compact codec, and [`CombatParams`]. It changes only the
//! entity's `hp` property (which then syncs out like any change); it never
//! routes anything: calls come out as `(target entity, bytes)` and the cell
//! delivers them to that entity's real wherever it is (forwarding).
//!
//! # Flow (attacker `A`, target `T`, possibly in different cells)
//!
//! 1. *try_hit* at `A`'s real: refuses unless `T` is visible to `A` (in its
//!    observer's view or AOI), alive, of another faction, within
//!    `hit_range_m`, and `A` is off cooldown (`attack_gap_ms`) with room in
//!    its pending table (`pending_hits_max`). It records a pending hit
//!    `seq` due at `now + hit_delay_ms` (the animation time; seed 000's
//!    0.5 s) that expires at `now + hit_timeout_ms`.
//! 2. *do_hit*: at the first [`Combat::tick`] past the delay, `A` emits a
//!    [`CombatCall::Hit`] addressed to `T` ([`Combat::poll_output`]).
//! 3. *on_hit* at `T`'s real ([`Combat::handle_call`]): applied once per
//!    `(attacker, seq)` (a bounded table of resolved hits drops duplicates
//!    for `hit_timeout_ms`): `hp` drops by the damage (not below 0), and a
//!    [`CombatCall::Feedback`] goes back to `A`.
//! 4. *hit feedback* at `A`'s real, wherever `A` migrated meanwhile (the
//!    state travels with [`Combat::encode`] / [`Combat::decode`]): the
//!    pending hit ends ([`CombatEvent::HitLanded`]).
//! 5. *timeouts*: a pending hit with no feedback by its expiry ends as
//!    [`CombatEvent::HitExpired`]; feedback after that is counted and
//!    dropped; resolved entries at `T` expire after `hit_timeout_ms`.
//!
//! Unlike seed 000, `A` never looks for `T`'s copy to decide between a
//! local call and an RPC: every hit is a call to `T`'s real, local or not,
//! so one path is tested.

use crate::core::entity::codec::{put_ivar, put_uvar, Reader};
use crate::core::entity::{DecodeError, Entity, Value};
use crate::core::ids::EntityId;
use crate::core::time::Time;
use std::collections::VecDeque;
use std::time::Duration;

/// First byte of a hit call.
pub const CALL_TAG_HIT: u8 = 0xC1;
/// First byte of a hit feedback call.
pub const CALL_TAG_FEEDBACK: u8 = 0xC2;
const STATE_FORMAT: u8 = 1;

/// Bounds and timings of combat.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CombatParams {
    /// From try_hit to do_hit (the attack animation). Default 500 ms.
    pub hit_delay_ms: u64,
    /// From try_hit until an unanswered hit is given up; also how long a
    /// target remembers a resolved hit. Default 5000 ms.
    pub hit_timeout_ms: u64,
    /// Cooldown between two hits of one attacker. Default 200 ms.
    pub attack_gap_ms: u64,
    /// Longest reach of a hit (ground distance). Default 10 m.
    pub hit_range_m: f64,
    /// Largest damage one hit may carry. Default 1_000_000.
    pub damage_max: i64,
    /// Most hits one attacker waits on. Default 16.
    pub pending_hits_max: usize,
    /// Most resolved hits a target remembers (duplicate filter). Default 256.
    pub resolved_hits_max: usize,
}

impl Default for CombatParams {
    fn default() -> Self {
        CombatParams {
            hit_delay_ms: 500,
            hit_timeout_ms: 5000,
            attack_gap_ms: 200,
            hit_range_m: 10.0,
            damage_max: 1_000_000,
            pending_hits_max: 16,
            resolved_hits_max: 256,
        }
    }
}

/// Why a try_hit was refused (nothing was recorded).
#[derive(Debug, Clone, Copy, PartialEq, thiserror::Error)]
pub enum HitRefused {
    /// The target is not in the attacker's view or AOI (or has no copy here).
    #[error("target not visible")]
    NotVisible,
    /// An entity cannot hit itself.
    #[error("cannot hit oneself")]
    SelfTarget,
    /// Too soon after the previous hit.
    #[error("on cooldown until {ready_at:?}")]
    Cooldown {
        /// When the next hit is allowed.
        ready_at: Time,
    },
    /// The target has no hp left.
    #[error("target is dead")]
    Dead,
    /// Attacker and target share a faction.
    #[error("same faction")]
    SameFaction,
    /// The target is beyond `hit_range_m`.
    #[error("out of range")]
    OutOfRange,
    /// The entity types lack `hp` or `faction`.
    #[error("not a combatant")]
    NotCombatant,
    /// `pending_hits_max` hits are already waiting.
    #[error("too many pending hits")]
    TooManyPending,
    /// Damage negative or over `damage_max`.
    #[error("bad damage {0}")]
    BadDamage(i64),
}

/// Why a combat call or state was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CombatError {
    /// The bytes did not decode.
    #[error(transparent)]
    Decode(#[from] DecodeError),
    /// A hit with negative or oversized damage.
    #[error("bad damage {0}")]
    BadDamage(i64),
    /// The entity has no `hp` property.
    #[error("not a combatant")]
    NotCombatant,
}

/// A combat call between reals.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CombatCall {
    /// do_hit: `attacker` hits the receiver.
    Hit {
        /// Who hits (feedback goes there).
        attacker: EntityId,
        /// The attacker's hit sequence number.
        seq: u64,
        /// Damage asked.
        damage: i64,
    },
    /// on_hit's answer to the attacker.
    Feedback {
        /// Who was hit.
        target: EntityId,
        /// The hit.
        seq: u64,
        /// Damage actually dealt (hp never goes below 0).
        dealt: i64,
        /// The hit took the target's last hp.
        killed: bool,
    },
}

impl CombatCall {
    /// True if `bytes` look like a combat call (dispatch on the first byte).
    pub fn is_combat(bytes: &[u8]) -> bool {
        matches!(bytes.first(), Some(&(CALL_TAG_HIT | CALL_TAG_FEEDBACK)))
    }

    /// Appends the call: `tag, varint entity, varint seq, zigzag damage`
    /// (`, u8 killed` for feedback); 4-15 bytes.
    pub fn encode(&self, out: &mut Vec<u8>) {
        match *self {
            CombatCall::Hit {
                attacker,
                seq,
                damage,
            } => {
                out.push(CALL_TAG_HIT);
                put_uvar(out, attacker.0);
                put_uvar(out, seq);
                put_ivar(out, damage);
            }
            CombatCall::Feedback {
                target,
                seq,
                dealt,
                killed,
            } => {
                out.push(CALL_TAG_FEEDBACK);
                put_uvar(out, target.0);
                put_uvar(out, seq);
                put_ivar(out, dealt);
                out.push(u8::from(killed));
            }
        }
    }

    /// Reads one call (the whole of `bytes`).
    ///
    /// # Errors
    /// [`DecodeError`]: unknown tag, truncation, bad bool, trailing bytes.
    pub fn decode(bytes: &[u8]) -> Result<CombatCall, DecodeError> {
        let mut r = Reader::new(bytes);
        let call = match r.u8()? {
            CALL_TAG_HIT => CombatCall::Hit {
                attacker: EntityId(r.uvar()?),
                seq: r.uvar()?,
                damage: r.ivar()?,
            },
            CALL_TAG_FEEDBACK => CombatCall::Feedback {
                target: EntityId(r.uvar()?),
                seq: r.uvar()?,
                dealt: r.ivar()?,
                killed: r.bool()?,
            },
            t => return Err(DecodeError::BadTag(t)),
        };
        r.finish()?;
        Ok(call)
    }
}

/// A call to deliver to `to`'s real, wherever it is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CombatOutput {
    /// The addressee entity.
    pub to: EntityId,
    /// The encoded [`CombatCall`].
    pub call: Vec<u8>,
}

/// What happened, for game code and counters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CombatEvent {
    /// Our hit `seq` on `target` was resolved there.
    HitLanded {
        /// The hit.
        seq: u64,
        /// Who was hit.
        target: EntityId,
        /// Damage dealt.
        dealt: i64,
        /// Target killed.
        killed: bool,
    },
    /// Our hit `seq` got no feedback in time and was dropped.
    HitExpired {
        /// The hit.
        seq: u64,
        /// Its target.
        target: EntityId,
    },
    /// We were hit.
    Damaged {
        /// By whom.
        attacker: EntityId,
        /// Their hit.
        seq: u64,
        /// Damage taken.
        dealt: i64,
        /// It killed us.
        killed: bool,
    },
    /// A hit already resolved arrived again and was dropped.
    DuplicateHit {
        /// By whom.
        attacker: EntityId,
        /// Their hit.
        seq: u64,
    },
    /// Feedback for a hit no longer pending (expired) was dropped.
    LateFeedback {
        /// The hit.
        seq: u64,
    },
}

/// One hit the attacker waits on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct PendingHit {
    seq: u64,
    target: EntityId,
    damage: i64,
    do_hit_at: Time,
    expire_at: Time,
    sent: bool,
}

/// One hit the target resolved (duplicate filter).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Resolved {
    attacker: EntityId,
    seq: u64,
    expire_at: Time,
}

/// The combat state of one real (see the module doc).
#[derive(Clone, Debug, PartialEq)]
pub struct Combat {
    params: CombatParams,
    me: EntityId,
    next_seq: u64,
    last_hit_at: Option<Time>,
    pending: Vec<PendingHit>,
    resolved: VecDeque<Resolved>,
    out: VecDeque<CombatOutput>,
    events: VecDeque<CombatEvent>,
}

fn prop_int(e: &Entity, name: &str) -> Option<(usize, i64)> {
    let i = e.props().entity_type().prop_index(name)?;
    match e.props().get(i)? {
        Value::Int(v) => Some((i, *v)),
        Value::UInt(v) => Some((i, i64::try_from(*v).unwrap_or(i64::MAX))),
        _ => None,
    }
}

impl Combat {
    /// The combat state of a new real `me`.
    pub fn new(me: EntityId, params: CombatParams) -> Self {
        Combat {
            params,
            me,
            next_seq: 1,
            last_hit_at: None,
            pending: Vec::new(),
            resolved: VecDeque::new(),
            out: VecDeque::new(),
            events: VecDeque::new(),
        }
    }

    /// True when nothing is left to do: no hit pending or remembered, no
    /// output or event to take ([`Combat::tick`] and the polls would do
    /// nothing).
    pub fn is_idle(&self) -> bool {
        self.pending.is_empty()
            && self.resolved.is_empty()
            && self.out.is_empty()
            && self.events.is_empty()
    }

    /// Hits waiting for feedback.
    pub fn pending(&self) -> usize {
        self.pending.len()
    }

    /// Hits remembered as resolved (target side).
    pub fn resolved(&self) -> usize {
        self.resolved.len()
    }

    /// The next call to deliver (to the addressee's real, wherever it is).
    pub fn poll_output(&mut self) -> Option<CombatOutput> {
        self.out.pop_front()
    }

    /// The next event.
    pub fn poll_event(&mut self) -> Option<CombatEvent> {
        self.events.pop_front()
    }

    /// When [`Combat::tick`] next has something to do, if ever.
    pub fn poll_timeout(&self) -> Option<Time> {
        let hits = self
            .pending
            .iter()
            .map(|p| if p.sent { p.expire_at } else { p.do_hit_at });
        hits.chain(self.resolved.front().map(|r| r.expire_at)).min()
    }

    /// try_hit: validates a hit of `me` (this real) on `target` (its local
    /// copy, real or ghost; `None` if the cell has none) and records it.
    /// `visible` is whether the target is in `me`'s observer view or AOI.
    ///
    /// # Errors
    /// [`HitRefused`] naming the failed check; nothing is recorded.
    pub fn try_hit(
        &mut self,
        now: Time,
        me: &Entity,
        target: Option<&Entity>,
        visible: bool,
        damage: i64,
    ) -> Result<u64, HitRefused> {
        debug_assert_eq!(me.core().id, self.me);
        let target = target.filter(|_| visible).ok_or(HitRefused::NotVisible)?;
        self.check_hit(now, me, target, damage)?;
        let seq = self.next_seq;
        self.next_seq += 1;
        self.last_hit_at = Some(now);
        self.pending.push(PendingHit {
            seq,
            target: target.core().id,
            damage,
            do_hit_at: now + Duration::from_millis(self.params.hit_delay_ms),
            expire_at: now + Duration::from_millis(self.params.hit_timeout_ms),
            sent: false,
        });
        Ok(seq)
    }

    fn check_hit(
        &self,
        now: Time,
        me: &Entity,
        target: &Entity,
        damage: i64,
    ) -> Result<(), HitRefused> {
        let p = &self.params;
        if target.core().id == self.me {
            return Err(HitRefused::SelfTarget);
        }
        if !(0..=p.damage_max).contains(&damage) {
            return Err(HitRefused::BadDamage(damage));
        }
        if let Some(last) = self.last_hit_at {
            let ready_at = last + Duration::from_millis(p.attack_gap_ms);
            if now < ready_at {
                return Err(HitRefused::Cooldown { ready_at });
            }
        }
        let (Some((_, hp)), Some((_, mine)), Some((_, theirs))) = (
            prop_int(target, "hp"),
            prop_int(me, "faction"),
            prop_int(target, "faction"),
        ) else {
            return Err(HitRefused::NotCombatant);
        };
        if hp <= 0 {
            return Err(HitRefused::Dead);
        }
        if mine == theirs {
            return Err(HitRefused::SameFaction);
        }
        let d2 = crate::core::aoi::dist2(me.core().pos, target.core().pos);
        if d2 > p.hit_range_m * p.hit_range_m {
            return Err(HitRefused::OutOfRange);
        }
        if self.pending.len() >= p.pending_hits_max {
            return Err(HitRefused::TooManyPending);
        }
        Ok(())
    }

    /// Time passes: due hits are sent (do_hit), unanswered ones expire,
    /// old resolved entries are forgotten.
    pub fn tick(&mut self, now: Time) {
        for p in &mut self.pending {
            if !p.sent && p.do_hit_at <= now && p.expire_at > now {
                p.sent = true;
                let mut call = Vec::with_capacity(16);
                CombatCall::Hit {
                    attacker: self.me,
                    seq: p.seq,
                    damage: p.damage,
                }
                .encode(&mut call);
                self.out.push_back(CombatOutput { to: p.target, call });
            }
        }
        let events = &mut self.events;
        self.pending.retain(|p| {
            let keep = p.expire_at > now;
            if !keep {
                events.push_back(CombatEvent::HitExpired {
                    seq: p.seq,
                    target: p.target,
                });
            }
            keep
        });
        while self.resolved.front().is_some_and(|r| r.expire_at <= now) {
            self.resolved.pop_front();
        }
    }

    /// A combat call reached this real (`me`): on_hit for a hit, the end of
    /// a pending hit for feedback. A hit lowers `me`'s `hp` (synced out by
    /// the next flush) and queues the feedback.
    ///
    /// # Errors
    /// [`CombatError`] for bytes that do not decode, bad damage, or an
    /// entity without `hp`; nothing changes.
    pub fn handle_call(
        &mut self,
        now: Time,
        me: &mut Entity,
        bytes: &[u8],
    ) -> Result<(), CombatError> {
        debug_assert_eq!(me.core().id, self.me);
        match CombatCall::decode(bytes)? {
            CombatCall::Hit {
                attacker,
                seq,
                damage,
            } => self.on_hit(now, me, attacker, seq, damage),
            CombatCall::Feedback {
                target,
                seq,
                dealt,
                killed,
            } => {
                self.on_feedback(target, seq, dealt, killed);
                Ok(())
            }
        }
    }

    fn on_hit(
        &mut self,
        now: Time,
        me: &mut Entity,
        attacker: EntityId,
        seq: u64,
        damage: i64,
    ) -> Result<(), CombatError> {
        if !(0..=self.params.damage_max).contains(&damage) {
            return Err(CombatError::BadDamage(damage));
        }
        let (hp_index, hp) = prop_int(me, "hp").ok_or(CombatError::NotCombatant)?;
        if self
            .resolved
            .iter()
            .any(|r| r.attacker == attacker && r.seq == seq)
        {
            self.events
                .push_back(CombatEvent::DuplicateHit { attacker, seq });
            return Ok(());
        }
        let dealt = damage.min(hp.max(0));
        let killed = hp > 0 && hp - dealt <= 0;
        if dealt > 0 {
            me.props_mut()
                .set(hp_index, Value::Int(hp - dealt))
                .expect("hp is an Int property");
        }
        if self.resolved.len() >= self.params.resolved_hits_max {
            self.resolved.pop_front();
        }
        self.resolved.push_back(Resolved {
            attacker,
            seq,
            expire_at: now + Duration::from_millis(self.params.hit_timeout_ms),
        });
        let mut call = Vec::with_capacity(16);
        CombatCall::Feedback {
            target: self.me,
            seq,
            dealt,
            killed,
        }
        .encode(&mut call);
        self.out.push_back(CombatOutput { to: attacker, call });
        self.events.push_back(CombatEvent::Damaged {
            attacker,
            seq,
            dealt,
            killed,
        });
        Ok(())
    }

    fn on_feedback(&mut self, target: EntityId, seq: u64, dealt: i64, killed: bool) {
        match self
            .pending
            .iter()
            .position(|p| p.seq == seq && p.target == target && p.sent)
        {
            Some(i) => {
                self.pending.remove(i);
                self.events.push_back(CombatEvent::HitLanded {
                    seq,
                    target,
                    dealt,
                    killed,
                });
            }
            None => self.events.push_back(CombatEvent::LateFeedback { seq }),
        }
    }
}

impl Combat {
    /// Appends the durable state (next seq, cooldown, pending and resolved
    /// hits) for the real's migration. Drain [`Combat::poll_output`] and
    /// [`Combat::poll_event`] first: queues are not carried.
    ///
    /// Layout: `u8 format (1), varint next_seq, varint last_hit_at + 1 (0:
    /// none), varint n, n x (varint seq, varint target, zigzag damage,
    /// varint do_hit_at, varint expire_at, u8 sent), varint m, m x (varint
    /// attacker, varint seq, varint expire_at)`; times in microseconds.
    pub fn encode(&self, out: &mut Vec<u8>) {
        debug_assert!(self.out.is_empty() && self.events.is_empty(), "drain first");
        out.push(STATE_FORMAT);
        put_uvar(out, self.next_seq);
        put_uvar(out, self.last_hit_at.map_or(0, |t| t.as_micros() + 1));
        put_uvar(out, self.pending.len() as u64);
        for p in &self.pending {
            put_uvar(out, p.seq);
            put_uvar(out, p.target.0);
            put_ivar(out, p.damage);
            put_uvar(out, p.do_hit_at.as_micros());
            put_uvar(out, p.expire_at.as_micros());
            out.push(u8::from(p.sent));
        }
        put_uvar(out, self.resolved.len() as u64);
        for r in &self.resolved {
            put_uvar(out, r.attacker.0);
            put_uvar(out, r.seq);
            put_uvar(out, r.expire_at.as_micros());
        }
    }

    /// The state of `me` arriving by migration.
    ///
    /// # Errors
    /// [`CombatError::Decode`] for bytes that are not a valid state within
    /// `params` (tables over their bounds included).
    pub fn decode(me: EntityId, params: CombatParams, bytes: &[u8]) -> Result<Combat, CombatError> {
        let mut r = Reader::new(bytes);
        let format = r.u8()?;
        if format != STATE_FORMAT {
            return Err(DecodeError::BadTag(format).into());
        }
        let mut c = Combat::new(me, params);
        c.next_seq = r.uvar()?;
        c.last_hit_at = r.uvar()?.checked_sub(1).map(Time);
        for _ in 0..r.len(params.pending_hits_max)? {
            c.pending.push(PendingHit {
                seq: r.uvar()?,
                target: EntityId(r.uvar()?),
                damage: r.ivar()?,
                do_hit_at: Time(r.uvar()?),
                expire_at: Time(r.uvar()?),
                sent: r.bool()?,
            });
        }
        for _ in 0..r.len(params.resolved_hits_max)? {
            c.resolved.push_back(Resolved {
                attacker: EntityId(r.uvar()?),
                seq: r.uvar()?,
                expire_at: Time(r.uvar()?),
            });
        }
        r.finish()?;
        Ok(c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::entity::{TypeRegistry, AVATAR};
    use crate::core::geom::Vec3;

    fn avatar(id: u64, x: f64, faction: u64, hp: i64) -> Entity {
        let reg = TypeRegistry::with_builtins();
        let ty = reg.get(AVATAR).expect("avatar").clone();
        let mut e = Entity::new_real(EntityId(id), ty.clone(), Vec3 { x, y: 0.0, z: 0.0 }, 0.0);
        let f = ty.prop_index("faction").expect("faction");
        let h = ty.prop_index("hp").expect("hp");
        e.props_mut().set(f, Value::UInt(faction)).expect("set");
        e.props_mut().set(h, Value::Int(hp)).expect("set");
        e
    }

    #[test]
    fn calls_round_trip_and_bad_bytes_are_typed() {
        let calls = [
            CombatCall::Hit {
                attacker: EntityId(7),
                seq: 3,
                damage: 25,
            },
            CombatCall::Feedback {
                target: EntityId(u64::MAX),
                seq: u64::MAX,
                dealt: -1,
                killed: true,
            },
        ];
        for c in calls {
            let mut b = Vec::new();
            c.encode(&mut b);
            assert!(CombatCall::is_combat(&b));
            assert_eq!(CombatCall::decode(&b), Ok(c));
            assert!(b.len() <= 24);
            b.push(0);
            assert_eq!(CombatCall::decode(&b), Err(DecodeError::Trailing(1)));
        }
        assert_eq!(CombatCall::decode(&[]), Err(DecodeError::Truncated));
        assert_eq!(CombatCall::decode(&[1]), Err(DecodeError::BadTag(1)));
        assert_eq!(
            CombatCall::decode(&[CALL_TAG_FEEDBACK, 1, 1, 0, 2]),
            Err(DecodeError::BadBool(2))
        );
        assert!(!CombatCall::is_combat(&[0]));
    }

    #[test]
    fn try_hit_checks_each_rule() {
        let p = CombatParams::default();
        let a = avatar(1, 0.0, 1, 100);
        let mut c = Combat::new(EntityId(1), p);
        let now = Time::from_millis(1000);
        let hit =
            |c: &mut Combat, t: &Entity, vis: bool, dmg: i64| c.try_hit(now, &a, Some(t), vis, dmg);
        let ok = avatar(2, 5.0, 2, 100);
        assert_eq!(
            c.try_hit(now, &a, None, true, 5),
            Err(HitRefused::NotVisible)
        );
        assert_eq!(hit(&mut c, &ok, false, 5), Err(HitRefused::NotVisible));
        assert_eq!(hit(&mut c, &a, true, 5), Err(HitRefused::SelfTarget));
        assert_eq!(hit(&mut c, &ok, true, -1), Err(HitRefused::BadDamage(-1)));
        assert_eq!(
            hit(&mut c, &avatar(2, 5.0, 2, 0), true, 5),
            Err(HitRefused::Dead)
        );
        assert_eq!(
            hit(&mut c, &avatar(2, 5.0, 1, 9), true, 5),
            Err(HitRefused::SameFaction)
        );
        assert_eq!(
            hit(&mut c, &avatar(2, 50.0, 2, 9), true, 5),
            Err(HitRefused::OutOfRange)
        );
        assert_eq!(hit(&mut c, &ok, true, 5), Ok(1));
        assert!(matches!(
            hit(&mut c, &ok, true, 5),
            Err(HitRefused::Cooldown { .. })
        ));
        assert_eq!(c.pending(), 1);
        let mut b = Vec::new();
        c.encode(&mut b);
        assert_eq!(Combat::decode(EntityId(1), p, &b), Ok(c.clone()));
        assert!(Combat::decode(EntityId(1), p, &b[..b.len() - 1]).is_err());
    }

    #[test]
    fn a_local_hit_resolves_once_and_expires_cleanly() {
        let p = CombatParams::default();
        let a = avatar(1, 0.0, 1, 100);
        let mut t = avatar(2, 5.0, 2, 30);
        let mut ca = Combat::new(EntityId(1), p);
        let mut ct = Combat::new(EntityId(2), p);
        let t0 = Time::from_millis(1000);
        let seq = ca.try_hit(t0, &a, Some(&t), true, 50).expect("ok");
        ca.tick(t0 + Duration::from_millis(499));
        assert_eq!(ca.poll_output(), None, "not before the delay");
        let t1 = t0 + Duration::from_millis(500);
        ca.tick(t1);
        let out = ca.poll_output().expect("do_hit");
        assert_eq!(out.to, EntityId(2));
        ct.handle_call(t1, &mut t, &out.call).expect("hit");
        ct.handle_call(t1, &mut t, &out.call).expect("duplicate");
        assert_eq!(prop_int(&t, "hp").map(|x| x.1), Some(0));
        assert_eq!(
            ct.poll_event(),
            Some(CombatEvent::Damaged {
                attacker: EntityId(1),
                seq,
                dealt: 30,
                killed: true
            })
        );
        assert_eq!(
            ct.poll_event(),
            Some(CombatEvent::DuplicateHit {
                attacker: EntityId(1),
                seq
            })
        );
        let fb = ct.poll_output().expect("feedback");
        assert_eq!(ct.poll_output(), None, "one feedback");
        assert_eq!(fb.to, EntityId(1));
        let mut a = a;
        ca.handle_call(t1, &mut a, &fb.call).expect("feedback");
        assert_eq!(
            ca.poll_event(),
            Some(CombatEvent::HitLanded {
                seq,
                target: EntityId(2),
                dealt: 30,
                killed: true
            })
        );
        assert_eq!(ca.pending(), 0);
        ca.handle_call(t1, &mut a, &fb.call).expect("late");
        assert_eq!(ca.poll_event(), Some(CombatEvent::LateFeedback { seq }));
        ct.tick(t0 + Duration::from_millis(p.hit_timeout_ms + 500));
        assert_eq!(ct.resolved(), 0, "resolved entries expire");
        assert_eq!(ct.poll_timeout(), None);
    }
}
