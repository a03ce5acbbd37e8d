//! The gateway's input rules that need state or the schema: the speed
//! limit of moves, the client-settable properties, login names.
//!
//! Owns [`MoveLimiter`] (a distance budget refilled at the speed limit) and
//! the pure checks [`check_set_prop`] and [`check_name`]. Must not touch
//! frames, sessions or the host.

use crate::core::entity::codec::Reader;
use crate::core::entity::{value, Audience, EntityType};
use crate::core::geom::{Rect, Vec3};
use crate::core::time::Time;
use crate::wire::client::ErrorCode;

/// The speed limit of one client's moves.
///
/// A budget of distance (metres) refills at `speed_mps` per second of
/// *trusted time*, up to `slack_m`; a move spends its ground distance from
/// the last accepted position.
///
/// # Trusted time
/// Server receive times alone punish honest clients: after a stall (the
/// shard's or the network's) their moves arrive in a burst, and a budget
/// capped at the slack refuses the tail of it. Client timestamps alone
/// trust a clock the client controls. So trusted time starts at the
/// Welcome (no move can be sent before it), advances by the client's own
/// clock between accepted moves (a delayed burst keeps the spacing its moves
/// were sent with), and is clamped to the server's receive time: it never
/// runs ahead of the server's clock and never goes back. Over any session
/// the refill is therefore at most `speed_mps` times the server time since
/// the Welcome, whatever the client's clock says; a fast clock only makes
/// its trusted time advance at the server's rate, a clock going backwards
/// refills nothing (the client time used is the highest seen).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MoveLimiter {
    speed_mps: f64,
    slack_m: f64,
    budget_m: f64,
    last_pos: Vec3,
    /// Trusted time of the last accepted move (the Welcome's at the start), µs.
    trusted_us: u64,
    /// The highest client time of an accepted move, µs.
    client_us: Option<u64>,
}

impl MoveLimiter {
    /// A limiter starting at `pos` at `now` (the Welcome) with a full budget.
    pub fn new(speed_mps: f64, slack_m: f64, pos: Vec3, now: Time) -> Self {
        MoveLimiter {
            speed_mps,
            slack_m,
            budget_m: slack_m,
            last_pos: pos,
            trusted_us: now.as_micros(),
            client_us: None,
        }
    }

    /// The last accepted position.
    pub fn last_pos(&self) -> Vec3 {
        self.last_pos
    }

    /// Checks a move to `pos` sent at `client_time_us` (client clock) and
    /// received at `now`; accepted moves spend the budget and become the
    /// last position.
    ///
    /// # Errors
    /// The ground distance asked and the budget there was (nothing changes).
    pub fn check(&mut self, now: Time, client_time_us: u64, pos: Vec3) -> Result<(), (f64, f64)> {
        let advance = self
            .client_us
            .map_or(0, |c| client_time_us.saturating_sub(c));
        let trusted = self
            .trusted_us
            .saturating_add(advance)
            .min(now.as_micros().max(self.trusted_us));
        let dt_s = (trusted - self.trusted_us) as f64 / 1e6;
        let budget = (self.budget_m + self.speed_mps * dt_s).min(self.slack_m);
        let d = ((pos.x - self.last_pos.x).powi(2) + (pos.z - self.last_pos.z).powi(2)).sqrt();
        if d > budget {
            return Err((d, budget));
        }
        self.budget_m = budget - d;
        self.last_pos = pos;
        self.trusted_us = trusted;
        self.client_us = Some(
            self.client_us
                .map_or(client_time_us, |c| c.max(client_time_us)),
        );
        Ok(())
    }
}

/// A position a client may ask for: finite, and inside the world (closed
/// rect: the far edges are allowed).
pub fn check_pos(world: &Rect, pos: Vec3) -> bool {
    pos.is_finite() && world.contains_closed(pos)
}

/// Checks a SetProp of property `prop` with `value` against `ty`.
///
/// # Errors
/// `PropNotSettable` if the property does not exist or clients may not
/// set it; `BadValue` if the value does not decode as its type (whole).
pub fn check_set_prop(ty: &EntityType, prop: u16, bytes: &[u8]) -> Result<(), ErrorCode> {
    let Some(def) = ty.prop(usize::from(prop)).filter(|d| d.client_settable) else {
        return Err(ErrorCode::PropNotSettable);
    };
    let mut r = Reader::new(bytes);
    match value::decode(&mut r, ty, def.ty, Audience::OwnClient) {
        Ok(_) if r.is_empty() => Ok(()),
        _ => Err(ErrorCode::BadValue),
    }
}

/// A login name the server takes: the protocol's 1..=64 bytes of UTF-8
/// (checked by the decoder), no control characters, not all blank.
pub fn check_name(name: &str) -> bool {
    !name.chars().any(char::is_control) && !name.trim().is_empty()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::entity::{TypeRegistry, AVATAR};
    use std::time::Duration;

    /// A client whose clock reads `skew_us` more than the server's, sending
    /// at server time `at`.
    fn sent(at: Time, skew_us: i64) -> u64 {
        (at.as_micros() as i64 + skew_us) as u64
    }

    #[test]
    fn the_budget_refills_at_the_speed_limit_up_to_the_slack() {
        let t0 = Time::from_millis(1000);
        let mut m = MoveLimiter::new(10.0, 5.0, Vec3::ground(0.0, 0.0), t0);
        let c = |t: Time| sent(t, 123_456);
        assert!(
            m.check(t0, c(t0), Vec3::ground(4.0, 0.0)).is_ok(),
            "within slack"
        );
        assert!(
            m.check(t0, c(t0), Vec3::ground(6.0, 0.0)).is_err(),
            "1 m left"
        );
        assert_eq!(m.last_pos(), Vec3::ground(4.0, 0.0));
        let t1 = t0 + Duration::from_millis(100);
        assert!(
            m.check(t1, c(t1), Vec3::ground(5.9, 0.0)).is_ok(),
            "1 + 1 m"
        );
        // A long pause does not bank more than the slack.
        let t2 = t1 + Duration::from_secs(60);
        assert!(m.check(t2, c(t2), Vec3::ground(11.0, 0.0)).is_err());
        assert!(m.check(t2, c(t2), Vec3::ground(10.8, 0.0)).is_ok());
        // Walking at the limit for a long time passes.
        let mut t = t2;
        let mut x = 10.8;
        for _ in 0..200 {
            t = t + Duration::from_millis(50);
            x += 0.5;
            assert!(m.check(t, c(t), Vec3::ground(x, 0.0)).is_ok());
        }
    }

    #[test]
    fn a_delayed_burst_of_honest_moves_passes() {
        let t0 = Time::from_millis(1000);
        let mut m = MoveLimiter::new(10.0, 5.0, Vec3::ground(0.0, 0.0), t0);
        let mut x = 0.0;
        // 2 s of moves at 9 m/s, 10 Hz, all received at once after a stall.
        let arrival = t0 + Duration::from_millis(2100);
        for i in 1..=20 {
            let at = t0 + Duration::from_millis(100 * i);
            x += 0.9;
            assert!(
                m.check(arrival, sent(at, -5_000), Vec3::ground(x, 0.0))
                    .is_ok(),
                "move {i}"
            );
        }
    }

    #[test]
    fn a_fast_client_clock_gains_nothing_over_the_server_clock() {
        let t0 = Time::from_millis(1000);
        let mut m = MoveLimiter::new(10.0, 5.0, Vec3::ground(0.0, 0.0), t0);
        let (mut x, mut accepted_m) = (0.0, 0.0);
        // The client claims twice the time that passed and walks at 15 m/s
        // (a limiter on client time alone would accept all 150 m).
        for i in 1..=100_u64 {
            let at = t0 + Duration::from_millis(100 * i);
            let claimed = 1_000_000 + i * 200_000;
            let step = 1.5;
            if m.check(at, claimed, Vec3::ground(x + step, 0.0)).is_ok() {
                x += step;
                accepted_m += step;
            }
        }
        // 10 s of server time at 10 m/s plus the slack.
        assert!(accepted_m <= 10.0 * 10.0 + 5.0, "gained {accepted_m} m");
    }

    #[test]
    fn a_clock_going_backwards_refills_nothing() {
        let t0 = Time::from_millis(1000);
        let mut m = MoveLimiter::new(10.0, 5.0, Vec3::ground(0.0, 0.0), t0);
        let t1 = t0 + Duration::from_secs(1);
        assert!(m.check(t1, 5_000_000, Vec3::ground(5.0, 0.0)).is_ok());
        let t2 = t1 + Duration::from_millis(10);
        assert!(m.check(t2, 4_000_000, Vec3::ground(6.0, 0.0)).is_err());
    }

    #[test]
    fn positions_must_be_finite_and_in_the_world() {
        let w = Rect::new(0.0, 0.0, 100.0, 100.0);
        assert!(check_pos(&w, Vec3::ground(100.0, 0.0)));
        assert!(!check_pos(&w, Vec3::ground(100.5, 0.0)));
        assert!(!check_pos(&w, Vec3::ground(f64::NAN, 0.0)));
    }

    #[test]
    fn only_settable_props_with_good_values_pass() {
        let reg = TypeRegistry::with_builtins();
        let avatar = reg.get(AVATAR).expect("avatar");
        let status = avatar.prop_index("status").expect("status") as u16;
        assert_eq!(check_set_prop(avatar, status, b"\x02ok"), Ok(()));
        assert_eq!(
            check_set_prop(avatar, status, b"\x05ok"),
            Err(ErrorCode::BadValue)
        );
        assert_eq!(
            check_set_prop(avatar, status, b"\x02okX"),
            Err(ErrorCode::BadValue)
        );
        assert_eq!(
            check_set_prop(avatar, 0, b"\x02An"),
            Err(ErrorCode::PropNotSettable)
        );
        assert_eq!(
            check_set_prop(avatar, 99, b""),
            Err(ErrorCode::PropNotSettable)
        );
        assert!(check_name("ann") && !check_name("a\nb") && !check_name("  "));
    }
}
