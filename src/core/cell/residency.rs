//! What a cell holds of one entity: the [`Residency`] enum, its legal
//! transitions, and a bounded per-entity transition history for failure
//! reports.
//!
//! ```text
//!            create_real / Onload
//!   (absent) ---------------------> Real{epoch} --offload--> Ghost{real_at, epoch}
//!      |                              ^                        |   ^   |
//!      | CreateGhost                  | Onload                 |   |   | RealMoved/SetNextReal
//!      v                              |                        |   |   v (epoch grows)
//!   Ghost{real_at, epoch} ------------+        DeleteGhost     |   +- Ghost
//!      |                                 +-----------------+   |
//!      v                                 v                     |
//!   Gone{forward_to, epoch, until} --CreateGhost--> Ghost -----+
//!      |  (expiry)
//!      v
//!   (absent)
//! ```
//!
//! A `DeleteGhost` for an absent entity leaves a `Gone` tombstone too (an
//! older `CreateGhost` may still be in flight on another channel).
//!
//! There is no `Offloading` state: offload is atomic on the sending side (the
//! real becomes a ghost pointing at the destination in the same step that
//! queues the `Onload`), and the destination becomes real in the step that
//! handles it, so "one real or one in flight" holds at every instant.
//!
//! Owns only these value types; must not touch tables or messages.

use crate::core::ids::CellId;
use crate::core::time::Time;

/// How one cell holds one entity.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Residency {
    /// The authoritative copy lives here. `epoch` counts the real's
    /// migrations (the proxy's channel version).
    Real {
        /// Migrations so far.
        epoch: u64,
    },
    /// A read-only copy; as far as this cell knows the real is at `real_at`,
    /// where it arrived at migration `epoch`.
    Ghost {
        /// Where real-bound messages are forwarded.
        real_at: CellId,
        /// The real's epoch when it was at `real_at`.
        epoch: u64,
    },
    /// The entity left (ghost deleted): real-bound messages are forwarded to
    /// `forward_to` until `until`; older control messages are recognised as
    /// stale by `epoch`.
    Gone {
        /// Last known cell of the real.
        forward_to: CellId,
        /// Epoch of the message that removed the ghost.
        epoch: u64,
        /// When the forwarding entry expires.
        until: Time,
    },
}

/// A residency change the protocol does not allow.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("illegal residency transition {from:?} -> {to:?}")]
pub struct IllegalTransition {
    /// Before (`None`: absent).
    pub from: Option<Residency>,
    /// After (`None`: absent).
    pub to: Option<Residency>,
}

impl Residency {
    /// The epoch this residency knows of.
    pub fn epoch(&self) -> u64 {
        match *self {
            Residency::Real { epoch }
            | Residency::Ghost { epoch, .. }
            | Residency::Gone { epoch, .. } => epoch,
        }
    }

    /// Checks a transition against the protocol.
    ///
    /// # Errors
    /// [`IllegalTransition`] when the step is not one the protocol makes:
    /// epochs never go back, a real only leaves by becoming a ghost (a
    /// migration) or a tombstone (a destroy) at a newer epoch, and nothing but an expired `Gone` becomes absent.
    pub fn check(from: Option<Residency>, to: Option<Residency>) -> Result<(), IllegalTransition> {
        use Residency::*;
        let ok = match (from, to) {
            (None, Some(Real { .. } | Ghost { .. } | Gone { .. })) => true,
            (Some(Gone { .. }), None) => true,
            (Some(Real { epoch: a }), Some(Ghost { epoch: b, .. })) => b > a,
            // A destroy: the real becomes a tombstone of a newer epoch.
            (Some(Real { epoch: a }), Some(Gone { epoch: b, .. })) => b > a,
            (Some(Ghost { epoch: a, .. } | Gone { epoch: a, .. }), Some(Real { epoch: b })) => {
                b >= a
            }
            (Some(Ghost { epoch: a, .. }), Some(Ghost { epoch: b, .. })) => b >= a,
            (Some(Ghost { epoch: a, .. }), Some(Gone { epoch: b, .. })) => b >= a,
            (Some(Gone { epoch: a, .. }), Some(Ghost { epoch: b, .. })) => b >= a,
            (Some(Gone { epoch: a, .. }), Some(Gone { epoch: b, .. })) => b >= a,
            _ => false,
        };
        if ok {
            Ok(())
        } else {
            Err(IllegalTransition { from, to })
        }
    }
}

/// Transitions kept per entity in debug and `verify` builds.
pub const HISTORY_MAX: usize = 16;

/// The last [`HISTORY_MAX`] transitions of one entity in one cell, oldest
/// first; compiled to nothing in release builds without `verify`.
#[derive(Clone, Debug, Default)]
pub struct History {
    #[cfg(any(debug_assertions, feature = "verify"))]
    steps: std::collections::VecDeque<(Time, Option<Residency>)>,
}

impl History {
    /// Records that the entity became `to` at `now`.
    #[inline]
    pub fn record(&mut self, now: Time, to: Option<Residency>) {
        #[cfg(any(debug_assertions, feature = "verify"))]
        {
            if self.steps.len() == HISTORY_MAX {
                self.steps.pop_front();
            }
            self.steps.push_back((now, to));
        }
        #[cfg(not(any(debug_assertions, feature = "verify")))]
        let _ = (now, to);
    }

    /// The recorded steps, oldest first (empty in plain release builds).
    pub fn steps(&self) -> Vec<(Time, Option<Residency>)> {
        #[cfg(any(debug_assertions, feature = "verify"))]
        {
            self.steps.iter().copied().collect()
        }
        #[cfg(not(any(debug_assertions, feature = "verify")))]
        Vec::new()
    }
}

/// Asserts `from -> to` is legal, printing the history on failure, and
/// records it.
///
/// # Panics
/// On an illegal transition: the cell broke its own protocol.
pub fn transition(
    history: &mut History,
    now: Time,
    from: Option<Residency>,
    to: Option<Residency>,
) {
    if let Err(e) = Residency::check(from, to) {
        panic!("{e} at {now:?}; history: {:?}", history.steps());
    }
    history.record(now, to);
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: CellId = CellId(1);
    const B: CellId = CellId(2);

    #[test]
    fn migration_steps_are_legal() {
        let real0 = Residency::Real { epoch: 0 };
        let ghost1 = Residency::Ghost {
            real_at: B,
            epoch: 1,
        };
        assert!(Residency::check(None, Some(real0)).is_ok());
        assert!(Residency::check(Some(real0), Some(ghost1)).is_ok());
        let gone = Residency::Gone {
            forward_to: B,
            epoch: 1,
            until: Time::ZERO,
        };
        assert!(Residency::check(Some(ghost1), Some(gone)).is_ok());
        assert!(Residency::check(Some(gone), None).is_ok());
        assert!(Residency::check(Some(ghost1), Some(Residency::Real { epoch: 2 })).is_ok());
    }

    #[test]
    fn backwards_and_skipping_steps_are_illegal() {
        let real3 = Residency::Real { epoch: 3 };
        assert!(Residency::check(
            Some(real3),
            Some(Residency::Ghost {
                real_at: A,
                epoch: 3
            })
        )
        .is_err());
        assert!(Residency::check(Some(real3), None).is_err());
        let ghost = Residency::Ghost {
            real_at: A,
            epoch: 2,
        };
        assert!(Residency::check(Some(ghost), None).is_err());
        assert!(Residency::check(Some(ghost), Some(Residency::Real { epoch: 1 })).is_err());
        assert!(Residency::check(
            Some(ghost),
            Some(Residency::Ghost {
                real_at: B,
                epoch: 1
            })
        )
        .is_err());
    }

    #[test]
    fn history_is_bounded() {
        let mut h = History::default();
        for i in 0..40 {
            h.record(Time(i), Some(Residency::Real { epoch: i }));
        }
        let steps = h.steps();
        if cfg!(any(debug_assertions, feature = "verify")) {
            assert_eq!(steps.len(), HISTORY_MAX);
            assert_eq!(steps[0].0, Time(40 - HISTORY_MAX as u64));
        }
    }

    #[test]
    #[should_panic(expected = "illegal residency transition")]
    fn transition_panics_on_illegal_step() {
        let mut h = History::default();
        transition(&mut h, Time::ZERO, Some(Residency::Real { epoch: 0 }), None);
    }
}
