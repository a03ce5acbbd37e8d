//! The run's fingerprint and its recent history.
//!
//! - [`TraceHasher`]: FNV-1a 64 over every event the world records
//!   (deliveries, migrations, ...). Two runs with the same seed must end with
//!   the same hash; a differing hash means something nondeterministic crept
//!   in. Hand-written so the value never changes with a dependency.
//! - [`EventLog`]: a bounded ring of the last `event_log_len_max` events,
//!   printed when a run fails so the failure comes with its lead-up.
//! - [`Trace`]: both together, fed through [`Traceable`].
//!
//! Owns only hashes and copies of events; knows nothing of what they mean.

use std::fmt::{self, Write as _};

use crate::core::ids::{CellId, EntityId, ShardId};
use crate::core::time::Time;

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

/// FNV-1a 64-bit hasher, fed field by field (little-endian).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TraceHasher {
    state: u64,
}

impl Default for TraceHasher {
    fn default() -> Self {
        TraceHasher { state: FNV_OFFSET }
    }
}

impl TraceHasher {
    /// A fresh hasher.
    pub fn new() -> Self {
        Self::default()
    }

    /// Feeds raw bytes.
    #[inline]
    pub fn write_bytes(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.state ^= u64::from(b);
            self.state = self.state.wrapping_mul(FNV_PRIME);
        }
    }

    /// Feeds one byte (an event tag, a bool).
    pub fn write_u8(&mut self, v: u8) {
        self.write_bytes(&[v]);
    }

    /// Feeds a `u32`.
    pub fn write_u32(&mut self, v: u32) {
        self.write_bytes(&v.to_le_bytes());
    }

    /// Feeds a `u64`.
    pub fn write_u64(&mut self, v: u64) {
        self.write_bytes(&v.to_le_bytes());
    }

    /// Feeds an `f64` by its bits (so `-0.0 != 0.0`, exactly as computed).
    pub fn write_f64(&mut self, v: f64) {
        self.write_u64(v.to_bits());
    }

    /// Feeds a string, length-prefixed so `("ab","c") != ("a","bc")`.
    pub fn write_str(&mut self, s: &str) {
        self.write_u64(s.len() as u64);
        self.write_bytes(s.as_bytes());
    }

    /// The hash so far.
    pub fn finish(&self) -> u64 {
        self.state
    }
}

/// Something that can be fed to a [`TraceHasher`], field by field.
pub trait Traceable {
    /// Feeds every field that matters for determinism.
    fn trace(&self, h: &mut TraceHasher);
}

macro_rules! traceable_int {
    ($($t:ty => $w:ident),*) => {$(
        impl Traceable for $t {
            fn trace(&self, h: &mut TraceHasher) {
                h.$w((*self).into());
            }
        }
    )*};
}
traceable_int!(u8 => write_u8, u16 => write_u32, u32 => write_u32, u64 => write_u64);

impl Traceable for Time {
    fn trace(&self, h: &mut TraceHasher) {
        h.write_u64(self.0);
    }
}
impl Traceable for EntityId {
    fn trace(&self, h: &mut TraceHasher) {
        h.write_u64(self.0);
    }
}
impl Traceable for CellId {
    fn trace(&self, h: &mut TraceHasher) {
        h.write_u32(self.0);
    }
}
impl Traceable for ShardId {
    fn trace(&self, h: &mut TraceHasher) {
        h.write_u32(u32::from(self.node.0) << 16 | u32::from(self.index));
    }
}

/// A bounded ring of the most recent events, tagged with their tick.
#[derive(Clone, Debug)]
pub struct EventLog<E> {
    ring: Vec<(u64, E)>,
    next: usize,
    len_max: usize,
    recorded: u64,
}

/// Default `event_log_len_max`: enough lead-up to read, small enough to print.
pub const EVENT_LOG_LEN_MAX_DEFAULT: usize = 256;

impl<E> EventLog<E> {
    /// An empty log keeping the last `event_log_len_max` events.
    ///
    /// # Panics
    /// If `event_log_len_max == 0`.
    pub fn new(event_log_len_max: usize) -> Self {
        assert!(event_log_len_max > 0, "event_log_len_max must be >= 1");
        EventLog {
            ring: Vec::with_capacity(event_log_len_max),
            next: 0,
            len_max: event_log_len_max,
            recorded: 0,
        }
    }

    /// Records `event` at `tick`, evicting the oldest if full.
    pub fn push(&mut self, tick: u64, event: E) {
        if self.ring.len() < self.len_max {
            self.ring.push((tick, event));
        } else {
            self.ring[self.next] = (tick, event);
        }
        self.next = (self.next + 1) % self.len_max;
        self.recorded += 1;
    }

    /// The kept events, oldest first.
    pub fn iter(&self) -> impl Iterator<Item = &(u64, E)> {
        let split = if self.ring.len() < self.len_max {
            0
        } else {
            self.next
        };
        self.ring[split..].iter().chain(self.ring[..split].iter())
    }

    /// Events kept.
    pub fn len(&self) -> usize {
        self.ring.len()
    }

    /// True if nothing was recorded.
    pub fn is_empty(&self) -> bool {
        self.ring.is_empty()
    }

    /// Events ever recorded (kept or evicted).
    pub fn recorded(&self) -> u64 {
        self.recorded
    }
}

impl<E: fmt::Display> EventLog<E> {
    /// The kept events, one per line (`tick N: event`), oldest first, after a
    /// line saying how many older ones were evicted.
    pub fn format(&self) -> String {
        let mut out = String::new();
        let evicted = self.recorded - self.ring.len() as u64;
        let _ = writeln!(
            out,
            "last {} events ({evicted} older evicted):",
            self.ring.len()
        );
        for (tick, e) in self.iter() {
            let _ = writeln!(out, "  tick {tick}: {e}");
        }
        out
    }
}

/// A hash over every event plus the log of the recent ones.
#[derive(Clone, Debug)]
pub struct Trace<E> {
    hasher: TraceHasher,
    log: EventLog<E>,
}

impl<E: Traceable> Trace<E> {
    /// An empty trace keeping the last `event_log_len_max` events.
    ///
    /// # Panics
    /// If `event_log_len_max == 0`.
    pub fn new(event_log_len_max: usize) -> Self {
        Trace {
            hasher: TraceHasher::new(),
            log: EventLog::new(event_log_len_max),
        }
    }

    /// Hashes `event` (with its tick) and keeps it in the log.
    pub fn record(&mut self, tick: u64, event: E) {
        self.hasher.write_u64(tick);
        event.trace(&mut self.hasher);
        self.log.push(tick, event);
    }

    /// The hash over everything recorded so far.
    pub fn hash(&self) -> u64 {
        self.hasher.finish()
    }

    /// The recent events.
    pub fn log(&self) -> &EventLog<E> {
        &self.log
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv1a_matches_reference_vectors() {
        // From the FNV reference test suite (fnv_test_str, 64-bit FNV-1a).
        assert_eq!(TraceHasher::new().finish(), 0xcbf2_9ce4_8422_2325);
        let mut h = TraceHasher::new();
        h.write_bytes(b"a");
        assert_eq!(h.finish(), 0xaf63_dc4c_8601_ec8c);
        let mut h = TraceHasher::new();
        h.write_bytes(b"foobar");
        assert_eq!(h.finish(), 0x8594_4171_f739_67e8);
    }

    #[test]
    fn order_and_framing_matter() {
        let hash = |parts: &[&str]| {
            let mut h = TraceHasher::new();
            parts.iter().for_each(|p| h.write_str(p));
            h.finish()
        };
        assert_ne!(hash(&["ab", "c"]), hash(&["a", "bc"]));
        assert_ne!(hash(&["a", "b"]), hash(&["b", "a"]));
        assert_eq!(hash(&["a", "b"]), hash(&["a", "b"]));
    }

    #[test]
    fn log_keeps_the_last_n_oldest_first() {
        let mut log = EventLog::new(3);
        assert!(log.is_empty());
        for i in 0..5u64 {
            log.push(i, i * 10);
        }
        let kept: Vec<_> = log.iter().copied().collect();
        assert_eq!(kept, vec![(2, 20), (3, 30), (4, 40)]);
        assert_eq!((log.len(), log.recorded()), (3, 5));
        let text = log.format();
        assert!(
            text.starts_with("last 3 events (2 older evicted)"),
            "{text}"
        );
        assert!(text.contains("tick 4: 40"));
        let mut short = EventLog::new(3);
        short.push(7, 1u8);
        assert_eq!(short.iter().copied().collect::<Vec<_>>(), vec![(7, 1)]);
    }

    #[test]
    fn trace_hash_depends_on_events_and_ticks() {
        let run = |events: &[(u64, u64)]| {
            let mut t = Trace::new(4);
            events
                .iter()
                .for_each(|&(tick, e)| t.record(tick, EntityId(e)));
            t.hash()
        };
        assert_eq!(run(&[(1, 5), (2, 6)]), run(&[(1, 5), (2, 6)]));
        assert_ne!(run(&[(1, 5), (2, 6)]), run(&[(1, 6), (2, 5)]));
        assert_ne!(run(&[(1, 5), (2, 6)]), run(&[(1, 5), (3, 6)]));
    }
}
