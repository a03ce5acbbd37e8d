//! One client's downstream budget and the priority of its movements
//! (BigWorld's per-client bandwidth scheme, with distance bands).
//!
//! Owns [`BudgetParams`] (the `[view]` knobs an observer needs), [`Band`]
//! and [`Pacer`], a token bucket in bytes refilled once per tick. Holds no
//! view state: the observer asks which band a distance falls in, how often
//! that band must be refreshed and how much it may still spend, and tells
//! the pacer what it spent. Nothing here knows of handles or the wire.
//!
//! # The scheme
//! Every tick the bucket gains `bytes_per_s * tick` bytes, up to
//! `burst_bytes`. What must never bend (enters, leaves, resyncs, property
//! changes, the own entity, the batch frame and the input acknowledgement)
//! is charged whatever the balance, so the bucket may go into debt. Then
//! coalesced movements are sent: first the nearest band's (never held: the
//! entities a player interacts with stay smooth) and those whose band's
//! minimum rate is due while the debt is under half a burst (neither in
//! degraded mode), then the rest by
//! priority (grown at each of the client's flushes by [`weight`], reset
//! when sent) while the
//! balance lasts. A client whose bucket stays in debt beyond one burst for
//! [`DEGRADE_MS`] is *degraded* (told by a `Degraded` event): the bands
//! lose their minimum rates (the nearest entities still come first, by
//! priority, within the budget) until the bucket has been positive for
//! [`RECOVER_MS`]. Both count the client's flushes (its `tick_ms` is the
//! flush period), so they hold in time at any update rate.

use crate::core::entity::{Detail, EntityType};

/// Most distance bands.
pub const BANDS_MAX: usize = 4;
const _: () = assert!(BANDS_MAX == crate::core::entity::schema::DETAIL_BANDS_MAX as usize);

/// How long a client's bucket stays in debt beyond one burst before it is
/// degraded (the burst of enters at a login or a teleport is not an
/// overload), milliseconds.
pub const DEGRADE_MS: u32 = 1_000;

/// How long its balance stays positive before it recovers, milliseconds.
pub const RECOVER_MS: u32 = 500;

/// The deepest debt, in bursts: what a burst of never-bend events costs
/// beyond it is forgiven, so a client recovers within about a second of
/// the burst (2 bursts at 2,500 B/s: 0.8 s).
pub const DEBT_BURSTS_MAX: f64 = 2.0;

/// One distance band: entities up to `to_m` away are refreshed at least
/// `min_hz` times a second (when they move).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Band {
    /// Upper distance of the band (ground metres).
    pub to_m: f32,
    /// Least refresh rate of a moving entity in the band.
    pub min_hz: f32,
}

/// The budget knobs of one observer (config `[view]`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BudgetParams {
    /// Downstream bytes per second per client; 0 = no limit (every movement
    /// goes out in the tick it arrives).
    pub bytes_per_s: u32,
    /// Most bytes the bucket holds (the burst).
    pub burst_bytes: u32,
    /// The tick period the observer is flushed at.
    pub tick_ms: u32,
    /// Distance bands, nearest first; entities beyond the last band use it.
    pub bands: [Band; BANDS_MAX],
    /// Bands in use (1..=[`BANDS_MAX`]).
    pub band_count: u8,
    /// A key frame (absolute position) every this many movements of one
    /// entity to one client.
    pub keyframe_every: u16,
    /// Bytes the transport adds per batch (ViewBatch frame header and tick).
    pub frame_bytes: u16,
    /// Bytes charged for the input acknowledgement of a tick in which the
    /// own entity changed (one InputAck frame).
    pub ack_bytes: u16,
    /// Priority factor of entities the game marked important.
    pub important_factor: f32,
    /// Levels of detail: a client that has a property's current value
    /// keeps receiving its changes until this far beyond the property's
    /// reach (config `view.detail_hysteresis_m`).
    pub detail_hysteresis_m: f32,
}

impl Default for BudgetParams {
    fn default() -> Self {
        let band = |to_m, min_hz| Band { to_m, min_hz };
        BudgetParams {
            bytes_per_s: 2_500,
            burst_bytes: 1_000,
            tick_ms: 50,
            bands: [
                band(15.0, 10.0),
                band(30.0, 5.0),
                band(1.0e6, 2.0),
                band(1.0e6, 2.0),
            ],
            band_count: 3,
            keyframe_every: 64,
            frame_bytes: 16,
            ack_bytes: 16,
            important_factor: 4.0,
            detail_hysteresis_m: 2.0,
        }
    }
}

impl BudgetParams {
    /// True when the budget paces anything.
    pub fn limited(&self) -> bool {
        self.bytes_per_s > 0
    }

    /// The band of an entity `dist_m` away (the last band beyond it).
    pub fn band_of(&self, dist_m: f64) -> usize {
        let n = usize::from(self.band_count.clamp(1, BANDS_MAX as u8));
        self.bands[..n]
            .iter()
            .position(|b| dist_m <= f64::from(b.to_m))
            .unwrap_or(n - 1)
    }

    /// How far (ground metres) a property of level `detail` reaches: a
    /// band's `to_m`, unbounded for the last band (or one beyond it).
    pub fn reach_m(&self, detail: Detail) -> f64 {
        match detail {
            Detail::Band(b) => {
                let n = usize::from(self.band_count.clamp(1, BANDS_MAX as u8));
                if usize::from(b) + 1 >= n {
                    f64::INFINITY
                } else {
                    f64::from(self.bands[usize::from(b)].to_m)
                }
            }
            Detail::WithinM(m) => f64::from(m),
        }
    }

    /// The properties of `ty` with a level of detail that a client `dist_m`
    /// from the entity is beyond by more than `slack_m`.
    pub fn beyond(&self, ty: &EntityType, dist_m: f64, slack_m: f64) -> u64 {
        let mut bits = ty.detail_mask();
        let mut out = 0;
        while bits != 0 {
            let i = bits.trailing_zeros() as usize;
            bits &= bits - 1;
            let d = ty.props()[i].detail.expect("in the detail mask");
            if dist_m > self.reach_m(d) + slack_m {
                out |= 1 << i;
            }
        }
        out
    }

    /// The farthest reach (ground metres) among the properties of `ty` in
    /// `bits`: beyond it, [`BudgetParams::beyond`] with no slack holds every
    /// one of them (0 for none).
    pub fn reach_of(&self, ty: &EntityType, bits: u64) -> f64 {
        let mut bits = bits & ty.detail_mask();
        let mut reach = 0.0f64;
        while bits != 0 {
            let i = bits.trailing_zeros() as usize;
            bits &= bits - 1;
            let d = ty.props()[i].detail.expect("in the detail mask");
            reach = reach.max(self.reach_m(d));
        }
        reach
    }

    /// Flushes (of `tick_ms`) in `ms`, rounded up, at least 1.
    pub fn flushes_in(&self, ms: u32) -> u16 {
        let n = ms.div_ceil(self.tick_ms.max(1)).max(1);
        u16::try_from(n).unwrap_or(u16::MAX)
    }

    /// Ticks between two refreshes at `band`'s minimum rate (at least 1).
    pub fn interval_ticks(&self, band: usize) -> u16 {
        let hz = f64::from(self.bands[band].min_hz);
        if hz.is_nan() || hz <= 0.0 {
            return u16::MAX;
        }
        let ticks = 1000.0 / hz / f64::from(self.tick_ms.max(1));
        // A little slack so a mover whose updates land one tick late is
        // still refreshed at its own rate.
        (crate::core::geom::round_i64(ticks).clamp(0, i64::from(u16::MAX)) as u16).max(1)
    }

    /// Checks the knobs, naming the first bad one.
    ///
    /// # Errors
    /// `(key, reason)`.
    pub fn validate(&self) -> Result<(), (&'static str, &'static str)> {
        let n = usize::from(self.band_count);
        if !(1..=BANDS_MAX).contains(&n) {
            return Err(("view.bands", "between 1 and 4 bands"));
        }
        let bands = &self.bands[..n];
        if bands.iter().any(|b| {
            !(b.to_m.is_finite() && b.to_m > 0.0 && b.min_hz.is_finite() && b.min_hz >= 0.0)
        }) {
            return Err(("view.bands", "to_m must be finite and > 0, min_hz >= 0"));
        }
        if bands.windows(2).any(|w| w[0].to_m >= w[1].to_m) {
            return Err(("view.bands", "to_m must increase"));
        }
        if self.limited() && self.burst_bytes == 0 {
            return Err(("view.client_burst_bytes", "must be > 0"));
        }
        if self.keyframe_every == 0 {
            return Err(("view.keyframe_every", "must be > 0"));
        }
        if self.tick_ms == 0 {
            return Err(("runtime.tick_ms", "must be > 0"));
        }
        if !(self.important_factor.is_finite() && self.important_factor >= 1.0) {
            return Err(("view.important_factor", "must be finite and >= 1"));
        }
        if !(self.detail_hysteresis_m.is_finite() && self.detail_hysteresis_m >= 0.0) {
            return Err(("view.detail_hysteresis_m", "must be finite and >= 0"));
        }
        Ok(())
    }
}

/// Priority an entity `dist_m` away gains per tick: 1 at 0-5 m, falling as
/// 5 / distance (so a 45 m entity gains a ninth of a near one's).
pub fn weight(dist_m: f64) -> f32 {
    (WEIGHT_FULL_M / dist_m.max(WEIGHT_FULL_M)) as f32
}

/// Within this distance an entity gains the full weight, 1 a tick.
const WEIGHT_FULL_M: f64 = 5.0;

/// [`BudgetParams::band_of`] and [`weight`] for a squared ground distance
/// in some unit (`per_m` units to the metre), worked out once per flush so
/// the per-entity step needs no division and at most one `f32` square root
/// (the paced flush runs it for every pending movement of every client).
#[derive(Clone, Copy, Debug)]
pub struct Ranks {
    /// Each band's `to_m`, squared, in units².
    band_to2: [f64; BANDS_MAX],
    bands: usize,
    /// `WEIGHT_FULL_M`, in units.
    full: f32,
    full2: f64,
}

impl Ranks {
    /// The ranks of `p`'s bands for distances in units of `1 / per_m` metres.
    pub fn new(p: &BudgetParams, per_m: f64) -> Self {
        let bands = usize::from(p.band_count.clamp(1, BANDS_MAX as u8));
        let full = WEIGHT_FULL_M * per_m;
        Self {
            band_to2: std::array::from_fn(|b| {
                let to = f64::from(p.bands[b].to_m) * per_m;
                to * to
            }),
            bands,
            full: full as f32,
            full2: full * full,
        }
    }

    /// The band of an entity `d2` (squared units) away: as `band_of`.
    ///
    /// Counted, not searched: the bands beyond whose reach `d2` lies (the
    /// reaches increase, `BudgetParams::validate`), every threshold
    /// compared with no branch, so the rank of each slot of a flush does
    /// not stake a misprediction on where its entity stands.
    #[inline]
    pub fn band(&self, d2: f64) -> usize {
        let mut band = 0;
        for k in 0..BANDS_MAX - 1 {
            band += usize::from((k + 1 < self.bands) & (d2 > self.band_to2[k]));
        }
        debug_assert_eq!(
            band,
            (self.band_to2[..self.bands].iter())
                .position(|&to2| d2 <= to2)
                .unwrap_or(self.bands - 1),
            "the bands' reaches increase"
        );
        band
    }

    /// The weight of an entity `d2` (squared units) away: as `weight`,
    /// within an `f32` rounding.
    #[inline]
    pub fn weight(&self, d2: f64) -> f32 {
        if d2 <= self.full2 {
            1.0
        } else {
            self.full / (d2 as f32).sqrt()
        }
    }
}

/// One client's token bucket (see the module doc).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Pacer {
    tokens: f64,
    degraded: bool,
    over_ticks: u16,
    ok_ticks: u16,
}

impl Pacer {
    /// Adds one tick's bytes (capped at the burst).
    pub fn refill(&mut self, p: &BudgetParams) {
        let gain = f64::from(p.bytes_per_s) * f64::from(p.tick_ms) / 1000.0;
        self.tokens = (self.tokens + gain).min(f64::from(p.burst_bytes));
    }

    /// Spends `bytes` (may go into debt; the debt is bounded so a long
    /// overload does not starve the client for ever after).
    pub fn charge(&mut self, p: &BudgetParams, bytes: usize) {
        let floor = -DEBT_BURSTS_MAX * f64::from(p.burst_bytes);
        self.tokens = (self.tokens - bytes as f64).max(floor);
    }

    /// The balance, bytes.
    pub fn tokens(&self) -> f64 {
        self.tokens
    }

    /// True while degraded.
    pub fn degraded(&self) -> bool {
        self.degraded
    }

    /// Ends a flush: `Some(on)` when the degraded state changes.
    pub fn end_tick(&mut self, p: &BudgetParams) -> Option<bool> {
        if self.tokens < -f64::from(p.burst_bytes) {
            self.over_ticks = self.over_ticks.saturating_add(1);
            self.ok_ticks = 0;
        } else if self.tokens > 0.0 {
            self.ok_ticks = self.ok_ticks.saturating_add(1);
            self.over_ticks = 0;
        }
        if !self.degraded && self.over_ticks >= p.flushes_in(DEGRADE_MS) {
            self.degraded = true;
            return Some(true);
        }
        if self.degraded && self.ok_ticks >= p.flushes_in(RECOVER_MS) {
            self.degraded = false;
            return Some(false);
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bands_and_intervals_follow_the_knobs() {
        let p = BudgetParams::default();
        assert_eq!(p.band_of(0.0), 0);
        assert_eq!(p.band_of(15.0), 0);
        assert_eq!(p.band_of(15.1), 1);
        assert_eq!(p.band_of(44.0), 2);
        assert_eq!(p.band_of(1.0e9), 2, "beyond the last band: the last");
        assert_eq!(p.interval_ticks(0), 2, "10 Hz at 50 ms ticks");
        assert_eq!(p.interval_ticks(2), 10, "2 Hz");
        assert!(weight(1.0) > weight(20.0));
        p.validate().expect("defaults validate");
    }

    proptest::proptest! {
        /// The flush's squared-distance ranks pick the band `band_of` picks
        /// and a weight within an `f32` rounding of `weight`'s, for any
        /// distance in wire units (centimetres) and any band count.
        #[test]
        fn ranks_agree_with_band_of_and_weight(
            units in 0u32..2_000_000,
            count in 1u8..=BANDS_MAX as u8,
        ) {
            let p = BudgetParams { band_count: count, ..BudgetParams::default() };
            let ranks = Ranks::new(&p, 100.0);
            let d = f64::from(units);
            let dist_m = d / 100.0;
            proptest::prop_assert_eq!(ranks.band(d * d), p.band_of(dist_m));
            let (fast, slow) = (ranks.weight(d * d), weight(dist_m));
            proptest::prop_assert!((fast - slow).abs() <= 2.0 * f32::EPSILON * slow);
        }
    }

    #[test]
    fn ranks_meet_band_edges_exactly() {
        let p = BudgetParams::default();
        let ranks = Ranks::new(&p, 100.0);
        for (m, band) in [
            (0.0, 0),
            (15.0, 0),
            (15.01, 1),
            (30.0, 1),
            (30.01, 2),
            (1.0e6, 2),
        ] {
            let u: f64 = m * 100.0;
            assert_eq!(ranks.band(u * u), band, "{m} m");
        }
        assert_eq!(ranks.weight(0.0), 1.0);
        assert_eq!(ranks.weight(500.0 * 500.0), 1.0, "5 m: the full weight");
        assert!(
            (ranks.weight(4500.0 * 4500.0) - 1.0 / 9.0).abs() < 1e-6,
            "45 m: a ninth"
        );
    }

    #[test]
    fn bad_knobs_are_named() {
        let mut p = BudgetParams::default();
        p.bands[1].to_m = 10.0;
        assert_eq!(p.validate().unwrap_err().0, "view.bands");
        let p = BudgetParams {
            band_count: 0,
            ..BudgetParams::default()
        };
        assert_eq!(p.validate().unwrap_err().0, "view.bands");
        let p = BudgetParams {
            burst_bytes: 0,
            ..BudgetParams::default()
        };
        assert_eq!(p.validate().unwrap_err().0, "view.client_burst_bytes");
        let p = BudgetParams {
            keyframe_every: 0,
            ..BudgetParams::default()
        };
        assert_eq!(p.validate().unwrap_err().0, "view.keyframe_every");
        let p = BudgetParams {
            detail_hysteresis_m: -1.0,
            ..BudgetParams::default()
        };
        assert_eq!(p.validate().unwrap_err().0, "view.detail_hysteresis_m");
    }

    #[test]
    fn detail_levels_reach_their_band() {
        use crate::core::entity::{TypeRegistry, AVATAR};
        let p = BudgetParams::default();
        assert_eq!(p.reach_m(Detail::Band(0)), 15.0);
        assert_eq!(p.reach_m(Detail::Band(1)), 30.0);
        assert_eq!(p.reach_m(Detail::Band(2)), f64::INFINITY, "the last band");
        assert_eq!(p.reach_m(Detail::Band(3)), f64::INFINITY);
        assert_eq!(p.reach_m(Detail::WithinM(7.5)), 7.5);
        let reg = TypeRegistry::with_builtins();
        let ty = reg.get(AVATAR).expect("avatar");
        let (hp, buffs) = (1 << ty.prop_index("hp").expect("hp"), 1 << 5);
        assert_eq!(p.beyond(ty, 10.0, 0.0), 0);
        assert_eq!(p.beyond(ty, 15.5, 0.0), buffs);
        assert_eq!(p.beyond(ty, 15.5, 1.0), 0, "within the slack");
        assert_eq!(p.beyond(ty, 31.0, 0.0), buffs | hp);
    }

    #[test]
    fn the_bucket_refills_to_the_burst_and_degrades_under_debt() {
        let p = BudgetParams::default();
        let mut b = Pacer::default();
        for _ in 0..100 {
            b.refill(&p);
        }
        assert_eq!(b.tokens(), f64::from(p.burst_bytes));
        let mut changes = Vec::new();
        for _ in 0..2 * p.flushes_in(DEGRADE_MS) {
            b.refill(&p);
            b.charge(&p, 3_000);
            changes.extend(b.end_tick(&p));
        }
        assert_eq!(changes, [true], "degraded once");
        assert!(b.degraded());
        assert!(
            b.tokens() >= -DEBT_BURSTS_MAX * f64::from(p.burst_bytes),
            "debt bounded"
        );
        for _ in 0..200 {
            b.refill(&p);
            changes.extend(b.end_tick(&p));
        }
        assert_eq!(changes, [true, false], "recovers once the bucket refills");
    }

    /// Degradation and recovery take the same time at any update rate: the
    /// pacer counts flushes of `tick_ms` (the flush period), not ticks.
    #[test]
    fn degradation_holds_in_time_at_any_update_rate() {
        for (flush_ms, degrade_at, recover_at) in [(50, 20, 10), (100, 10, 5), (30, 34, 17)] {
            let p = BudgetParams {
                tick_ms: flush_ms,
                ..BudgetParams::default()
            };
            let mut b = Pacer::default();
            let mut flushes = 0u16;
            let degraded_after = loop {
                b.refill(&p);
                b.charge(&p, 10_000);
                flushes += 1;
                if b.end_tick(&p) == Some(true) {
                    break flushes;
                }
                assert!(flushes < 1_000, "never degraded");
            };
            assert_eq!(degraded_after, degrade_at, "{flush_ms} ms flushes");
            // Out of debt: refill until positive, then count.
            let mut positive = 0u16;
            let recovered_after = loop {
                b.refill(&p);
                b.refill(&p);
                let change = b.end_tick(&p);
                if b.tokens() > 0.0 {
                    positive += 1;
                }
                if change == Some(false) {
                    break positive;
                }
                assert!(positive < 1_000, "never recovered");
            };
            assert_eq!(recovered_after, recover_at, "{flush_ms} ms flushes");
        }
    }
}
