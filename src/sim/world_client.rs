//! The client side of the simulated world: what a client does with the bytes
//! its proxy delivers.
//!
//! [`ClientHook`] is a plug for extra client-side checks. View batches are
//! checked beside it, by each client's `ClientView` (`world_view.rs`:
//! enter/update/leave order, version continuity, view == truth after
//! healing). The default,
//! [`DownstreamOrder`], checks what the proxy promises today: downstream
//! data arrives exactly once, in the real's sequence order, across
//! migrations (the game acknowledges inputs in increasing order).
//!
//! Owns only per-client checking state.

use crate::game::relay::{decode_down, Down};

/// Receives, in delivery order, what a proxy writes to its client.
pub trait ClientHook {
    /// One downstream message, numbered by the proxy.
    ///
    /// # Errors
    /// A description of the broken rule (the world reports it).
    fn on_downstream(&mut self, tick: u64, seq: u64, data: &[u8]) -> Result<(), String>;

    /// After healing: everything the hook expects has arrived.
    ///
    /// # Errors
    /// A description of what is missing.
    fn check_converged(&self) -> Result<(), String> {
        Ok(())
    }
}

/// The client seq a downstream payload acknowledges: the ack of the
/// game's reply, or the one riding a view batch; `None` for anything else
/// (plain view batches, notices).
pub fn ack_of(data: &[u8]) -> Option<u64> {
    match decode_down(data).ok()? {
        Down::Reply(reply) => reply.ack(),
        Down::ViewAcked { ack, .. } => Some(ack),
        _ => None,
    }
}

/// Checks consecutive proxy sequence numbers and increasing acknowledged
/// inputs; other messages only count for the sequence (an observer hook can
/// wrap this one and decode them).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DownstreamOrder {
    last_seq: u64,
    last_ack: u64,
}

impl DownstreamOrder {
    /// Messages received so far.
    pub fn received(&self) -> u64 {
        self.last_seq
    }
}

impl ClientHook for DownstreamOrder {
    fn on_downstream(&mut self, _tick: u64, seq: u64, data: &[u8]) -> Result<(), String> {
        if seq != self.last_seq + 1 {
            return Err(format!("downstream #{seq} after #{}", self.last_seq));
        }
        self.last_seq = seq;
        let Some(ack) = ack_of(data) else {
            return Ok(());
        };
        if ack <= self.last_ack {
            return Err(format!("ack of input {ack} after input {}", self.last_ack));
        }
        self.last_ack = ack;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::down::{with_kind, DownKind};
    use crate::game::relay::{reply_ack as ack, reply_start, DOWN_REPLY};

    #[test]
    fn order_is_checked() {
        let mut h = DownstreamOrder::default();
        assert!(h.on_downstream(0, 1, &ack(8)).is_ok());
        assert!(h.on_downstream(0, 2, &ack(16)).is_ok());
        assert!(h.on_downstream(0, 4, &ack(24)).is_err());
        assert!(h.on_downstream(0, 3, &ack(16)).is_err());
        let view = with_kind(DownKind::View, b"view batch");
        assert!(h.on_downstream(0, 4, &view).is_ok());
        assert!(h.on_downstream(0, 5, &ack(16)).is_err());
        assert_eq!(h.received(), 5);
        assert_eq!(ack_of(&ack(7)), Some(7));
        assert_eq!(ack_of(&[DOWN_REPLY, 1]), None);
        let mut nothing = Vec::new();
        reply_start(&mut nothing);
        assert_eq!(ack_of(&nothing), None, "a reply without an ack");
        assert_eq!(ack_of(&with_kind(DownKind::View, &ack(7))), None, "a view");
        // An acknowledgement riding a view batch counts as one, in order.
        let mut riding = with_kind(DownKind::View, b"batch");
        assert!(riding.carry_ack(17));
        assert_eq!(ack_of(&riding), Some(17));
        assert!(h.on_downstream(0, 6, &riding).is_ok());
        let mut again = with_kind(DownKind::View, &[]);
        assert!(again.carry_ack(17));
        assert!(h.on_downstream(0, 7, &again).is_err(), "an ack repeated");
    }
}
