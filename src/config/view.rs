//! The `[view]` section: each client's downstream budget and the distance
//! bands of its view (issue 12; BigWorld's per-client bandwidth scheme).
//!
//! Owns [`ViewConfig`] and its rules; builds the core's
//! [`BudgetParams`](crate::core::view::BudgetParams). Holds no state.

use super::{invalid, ConfigError};
use crate::core::view::budget::{Band, BudgetParams, BANDS_MAX};
use serde::{Deserialize, Serialize};

/// One distance band of `[view]`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BandConfig {
    /// Entities up to this far (ground metres) belong to the band.
    pub to_m: f64,
    /// A moving entity of the band is refreshed at least this often (Hz).
    pub min_hz: f64,
}

/// Each client's downstream budget and view bands.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ViewConfig {
    /// Downstream bytes per second per client (0 = no limit).
    pub client_bytes_per_s_max: u32,
    /// Bytes a client may receive at once above its rate (the bucket).
    pub client_burst_bytes: u32,
    /// A key frame (absolute position) every this many movements of one
    /// entity to one client.
    pub keyframe_every: u16,
    /// Entities the game marks important (target, attackers) gain movement
    /// priority this many times as fast.
    pub important_factor: f64,
    /// Distance bands, nearest first (1 to 4); the last also covers
    /// everything beyond it.
    pub bands: Vec<BandConfig>,
    /// How often each client is sent its view batch, per second (rounded
    /// to a whole number of ticks; at or above the tick rate: every tick).
    pub client_update_hz: f64,
    /// Below the tick rate, whether the clients' updates are spread over
    /// the ticks of an update period (each client at its own phase) or all
    /// sent in one tick of it.
    pub client_phases: ClientPhases,
    /// Levels of detail: a client that has a property's current value keeps
    /// receiving its changes until this many metres beyond its reach.
    pub detail_hysteresis_m: f64,
    /// Band-rate visits: while a client's budget is binding, its update
    /// skips the shown entities it cannot send (farther bands between
    /// their refreshes, below the priority that went), reading nothing of
    /// them; property changes and due movements are never skipped.
    pub band_rate_visits: bool,
}

/// `view.client_phases`: when, within an update period of several ticks,
/// each client's view batch is made and sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ClientPhases {
    /// Each client at its own phase: every tick makes and sends an equal
    /// share of the batches (the smoothest tick).
    Spread,
    /// Every client in the same tick: one burst of sends per update period
    /// (the kernel's cheaper pattern, measured on loopback; that tick does
    /// the whole view work, the others none).
    Aligned,
    /// Each client in the tick its inputs come in (within its period; it
    /// starts spread): the answer to an input leaves in the tick it was
    /// applied.
    Input,
}

impl ClientPhases {
    /// The core's name for it.
    pub fn flush_phases(self) -> crate::core::cell::FlushPhases {
        match self {
            ClientPhases::Spread => crate::core::cell::FlushPhases::Spread,
            ClientPhases::Aligned => crate::core::cell::FlushPhases::Aligned,
            ClientPhases::Input => crate::core::cell::FlushPhases::Input,
        }
    }
}

/// Ticks of `tick_ms` between two view batches of one client at
/// `client_update_hz`: rounded to whole ticks, at least 1 (a rate at or
/// above the tick rate means every tick).
pub fn ticks_per_update(client_update_hz: f64, tick_ms: u64) -> u16 {
    let per_s = 1000.0 / tick_ms.max(1) as f64;
    let every = (per_s / client_update_hz).round();
    if every.is_finite() && every >= 1.0 {
        every.min(f64::from(u16::MAX)) as u16
    } else {
        1
    }
}

/// Band-rate visits' span in flushes of `flush_every_ticks` ticks: a slot
/// is visited at least this often, so the versions a visit takes stay
/// within a ghost's cache of `ghost_cache_max` messages (see
/// [`ViewConfig::visit_span_max`]).
pub fn visit_span(ghost_cache_max: usize, flush_every_ticks: u16) -> u16 {
    let flushes = ghost_cache_max / usize::from(flush_every_ticks.max(1));
    u16::try_from(flushes).unwrap_or(u16::MAX)
}

impl ViewConfig {
    /// The observers' `visit_span_max` (see
    /// [`ObserverParams`](crate::core::view::ObserverParams)): a slot is
    /// visited at least every so many flushes since its last send, so the
    /// versions a visit takes stay within a ghost's cache of
    /// `ghost_cache_max` messages (one flush to spare); 0 when
    /// `band_rate_visits` is off.
    pub fn visit_span_max(&self, ghost_cache_max: usize, flush_every_ticks: u16) -> u16 {
        if !self.band_rate_visits {
            return 0;
        }
        visit_span(ghost_cache_max, flush_every_ticks)
    }

    /// Ticks between two view batches of one client (`client_update_hz`
    /// rounded to whole ticks, at least 1).
    pub fn flush_every_ticks(&self, tick_ms: u64) -> u16 {
        ticks_per_update(self.client_update_hz, tick_ms)
    }

    /// The observers' budget knobs when they are flushed every `tick_ms`
    /// (the flush period: `runtime.tick_ms` times [`Self::flush_every_ticks`]).
    pub fn budget(&self, tick_ms: u64) -> BudgetParams {
        let d = BudgetParams::default();
        let mut bands = [Band {
            to_m: f32::MAX,
            min_hz: 0.0,
        }; BANDS_MAX];
        for (b, c) in bands.iter_mut().zip(&self.bands) {
            *b = Band {
                to_m: c.to_m as f32,
                min_hz: c.min_hz as f32,
            };
        }
        BudgetParams {
            bytes_per_s: self.client_bytes_per_s_max,
            burst_bytes: self.client_burst_bytes,
            tick_ms: u32::try_from(tick_ms).unwrap_or(u32::MAX),
            bands,
            band_count: self.bands.len().min(BANDS_MAX) as u8,
            keyframe_every: self.keyframe_every,
            important_factor: self.important_factor as f32,
            detail_hysteresis_m: self.detail_hysteresis_m as f32,
            ..d
        }
    }

    pub(crate) fn validate(&self, tick_ms: u64) -> Result<(), ConfigError> {
        // Above the tick rate it means every tick (a slower tick set on its
        // own must not make the default invalid).
        if !(self.client_update_hz.is_finite() && self.client_update_hz > 0.0) {
            return Err(invalid(
                "view.client_update_hz",
                self.client_update_hz,
                "must be a finite number > 0",
            ));
        }
        let flush_ms = tick_ms * u64::from(self.flush_every_ticks(tick_ms));
        if self.bands.is_empty() || self.bands.len() > BANDS_MAX {
            return Err(invalid(
                "view.bands",
                self.bands.len(),
                format!("between 1 and {BANDS_MAX} bands"),
            ));
        }
        for (i, b) in self.bands.iter().enumerate() {
            if !(b.to_m.is_finite() && b.to_m > 0.0) {
                return Err(invalid(
                    format!("view.bands[{i}].to_m"),
                    b.to_m,
                    "must be a finite number > 0",
                ));
            }
            if !(b.min_hz.is_finite() && b.min_hz >= 0.0) {
                return Err(invalid(
                    format!("view.bands[{i}].min_hz"),
                    b.min_hz,
                    "must be a finite number >= 0",
                ));
            }
            if b.min_hz > self.client_update_hz {
                return Err(invalid(
                    format!("view.bands[{i}].min_hz"),
                    b.min_hz,
                    format!(
                        "must be <= view.client_update_hz = {}",
                        self.client_update_hz
                    ),
                ));
            }
            if i > 0 && self.bands[i - 1].to_m >= b.to_m {
                return Err(invalid(
                    format!("view.bands[{i}].to_m"),
                    b.to_m,
                    "bands must be in increasing to_m",
                ));
            }
        }
        if self.client_bytes_per_s_max > 0 && self.client_burst_bytes == 0 {
            return Err(invalid(
                "view.client_burst_bytes",
                0,
                "must be > 0 when client_bytes_per_s_max is set",
            ));
        }
        if self.keyframe_every == 0 {
            return Err(invalid("view.keyframe_every", 0, "must be >= 1"));
        }
        if !(self.important_factor.is_finite() && self.important_factor >= 1.0) {
            return Err(invalid(
                "view.important_factor",
                self.important_factor,
                "must be a finite number >= 1",
            ));
        }
        if !(self.detail_hysteresis_m.is_finite() && self.detail_hysteresis_m >= 0.0) {
            return Err(invalid(
                "view.detail_hysteresis_m",
                self.detail_hysteresis_m,
                "must be a finite number >= 0",
            ));
        }
        self.budget(flush_ms)
            .validate()
            .map_err(|(key, rule)| invalid(key, "?", rule))
    }
}
