//! Time as the core sees it: a value handed in by the caller, never read.
//!
//! [`Time`] is microseconds since the start of the world (the runtime maps its
//! monotonic clock onto it; the simulator advances it by hand). Using a plain
//! `u64` keeps the core deterministic and lets the simulator run faster than
//! real time.

use std::fmt;
use std::ops::{Add, Sub};
use std::time::Duration;

/// A point in world time, in microseconds since the world started.
#[derive(
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Default,
    rkyv::Archive,
    rkyv::Serialize,
    rkyv::Deserialize,
)]
#[rkyv(derive(Debug, PartialEq, Eq, PartialOrd, Ord))]
pub struct Time(pub u64);

impl Time {
    /// The start of the world.
    pub const ZERO: Time = Time(0);

    /// A time `ms` milliseconds after the start.
    pub const fn from_millis(ms: u64) -> Time {
        Time(ms * 1_000)
    }

    /// Microseconds since the start.
    pub const fn as_micros(self) -> u64 {
        self.0
    }

    /// Milliseconds since the start, rounded down.
    pub const fn as_millis(self) -> u64 {
        self.0 / 1_000
    }

    /// How long after `earlier` this is; zero if `earlier` is later.
    pub fn saturating_since(self, earlier: Time) -> Duration {
        Duration::from_micros(self.0.saturating_sub(earlier.0))
    }
}

impl Add<Duration> for Time {
    type Output = Time;
    fn add(self, d: Duration) -> Time {
        let micros = u64::try_from(d.as_micros()).unwrap_or(u64::MAX);
        Time(self.0.saturating_add(micros))
    }
}

impl Sub<Duration> for Time {
    type Output = Time;
    fn sub(self, d: Duration) -> Time {
        let micros = u64::try_from(d.as_micros()).unwrap_or(u64::MAX);
        Time(self.0.saturating_sub(micros))
    }
}

impl fmt::Debug for Time {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{:06}s", self.0 / 1_000_000, self.0 % 1_000_000)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arithmetic_saturates() {
        let t = Time::from_millis(5);
        assert_eq!(t + Duration::from_millis(2), Time::from_millis(7));
        assert_eq!(t - Duration::from_secs(1), Time::ZERO);
        assert_eq!(t.saturating_since(Time::from_millis(9)), Duration::ZERO);
        assert_eq!(
            Time::from_millis(9).saturating_since(t),
            Duration::from_millis(4)
        );
        assert_eq!(format!("{:?}", Time(1_500_000)), "1.500000s");
    }
}
