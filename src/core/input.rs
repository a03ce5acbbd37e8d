//! The move input a client's proxy forwards to its real: 17 bytes,
//! `flags: u8` (bit 0 = teleport), then `x: f64` and `z: f64` little-endian.
//!
//! One format for every driver (the server's host and the simulator), so
//! neither depends on the other. Owns the byte layout only; what a move does
//! to a real is the driver's entity logic.

use std::sync::Arc;

use crate::core::geom::Vec3;

const FLAG_TELEPORT: u8 = 1;

/// Encodes a move input.
pub fn encode_move(pos: Vec3, teleport: bool) -> Arc<[u8]> {
    let mut b = [0u8; 17];
    b[0] = if teleport { FLAG_TELEPORT } else { 0 };
    b[1..9].copy_from_slice(&pos.x.to_le_bytes());
    b[9..17].copy_from_slice(&pos.z.to_le_bytes());
    Arc::from(&b[..])
}

/// Decodes a move input: the position and whether it is a teleport; `None`
/// if the bytes are not exactly one move.
pub fn decode_move(data: &[u8]) -> Option<(Vec3, bool)> {
    let b: &[u8; 17] = data.try_into().ok()?;
    let x = f64::from_le_bytes(b[1..9].try_into().ok()?);
    let z = f64::from_le_bytes(b[9..17].try_into().ok()?);
    Some((Vec3::ground(x, z), b[0] & FLAG_TELEPORT != 0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn moves_round_trip() {
        let p = Vec3::ground(12.5, -3.25);
        assert_eq!(decode_move(&encode_move(p, true)), Some((p, true)));
        assert_eq!(decode_move(&encode_move(p, false)), Some((p, false)));
        assert_eq!(decode_move(b"short"), None);
    }
}
