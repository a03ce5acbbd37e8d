//! The client side of the simulated world: what a client does with the bytes
//! its proxy delivers.
//!
//! [`ClientHook`] is a plug for extra client-side checks. View batches are
//! checked beside it, by each client's `ClientView` (`world_view.rs`:
//! enter/update/leave order, version continuity, view == truth after
//! healing). The default,
//! [`DownstreamOrder`], checks what the proxy promises today: downstream
//! data arrives exactly once, in the real's sequence order, across
//! migrations (the entity logic acknowledges inputs in increasing order).
//!
//! Owns only per-client checking state.

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

/// First byte of the entity logic's input acknowledgements. Anything else
/// on the downstream channel (view batches, later) is not an ack.
pub const ACK_TAG: u8 = 0xAC;

/// Encodes the entity logic's acknowledgement of input `seq`: the tag, then
/// `seq` little-endian.
pub fn encode_ack(seq: u64) -> [u8; 9] {
    let mut b = [ACK_TAG; 9];
    b[1..].copy_from_slice(&seq.to_le_bytes());
    b
}

/// The input sequence an ack acknowledges; `None` if `data` is no ack.
pub fn decode_ack(data: &[u8]) -> Option<u64> {
    match data {
        [ACK_TAG, rest @ ..] => rest.try_into().ok().map(u64::from_le_bytes),
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
        let Some(ack) = decode_ack(data) else {
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

    #[test]
    fn order_is_checked() {
        let mut h = DownstreamOrder::default();
        assert!(h.on_downstream(0, 1, &encode_ack(8)).is_ok());
        assert!(h.on_downstream(0, 2, &encode_ack(16)).is_ok());
        assert!(h.on_downstream(0, 4, &encode_ack(24)).is_err());
        assert!(h.on_downstream(0, 3, &encode_ack(16)).is_err());
        assert!(h.on_downstream(0, 4, b"view batch").is_ok());
        assert!(h.on_downstream(0, 5, &encode_ack(16)).is_err());
        assert_eq!(h.received(), 5);
        assert_eq!(decode_ack(&encode_ack(7)), Some(7));
        assert_eq!(decode_ack(&[ACK_TAG, 1]), None);
    }
}
