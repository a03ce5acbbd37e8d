//! Per-shard metrics, and their rendering in the Prometheus/OpenMetrics text
//! format.
//!
//! # Who writes, who reads
//!
//! Each shard owns one [`ShardStats`] (behind an `Arc`) and is its only
//! writer; the admin thread only reads it at scrape time.
//! - Counters and levels are relaxed atomics: one uncontended atomic add per
//!   event kind per tick, never per message.
//! - Histograms (hdrhistogram, microseconds) are recorded into shard-local
//!   [`LocalHists`] with no synchronisation at all, and folded into the shared
//!   copy every `runtime.metrics_publish_ticks` ticks with `try_lock`: a shard
//!   never waits for a scrape (if the admin thread holds the lock, the shard
//!   keeps its samples and publishes them next time).
//!
//! # What is exported
//!
//! - `tessera_shard_<counter>_total{shard}` for every [`Count`];
//! - `tessera_shard_<level>{shard}` for every [`Level`];
//! - `tessera_tick_phase_seconds{phase}`: a histogram with buckets, aggregated
//!   across shards (the phases are `tick`, `drain`, `app`, `flush`);
//! - `tessera_tick_phase_quantile_seconds{shard,phase,quantile}`: per-shard
//!   quantiles read off the hdrhistograms (summaries, as gauges);
//! - `tessera_mesh_inbound_queued_batches`: histogram of the batches found
//!   waiting in a shard's inbound queues at each drain, aggregated;
//! - `tessera_app_<name>{shard}`: what the application reports through
//!   [`MetricSink`] (the contract's side, in `crate::shard`).
//!
//! The names of the counters and levels are the shard contract's
//! ([`crate::shard::counters`]). Owns metric storage and encoding; it must
//! not touch queues or sockets.

use crate::core::ids::ShardId;
use hdrhistogram::Histogram;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, NoLabelSet};
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crate::shard::counters::{Count, Level, COUNTS, LEVELS};
use crate::shard::metric_sink::{AppMetric, MetricSink};

/// Histograms every shard records (values in microseconds, or counts).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(usize)]
pub enum Hist {
    /// Whole tick work (drain + app + flush), µs.
    Tick,
    /// Draining inbound queues, µs.
    Drain,
    /// The application's `on_tick`, µs.
    App,
    /// Flushing the outbox into queues, µs.
    Flush,
    /// Batches waiting in inbound queues at a drain.
    InboundQueued,
    /// One pump of the client socket loop (reads, accepts, writes), µs;
    /// outside the tick's phases.
    ClientIo,
}

const HISTS: usize = 6;
const PHASES: [(Hist, &str); 5] = [
    (Hist::Tick, "tick"),
    (Hist::Drain, "drain"),
    (Hist::App, "app"),
    (Hist::Flush, "flush"),
    (Hist::ClientIo, "client_io"),
];
/// Largest recorded value: 60 s in µs; longer samples saturate.
const HIST_MAX: u64 = 60_000_000;
/// Bucket bounds of the exported phase histograms, µs.
const PHASE_BUCKETS_US: [u64; 15] = [
    50, 100, 250, 500, 1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000, 500_000,
    1_000_000, 10_000_000,
];
const QUEUE_BUCKETS: [u64; 9] = [0, 1, 2, 4, 8, 16, 64, 256, 1024];
const QUANTILES: [(f64, &str); 4] = [(0.5, "0.5"), (0.99, "0.99"), (0.999, "0.999"), (1.0, "1")];

fn new_hists() -> [Histogram<u64>; HISTS] {
    std::array::from_fn(|_| Histogram::new_with_bounds(1, HIST_MAX, 2).expect("valid bounds"))
}

/// The metrics of one shard, written by that shard only.
#[derive(Debug)]
pub struct ShardStats {
    shard: ShardId,
    counts: [AtomicU64; COUNTS.len()],
    levels: [AtomicU64; LEVELS.len()],
    hists: Mutex<[Histogram<u64>; HISTS]>,
    app: Mutex<Vec<AppMetric>>,
}

impl ShardStats {
    pub(crate) fn new(shard: ShardId) -> ShardStats {
        ShardStats {
            shard,
            counts: std::array::from_fn(|_| AtomicU64::new(0)),
            levels: std::array::from_fn(|_| AtomicU64::new(0)),
            hists: Mutex::new(new_hists()),
            app: Mutex::new(Vec::new()),
        }
    }

    /// The shard these figures belong to.
    pub fn shard(&self) -> ShardId {
        self.shard
    }

    /// A counter's current value.
    pub fn count(&self, c: Count) -> u64 {
        self.counts[c as usize].load(Ordering::Relaxed)
    }

    /// A level's current value.
    pub fn level(&self, l: Level) -> u64 {
        self.levels[l as usize].load(Ordering::Relaxed)
    }

    /// The value at quantile `q` (0..=1) of a published histogram.
    pub fn quantile(&self, h: Hist, q: f64) -> u64 {
        self.lock_hists()[h as usize].value_at_quantile(q)
    }

    /// Samples in a published histogram.
    pub fn samples(&self, h: Hist) -> u64 {
        self.lock_hists()[h as usize].len()
    }

    /// The application metrics last published.
    pub fn app_metrics(&self) -> Vec<AppMetric> {
        self.app.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    pub(crate) fn add(&self, c: Count, n: u64) {
        if n != 0 {
            self.counts[c as usize].fetch_add(n, Ordering::Relaxed);
        }
    }

    pub(crate) fn set(&self, l: Level, v: u64) {
        self.levels[l as usize].store(v, Ordering::Relaxed);
    }

    fn lock_hists(&self) -> std::sync::MutexGuard<'_, [Histogram<u64>; HISTS]> {
        // A poisoned lock only means a panic elsewhere; the data is plain.
        self.hists.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Folds `local` into the shared histograms if the lock is free now;
    /// `local` is reset when it was published. Never blocks.
    pub(crate) fn try_publish(&self, local: &mut LocalHists) -> bool {
        let Ok(mut shared) = self.hists.try_lock() else {
            return false;
        };
        for (s, l) in shared.iter_mut().zip(local.hists.iter_mut()) {
            s.add(&*l).expect("same bounds");
            l.reset();
        }
        true
    }

    /// Replaces the published application metrics (never blocks).
    pub(crate) fn try_publish_app(&self, sink: &mut MetricSink) {
        if let Ok(mut app) = self.app.try_lock() {
            sink.swap_items(&mut app);
        }
        sink.clear();
    }
}

/// Histograms recorded by a shard between two publications.
#[derive(Debug)]
pub(crate) struct LocalHists {
    hists: [Histogram<u64>; HISTS],
}

impl LocalHists {
    pub(crate) fn new() -> LocalHists {
        LocalHists { hists: new_hists() }
    }

    pub(crate) fn record(&mut self, h: Hist, value: u64) {
        self.hists[h as usize].saturating_record(value.min(HIST_MAX));
    }

    /// The value at quantile `q` of what `h` recorded since it was last
    /// published (0 if nothing).
    pub(crate) fn quantile(&self, h: Hist, q: f64) -> u64 {
        self.hists[h as usize].value_at_quantile(q)
    }
}

/// Renders the metrics of `shards` as OpenMetrics text (which Prometheus
/// scrapes), ending with `# EOF`.
pub fn render(shards: &[Arc<ShardStats>]) -> String {
    let mut registry = Registry::default();
    registry.register_collector(Box::new(MeshCollector {
        shards: shards.to_vec(),
    }));
    let mut out = String::with_capacity(16 * 1024);
    prometheus_client::encoding::text::encode(&mut out, &registry).expect("writing to a String");
    out
}

#[derive(Debug)]
struct MeshCollector {
    shards: Vec<Arc<ShardStats>>,
}

fn shard_label(s: &ShardStats) -> String {
    s.shard.index.to_string()
}

impl Collector for MeshCollector {
    fn encode(&self, mut enc: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        for (c, name, help) in COUNTS {
            let name = format!("tessera_shard_{name}");
            let mut m = enc.encode_descriptor(&name, help, None, MetricType::Counter)?;
            for s in &self.shards {
                let label = [("shard", shard_label(s))];
                m.encode_family(&label)?
                    .encode_counter::<NoLabelSet, _, u64>(&s.count(c), None)?;
            }
        }
        for (l, name, help) in LEVELS {
            let name = format!("tessera_shard_{name}");
            let mut m = enc.encode_descriptor(&name, help, None, MetricType::Gauge)?;
            for s in &self.shards {
                let label = [("shard", shard_label(s))];
                m.encode_family(&label)?.encode_gauge(&s.level(l))?;
            }
        }
        let snaps: Vec<[Histogram<u64>; HISTS]> =
            self.shards.iter().map(|s| s.lock_hists().clone()).collect();
        self.encode_histograms(&mut enc, &snaps)?;
        self.encode_quantiles(&mut enc, &snaps)?;
        self.encode_app(&mut enc)
    }
}

impl MeshCollector {
    fn encode_histograms(
        &self,
        enc: &mut DescriptorEncoder,
        snaps: &[[Histogram<u64>; HISTS]],
    ) -> Result<(), std::fmt::Error> {
        let merged = |h: Hist| {
            let mut all = Histogram::<u64>::new_with_bounds(1, HIST_MAX, 2).expect("bounds");
            for s in snaps {
                all.add(&s[h as usize]).expect("same bounds");
            }
            all
        };
        let mut m = enc.encode_descriptor(
            "tessera_tick_phase_seconds",
            "Time of each tick phase, all shards",
            None,
            MetricType::Histogram,
        )?;
        for (h, phase) in PHASES {
            let all = merged(h);
            let buckets = buckets(&all, &PHASE_BUCKETS_US, 1e-6);
            let sum = all.mean() * all.len() as f64 * 1e-6;
            m.encode_family(&[("phase", phase)])?
                .encode_histogram::<NoLabelSet>(sum, all.len(), &buckets, None)?;
        }
        let all = merged(Hist::InboundQueued);
        let buckets = buckets(&all, &QUEUE_BUCKETS, 1.0);
        let sum = all.mean() * all.len() as f64;
        enc.encode_descriptor(
            "tessera_mesh_inbound_queued_batches",
            "Batches waiting in a shard's inbound queues at each drain, all shards",
            None,
            MetricType::Histogram,
        )?
        .encode_histogram::<NoLabelSet>(sum, all.len(), &buckets, None)
    }

    fn encode_quantiles(
        &self,
        enc: &mut DescriptorEncoder,
        snaps: &[[Histogram<u64>; HISTS]],
    ) -> Result<(), std::fmt::Error> {
        let mut m = enc.encode_descriptor(
            "tessera_tick_phase_quantile_seconds",
            "Quantiles of each tick phase per shard, since start",
            None,
            MetricType::Gauge,
        )?;
        for (s, snap) in self.shards.iter().zip(snaps) {
            let shard = shard_label(s);
            for (h, phase) in PHASES {
                for (q, qname) in QUANTILES {
                    let v = snap[h as usize].value_at_quantile(q) as f64 * 1e-6;
                    let labels = [
                        ("shard", shard.as_str()),
                        ("phase", phase),
                        ("quantile", qname),
                    ];
                    m.encode_family(&labels)?.encode_gauge(&v)?;
                }
            }
        }
        Ok(())
    }

    fn encode_app(&self, enc: &mut DescriptorEncoder) -> Result<(), std::fmt::Error> {
        // Group by name across shards: one descriptor per metric name.
        let mut all: Vec<(String, AppMetric)> = Vec::new();
        for s in &self.shards {
            all.extend(s.app_metrics().into_iter().map(|m| (shard_label(s), m)));
        }
        all.sort_by(|a, b| a.1.name.cmp(b.1.name));
        for group in all.chunk_by(|a, b| a.1.name == b.1.name) {
            let first = &group[0].1;
            let name = format!("tessera_app_{}", first.name);
            let kind = if first.counter {
                MetricType::Counter
            } else {
                MetricType::Gauge
            };
            let mut m = enc.encode_descriptor(&name, first.help, None, kind)?;
            for (shard, metric) in group {
                let labels = [("shard", shard.as_str())];
                let mut f = m.encode_family(&labels)?;
                if first.counter {
                    f.encode_counter::<NoLabelSet, _, u64>(&metric.value, None)?;
                } else {
                    f.encode_gauge(&metric.value)?;
                }
            }
        }
        Ok(())
    }
}

/// Cumulative bucket counts of `h` at `bounds` (in the histogram's unit),
/// with the bounds scaled by `scale` for export; `+Inf` is added by the
/// encoder from the total count.
fn buckets(h: &Histogram<u64>, bounds: &[u64], scale: f64) -> Vec<(f64, u64)> {
    let mut out: Vec<(f64, u64)> = bounds
        .iter()
        .map(|&b| (b as f64 * scale, h.count_between(0, b)))
        .collect();
    out.push((f64::INFINITY, h.len()));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_and_histograms_render() {
        let a = Arc::new(ShardStats::new(ShardId::local(0)));
        let b = Arc::new(ShardStats::new(ShardId::local(1)));
        a.add(Count::Ticks, 3);
        b.add(Count::Stalls, 1);
        let mut local = LocalHists::new();
        for us in [100, 200, 30_000] {
            local.record(Hist::Tick, us);
        }
        assert!(a.try_publish(&mut local));
        assert_eq!(a.samples(Hist::Tick), 3);
        let mut sink = MetricSink::default();
        sink.gauge("entities", "Entities on the shard", 42);
        b.try_publish_app(&mut sink);
        let text = render(&[a, b]);
        for needle in [
            "tessera_shard_ticks_total{shard=\"0\"} 3",
            "tessera_shard_stalls_total{shard=\"1\"} 1",
            "tessera_tick_phase_seconds_count{phase=\"tick\"} 3",
            "tessera_tick_phase_quantile_seconds{shard=\"0\",phase=\"tick\",quantile=\"1\"}",
            "tessera_app_entities{shard=\"1\"} 42",
            "# EOF",
        ] {
            assert!(text.contains(needle), "missing {needle} in\n{text}");
        }
    }

    #[test]
    fn the_local_window_holds_only_what_was_not_published_yet() {
        let a = ShardStats::new(ShardId::local(0));
        let mut local = LocalHists::new();
        local.record(Hist::Tick, 90_000);
        assert!(a.try_publish(&mut local));
        assert_eq!(local.quantile(Hist::Tick, 0.99), 0, "reset by the publish");
        for us in [1_000, 2_000, 3_000] {
            local.record(Hist::Tick, us);
        }
        let p99 = local.quantile(Hist::Tick, 0.99);
        assert!((2_990..=3_010).contains(&p99), "window p99 {p99}");
        assert!(
            a.quantile(Hist::Tick, 0.99) >= 89_000,
            "the run keeps the old one"
        );
        a.set(Level::TickP99WindowUs, p99);
        let text = render(&[Arc::new(a)]);
        assert!(
            text.contains("tick_p99_window_us"),
            "the window is exported:\n{text}"
        );
    }
}
