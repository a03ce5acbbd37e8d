//! Levels of detail on the bytes of a property delta: the observer's filter.
//!
//! Owns [`filter_delta`], which copies a property delta (the `store` wire
//! form) without the entries of some properties, stepping over values and
//! container operations without building them (no allocation). The levels
//! themselves are declared in `schema` ([`super::schema::Detail`]) and
//! applied per client by `core::view::observer`; nothing here knows of
//! distances or clients.

use super::codec::{DecodeError, Reader};
use super::flags::Audience;
use super::ops;
use super::schema::{EntityType, PropType};
use super::store::{MODE_OPS, MODE_WHOLE};
use super::value;

/// Appends to `out` the delta `delta` (encoded for `aud`) without the
/// entries of the properties in `drop`; returns the mask of every property
/// `delta` has an entry for. Entries keep their order; the count byte is
/// rewritten.
///
/// # Errors
/// Any [`DecodeError`] the bytes cause (an unknown or invisible property,
/// a bad mode, a value or op that does not decode, trailing bytes); `out`
/// is then as it was.
pub fn filter_delta(
    ty: &EntityType,
    aud: Audience,
    delta: &[u8],
    drop: u64,
    out: &mut Vec<u8>,
) -> Result<u64, DecodeError> {
    let start = out.len();
    let r = filter_into(ty, aud, delta, drop, out);
    if r.is_err() {
        out.truncate(start);
    }
    r
}

fn filter_into(
    ty: &EntityType,
    aud: Audience,
    delta: &[u8],
    drop: u64,
    out: &mut Vec<u8>,
) -> Result<u64, DecodeError> {
    let mask = ty.visible_mask(aud);
    let mut r = Reader::new(delta);
    let n = r.u8()?;
    let count_at = out.len();
    out.push(0);
    let (mut kept, mut present) = (0u8, 0u64);
    for _ in 0..n {
        let from = delta.len() - r.remaining();
        let i = r.uvar()?;
        let Some(i) = usize::try_from(i)
            .ok()
            .filter(|&i| i < 64 && mask >> i & 1 != 0)
        else {
            return Err(DecodeError::BadProperty(i));
        };
        let pty = ty.props()[i].ty;
        match r.u8()? {
            MODE_WHOLE => value::skip(&mut r, ty, pty, aud)?,
            MODE_OPS => {
                let k = r.len(r.remaining())?;
                for _ in 0..k {
                    match pty {
                        PropType::Array(e) => ops::skip_array_op(&mut r, ty, e, aud)?,
                        PropType::Map(kt, e) => ops::skip_map_op(&mut r, ty, kt, e, aud)?,
                        _ => return Err(DecodeError::WrongType),
                    }
                }
            }
            t => return Err(DecodeError::BadTag(t)),
        }
        present |= 1 << i;
        if drop >> i & 1 == 0 {
            out.extend_from_slice(&delta[from..delta.len() - r.remaining()]);
            kept += 1;
        }
    }
    r.finish()?;
    out[count_at] = kept;
    Ok(present)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::entity::schema::{TypeRegistry, AVATAR};
    use crate::core::entity::store::PropertyStore;
    use crate::core::entity::{ArrayOp, Value};
    use std::sync::Arc;

    #[test]
    fn dropped_entries_are_cut_and_the_rest_applies_as_sent() {
        let reg = TypeRegistry::with_builtins();
        let ty = Arc::clone(reg.get(AVATAR).expect("avatar"));
        let idx = |n: &str| ty.prop_index(n).expect("prop");
        let mut real = PropertyStore::new(Arc::clone(&ty));
        real.set(idx("name"), Value::Str("Bo".into()))
            .expect("name");
        real.set(idx("hp"), Value::Int(-40)).expect("hp");
        let buff = Value::Record(vec![Value::UInt(4), Value::Int(1), Value::UInt(9)]);
        real.array_op(idx("buffs"), ArrayOp::Push(buff))
            .expect("push");
        real.set(idx("level"), Value::UInt(300)).expect("level");
        let mut delta = Vec::new();
        real.encode_delta(Audience::OtherClients, &mut delta);
        let drop = 1 << idx("hp") | 1 << idx("buffs");
        let mut out = vec![0xaa];
        let present =
            filter_delta(&ty, Audience::OtherClients, &delta, drop, &mut out).expect("filters");
        assert_eq!(present, drop | 1 << idx("name") | 1 << idx("level"));
        assert_eq!(out[0], 0xaa, "appends");
        let mut far = PropertyStore::replica(Arc::clone(&ty), Audience::OtherClients);
        far.apply_delta(&mut Reader::new(&out[1..]))
            .expect("applies");
        assert_eq!(far.get(idx("name")), Some(&Value::Str("Bo".into())));
        assert_eq!(far.get(idx("level")), Some(&Value::UInt(300)));
        assert_eq!(far.get(idx("hp")), Some(&Value::Int(0)), "dropped");
        assert_eq!(far.get(idx("buffs")), Some(&Value::Array(Vec::new())));
        let mut all = Vec::new();
        filter_delta(&ty, Audience::OtherClients, &delta, 0, &mut all).expect("filters");
        assert_eq!(all, delta, "nothing dropped: the same bytes");
        // Catch-up: the whole values of the dropped ones bring it level.
        let mut whole = Vec::new();
        real.encode_whole(Audience::OtherClients, drop, &mut whole);
        far.apply_delta(&mut Reader::new(&whole)).expect("applies");
        assert_eq!(
            far.values(),
            &real.filtered(Audience::OtherClients)[..],
            "caught up"
        );
    }

    #[test]
    fn bad_deltas_are_refused_and_leave_out_unchanged() {
        let reg = TypeRegistry::with_builtins();
        let ty = Arc::clone(reg.get(AVATAR).expect("avatar"));
        let inv = ty.prop_index("inventory").expect("inventory") as u8;
        let hp = ty.prop_index("hp").expect("hp") as u8;
        let aud = Audience::OtherClients;
        let cases: [(&[u8], DecodeError); 5] = [
            (&[1, inv, 0, 0], DecodeError::BadProperty(u64::from(inv))),
            (&[1, hp, 7, 0], DecodeError::BadTag(7)),
            (&[1, hp, 1, 1, 0], DecodeError::WrongType),
            (&[1, hp, 0], DecodeError::Truncated),
            (&[1, hp, 0, 2, 9], DecodeError::Trailing(1)),
        ];
        for (bytes, want) in cases {
            let mut out = vec![5];
            assert_eq!(filter_delta(&ty, aud, bytes, 0, &mut out), Err(want));
            assert_eq!(out, [5]);
        }
    }
}
