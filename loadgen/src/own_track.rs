//! A bot's own-stream timing: the gap between two updates of its own entity,
//! and the migration gap (the largest own gap in the window after the bot
//! crossed into another cell).
//!
//! Plain data on the bot's thread; time is an argument. A gap still open when
//! the window closes is not dropped: while the bot is moving (so the server
//! owes it own updates) the open gap counts, and one that lasted the whole
//! window is an overflow ([`WindowClosed::overflow`]), recorded as at least
//! the window.

use std::time::Duration;

use tessera::core::time::Time;

/// The own stream of one bot.
#[derive(Debug, Default)]
pub struct OwnTrack {
    /// When the last own update arrived.
    last: Option<Time>,
    /// The crossing that opened the current window, and when it closes.
    window: Option<(Time, Time)>,
    /// The largest own gap seen in the window so far, µs.
    window_max_us: u64,
}

/// What a closed migration window measured.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WindowClosed {
    /// The migration gap, µs (0: nothing to record).
    pub gap_us: u64,
    /// No own update arrived in the whole window after the crossing.
    pub overflow: bool,
}

impl OwnTrack {
    /// An own update arrived at `now`; returns the gap since the previous
    /// one, µs (none for the first).
    pub fn update(&mut self, now: Time) -> Option<u64> {
        let gap = self
            .last
            .map(|last| now.saturating_since(last).as_micros() as u64);
        if let (Some(g), Some(_)) = (gap, self.window) {
            self.window_max_us = self.window_max_us.max(g);
        }
        self.last = Some(now);
        gap
    }

    /// The bot crossed into another cell at `now`: a new window of
    /// `window` opens (replacing an open one).
    pub fn crossed(&mut self, now: Time, window: Duration) {
        self.window = Some((now, now + window));
        self.window_max_us = 0;
    }

    /// Closes the window if it ended before `now`. `moving`: the bot sent
    /// moves all along, so a silent own stream is a gap (when it stopped
    /// moving the server owes it nothing, and an open gap is not counted).
    pub fn close_if_due(&mut self, now: Time, moving: bool) -> Option<WindowClosed> {
        let (crossed_at, until) = self.window?;
        if now <= until {
            return None;
        }
        self.window = None;
        let mut closed = WindowClosed {
            gap_us: self.window_max_us,
            overflow: false,
        };
        if moving {
            let since = self.last.unwrap_or(crossed_at);
            let open_us = now.saturating_since(since).as_micros() as u64;
            closed.gap_us = closed.gap_us.max(open_us);
            closed.overflow = self.last.is_none_or(|l| l <= crossed_at);
        }
        Some(closed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const W: Duration = Duration::from_millis(1500);

    fn ms(m: u64) -> Time {
        Time(m * 1000)
    }

    #[test]
    fn a_gap_inside_the_window_is_its_largest() {
        let mut o = OwnTrack::default();
        assert_eq!(o.update(ms(0)), None);
        o.crossed(ms(50), W);
        assert_eq!(o.update(ms(100)), Some(100_000));
        assert_eq!(o.update(ms(400)), Some(300_000));
        assert_eq!(o.update(ms(500)), Some(100_000));
        assert_eq!(o.close_if_due(ms(1550), true), None, "still open");
        o.update(ms(1540));
        let c = o.close_if_due(ms(1560), true).expect("closed");
        assert_eq!(
            c,
            WindowClosed {
                gap_us: 1_040_000,
                overflow: false
            }
        );
        assert_eq!(o.close_if_due(ms(5000), true), None, "closed once");
    }

    #[test]
    fn a_silence_longer_than_the_window_is_an_overflow_not_dropped() {
        let mut o = OwnTrack::default();
        o.update(ms(0));
        o.crossed(ms(100), W);
        let c = o.close_if_due(ms(1700), true).expect("closed");
        assert!(c.overflow);
        assert!(c.gap_us >= W.as_micros() as u64, "{c:?}");
        // The late update that ends the silence is an own gap, and no
        // window is open to take it again.
        assert_eq!(o.update(ms(4000)), Some(4_000_000));
        assert_eq!(o.close_if_due(ms(9000), true), None);
    }

    #[test]
    fn no_update_ever_after_a_crossing_is_an_overflow() {
        let mut o = OwnTrack::default();
        o.crossed(ms(0), W);
        let c = o.close_if_due(ms(1600), true).expect("closed");
        assert_eq!(
            c,
            WindowClosed {
                gap_us: 1_600_000,
                overflow: true
            }
        );
    }

    #[test]
    fn a_bot_that_stopped_moving_records_only_what_it_saw() {
        let mut o = OwnTrack::default();
        o.update(ms(0));
        o.crossed(ms(10), W);
        o.update(ms(200));
        let c = o.close_if_due(ms(3000), false).expect("closed");
        assert_eq!(
            c,
            WindowClosed {
                gap_us: 200_000,
                overflow: false
            }
        );
    }
}
