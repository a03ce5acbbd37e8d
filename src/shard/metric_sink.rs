//! [`MetricSink`]: what a shard's application reports about itself
//! (`ShardApp::export_metrics`), exported as `tessera_app_<name>{shard}`.
//!
//! The driver hands the application a sink every
//! `runtime.metrics_publish_ticks` ticks and publishes what it holds (the
//! runtime: `runtime::metrics::ShardStats`, which renders it on
//! `/metrics`).
//!
//! Runs on: the shard's thread. Owns the reported items until published; it
//! must not touch locks, queues, sockets or clocks.

/// What the application reports about itself, read at publish time.
#[derive(Debug, Default)]
pub struct MetricSink {
    items: Vec<AppMetric>,
}

/// One application metric.
#[derive(Clone, Debug, PartialEq)]
pub struct AppMetric {
    /// Name without prefix (exported as `tessera_app_<name>`); `[a-z0-9_]`.
    pub name: &'static str,
    /// Help text.
    pub help: &'static str,
    /// A counter (monotonic) or a gauge.
    pub counter: bool,
    /// The value.
    pub value: u64,
}

impl MetricSink {
    /// Reports a monotonic counter.
    pub fn counter(&mut self, name: &'static str, help: &'static str, value: u64) {
        self.items.push(AppMetric {
            name,
            help,
            counter: true,
            value,
        });
    }

    /// Reports a gauge.
    pub fn gauge(&mut self, name: &'static str, help: &'static str, value: u64) {
        self.items.push(AppMetric {
            name,
            help,
            counter: false,
            value,
        });
    }
}

impl MetricSink {
    /// Swaps the reported items with `published` (the driver's publish).
    pub(crate) fn swap_items(&mut self, published: &mut Vec<AppMetric>) {
        std::mem::swap(published, &mut self.items);
    }

    /// Forgets the items (after a publish).
    pub(crate) fn clear(&mut self) {
        self.items.clear();
    }
}
