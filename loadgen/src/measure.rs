//! What the bots measure: histograms and counters of one thread for one
//! interval, merged across threads and over time by the main thread.
//!
//! Owns [`Hists`] (hdrhistogram, microseconds), [`Counters`] and
//! [`Interval`] (both for one thread's one-second slice), plus
//! [`Percentiles`] for reports. Plain data: the driver fills it, the report
//! reads it.

use std::collections::BTreeMap;

use hdrhistogram::Histogram;
use serde::Serialize;

use crate::bands::{BandCounts, BandHists};

/// Largest value a histogram records, µs (60 s; larger ones saturate).
pub const HIST_MAX_US: u64 = 60_000_000;
/// Significant figures kept by every histogram.
pub const HIST_SIGFIG: u8 = 3;

/// A new latency histogram (1 µs .. 60 s, 3 significant figures).
pub fn new_hist() -> Histogram<u64> {
    Histogram::new_with_bounds(1, HIST_MAX_US, HIST_SIGFIG).expect("valid histogram bounds")
}

/// Records `us` (clamped into range).
pub fn record(h: &mut Histogram<u64>, us: u64) {
    h.saturating_record(us.clamp(1, HIST_MAX_US));
}

/// The latency histograms.
#[derive(Clone, Debug)]
pub struct Hists {
    /// A mover's input send time to an observer's receipt of that position.
    pub update_latency: Histogram<u64>,
    /// A move's send time to the InputAck covering it.
    pub ack_rtt: Histogram<u64>,
    /// A Hit's send time to its CallResult (or refusing Error).
    pub hit_rtt: Histogram<u64>,
    /// Time between two updates of a bot's own stream.
    pub own_gap: Histogram<u64>,
    /// The largest own-stream gap within the window after a bot crossed
    /// into another cell of the layout (its migration).
    pub migration_gap: Histogram<u64>,
    /// Update latency by distance band.
    pub bands: BandHists,
}

impl Default for Hists {
    fn default() -> Self {
        Hists {
            update_latency: new_hist(),
            ack_rtt: new_hist(),
            hit_rtt: new_hist(),
            own_gap: new_hist(),
            migration_gap: new_hist(),
            bands: BandHists::default(),
        }
    }
}

impl Hists {
    /// Empties every histogram, keeping its memory.
    pub fn clear(&mut self) {
        for h in [
            &mut self.update_latency,
            &mut self.ack_rtt,
            &mut self.hit_rtt,
            &mut self.own_gap,
            &mut self.migration_gap,
        ] {
            h.reset();
        }
        for h in &mut self.bands.latency {
            h.reset();
        }
    }

    /// Adds every sample of `other`.
    pub fn add(&mut self, other: &Hists) {
        let pairs = [
            (&mut self.update_latency, &other.update_latency),
            (&mut self.ack_rtt, &other.ack_rtt),
            (&mut self.hit_rtt, &other.hit_rtt),
            (&mut self.own_gap, &other.own_gap),
            (&mut self.migration_gap, &other.migration_gap),
        ];
        for (a, b) in pairs {
            a.add(b).expect("histograms share their bounds");
        }
        self.bands.add(&other.bands);
    }
}

/// Event counts (per interval; the report sums them).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Counters {
    /// Sessions welcomed.
    pub connects: u64,
    /// Of them, sessions that ran every view check (`--check-fraction`).
    pub connects_checked: u64,
    /// Connections that failed before a Welcome (TCP error, refused login).
    pub connect_failures: u64,
    /// Welcomed sessions that ended before the run did (kick, EOF, error).
    pub disconnects: u64,
    /// Sessions closed by the run's end (Bye).
    pub closed: u64,
    /// Rule violations (session and view).
    pub violations: u64,
    /// The same by rule name (`AfterLeave`, `TruncatedStream`, ...).
    pub violation_kinds: BTreeMap<String, u64>,
    /// Bots welcomed that got no view batch at all over their part of the
    /// steady window (at least [`crate::bot::SILENCE_WINDOW_MIN`] of it).
    pub silent: u64,
    /// Move, Props and MoveProps events of other entities.
    pub updates: u64,
    /// Updates matched to a bot's send time (timed).
    pub updates_timed: u64,
    /// Enter events.
    pub enters: u64,
    /// Leave events.
    pub leaves: u64,
    /// Resync events.
    pub resyncs: u64,
    /// Detail events (level-of-detail catch-ups).
    pub details: u64,
    /// Own-stream events.
    pub own_updates: u64,
    /// View batch frames.
    pub batches: u64,
    /// Bytes received.
    pub bytes_in: u64,
    /// Bytes sent.
    pub bytes_out: u64,
    /// io_uring loop: multishot receives that ended because every
    /// provided buffer was in use, armed again the next round (many:
    /// raise `--uring-buffers`).
    pub recv_rearms: u64,
    /// Moves sent.
    pub moves: u64,
    /// Inputs acknowledged.
    pub acks: u64,
    /// Hits sent.
    pub hits: u64,
    /// Hits that landed.
    pub hits_landed: u64,
    /// Hits that expired.
    pub hits_expired: u64,
    /// Hits refused (CallResult refused, or an Error naming the hit).
    pub hits_refused: u64,
    /// Attack draws that found no visible target within reach.
    pub no_target: u64,
    /// Bots whose tracked cell changed (client-side migration estimate).
    pub crossings: u64,
    /// Migration windows in which a moving bot got no own update at all
    /// after its crossing (the gap outlasted the window; recorded in
    /// `migration_gap` as at least the window, and counted here).
    pub migration_gap_overflow: u64,
    /// Move ticks that found the bot more than a move period late.
    pub late_ticks: u64,
    /// Inputs not sent because the session refused (in-flight bound).
    pub send_refused: u64,
    /// EnterSpace requests sent (scenario `spaces`).
    pub space_requests: u64,
    /// SpaceChanged received.
    pub space_changes: u64,
    /// Sum over move ticks of the entities each bot's view showed.
    pub view_size_sum: u64,
    /// Move ticks that sampled a view size.
    pub view_size_samples: u64,
    /// Updates and shown entities by distance band.
    pub bands: BandCounts,
    /// `Degraded` notices received (the server's budget could not carry a
    /// view).
    pub degraded_notices: u64,
    /// Error frames by rule name, and refused hits by reason
    /// (`hit-refused:REASON`).
    pub errors: BTreeMap<String, u64>,
    /// Session ends by reason (kick code, eof, io error).
    pub disconnect_reasons: BTreeMap<String, u64>,
}

impl Counters {
    /// Adds `other` to `self`.
    pub fn add(&mut self, o: &Counters) {
        let pairs = [
            (&mut self.connects, o.connects),
            (&mut self.connects_checked, o.connects_checked),
            (&mut self.connect_failures, o.connect_failures),
            (&mut self.disconnects, o.disconnects),
            (&mut self.closed, o.closed),
            (&mut self.violations, o.violations),
            (&mut self.silent, o.silent),
            (&mut self.updates, o.updates),
            (&mut self.updates_timed, o.updates_timed),
            (&mut self.enters, o.enters),
            (&mut self.leaves, o.leaves),
            (&mut self.resyncs, o.resyncs),
            (&mut self.details, o.details),
            (&mut self.own_updates, o.own_updates),
            (&mut self.batches, o.batches),
            (&mut self.bytes_in, o.bytes_in),
            (&mut self.bytes_out, o.bytes_out),
            (&mut self.recv_rearms, o.recv_rearms),
            (&mut self.moves, o.moves),
            (&mut self.acks, o.acks),
            (&mut self.hits, o.hits),
            (&mut self.hits_landed, o.hits_landed),
            (&mut self.hits_expired, o.hits_expired),
            (&mut self.hits_refused, o.hits_refused),
            (&mut self.no_target, o.no_target),
            (&mut self.crossings, o.crossings),
            (&mut self.migration_gap_overflow, o.migration_gap_overflow),
            (&mut self.late_ticks, o.late_ticks),
            (&mut self.send_refused, o.send_refused),
            (&mut self.space_requests, o.space_requests),
            (&mut self.space_changes, o.space_changes),
            (&mut self.view_size_sum, o.view_size_sum),
            (&mut self.view_size_samples, o.view_size_samples),
            (&mut self.degraded_notices, o.degraded_notices),
        ];
        self.bands.add(&o.bands);
        for (a, b) in pairs {
            *a += b;
        }
        for (k, v) in &o.violation_kinds {
            *self.violation_kinds.entry(k.clone()).or_default() += v;
        }
        for (k, v) in &o.errors {
            *self.errors.entry(k.clone()).or_default() += v;
        }
        for (k, v) in &o.disconnect_reasons {
            *self.disconnect_reasons.entry(k.clone()).or_default() += v;
        }
    }

    /// Bots connected now, from cumulative counts.
    pub fn connected(&self) -> u64 {
        self.connects
            .saturating_sub(self.disconnects)
            .saturating_sub(self.closed)
    }
}

/// One thread's measurements over one interval.
#[derive(Clone, Debug, Default)]
pub struct Interval {
    /// Latencies.
    pub hists: Hists,
    /// Counts.
    pub counters: Counters,
    /// A few violations described (at most [`VIOLATION_SAMPLES_MAX`] per
    /// interval per thread).
    pub violation_samples: Vec<String>,
}

/// Violations described per thread per interval (the rest are counted).
pub const VIOLATION_SAMPLES_MAX: usize = 4;

impl Interval {
    /// Empties it, keeping the histograms' memory (a fresh [`Interval`]
    /// allocates and faults in about 1.3 MB of counts).
    pub fn clear(&mut self) {
        self.hists.clear();
        self.counters = Counters::default();
        self.violation_samples.clear();
    }

    /// Adds `other` to `self`.
    pub fn add(&mut self, other: &Interval) {
        self.hists.add(&other.hists);
        self.counters.add(&other.counters);
        for s in &other.violation_samples {
            if self.violation_samples.len() < 64 {
                self.violation_samples.push(s.clone());
            }
        }
    }
}

/// Used [`Interval`]s handed back by the main thread for the bot threads
/// to fill again: each thread reports one a second, and a fresh one costs
/// its histograms' memory (allocated, zeroed and faulted in again, since
/// the allocator returns freed pages to the OS). Locked twice a second per
/// thread, never on a bot's path.
#[derive(Debug, Default)]
pub struct IntervalPool {
    spare: std::sync::Mutex<Vec<Interval>>,
}

/// Most intervals an [`IntervalPool`] keeps.
const POOL_MAX: usize = 64;

impl IntervalPool {
    /// A cleared interval: a used one if any, else a new one.
    pub fn take(&self) -> Interval {
        let used = self.spare.lock().ok().and_then(|mut s| s.pop());
        used.unwrap_or_default()
    }

    /// Hands `iv` back (cleared here, by the caller's thread).
    pub fn put(&self, mut iv: Interval) {
        iv.clear();
        if let Ok(mut s) = self.spare.lock() {
            if s.len() < POOL_MAX {
                s.push(iv);
            }
        }
    }
}

/// Percentiles of a histogram, milliseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Percentiles {
    /// Samples.
    pub count: u64,
    /// Median.
    pub p50: f64,
    /// 90th percentile.
    pub p90: f64,
    /// 99th percentile.
    pub p99: f64,
    /// 99.9th percentile.
    pub p999: f64,
    /// Largest.
    pub max: f64,
    /// Mean.
    pub mean: f64,
}

impl Percentiles {
    /// Of a µs histogram, in ms (all zero when empty).
    pub fn of(h: &Histogram<u64>) -> Percentiles {
        if h.is_empty() {
            return Percentiles::default();
        }
        let ms = |us: u64| us as f64 / 1000.0;
        Percentiles {
            count: h.len(),
            p50: ms(h.value_at_quantile(0.5)),
            p90: ms(h.value_at_quantile(0.9)),
            p99: ms(h.value_at_quantile(0.99)),
            p999: ms(h.value_at_quantile(0.999)),
            max: ms(h.max()),
            mean: h.mean() / 1000.0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intervals_merge_histograms_and_counts() {
        let mut a = Interval::default();
        let mut b = Interval::default();
        for us in 1..=1000 {
            record(&mut a.hists.update_latency, us * 1000);
        }
        record(&mut b.hists.update_latency, 5_000_000);
        record(&mut b.hists.update_latency, 100 * HIST_MAX_US);
        a.counters.updates = 3;
        b.counters.updates = 4;
        *b.counters.errors.entry("move-too-fast".into()).or_default() += 2;
        a.add(&b);
        assert_eq!(a.counters.updates, 7);
        assert_eq!(a.counters.errors["move-too-fast"], 2);
        let p = Percentiles::of(&a.hists.update_latency);
        assert_eq!(p.count, 1002);
        assert!((p.p50 - 500.0).abs() < 2.0, "{p:?}");
        assert!(p.max >= 59_000.0 && p.max <= 60_100.0, "{p:?}");
        assert_eq!(Percentiles::of(&new_hist()), Percentiles::default());
    }

    #[test]
    fn connected_is_connects_minus_ends() {
        let c = Counters {
            connects: 10,
            disconnects: 2,
            closed: 3,
            ..Counters::default()
        };
        assert_eq!(c.connected(), 5);
    }
}
