//! [`MonotonicClock`]: the OS clock the runtime hands an application to
//! stamp its own work with (`ShardApp::set_cost_clock`).
//!
//! Runs on: the shard's thread. Owns: the clock's start instant; the
//! application sees it only as a `core::load::CostClock`.

use crate::core::load::CostClock;
use std::time::Instant;

/// The clock the runtime gives an application to stamp its own work with
/// (load measurement, `core::load`): nanoseconds since it was made. The
/// application never reads a clock itself; its driver injects this one.
#[derive(Debug)]
pub struct MonotonicClock {
    start: Instant,
}

impl MonotonicClock {
    /// Starts now.
    pub fn new() -> Self {
        MonotonicClock {
            start: Instant::now(),
        }
    }
}

impl Default for MonotonicClock {
    fn default() -> Self {
        Self::new()
    }
}

impl CostClock for MonotonicClock {
    fn stamp(&self) -> u64 {
        self.start.elapsed().as_nanos() as u64
    }
}
